/* treemask for llama.cpp: the llama_sampler (see treemask_llama.h).
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
/* The string-set functions (treemask_llama_vocab and the check) are in the
 * experimental tier, as string sets are. */
#define TREEMASK_EXPERIMENTAL
#include "treemask_llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Above this many allowed tokens (a think phase allows the whole vocabulary)
 * the candidates are filtered through a bitmask rather than a token list. */
enum { TM_LLAMA_LIST_MAX = 4096, TM_LLAMA_LIST_INITIAL = 256 };

typedef struct tm_llama {
  treemask_trie *trie;       /* retained */
  treemask_matcher *matcher; /* NULL only in a clone that could not copy it */
  bool failed;               /* fail-closed: only stop tokens until reset */
  int32_t vocab_size;
  int32_t *next; /* the allowed tokens of this step (lazily allocated) */
  size_t next_cap;
  int32_t *mask; /* one bitmask row, for candidate arrays that are not id == index */
  size_t mask_words;
  size_t n_stops;
  int32_t stops[]; /* the matcher's stop tokens, ascending (never empty) */
} tm_llama;

static struct llama_sampler_i tm_llama_iface;

static tm_llama *tm_llama_alloc(treemask_trie *trie, const int32_t *stops, size_t n_stops) {
  tm_llama *s = (tm_llama *)calloc(1, sizeof(tm_llama) + n_stops * sizeof(int32_t));
  if (!s) return NULL;
  s->trie = treemask_trie_retain(trie);
  s->vocab_size = treemask_trie_vocab_size(trie);
  s->n_stops = n_stops;
  if (n_stops) memcpy(s->stops, stops, n_stops * sizeof(int32_t));
  return s;
}

static void tm_llama_destroy(tm_llama *s) {
  if (!s) return;
  treemask_matcher_free(s->matcher);
  treemask_trie_free(s->trie);
  free(s->next);
  free(s->mask);
  free(s);
}

/* ---- filtering the candidate array ----------------------------------- */

/* Keeps data[r] for every r with keep(r) true, in order; `selected` follows
 * its entry. When nothing is kept the array becomes the first stop token
 * alone: never empty (llama.cpp's final samplers assert a non-empty array),
 * never a token outside the trie's allowed set. */
static void tm_finish(tm_llama *s, llama_token_data_array *cur_p, size_t kept, int64_t selected) {
  if (kept == 0) {
    cur_p->data[0].id = s->stops[0];
    cur_p->data[0].logit = 0.0f;
    cur_p->data[0].p = 1.0f;
    kept = 1;
    selected = -1;
  }
  cur_p->size = kept;
  cur_p->selected = selected;
}

/* The common case: llama.cpp fills the array with data[i].id == i over the
 * whole vocabulary. If every allowed token t sits at index t, keep exactly
 * those entries: O(n), no look at the other candidates. tokens is ascending,
 * so moving data[t_i] to data[i] (i <= t_i) never overwrites an entry still
 * to be read. Returns false (array untouched) if the layout is not that. */
static bool tm_keep_by_index(tm_llama *s, llama_token_data_array *cur_p, const int32_t *tokens,
                             size_t n) {
  const size_t size = cur_p->size;
  llama_token_data *data = cur_p->data;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || (size_t)t >= size || data[t].id != t) return false;
  }
  int64_t selected = -1;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = tokens[i];
    if ((int64_t)t == cur_p->selected) selected = (int64_t)i;
    data[i] = data[t];
  }
  tm_finish(s, cur_p, n, selected);
  return true;
}

/* Any other array (reordered, truncated by an earlier sampler): one bit test
 * per candidate against the row in s->mask. */
static void tm_keep_by_mask(tm_llama *s, llama_token_data_array *cur_p) {
  const uint32_t *mask = (const uint32_t *)s->mask;
  llama_token_data *data = cur_p->data;
  size_t kept = 0;
  int64_t selected = -1;
  for (size_t r = 0; r < cur_p->size; ++r) {
    const int32_t t = data[r].id;
    if (t < 0 || t >= s->vocab_size || !((mask[t >> 5] >> (t & 31)) & 1u)) continue;
    if ((int64_t)r == cur_p->selected) selected = (int64_t)kept;
    data[kept++] = data[r];
  }
  tm_finish(s, cur_p, kept, selected);
}

static bool tm_ensure_mask(tm_llama *s) {
  if (s->mask) return true;
  const size_t words = treemask_bitmask_words(s->vocab_size);
  s->mask = (int32_t *)malloc(words * sizeof(int32_t));
  if (!s->mask) return false;
  s->mask_words = words;
  return true;
}

