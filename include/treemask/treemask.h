/* treemask — constrain LLM generation to a fixed set of token sequences.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * This is the one stable C header (C99 and C++). It needs only <stdint.h>,
 * <stddef.h> and <stdbool.h>.
 *
 * Model
 * -----
 * A *trie* is an immutable set of allowed token-id sequences plus the stop
 * tokens that may end a sequence. It is built once (from token paths, an
 * RTP-LLM prefix dictionary or a compiled .tmtrie file), reference counted and
 * shared by any number of matchers and threads.
 *
 * A *matcher* follows one generated sequence (one beam). Every decode step the
 * engine asks it for the next-token bitmask, samples, and hands the sampled
 * token back with accept_token.
 *
 * Bitmask layout (xgrammar's, verbatim): int32 words, a row has
 * treemask_bitmask_words(vocab_size) = ceil(vocab_size / 32) words, token t is
 * bit (t % 32) of word (t / 32), 1 = allowed. Bits at or beyond vocab_size are
 * always written as 0.
 *
 * Conventions
 * -----------
 * - Functions that can fail return a treemask_status; results go to
 *   out-parameters. On failure, out-parameters are left untouched unless the
 *   function says otherwise, and treemask_last_error() describes the problem.
 * - Buffers are caller-owned, with explicit lengths in elements. Functions
 *   that list things take (out, cap) and return the full count, so a call with
 *   cap = 0 (out may then be NULL) is a size query.
 * - Options structs start with struct_size. Fill them with the matching
 *   *_options_init function, then change fields. The library reads
 *   min(struct_size, its own sizeof) bytes; fields are only ever appended, and
 *   fields a caller's older header does not know take their defaults.
 * - Every *_free accepts NULL. Nothing is ever handed to the caller to free
 *   with libc free().
 * - No C++ exception ever crosses this interface; an internal failure becomes
 *   TREEMASK_ERR_INTERNAL or TREEMASK_ERR_OUT_OF_MEMORY.
 * - Thread safety is stated per type: a trie may be used from any number of
 *   threads at once; a matcher by one thread at a time, except that functions
 *   taking a const matcher may run concurrently with each other.
 */
#ifndef TREEMASK_TREEMASK_H
#define TREEMASK_TREEMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "version.h"

#if defined(_WIN32) && defined(TREEMASK_BUILDING_LIBRARY)
#define TREEMASK_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(TREEMASK_STATIC)
#define TREEMASK_API __declspec(dllimport)
#elif defined(__GNUC__) || defined(__clang__)
#define TREEMASK_API __attribute__((visibility("default")))
#else
#define TREEMASK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Section 1: version                                                        */
/* ======================================================================== */

/* TREEMASK_VERSION_NUMBER of the library actually loaded:
 * major * 10000 + minor * 100 + patch. Compare with the macro to detect a
 * header/library mismatch. Thread-safe. */
TREEMASK_API uint32_t treemask_version(void);

/* The same as a string, e.g. "0.1.0". Static storage; never NULL. */
TREEMASK_API const char *treemask_version_string(void);

/* ======================================================================== */
/* Section 2: types                                                          */
/* ======================================================================== */

/* An immutable set of allowed token sequences. Reference counted: created
 * with a refcount of 1, treemask_trie_retain adds one, treemask_trie_free
 * drops one and destroys the trie at zero. Every function taking a trie is
 * safe to call from any number of threads at once. */
typedef struct treemask_trie treemask_trie;

/* The decoding state of one sequence. A matcher retains its trie, so the
 * trie may be freed by the caller while matchers still use it. One thread at
 * a time; functions on a const matcher may run concurrently. */
typedef struct treemask_matcher treemask_matcher;

/* ======================================================================== */
/* Section 3: status and errors                                              */
/* ======================================================================== */

typedef int32_t treemask_status;

