/* treemask for llama.cpp: a llama_sampler that lets a sequence generate only
 * the token sequences of a treemask trie.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * Built on treemask's C API and llama.cpp's custom-sampler interface
 * (llama_sampler_i), nothing else. Compile treemask_llama.c into your program
 * next to llama.h (tested against the llama.cpp pinned by
 * llama-cpp-python 0.3.36) and link with -ltreemask -lllama.
 *
 * Put it FIRST in a sampler chain, before any sampler that reads
 * probabilities (top_k, top_p, temp, dist, ...):
 *
 *   struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
 *   const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
 *   llama_sampler_chain_add(chain, treemask_llama_sampler_init(n_vocab, trie, NULL));
 *   llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
 *   llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
 *   ... llama_sampler_sample(chain, ctx, -1) ...
 *
 * What each llama_sampler_i entry does:
 * - apply: keeps only the allowed candidates in the llama_token_data_array
 *   (the others are removed: size shrinks, the kept entries keep their order,
 *   so `sorted` stays true if it was). On llama.cpp's usual full-vocabulary
 *   array (data[i].id == i) this costs O(allowed tokens); on any other array
 *   one bit test per candidate. `selected` follows its entry or becomes -1.
 * - accept: advances the matcher with the sampled token.
 * - reset: back to the root of the trie (a new sequence). llama_sampler_reset
 *   on a chain resets every sampler in it, which re-seeds a dist sampler made
 *   with a fixed seed. To start a new sequence but keep the random stream,
 *   reset only this sampler: llama_sampler_reset(llama_sampler_chain_get(chain, 0))
 *   (0 = its index in the chain).
 * - clone: an independent copy in the same state (llama_sampler_clone of the
 *   chain clones it; the copy retains the same trie).
 * - free: releases the matcher and the trie reference.
 *
 * Fail closed. Generation is never left unconstrained:
 * - an internal failure (no memory, a matcher error) leaves only the stop
 *   tokens in the array from then on, until reset;
 * - accepting a token the trie does not allow at that point (a token forced
 *   by the application, or chosen by a sampler placed before this one) leaves
 *   only the stop tokens too, until reset: the sequence has left the trie;
 * - if no allowed token is in the array at all (an earlier sampler removed
 *   them), the array becomes the one entry {first stop token, logit 0}.
 * After the sequence ends (a stop token was accepted), only stop tokens are
 * allowed. The trie's stop tokens should be the model's end-of-generation
 * ids (llama_vocab_eos / llama_vocab_eot), so llama_vocab_is_eog ends the
 * decode loop; treemask_llama_sampler_is_terminated tells it too.
 *
 * Thread safety: as every llama_sampler, one thread at a time per sampler;
 * samplers made from one trie may run on different threads at once. */
#ifndef TREEMASK_LLAMA_H_
#define TREEMASK_LLAMA_H_

#include <stdbool.h>

#include <treemask/treemask.h>

#include "llama.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef TREEMASK_EXPERIMENTAL
/* Experimental, as string sets are (define TREEMASK_EXPERIMENTAL before
 * including this header).
 *
 * The model's vocabulary at the byte level, for string sets: token t's
 * bytes are its piece as llama.cpp decodes it (llama_token_to_piece with
 * special = false: what it adds to the text); control, user-defined (added),
 * unused, unknown and undefined tokens are flagged TREEMASK_TOKEN_SPECIAL
 * (never text) with no bytes; vocab_size = n_tokens =
 * llama_vocab_n_tokens(vocab). Build it once per model (~0.1 s for 150k
 * tokens: the token trie) and keep it: compile string sets over it
 * (treemask_trie_from_strings) and give it to
 * treemask_llama_sampler_init_vocab. Free it with treemask_vocab_free.
 * Errors: TREEMASK_ERR_INVALID_ARGUMENT for NULL arguments,
 * TREEMASK_ERR_OUT_OF_MEMORY, or treemask_vocab_create's (its message in
 * treemask_last_error()). A token whose piece llama.cpp cannot give is
 * never text. */
treemask_status treemask_llama_vocab(const struct llama_vocab *vocab, treemask_vocab **out);

/* A new sampler at the root of trie for the model whose vocabulary is
 * model_vocab (treemask_llama_vocab of the model's llama_vocab), with
 * n_vocab = its vocab_size. The trie must fit that model
 * (treemask_trie_check_vocab): no wider than it, and a string set's masks
 * the same over the model's vocabulary as over the one it was compiled for
 * (equal fingerprints, or the same bytes at every text token). A string set
 * compiled for another tokenizer (other bytes at the same width, or a
 * smaller vocabulary) is refused, naming both fingerprints: it would let
 * the model write text outside the set. Otherwise as
 * treemask_llama_sampler_init. The check costs O(1) when the trie was
 * compiled over model_vocab itself, one pass over the token bytes (~1 ms
 * for 150k tokens) otherwise. */
struct llama_sampler *treemask_llama_sampler_init_vocab(const treemask_vocab *model_vocab,
                                                        const treemask_trie *trie,
                                                        const treemask_matcher_options *opts);
#endif /* TREEMASK_EXPERIMENTAL */

/* A new sampler at the root of trie, for a model of n_vocab tokens
 * (llama_vocab_n_tokens(llama_model_get_vocab(model)); the first argument,
 * as llama.cpp's llama_sampler_init_logit_bias takes it). trie is retained
 * (the caller may free its own reference at once). opts NULL means
 * treemask_matcher_options_init's defaults; every matcher option works, the
 * experimental ones too (decoding modes, length budget, override_stop_tokens:
 * pass &mode_options.matcher of a treemask_mode_options).
 *
 * Returns NULL on error, and treemask_llama_sampler_error() says why: a NULL
 * trie, n_vocab < 1, inconsistent options, or a trie that does not fit the
 * model: its vocab_size larger than n_vocab (build it with vocab_size =
 * n_vocab), or a stop token (the trie's or override_stop_tokens) >= n_vocab.
 * Such a trie could offer, or end a sequence with, a token the model does not
 * have. A string-set trie is refused here: n_vocab cannot tell whether it was
 * compiled for this model's tokenizer, so use
 * treemask_llama_sampler_init_vocab (experimental tier), which checks. Free the sampler with
 * llama_sampler_free, or let the chain it was added to free it. */
struct llama_sampler *treemask_llama_sampler_init(int32_t n_vocab, const treemask_trie *trie,
                                                  const treemask_matcher_options *opts);

/* Why the last treemask_llama_sampler_init on this thread returned NULL (a
 * message naming the problem), or "" if it did not fail. Thread-local; valid
 * until the next init on this thread. */
const char *treemask_llama_sampler_error(void);

/* True iff smpl is a treemask sampler whose sequence has ended (a stop token
 * was accepted). False for NULL and for any other sampler. */
bool treemask_llama_sampler_is_terminated(const struct llama_sampler *smpl);

/* True iff smpl is a treemask sampler in its fail-closed state (internal
 * failure or a token outside the trie accepted): it offers only stop tokens
 * until reset. */
bool treemask_llama_sampler_is_failed(const struct llama_sampler *smpl);

/* The sampler's matcher (borrowed; valid until the sampler is freed), to read
 * labels or counters; NULL for NULL, another sampler, or a failed clone. Do
 * not accept tokens through it behind the sampler's back. */
const treemask_matcher *treemask_llama_sampler_matcher(const struct llama_sampler *smpl);

#ifdef __cplusplus
}
#endif

#endif /* TREEMASK_LLAMA_H_ */