/* Keeps the candidates whose ids are in tokens (ascending). */
static bool tm_keep_tokens(tm_llama *s, llama_token_data_array *cur_p, const int32_t *tokens,
                           size_t n) {
  if (tm_keep_by_index(s, cur_p, tokens, n)) return true;
  if (!tm_ensure_mask(s)) return false;
  memset(s->mask, 0, s->mask_words * sizeof(int32_t));
  uint32_t *mask = (uint32_t *)s->mask;
  for (size_t i = 0; i < n; ++i) mask[tokens[i] >> 5] |= 1u << (tokens[i] & 31);
  tm_keep_by_mask(s, cur_p);
  return true;
}

static void tm_keep_stop_tokens(tm_llama *s, llama_token_data_array *cur_p) {
  if (!tm_keep_tokens(s, cur_p, s->stops, s->n_stops)) {
    /* No memory even for the mask row: the first stop token alone. */
    tm_finish(s, cur_p, 0, -1);
  }
}

/* The allowed tokens of this step into s->next; 0 on any failure. */
static size_t tm_next_tokens(tm_llama *s, bool *too_many) {
  *too_many = false;
  if (!s->next) {
    s->next = (int32_t *)malloc(TM_LLAMA_LIST_INITIAL * sizeof(int32_t));
    if (!s->next) return 0;
    s->next_cap = TM_LLAMA_LIST_INITIAL;
  }
  size_t n = treemask_matcher_next_tokens(s->matcher, s->next, s->next_cap);
  if (n <= s->next_cap) return n;
  if (n > TM_LLAMA_LIST_MAX) {
    *too_many = true;
    return n;
  }
  int32_t *grown = (int32_t *)realloc(s->next, n * sizeof(int32_t));
  if (!grown) return 0;
  s->next = grown;
  s->next_cap = n;
  n = treemask_matcher_next_tokens(s->matcher, s->next, s->next_cap);
  return n <= s->next_cap ? n : 0;
}

/* ---- llama_sampler_i ---------------------------------------------------- */

static const char *tm_llama_name(const struct llama_sampler *smpl) {
  (void)smpl;
  return "treemask";
}

static void tm_llama_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
  tm_llama *s = (tm_llama *)smpl->ctx;
  if (!cur_p || !cur_p->data || cur_p->size == 0) return;
  if (!s->failed && s->matcher) {
    bool too_many = false;
    const size_t n = tm_next_tokens(s, &too_many);
    if (too_many) {
      /* A think phase or a huge fanout: let the matcher fill a whole row. */
      bool need_apply = true;
      if (tm_ensure_mask(s) &&
          treemask_matcher_fill_next_token_bitmask(s->matcher, s->mask, s->mask_words, NULL,
                                                   &need_apply) == TREEMASK_OK) {
        if (need_apply) tm_keep_by_mask(s, cur_p);
        return;
      }
    } else if (n > 0 && tm_keep_tokens(s, cur_p, s->next, n)) {
      return;
    }
    /* next_tokens lists at least the stop tokens in every state but the
     * sticky-error one, so 0 (or no memory) is a failure: close. */
    s->failed = true;
  }
  tm_keep_stop_tokens(s, cur_p);
}

static void tm_llama_accept(struct llama_sampler *smpl, llama_token token) {
  tm_llama *s = (tm_llama *)smpl->ctx;
  if (s->failed || !s->matcher) return;
  bool accepted = false;
  if (treemask_matcher_accept_token(s->matcher, token, &accepted) != TREEMASK_OK || !accepted) {
    s->failed = true; /* the sequence has left the trie: only stop tokens */
  }
}

static void tm_llama_reset(struct llama_sampler *smpl) {
  tm_llama *s = (tm_llama *)smpl->ctx;
  if (!s->matcher) return; /* a clone without a matcher stays closed */
  treemask_matcher_reset(s->matcher);
  s->failed = false;
}

static struct llama_sampler *tm_llama_clone(const struct llama_sampler *smpl) {
  const tm_llama *src = (const tm_llama *)smpl->ctx;
  tm_llama *s = tm_llama_alloc(src->trie, src->stops, src->n_stops);
  if (!s) {
    /* Returning NULL would put a no-op sampler in a cloned chain: generation
     * unconstrained. llama.cpp itself aborts when it runs out of memory. */
    fprintf(stderr, "treemask_llama: out of memory cloning the sampler\n");
    abort();
  }
  s->failed = src->failed;
  if (src->matcher && treemask_matcher_clone(src->matcher, &s->matcher) != TREEMASK_OK) {
    s->matcher = NULL;
  }
  if (!s->matcher) s->failed = true;
  return llama_sampler_init(&tm_llama_iface, s);
}