/* Pinned values: never renumbered, never reused. */
#define TREEMASK_OK 0
#define TREEMASK_ERR_INVALID_ARGUMENT 1 /* a NULL pointer, a bad option, ... */
#define TREEMASK_ERR_OUT_OF_RANGE 2     /* a token id or index outside its range */
#define TREEMASK_ERR_BUFFER_TOO_SMALL 3 /* a caller buffer shorter than needed */
#define TREEMASK_ERR_INVALID_STATE 4    /* the call is not allowed in this state */
#define TREEMASK_ERR_OUT_OF_MEMORY 5
#define TREEMASK_ERR_PARSE 6            /* malformed input text (JSON, TSV, ...) */
#define TREEMASK_ERR_IO 7               /* a file could not be read or written */
#define TREEMASK_ERR_CORRUPT_FILE 8     /* a .tmtrie file fails its checks */
#define TREEMASK_ERR_VERSION_MISMATCH 9 /* a .tmtrie file of another format version */
#define TREEMASK_ERR_UNSUPPORTED 10     /* not built into this library (JSON, CUDA) */
#define TREEMASK_ERR_INTERNAL 11        /* a bug in treemask; please report it */

/* A short static description of a status ("invalid argument"); an unknown
 * value gives "unknown status". Never NULL. Thread-safe. */
TREEMASK_API const char *treemask_status_string(treemask_status status);

/* The message of the last failing call made on this thread, or of the last
 * token rejection (accept_token with *accepted = false). It names the problem
 * (which argument, which path and position, which token). Never NULL ("" if
 * nothing failed yet). Valid until the next treemask call on this thread.
 * Successful calls do not clear it. */
TREEMASK_API const char *treemask_last_error(void);

/* ======================================================================== */
/* Section 4: trie                                                           */
/* ======================================================================== */

/* ceil(vocab_size / 32): the int32 words in one bitmask row; 0 when
 * vocab_size <= 0. */
TREEMASK_API size_t treemask_bitmask_words(int32_t vocab_size);

typedef struct treemask_trie_options {
  size_t struct_size;
  /* Every token id in the trie and every stop token must be < vocab_size.
   * Required (> 0); init sets 0. */
  int32_t vocab_size;
  /* Tokens that end a sequence at a terminal node (one model may have several
   * EOS ids). Copied; duplicates are merged. */
  const int32_t *stop_tokens;
  size_t n_stop_tokens;
  /* Memory budget for cached dense rows of high-fanout nodes (a root with
   * thousands of children): a fill at such a node copies the cached row
   * instead of setting each bit. Rows are built lazily, thread-safely, and
   * never exceed this budget. init sets 64 MiB; 0 disables the cache. */
  size_t dense_row_cache_bytes;
} treemask_trie_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_trie_options_init(treemask_trie_options *opts);

/* Builds a trie from token paths in CSR form: path i is
 * tokens[offsets[i] .. offsets[i + 1]).
 *
 * - opts: required; vocab_size > 0; at least one stop token, each in
 *   [0, vocab_size).
 * - offsets: n_paths + 1 entries, offsets[0] == 0, non-decreasing.
 * - tokens: offsets[n_paths] entries, each in [0, vocab_size); a stop token
 *   must not occur inside any path (the error names both).
 * - n_paths >= 1. The empty path makes the root terminal.
 * - label_ids: NULL (path i carries label i) or n_paths entries. Duplicate
 *   paths merge into one terminal node that carries every label given for
 *   them; one label id may sit on several paths.
 * - out: receives the new trie (refcount 1) on success.
 *
 * Cost: O(total tokens * log fanout) time, O(total tokens) temporary memory.
 * On failure *out is untouched and treemask_last_error() names the offending
 * argument, path index and position. Thread-safe. */
TREEMASK_API treemask_status treemask_trie_from_paths(const treemask_trie_options *opts,
                                                      const int32_t *tokens, const size_t *offsets,
                                                      size_t n_paths, const int64_t *label_ids,
                                                      treemask_trie **out);

/* Adds a reference and returns trie (NULL gives NULL). Thread-safe. */
TREEMASK_API treemask_trie *treemask_trie_retain(treemask_trie *trie);

/* Drops one reference; the last one destroys the trie. NULL is a no-op.
 * Thread-safe (each reference is released once). */
TREEMASK_API void treemask_trie_free(treemask_trie *trie);

/* The vocab_size the trie was built with; 0 for NULL. */
TREEMASK_API int32_t treemask_trie_vocab_size(const treemask_trie *trie);