static void tm_llama_free(struct llama_sampler *smpl) {
  tm_llama_destroy((tm_llama *)smpl->ctx);
  smpl->ctx = NULL;
}

static struct llama_sampler_i tm_llama_iface = {
    .name = tm_llama_name,
    .accept = tm_llama_accept,
    .apply = tm_llama_apply,
    .reset = tm_llama_reset,
    .clone = tm_llama_clone,
    .free = tm_llama_free,
    /* No backend (on-device) sampling: llama.cpp runs this sampler, and every
     * sampler after it in the chain, on the CPU. copy_state NULL makes
     * llama_sampler_copy go through clone. */
};

/* ---- public ------------------------------------------------------------- */

/* Why the last init on this thread failed (treemask_llama_sampler_error). */
static _Thread_local char tm_llama_error[512];

static struct llama_sampler *tm_llama_init_failed(treemask_matcher *matcher, const char *why) {
  snprintf(tm_llama_error, sizeof(tm_llama_error), "treemask_llama_sampler_init: %s", why);
  treemask_matcher_free(matcher);
  return NULL;
}

treemask_status treemask_llama_vocab(const struct llama_vocab *vocab, treemask_vocab **out) {
  if (!vocab || !out) return TREEMASK_ERR_INVALID_ARGUMENT;
  *out = NULL;
  const int32_t n = llama_vocab_n_tokens(vocab);
  const int never_text = LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED |
                         LLAMA_TOKEN_ATTR_UNUSED | LLAMA_TOKEN_ATTR_UNKNOWN;
  uint64_t *offsets = (uint64_t *)malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof(uint64_t));
  uint8_t *flags = (uint8_t *)malloc((size_t)(n > 0 ? n : 1));
  size_t cap = (size_t)(n > 0 ? n : 1) * 8, used = 0;
  uint8_t *bytes = (uint8_t *)malloc(cap);
  char *piece = (char *)malloc(256);
  int32_t piece_cap = 256;
  treemask_status status = TREEMASK_OK;
  if (!offsets || !flags || !bytes || !piece) goto no_memory;
  offsets[0] = 0;
  for (int32_t t = 0; t < n; ++t) {
    const int attr = (int)llama_vocab_get_attr(vocab, t);
    const bool text = !(attr & never_text) && attr != LLAMA_TOKEN_ATTR_UNDEFINED;
    int32_t k = 0;
    if (text) {
      k = llama_token_to_piece(vocab, t, piece, piece_cap, 0, false);
      if (k < 0) { /* -k bytes needed */
        char *grown = (char *)realloc(piece, (size_t)-k);
        if (!grown) goto no_memory;
        piece = grown;
        piece_cap = -k;
        k = llama_token_to_piece(vocab, t, piece, piece_cap, 0, false);
        if (k < 0) k = 0; /* no piece llama.cpp gives: never text */
      }
    }
    if (used + (size_t)k > cap) {
      while (used + (size_t)k > cap) cap *= 2;
      uint8_t *grown = (uint8_t *)realloc(bytes, cap);
      if (!grown) goto no_memory;
      bytes = grown;
    }
    if (k > 0) memcpy(bytes + used, piece, (size_t)k);
    used += (size_t)k;
    offsets[t + 1] = used;
    flags[t] = text ? 0 : TREEMASK_TOKEN_SPECIAL;
  }
  status = treemask_vocab_create(bytes, offsets, (size_t)(n > 0 ? n : 0), flags, n, out);
  goto done;
no_memory:
  status = TREEMASK_ERR_OUT_OF_MEMORY;
done:
  free(piece);
  free(bytes);
  free(flags);
  free(offsets);
  return status;
}

/* The checks and the sampler of both inits; *checked: the caller has
 * checked a string set against the model's vocabulary. */
static struct llama_sampler *tm_llama_init(int32_t n_vocab, const treemask_trie *trie,
                                           const treemask_matcher_options *opts, bool checked);

struct llama_sampler *treemask_llama_sampler_init_vocab(const treemask_vocab *model_vocab,
                                                        const treemask_trie *trie,
                                                        const treemask_matcher_options *opts) {
  tm_llama_error[0] = '\0';
  if (!model_vocab) {
    return tm_llama_init_failed(
        NULL, "model_vocab is NULL (treemask_llama_vocab of the model's vocabulary)");
  }
  if (!trie) return tm_llama_init_failed(NULL, "trie is NULL");
  if (treemask_trie_check_vocab(trie, model_vocab) != TREEMASK_OK) {
    return tm_llama_init_failed(NULL, treemask_last_error());
  }
  return tm_llama_init(treemask_vocab_size(model_vocab), trie, opts, true);
}

struct llama_sampler *treemask_llama_sampler_init(int32_t n_vocab, const treemask_trie *trie,
                                                  const treemask_matcher_options *opts) {
  tm_llama_error[0] = '\0';
  return tm_llama_init(n_vocab, trie, opts, false);
}

static struct llama_sampler *tm_llama_init(int32_t n_vocab, const treemask_trie *trie,
                                           const treemask_matcher_options *opts, bool checked) {
  char why[256];
  if (!trie) return tm_llama_init_failed(NULL, "trie is NULL");
  if (!checked && treemask_trie_is_string_set(trie)) {
    return tm_llama_init_failed(
        NULL,
        "a string-set trie needs the model's vocabulary, to check that it was compiled for this "
        "model's tokenizer: create the sampler with treemask_llama_sampler_init_vocab("
        "treemask_llama_vocab(llama_model_get_vocab(model)), trie, opts)");
  }
  if (n_vocab < 1) {
    snprintf(why, sizeof(why), "n_vocab %d: want the model's vocabulary size (>= 1)", (int)n_vocab);
    return tm_llama_init_failed(NULL, why);
  }
  /* Every token the trie can offer is below its vocab_size: the check that
   * keeps the sampler from offering a token the model does not have. */
  const int32_t trie_vocab = treemask_trie_vocab_size(trie);
  if (trie_vocab > n_vocab) {
    snprintf(why, sizeof(why),
             "the trie's vocab_size %d is larger than the model's n_vocab %d (build the trie for "
             "this model, with vocab_size = llama_vocab_n_tokens)",
             (int)trie_vocab, (int)n_vocab);
    return tm_llama_init_failed(NULL, why);
  }
  /* The C API takes a mutable trie only to count references. */
  treemask_trie *shared = (treemask_trie *)trie;
  treemask_matcher *matcher = NULL;
  if (treemask_matcher_create(shared, opts, &matcher) != TREEMASK_OK) {
    return tm_llama_init_failed(NULL, treemask_last_error());
  }
  /* At least one stop token: the trie requires one, and so does an
   * override list. Each is below the trie's vocab_size, so below n_vocab. */
  const size_t n_stops = treemask_matcher_stop_tokens(matcher, NULL, 0);
  int32_t *stops = n_stops ? (int32_t *)malloc(n_stops * sizeof(int32_t)) : NULL;
  if (!stops) return tm_llama_init_failed(matcher, "out of memory");
  treemask_matcher_stop_tokens(matcher, stops, n_stops);
  for (size_t i = 0; i < n_stops; ++i) {
    if (stops[i] < 0 || stops[i] >= n_vocab) {
      snprintf(why, sizeof(why), "stop token %d is not below the model's n_vocab %d", (int)stops[i],
               (int)n_vocab);
      free(stops);
      return tm_llama_init_failed(matcher, why);
    }
  }
  tm_llama *s = tm_llama_alloc(shared, stops, n_stops);
  free(stops);
  if (!s) return tm_llama_init_failed(matcher, "out of memory");
  s->matcher = matcher;
  return llama_sampler_init(&tm_llama_iface, s);
}

const char *treemask_llama_sampler_error(void) { return tm_llama_error; }

static const tm_llama *tm_llama_of(const struct llama_sampler *smpl) {
  return smpl && smpl->iface == &tm_llama_iface ? (const tm_llama *)smpl->ctx : NULL;
}

bool treemask_llama_sampler_is_terminated(const struct llama_sampler *smpl) {
  const tm_llama *s = tm_llama_of(smpl);
  return s && s->matcher && treemask_matcher_is_terminated(s->matcher);
}

bool treemask_llama_sampler_is_failed(const struct llama_sampler *smpl) {
  const tm_llama *s = tm_llama_of(smpl);
  return s && s->failed;
}

const treemask_matcher *treemask_llama_sampler_matcher(const struct llama_sampler *smpl) {
  const tm_llama *s = tm_llama_of(smpl);
  return s ? s->matcher : NULL;
}