/* Writes the stop tokens (ascending, distinct) to out[0 .. min(cap, n)) and
 * returns n. 0 for NULL. */
TREEMASK_API size_t treemask_trie_stop_tokens(const treemask_trie *trie, int32_t *out, size_t cap);

typedef struct treemask_trie_stats {
  size_t struct_size;             /* set by the caller: the library writes at most this */
  uint64_t n_nodes;               /* including the root */
  uint64_t n_edges;               /* n_nodes - 1 */
  uint64_t n_terminals;           /* nodes at which a sequence may end */
  uint64_t n_labels;              /* label ids stored over all terminal nodes */
  uint32_t max_depth;             /* longest path, in tokens */
  uint32_t max_fanout;            /* most children of one node */
  uint64_t bytes;                 /* memory of the flat arrays (no dense-row cache) */
  uint64_t dense_row_cache_bytes; /* memory the lazily built cache uses now */
} treemask_trie_stats;

/* Fills *out (up to out->struct_size bytes; set it to sizeof first).
 * Errors: NULL trie or out, struct_size smaller than sizeof(size_t). */
TREEMASK_API treemask_status treemask_trie_get_stats(const treemask_trie *trie,
                                                     treemask_trie_stats *out);

/* <treemask:trie-extensions> later sections add trie sources here. */

/* ======================================================================== */
/* Section 5: matcher                                                        */
/* ======================================================================== */

/* What accept_token does with a token that is not allowed. In every policy
 * the call returns TREEMASK_OK with *accepted = false and sets
 * treemask_last_error(). */
#define TREEMASK_FAILURE_REJECT 0       /* state unchanged (xgrammar) */
#define TREEMASK_FAILURE_FAIL_CLOSED 1  /* from now on only stop tokens (RTP-LLM) */
#define TREEMASK_FAILURE_STICKY_ERROR 2 /* the matcher is failed until reset (llguidance) */

typedef struct treemask_matcher_options {
  size_t struct_size;
  /* TREEMASK_FAILURE_*; init sets TREEMASK_FAILURE_REJECT. */
  int32_t failure_policy;
  /* Terminate as soon as a node without children is reached, as part of the
   * accept that reached it (no stop token needed). init sets false. */
  bool terminate_without_stop_token;
  /* How many accepts rollback may undo; 0 = unlimited (the history is then
   * bounded by the longest path of the trie). init sets 0. */
  size_t max_rollback_tokens;
  /* After termination this token is accepted and changes nothing, like a
   * stop token (for engines that pad finished rows). -1 = none (init). */
  int32_t pad_token;
} treemask_matcher_options;

/* Sets struct_size and every field to its default. */
TREEMASK_API void treemask_matcher_options_init(treemask_matcher_options *opts);

/* Creates a matcher at the root of trie (which it retains). opts NULL means
 * defaults. Errors: NULL trie or out, an unknown failure_policy, pad_token
 * outside [-1, vocab_size). Thread-safe with respect to the trie. */
TREEMASK_API treemask_status treemask_matcher_create(treemask_trie *trie,
                                                     const treemask_matcher_options *opts,
                                                     treemask_matcher **out);

/* A copy of m with the same state, history and options. Cheap: the rollback
 * history is shared copy-on-write, never copied whole. Works in every state. */
TREEMASK_API treemask_status treemask_matcher_clone(const treemask_matcher *m,
                                                    treemask_matcher **out);

/* Destroys m and releases its trie. NULL is a no-op. */
TREEMASK_API void treemask_matcher_free(treemask_matcher *m);

/* Writes the next-token bitmask row: bit t is set iff t is a child token of
 * the current node, or t is a stop token and the node is terminal. Once
 * terminated, and after a rejection under FAIL_CLOSED or STICKY_ERROR, only
 * the stop tokens are set.
 *
 * Writes all n_words words whatever the buffer held (bits >= vocab_size are
 * 0); n_words must be >= treemask_bitmask_words(vocab_size). *need_apply
 * (optional) is false iff every token < vocab_size is allowed, so the
 * engine may skip masking.
 *
 * Cost: about a memset of the row (a high-fanout node copies a cached dense
 * row). For the O(fanout) incremental form use the batch API.
 *
 * Errors: NULL m or bitmask, n_words too small (nothing written). In the
 * STICKY_ERROR failed state the row is written (stop tokens only) and
 * TREEMASK_ERR_INVALID_STATE is returned. */
TREEMASK_API treemask_status treemask_matcher_fill_next_token_bitmask(treemask_matcher *m,
                                                                      int32_t *bitmask,
                                                                      size_t n_words,
                                                                      bool *need_apply);

/* Feeds the sampled token. accepted must be non-NULL.
 * - A child token advances (*accepted = true). With
 *   terminate_without_stop_token, reaching a node without children also
 *   terminates, in the same accept.
 * - A stop token at a terminal node terminates (*accepted = true).
 * - After termination, stop tokens and pad_token are accepted and change
 *   nothing; any other token is rejected without entering a failure state.
 * - Anything else, including ids < 0 or >= vocab_size, is rejected:
 *   TREEMASK_OK, *accepted = false, treemask_last_error() says why, and the
 *   failure policy applies (see TREEMASK_FAILURE_*). Under FAIL_CLOSED a
 *   later stop token is accepted and terminates.
 * In the STICKY_ERROR failed state: TREEMASK_ERR_INVALID_STATE. */
TREEMASK_API treemask_status treemask_matcher_accept_token(treemask_matcher *m, int32_t token,
                                                           bool *accepted);

/* Undoes the last n_tokens accepts that changed the state (a terminating
 * stop token counts and undoes termination; rejected tokens and accepts after
 * termination do not count). n_tokens = 0 does nothing. More than the history
 * holds, or more than max_rollback_tokens, is TREEMASK_ERR_OUT_OF_RANGE and
 * changes nothing. In the FAIL_CLOSED closed state and the STICKY_ERROR
 * failed state: TREEMASK_ERR_INVALID_STATE (use reset). */
TREEMASK_API treemask_status treemask_matcher_rollback(treemask_matcher *m, size_t n_tokens);

/* Back to the root with an empty history, whatever the state. NULL is a
 * no-op. */
TREEMASK_API void treemask_matcher_reset(treemask_matcher *m);

/* True once a stop token (or, with terminate_without_stop_token, a leaf)
 * ended the sequence. False for NULL and in the failed state. */
TREEMASK_API bool treemask_matcher_is_terminated(const treemask_matcher *m);

/* True iff accepting a stop token now would terminate: the current node is
 * terminal, or the matcher is closed after a FAIL_CLOSED rejection. False
 * once terminated, in the failed state, and for NULL. */
TREEMASK_API bool treemask_matcher_can_terminate(const treemask_matcher *m);

/* Writes the allowed next tokens in ascending order (stop tokens included
 * when allowed; a terminated or closed matcher lists the stop tokens) to
 * out[0 .. min(cap, n)) and returns n. 0 for NULL and in the failed state. */
TREEMASK_API size_t treemask_matcher_next_tokens(const treemask_matcher *m, int32_t *out,
                                                 size_t cap);

/* Jump-forward: the maximal chain t1..tk in which each node before ti is
 * non-terminal with exactly one child ti. Stop tokens are never included.
 * Writes out[0 .. min(cap, k)) and returns k; 0 when terminated, closed,
 * failed, or for NULL. */
TREEMASK_API size_t treemask_matcher_forced_tokens(const treemask_matcher *m, int32_t *out,
                                                   size_t cap);

/* The label ids of the current node (ascending, distinct) to
 * out[0 .. min(cap, n)); returns n. 0 at a non-terminal node, when closed or
 * failed, and for NULL. Still readable after termination (the labels of the
 * node the sequence ended at). */
TREEMASK_API size_t treemask_matcher_label_ids(const treemask_matcher *m, int64_t *out, size_t cap);

/* The trie this matcher follows (borrowed: not retained). NULL for NULL. */
TREEMASK_API treemask_trie *treemask_matcher_trie(const treemask_matcher *m);

/* How many accepts rollback can undo right now (bounded by
 * max_rollback_tokens). 0 for NULL, closed or failed. */
TREEMASK_API size_t treemask_matcher_rollback_depth(const treemask_matcher *m);

/* <treemask:matcher-extensions> later sections add matcher modes here. */

/* ======================================================================== */
/* Section 6: batch and state arrays                                         */
/* ======================================================================== */

/* <treemask:batch> */

/* ======================================================================== */
/* Section 7: bitmask kernels                                                */
/* ======================================================================== */

/* <treemask:kernels> */

/* Masking logits on the CPU with a bitmask (any xgrammar-layout mask: ours,
 * xgrammar's, llguidance's) or with candidate lists. Masked logits become
 * -inf, written as the dtype's bit pattern (f32 0xFF800000, f16 0xFC00, bf16
 * 0xFF80); kept logits are never read or rewritten as numbers. The kernel is
 * chosen once per process: AVX2 where the CPU has it, else a scalar loop. No
 * threads: the caller's thread does the work. Thread-safe for disjoint
 * logits. */

typedef enum treemask_dtype {
  TREEMASK_F32 = 0,
  TREEMASK_F16 = 1,
  TREEMASK_BF16 = 2
} treemask_dtype;

/* Sets logits[r][c] = -inf for every masked column of every touched row r:
 * column c (< logits_width) is masked iff c >= vocab_size or bit c of bitmask
 * row r is 0. Columns from logits_width up to the stride are never touched.
 *
 * - logits: n_rows rows of logits_width elements of dtype, row r at element
 *   r * logits_row_stride (logits_row_stride >= logits_width).
 * - bitmask: n_rows rows of bitmask_row_words int32 words, row r at word
 *   r * bitmask_row_words; bitmask_row_words must cover
 *   min(vocab_size, logits_width) columns. Bits past that are ignored.
 * - vocab_size > 0: columns at or past it (a padded vocab) are masked.
 * - indices: NULL (with n_indices = 0) touches every row; otherwise only
 *   rows indices[0 .. n_indices), each in [0, n_rows), which address both
 *   the logits row and the bitmask row (xgrammar's semantics).
 *
 * Cost: a fully-masked word is 32 -inf stores with no load, a fully-allowed
 * one is skipped, a mixed one is blended; memory-bandwidth bound.
 * Errors: an unknown dtype, vocab_size <= 0, logits_row_stride <
 * logits_width, bitmask_row_words too small, an index out of range (named),
 * NULL logits or bitmask when something would be touched. Everything is
 * checked before anything is written. */
TREEMASK_API treemask_status treemask_apply_token_bitmask_cpu(
    void *logits, treemask_dtype dtype, size_t n_rows, size_t logits_row_stride,
    size_t logits_width, const int32_t *bitmask, size_t bitmask_row_words, int32_t vocab_size,
    const int32_t *indices, size_t n_indices);

/* The sparse form: row r keeps only its candidates
 * candidate_tokens[row_offsets[r] .. row_offsets[r + 1]) and every other
 * column (< logits_width) becomes -inf. Each row is filled with -inf and its
 * candidates restored, so it never reads a bitmask: for trie rows (few
 * candidates) it moves the least memory. Same logits, dtype, vocab_size and
 * indices rules as above; row_offsets has n_rows + 1 non-decreasing entries
 * (CSR, e.g. treemask_matcher_next_tokens of each row). Candidates may repeat
 * and come in any order; each must be in [0, vocab_size) (an error names the
 * row and position); one >= logits_width is ignored.
 * Errors: as above, plus NULL row_offsets, decreasing offsets, NULL
 * candidate_tokens when there are candidates. */
TREEMASK_API treemask_status treemask_apply_token_candidates_cpu(
    void *logits, treemask_dtype dtype, size_t n_rows, size_t logits_row_stride,
    size_t logits_width, const size_t *row_offsets, const int32_t *candidate_tokens,
    int32_t vocab_size, const int32_t *indices, size_t n_indices);

/* The instruction set of the kernel the apply functions use in this process:
 * "avx2" or "scalar". Static storage; never NULL. Thread-safe. */
TREEMASK_API const char *treemask_cpu_kernel_isa(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TREEMASK_TREEMASK_H */
