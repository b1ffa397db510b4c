/* The treemask llama_sampler against the real llama.cpp (the sources pinned by
 * llama-cpp-python 0.3.36).
 *
 * Part 1, no model: candidate arrays built by hand, in the manner of
 * llama.cpp's tests/test-sampling.cpp (its sampler_tester: probabilities in,
 * apply, dist, probabilities checked), plus every llama_sampler_i entry:
 * apply on llama.cpp's id == index arrays and on reordered / sorted /
 * truncated ones, accept, reset (alone and through a chain), clone and
 * llama_sampler_copy, the fail-closed paths, a think phase (whole-vocabulary
 * steps), and chains with top_k / top_p / min_p / temp after it.
 *
 * Part 2, with a model (argv[1] = a .gguf, argv[2] = labels, one per line,
 * argv[3] = where to write the trie for the README example): the labels are
 * tokenized with the model's own vocabulary, and generation runs many times
 * with sampling (1 thread) through [treemask, dist] and [treemask, top_k,
 * temp, dist]; every output must be exactly one label's path followed by a
 * stop token. Then the labels as a string set (the model's token bytes read
 * through llama_token_to_piece): every output spells one label, in any
 * tokenization, and ends with a stop token.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* strdup, clock_gettime */
#define TREEMASK_EXPERIMENTAL   /* the decoding modes: treemask_mode_options */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "treemask_llama.h"

#define CHECK(cond)                                                                \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
              treemask_last_error() ? treemask_last_error() : "");                 \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

/* ---- part 1: hand-made candidate arrays ---------------------------------- */

enum { V = 1000, STOP = 999 };

/* Paths: 5 7 9 | 5 7 11 | 5 8 | 20 | 5 (a label that is a prefix of others). */
static treemask_trie *small_trie(void) {
  const int32_t tokens[] = {5, 7, 9, 5, 7, 11, 5, 8, 20, 5};
  const size_t offsets[] = {0, 3, 6, 8, 9, 10};
  const int32_t stop = STOP;
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = V;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  treemask_trie *trie = NULL;
  CHECK(treemask_trie_from_paths(&o, tokens, offsets, 5, NULL, &trie) == TREEMASK_OK);
  return trie;
}

typedef struct {
  llama_token_data data[V];
  llama_token_data_array arr;
} candidates;

/* llama.cpp's layout: data[i].id == i over the whole vocabulary. */
static void fill_identity(candidates *c, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    c->data[i].id = (llama_token)i;
    c->data[i].logit = (float)((i * 7919) % 1000) / 100.0f;
    c->data[i].p = 0.0f;
  }
  c->arr.data = c->data;
  c->arr.size = n;
  c->arr.selected = -1;
  c->arr.sorted = false;
}

static int cmp_logit_desc(const void *a, const void *b) {
  const float x = ((const llama_token_data *)a)->logit, y = ((const llama_token_data *)b)->logit;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The ids left in the array, in order, must be exactly want[]. */
static void expect_ids(const llama_token_data_array *arr, const int32_t *want, size_t n) {
  if (arr->size != n) {
    fprintf(stderr, "expected %zu candidates, got %zu:", n, arr->size);
    for (size_t i = 0; i < arr->size && i < 20; ++i) fprintf(stderr, " %d", arr->data[i].id);
    fprintf(stderr, "\n");
  }
  CHECK(arr->size == n);
  for (size_t i = 0; i < n; ++i) CHECK(arr->data[i].id == want[i]);
}

/* Applies smpl to a fresh identity array and checks the allowed set. */
static void expect_allowed(struct llama_sampler *smpl, const int32_t *want, size_t n) {
  static candidates c;
  fill_identity(&c, V);
  llama_sampler_apply(smpl, &c.arr);
  expect_ids(&c.arr, want, n);
  for (size_t i = 0; i < n; ++i) {
    CHECK(c.arr.data[i].logit == (float)((want[i] * 7919) % 1000) / 100.0f); /* logits kept */
  }
}

static void test_init_errors(void) {
  CHECK(treemask_llama_sampler_init(V, NULL, NULL) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(), "trie is NULL") != NULL);
  treemask_trie *trie = small_trie();
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = 99;
  CHECK(treemask_llama_sampler_init(V, trie, &o) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(), "failure_policy") != NULL);
  /* Issue 21 item 12: a trie that does not fit the model's vocabulary (its
   * stop token STOP = 999 on a model of 500 tokens would be offered). */
  CHECK(treemask_llama_sampler_init(500, trie, NULL) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(),
               "vocab_size 1000 is larger than the model's n_vocab 500") != NULL);
  CHECK(treemask_llama_sampler_init(0, trie, NULL) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(), "n_vocab 0") != NULL);
  CHECK(treemask_llama_sampler_init(-5, trie, NULL) == NULL);
  /* Fits exactly: fine, and a success clears the message. */
  struct llama_sampler *fits = treemask_llama_sampler_init(V, trie, NULL);
  CHECK(fits != NULL);
  CHECK(strcmp(treemask_llama_sampler_error(), "") == 0);
  llama_sampler_free(fits);
  /* A larger (padded) model vocabulary is fine: its extra ids are never allowed. */
  fits = treemask_llama_sampler_init(V + 64, trie, NULL);
  CHECK(fits != NULL);
  static candidates c;
  fill_identity(&c, V);
  llama_sampler_apply(fits, &c.arr);
  CHECK(c.arr.size == 2 && c.arr.data[0].id == 5 && c.arr.data[1].id == 20);
  llama_sampler_free(fits);
  treemask_trie_free(trie);
  CHECK(!treemask_llama_sampler_is_terminated(NULL));
  CHECK(treemask_llama_sampler_matcher(NULL) == NULL);
  struct llama_sampler *other = llama_sampler_init_greedy();
  CHECK(treemask_llama_sampler_matcher(other) == NULL); /* not ours */
  CHECK(!treemask_llama_sampler_is_failed(other));
  llama_sampler_free(other);
}

static void test_walk(void) {
  treemask_trie *trie = small_trie();
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, NULL);
  treemask_trie_free(trie); /* the sampler retains it */
  CHECK(s != NULL);
  CHECK(strcmp(llama_sampler_name(s), "treemask") == 0);
  const int32_t root[] = {5, 20};
  expect_allowed(s, root, 2);
  llama_sampler_accept(s, 5);
  const int32_t after5[] = {7, 8, STOP};
  expect_allowed(s, after5, 3);
  llama_sampler_accept(s, 7);
  const int32_t after57[] = {9, 11};
  expect_allowed(s, after57, 2);
  llama_sampler_accept(s, 11);
  const int32_t stop[] = {STOP};
  expect_allowed(s, stop, 1);
  CHECK(!treemask_llama_sampler_is_terminated(s));
  llama_sampler_accept(s, STOP);
  CHECK(treemask_llama_sampler_is_terminated(s));
  CHECK(!treemask_llama_sampler_is_failed(s));
  expect_allowed(s, stop, 1); /* finished: only stop tokens */
  llama_sampler_reset(s);
  CHECK(!treemask_llama_sampler_is_terminated(s));
  expect_allowed(s, root, 2);
  llama_sampler_free(s);
}

/* Arrays that are not id == index: reversed, sorted by logit, truncated. */
static void test_other_layouts(void) {
  treemask_trie *trie = small_trie();
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, NULL);
  treemask_trie_free(trie);
  static candidates c;

  /* reversed: kept in array order; selected follows its entry */
  fill_identity(&c, V);
  for (size_t i = 0; i < V / 2; ++i) {
    llama_token_data t = c.data[i];
    c.data[i] = c.data[V - 1 - i];
    c.data[V - 1 - i] = t;
  }
  c.arr.selected = V - 1 - 20; /* the entry of token 20 */
  llama_sampler_apply(s, &c.arr);
  const int32_t reversed[] = {20, 5};
  expect_ids(&c.arr, reversed, 2);
  CHECK(c.arr.selected == 0);

  /* sorted by logit (as after top_k): stays sorted, flag kept */
  fill_identity(&c, V);
  qsort(c.data, V, sizeof(llama_token_data), cmp_logit_desc);
  c.arr.sorted = true;
  llama_sampler_apply(s, &c.arr);
  CHECK(c.arr.size == 2 && c.arr.sorted);
  CHECK(c.arr.data[0].logit >= c.arr.data[1].logit);

  /* identity layout, selected on a removed entry: -1 */
  fill_identity(&c, V);
  c.arr.selected = 6;
  llama_sampler_apply(s, &c.arr);
  CHECK(c.arr.size == 2 && c.arr.selected == -1);
  fill_identity(&c, V);
  c.arr.selected = 20;
  llama_sampler_apply(s, &c.arr);
  CHECK(c.arr.size == 2 && c.arr.selected == 1);

  /* truncated to ids 0..9 (token 20 is gone): 5 only */
  fill_identity(&c, 10);
  llama_sampler_apply(s, &c.arr);
  const int32_t five[] = {5};
  expect_ids(&c.arr, five, 1);

  /* no allowed token at all in the array: the stop token alone, never empty */
  fill_identity(&c, 4);
  llama_sampler_apply(s, &c.arr);
  const int32_t stop[] = {STOP};
  expect_ids(&c.arr, stop, 1);

  /* candidate ids outside the vocabulary are never kept */
  fill_identity(&c, 3);
  c.data[0].id = -1;
  c.data[1].id = V + 5;
  c.data[2].id = 20;
  llama_sampler_apply(s, &c.arr);
  const int32_t twenty[] = {20};
  expect_ids(&c.arr, twenty, 1);

  /* an empty array stays empty */
  fill_identity(&c, 0);
  llama_sampler_apply(s, &c.arr);
  CHECK(c.arr.size == 0);
  llama_sampler_free(s);
}

static void test_fail_closed(void) {
  treemask_trie *trie = small_trie();
  const int32_t root[] = {5, 20}, stop[] = {STOP};

  /* a token outside the trie accepted (forced by the application) */
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, NULL);
  llama_sampler_accept(s, 6);
  CHECK(treemask_llama_sampler_is_failed(s));
  expect_allowed(s, stop, 1);
  llama_sampler_accept(s, 5); /* stays closed */
  expect_allowed(s, stop, 1);
  struct llama_sampler *copy = llama_sampler_clone(s); /* a clone is closed too */
  CHECK(treemask_llama_sampler_is_failed(copy));
  expect_allowed(copy, stop, 1);
  llama_sampler_free(copy);
  llama_sampler_reset(s);
  CHECK(!treemask_llama_sampler_is_failed(s));
  expect_allowed(s, root, 2);
  llama_sampler_accept(s, -7); /* a negative id */
  expect_allowed(s, stop, 1);
  llama_sampler_free(s);

  /* an internal failure: the matcher put into its failed state behind the
   * sampler's back (sticky_error policy), so next_tokens has nothing */
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = TREEMASK_FAILURE_STICKY_ERROR;
  s = treemask_llama_sampler_init(V, trie, &o);
  treemask_matcher *m = (treemask_matcher *)treemask_llama_sampler_matcher(s);
  bool accepted = true;
  CHECK(treemask_matcher_accept_token(m, 6, &accepted) == TREEMASK_OK && !accepted);
  CHECK(!treemask_llama_sampler_is_failed(s));
  expect_allowed(s, stop, 1);
  CHECK(treemask_llama_sampler_is_failed(s));
  llama_sampler_reset(s);
  expect_allowed(s, root, 2);
  llama_sampler_free(s);

  /* override_stop_tokens: those are the stop tokens of the closed state */
  const int32_t overrides[] = {3, 998};
  treemask_mode_options mo;
  treemask_mode_options_init(&mo);
  mo.override_stop_tokens = overrides;
  mo.n_override_stop_tokens = 2;
  s = treemask_llama_sampler_init(V, trie, &mo.matcher);
  llama_sampler_accept(s, 6);
  expect_allowed(s, overrides, 2);
  llama_sampler_free(s);
  treemask_trie_free(trie);
}

static void test_clone_and_copy(void) {
  treemask_trie *trie = small_trie();
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, NULL);
  treemask_trie_free(trie);
  llama_sampler_accept(s, 5);
  struct llama_sampler *c = llama_sampler_clone(s);
  CHECK(c != NULL && c != s);
  const int32_t after5[] = {7, 8, STOP}, after57[] = {9, 11};
  expect_allowed(c, after5, 3);
  llama_sampler_accept(c, 7); /* the clone moves alone */
  expect_allowed(c, after57, 2);
  expect_allowed(s, after5, 3);
  llama_sampler_copy(c, s); /* s takes c's state (through clone) */
  expect_allowed(s, after57, 2);
  llama_sampler_free(s);
  expect_allowed(c, after57, 2); /* the trie outlives the first sampler */
  llama_sampler_free(c);

  /* a whole chain cloned carries our state */
  trie = small_trie();
  struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, treemask_llama_sampler_init(V, trie, NULL));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(7));
  treemask_trie_free(trie);
  llama_sampler_accept(chain, 5);
  struct llama_sampler *chain2 = llama_sampler_clone(chain);
  expect_allowed(llama_sampler_chain_get(chain2, 0), after5, 3);
  llama_sampler_free(chain);
  llama_sampler_free(chain2);
}

/* One constrained sequence through chain on an identity array with logits
 * from seed; returns its length and writes the tokens. */
static size_t sample_sequence(struct llama_sampler *chain, unsigned *seed, int32_t *out) {
  static candidates c;
  size_t n = 0;
  for (int step = 0; step < 10; ++step) {
    fill_identity(&c, V);
    for (size_t i = 0; i < V; ++i) {
      *seed = *seed * 1103515245u + 12345u;
      c.data[i].logit = (float)((*seed >> 16) % 1000) / 1000.0f;
    }
    llama_sampler_apply(chain, &c.arr);
    CHECK(c.arr.selected >= 0 && (size_t)c.arr.selected < c.arr.size);
    const llama_token t = c.arr.data[c.arr.selected].id;
    llama_sampler_accept(chain, t);
    out[n++] = t;
    if (t == STOP) return n;
  }
  CHECK(!"a sequence did not end within 10 tokens");
  return n;
}

static bool is_small_trie_path(const int32_t *t, size_t n) {
  static const int32_t paths[5][4] = {
      {5, 7, 9, STOP}, {5, 7, 11, STOP}, {5, 8, STOP}, {20, STOP}, {5, STOP}};
  static const size_t lens[5] = {4, 4, 3, 2, 2};
  for (int p = 0; p < 5; ++p) {
    if (lens[p] == n && memcmp(paths[p], t, n * sizeof(int32_t)) == 0) return true;
  }
  return false;
}

/* Resetting the chain re-seeds dist (same sequences again); resetting only
 * the treemask sampler keeps the random stream going. */
static void test_reset_semantics(void) {
  treemask_trie *trie = small_trie();
  struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, treemask_llama_sampler_init(V, trie, NULL));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(1234));
  treemask_trie_free(trie);
  int32_t first[10], seq[10];
  int distinct_after_own_reset = 0, same_after_chain_reset = 0;
  unsigned seed = 99; /* the same "model" logits for every sequence */
  llama_sampler_reset(chain);
  const size_t n0 = sample_sequence(chain, &seed, first);
  CHECK(is_small_trie_path(first, n0));
  for (int round = 0; round < 20; ++round) {
    seed = 99;
    llama_sampler_reset(llama_sampler_chain_get(chain, 0)); /* only ours: dist goes on */
    const size_t n = sample_sequence(chain, &seed, seq);
    CHECK(is_small_trie_path(seq, n));
    distinct_after_own_reset += !(n == n0 && memcmp(seq, first, n0 * sizeof(int32_t)) == 0);
  }
  for (int round = 0; round < 20; ++round) {
    seed = 99;
    llama_sampler_reset(chain); /* everything: dist re-seeded with 1234 */
    const size_t n = sample_sequence(chain, &seed, seq);
    same_after_chain_reset += n == n0 && memcmp(seq, first, n0 * sizeof(int32_t)) == 0;
  }
  CHECK(same_after_chain_reset == 20);
  CHECK(distinct_after_own_reset > 0);
  llama_sampler_free(chain);
}

/* test-sampling.cpp's sampler_tester: probabilities in, [treemask, dist]
 * applied, the probabilities of what is left checked. */
static void test_probabilities(void) {
  const int32_t tokens[] = {1, 2, 3};
  const size_t offsets[] = {0, 1, 2, 3};
  const int32_t stop = 7;
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 8;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  treemask_trie *trie = NULL;
  CHECK(treemask_trie_from_paths(&o, tokens, offsets, 3, NULL, &trie) == TREEMASK_OK);
  const float probs[8] = {0.05f, 0.1f, 0.2f, 0.3f, 0.15f, 0.1f, 0.05f, 0.05f};
  llama_token_data data[8];
  for (int i = 0; i < 8; ++i) data[i] = (llama_token_data){i, logf(probs[i]), probs[i]};
  llama_token_data_array arr = {data, 8, -1, false};
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, NULL);
  struct llama_sampler *dist = llama_sampler_init_dist(0);
  llama_sampler_apply(s, &arr);
  llama_sampler_apply(dist, &arr);
  CHECK(arr.size == 3);
  for (size_t i = 0; i < arr.size; ++i) {
    const float want = probs[arr.data[i].id] / (0.1f + 0.2f + 0.3f);
    CHECK(fabsf(arr.data[i].p - want) < 1e-5f);
  }
  CHECK(arr.selected >= 0 && arr.selected < 3);
  llama_sampler_free(s);
  llama_sampler_free(dist);
  treemask_trie_free(trie);
}

/* test-sampling.cpp's sampler queues, with treemask in front: whatever
 * top_k / top_p / min_p / temp do after it, the pick is allowed. */
static void test_queues(void) {
  treemask_trie *trie = small_trie();
  const char *queues[] = {"", "k", "p", "m", "kp", "pm", "kpm", "t", "ktp"};
  for (size_t q = 0; q < sizeof(queues) / sizeof(queues[0]); ++q) {
    for (unsigned round = 0; round < 50; ++round) {
      struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
      llama_sampler_chain_add(chain, treemask_llama_sampler_init(V, trie, NULL));
      for (const char *c = queues[q]; *c; ++c) {
        switch (*c) {
          case 'k': llama_sampler_chain_add(chain, llama_sampler_init_top_k(1 + round % 3)); break;
          case 'p': llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.5f, 1)); break;
          case 'm': llama_sampler_chain_add(chain, llama_sampler_init_min_p(0.3f, 1)); break;
          case 't': llama_sampler_chain_add(chain, llama_sampler_init_temp(0.7f)); break;
        }
      }
      llama_sampler_chain_add(chain, llama_sampler_init_dist(round));
      unsigned seed = round * 31u + (unsigned)q;
      int32_t seq[10];
      const size_t n = sample_sequence(chain, &seed, seq);
      CHECK(is_small_trie_path(seq, n));
      llama_sampler_free(chain);
    }
  }
  treemask_trie_free(trie);
}

/* Think mode: the whole vocabulary is allowed until the end-think token, so
 * apply goes through a bitmask row instead of a token list. */
static void test_think_mode(void) {
  treemask_trie *trie = small_trie();
  const int32_t think_end = 50;
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.think_end_tokens = &think_end;
  o.n_think_end_tokens = 1;
  o.start_in_thinking = true;
  o.think_begin_token = 49;
  struct llama_sampler *s = treemask_llama_sampler_init(V, trie, &o.matcher);
  CHECK(s != NULL);
  static candidates c;
  fill_identity(&c, V);
  llama_sampler_apply(s, &c.arr);
  CHECK(c.arr.size == V - 1); /* all but think_begin_token */
  for (size_t i = 0; i < c.arr.size; ++i) CHECK(c.arr.data[i].id != 49);
  llama_sampler_accept(s, 123);
  llama_sampler_accept(s, think_end);
  const int32_t root[] = {5, 20};
  expect_allowed(s, root, 2);
  llama_sampler_free(s);
  treemask_trie_free(trie);
}

/* ---- part 2: a real model ------------------------------------------------ */

typedef struct {
  int32_t *tokens; /* CSR */
  size_t *offsets;
  size_t n_paths, n_tokens, cap;
  char **labels;
} label_set;

static void add_path(label_set *ls, const llama_token *t, int32_t n, const char *label) {
  if (ls->n_tokens + (size_t)n > ls->cap) {
    ls->cap = 2 * (ls->cap + (size_t)n);
    ls->tokens = (int32_t *)realloc(ls->tokens, ls->cap * sizeof(int32_t));
  }
  ls->offsets = (size_t *)realloc(ls->offsets, (ls->n_paths + 2) * sizeof(size_t));
  ls->labels = (char **)realloc(ls->labels, (ls->n_paths + 1) * sizeof(char *));
  CHECK(ls->tokens && ls->offsets && ls->labels);
  if (ls->n_paths == 0) ls->offsets[0] = 0;
  memcpy(ls->tokens + ls->n_tokens, t, (size_t)n * sizeof(int32_t));
  ls->n_tokens += (size_t)n;
  ls->labels[ls->n_paths] = strdup(label);
  ls->offsets[++ls->n_paths] = ls->n_tokens;
}

static long find_path(const label_set *ls, const llama_token *t, size_t n) {
  for (size_t p = 0; p < ls->n_paths; ++p) {
    const size_t len = ls->offsets[p + 1] - ls->offsets[p];
    if (len == n && memcmp(ls->tokens + ls->offsets[p], t, n * sizeof(int32_t)) == 0)
      return (long)p;
  }
  return -1;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* n generations through chain; every output must be one label's path
 * followed by one of the trie's stop tokens. Returns the distinct labels. */
static int generate_many(struct llama_context *ctx, const struct llama_vocab *vocab,
                         struct llama_sampler *chain, const label_set *ls, size_t max_len,
                         int n_runs, const char *what) {
  llama_token prompt[64];
  const char *text = "Article: a recipe for sourdough bread. Topic:";
  const int32_t n_prompt =
      llama_tokenize(vocab, text, (int32_t)strlen(text), prompt, 64, true, false);
  CHECK(n_prompt > 0);
  struct llama_sampler *ours = llama_sampler_chain_get(chain, 0);
  char *seen = (char *)calloc(ls->n_paths, 1);
  int distinct = 0;
  llama_token *out = (llama_token *)malloc((max_len + 2) * sizeof(llama_token));
  for (int run = 0; run < n_runs; ++run) {
    llama_memory_clear(llama_get_memory(ctx), true);
    CHECK(llama_decode(ctx, llama_batch_get_one(prompt, n_prompt)) == 0);
    llama_sampler_reset(ours); /* a new sequence; dist keeps its stream */
    size_t n = 0;
    bool stopped = false;
    while (n <= max_len) {
      llama_token t = llama_sampler_sample(chain, ctx, -1);
      if (treemask_llama_sampler_is_terminated(ours)) {
        CHECK(llama_vocab_is_eog(vocab, t));
        stopped = true;
        break;
      }
      out[n++] = t;
      CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1)) == 0);
    }
    if (!stopped) fprintf(stderr, "%s run %d: no stop token after %zu tokens\n", what, run, n);
    CHECK(stopped);
    const long p = find_path(ls, out, n);
    if (p < 0) {
      fprintf(stderr, "%s run %d: output is not a path of the trie:", what, run);
      for (size_t i = 0; i < n; ++i) fprintf(stderr, " %d", out[i]);
      fprintf(stderr, "\n");
    }
    CHECK(p >= 0);
    CHECK(!treemask_llama_sampler_is_failed(ours));
    if (!seen[p]) {
      seen[p] = 1;
      ++distinct;
    }
  }
  printf("%s: %d generations, every one a label; %d distinct labels\n", what, n_runs, distinct);
  free(out);
  free(seen);
  return distinct;
}

/* A vocabulary of the model's width whose token t has the bytes of token
 * t + 1 (another tokenizer of the same width): a string set compiled over it
 * is another model's (issue 29 item 2: the sampler generated "xzg" for the
 * set {"cat"}). shrink > 0: only the first n_vocab - shrink tokens. */
static treemask_vocab *other_vocab(const treemask_vocab *v, int32_t shrink) {
  const int32_t n = treemask_vocab_n_tokens(v) - shrink;
  const uint64_t total = treemask_vocab_copy_tokens(v, NULL, 0, NULL, NULL);
  uint8_t *bytes = (uint8_t *)malloc(total + 1);
  uint8_t *shifted = (uint8_t *)malloc(total + 1);
  uint64_t *offsets =
      (uint64_t *)malloc(((size_t)treemask_vocab_n_tokens(v) + 1) * sizeof(uint64_t));
  uint64_t *shifted_offsets = (uint64_t *)malloc(((size_t)n + 1) * sizeof(uint64_t));
  uint8_t *flags = (uint8_t *)malloc((size_t)treemask_vocab_n_tokens(v));
  uint8_t *shifted_flags = (uint8_t *)malloc((size_t)n);
  CHECK(bytes && shifted && offsets && shifted_offsets && flags && shifted_flags);
  CHECK(treemask_vocab_copy_tokens(v, bytes, total, offsets, flags) == total);
  size_t used = 0;
  shifted_offsets[0] = 0;
  for (int32_t t = 0; t < n; ++t) {
    const int32_t from = shrink ? t : (t + 1) % n;
    const size_t len = (size_t)(offsets[from + 1] - offsets[from]);
    memcpy(shifted + used, bytes + offsets[from], len);
    used += len;
    shifted_offsets[t + 1] = used;
    shifted_flags[t] = flags[from];
  }
  treemask_vocab *out = NULL;
  CHECK(treemask_vocab_create(shifted, shifted_offsets, (size_t)n, shifted_flags, n, &out) ==
        TREEMASK_OK);
  free(bytes);
  free(shifted);
  free(offsets);
  free(shifted_offsets);
  free(flags);
  free(shifted_flags);
  return out;
}

static treemask_trie *strings_over(const treemask_vocab *v, const char *const *strings, size_t n,
                                   const int32_t *stops, size_t n_stops) {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += strlen(strings[i]);
  char *joined = (char *)malloc(total + 1);
  size_t *offsets = (size_t *)malloc((n + 1) * sizeof(size_t));
  CHECK(joined && offsets);
  offsets[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    memcpy(joined + offsets[i], strings[i], strlen(strings[i]));
    offsets[i + 1] = offsets[i] + strlen(strings[i]);
  }
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.stop_tokens = stops;
  o.n_stop_tokens = n_stops;
  treemask_strings_options so;
  treemask_strings_options_init(&so);
  so.prefix = " ";
  so.prefix_len = 1;
  treemask_trie *out = NULL;
  CHECK(treemask_trie_from_strings(&o, v, joined, offsets, n, &so, &out) == TREEMASK_OK);
  free(joined);
  free(offsets);
  return out;
}

/* A string set meets the model's vocabulary: compiled over it, it is taken;
 * compiled over another tokenizer of the same width, or a smaller one, it
 * is refused naming both fingerprints; the n_vocab init refuses every
 * string set (it cannot check one). */
static void test_string_set_vocabularies(const treemask_vocab *model_vocab, const int32_t *stops,
                                         size_t n_stops) {
  const char *cat[] = {"cat"};
  treemask_trie *ours = strings_over(model_vocab, cat, 1, stops, n_stops);
  struct llama_sampler *ok = treemask_llama_sampler_init_vocab(model_vocab, ours, NULL);
  CHECK(ok != NULL);
  llama_sampler_free(ok);
  CHECK(treemask_llama_sampler_init(treemask_vocab_size(model_vocab), ours, NULL) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(), "treemask_llama_sampler_init_vocab") != NULL);
  for (int32_t shrink = 0; shrink <= 2000; shrink += 2000) {
    treemask_vocab *other = other_vocab(model_vocab, shrink);
    /* The model's stop tokens are among its last ids, which the smaller
     * vocabulary cuts off: that set ends with a low id instead. */
    const int32_t low_stop = 100;
    treemask_trie *theirs = shrink ? strings_over(other, cat, 1, &low_stop, 1)
                                   : strings_over(other, cat, 1, stops, n_stops);
    CHECK(treemask_llama_sampler_init_vocab(model_vocab, theirs, NULL) == NULL);
    const char *why = treemask_llama_sampler_error();
    char fp[40];
    snprintf(fp, sizeof fp, "0x%llx", (unsigned long long)treemask_vocab_fingerprint(other));
    CHECK(strstr(why, "compiled for another vocabulary") != NULL);
    CHECK(strstr(why, fp) != NULL);
    snprintf(fp, sizeof fp, "0x%llx", (unsigned long long)treemask_vocab_fingerprint(model_vocab));
    CHECK(strstr(why, fp) != NULL);
    printf("refused (%s): %s\n", shrink ? "smaller vocabulary" : "other bytes, same width", why);
    treemask_trie_free(theirs);
    treemask_vocab_free(other);
  }
  treemask_trie_free(ours);
}

/* Generations through a chain over a string-set trie of the labels (prefix
 * " "): every output, decoded, must be " " + one label, ended by a stop
 * token; returns how many were not the label's canonical tokens (the set
 * allows any tokenization, and a random model takes others). */
static int generate_strings(struct llama_context *ctx, const struct llama_vocab *vocab,
                            struct llama_sampler *chain, const label_set *ls, int n_runs) {
  llama_token prompt[64];
  const char *text = "Article: a recipe for sourdough bread. Topic:";
  const int32_t n_prompt =
      llama_tokenize(vocab, text, (int32_t)strlen(text), prompt, 64, true, false);
  struct llama_sampler *ours = llama_sampler_chain_get(chain, 0);
  int other_spellings = 0;
  for (int run = 0; run < n_runs; ++run) {
    llama_memory_clear(llama_get_memory(ctx), true);
    CHECK(llama_decode(ctx, llama_batch_get_one(prompt, n_prompt)) == 0);
    llama_sampler_reset(ours);
    char decoded[2048];
    size_t len = 0;
    llama_token out[512];
    size_t n = 0;
    bool stopped = false;
    while (n < 500) {
      llama_token t = llama_sampler_sample(chain, ctx, -1);
      if (treemask_llama_sampler_is_terminated(ours)) {
        CHECK(llama_vocab_is_eog(vocab, t));
        stopped = true;
        break;
      }
      out[n++] = t;
      char piece[512];
      const int32_t k = llama_token_to_piece(vocab, t, piece, sizeof piece, 0, false);
      CHECK(k >= 0 && len + (size_t)k < sizeof decoded);
      memcpy(decoded + len, piece, (size_t)k);
      len += (size_t)k;
      CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1)) == 0);
    }
    CHECK(stopped);
    decoded[len] = 0;
    long label = -1;
    for (size_t p = 0; p < ls->n_paths && label < 0; ++p) {
      if (decoded[0] == ' ' && strcmp(decoded + 1, ls->labels[p]) == 0) label = (long)p;
    }
    if (label < 0) fprintf(stderr, "string-set run %d: \"%s\" is no label\n", run, decoded);
    CHECK(label >= 0);
    if (find_path(ls, out, n) != label) ++other_spellings;
  }
  printf(
      "[treemask string set, dist]: %d generations, every one a label; %d not in the canonical"
      " tokenization\n",
      n_runs, other_spellings);
  return other_spellings;
}

static void test_model(const char *model_path, const char *labels_path, const char *trie_out) {
  llama_log_set(quiet_log, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model *model = llama_model_load_from_file(model_path, mp);
  CHECK(model != NULL);
  const struct llama_vocab *vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  CHECK(n_vocab == 151936);

  /* the labels, tokenized by the model's vocabulary with a leading space */
  FILE *f = fopen(labels_path, "r");
  CHECK(f != NULL);
  label_set ls = {0};
  char line[1024], text[1100];
  llama_token toks[512];
  size_t max_len = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    snprintf(text, sizeof text, " %s", line);
    const int32_t n = llama_tokenize(vocab, text, (int32_t)strlen(text), toks, 512, false, false);
    CHECK(n > 0);
    add_path(&ls, toks, n, line);
    if ((size_t)n > max_len) max_len = (size_t)n;
  }
  fclose(f);
  CHECK(ls.n_paths > 100);

  int32_t stops[2];
  size_t n_stops = 0;
  stops[n_stops++] = llama_vocab_eos(vocab);
  const llama_token eot = llama_vocab_eot(vocab);
  if (eot >= 0 && eot != stops[0]) stops[n_stops++] = eot;
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = n_vocab;
  o.stop_tokens = stops;
  o.n_stop_tokens = n_stops;
  treemask_trie *trie = NULL;
  CHECK(treemask_trie_from_paths(&o, ls.tokens, ls.offsets, ls.n_paths, NULL, &trie) ==
        TREEMASK_OK);
  if (trie_out) CHECK(treemask_trie_save(trie, trie_out, NULL) == TREEMASK_OK);
  /* Issue 21 item 12: the same labels built for a larger vocabulary (a stop
   * id past the model's last token) are refused for this model. */
  treemask_trie *too_wide = NULL;
  const int32_t past_the_end = n_vocab + 50;
  treemask_trie_options wide = o;
  wide.vocab_size = n_vocab + 100;
  wide.stop_tokens = &past_the_end;
  wide.n_stop_tokens = 1;
  CHECK(treemask_trie_from_paths(&wide, ls.tokens, ls.offsets, ls.n_paths, NULL, &too_wide) ==
        TREEMASK_OK);
  CHECK(treemask_llama_sampler_init(n_vocab, too_wide, NULL) == NULL);
  CHECK(strstr(treemask_llama_sampler_error(), "larger than the model's n_vocab") != NULL);
  treemask_trie_free(too_wide);
  printf("model: %d-token vocabulary; trie of %zu labels (longest %zu tokens), stop tokens",
         n_vocab, ls.n_paths, max_len);
  for (size_t i = 0; i < n_stops; ++i) printf(" %d", stops[i]);
  printf("\n");

  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 64;
  cp.n_threads = 1;
  cp.n_threads_batch = 1;
  cp.no_perf = true;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  CHECK(ctx != NULL);

  struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, treemask_llama_sampler_init(n_vocab, trie, NULL));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(42));
  const int runs = getenv("TREEMASK_LLAMA_RUNS") ? atoi(getenv("TREEMASK_LLAMA_RUNS")) : 200;
  CHECK(generate_many(ctx, vocab, chain, &ls, max_len, runs, "[treemask, dist]") > 1);
  llama_sampler_free(chain);

  chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, treemask_llama_sampler_init(n_vocab, trie, NULL));
  llama_sampler_chain_add(chain, llama_sampler_init_top_k(3));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(0.8f));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(7));
  CHECK(generate_many(ctx, vocab, chain, &ls, max_len, runs / 2, "[treemask, top_k, temp, dist]") >
        1);

  /* a clone of the whole chain works on its own */
  struct llama_sampler *copy = llama_sampler_clone(chain);
  CHECK(generate_many(ctx, vocab, copy, &ls, max_len, 5, "cloned chain") >= 1);
  llama_sampler_free(copy);
  llama_sampler_free(chain);

  /* The same labels as a string set (any tokenization), through the
   * sampler made with the model's vocabulary (which checks the set). */
  treemask_vocab *bytes_vocab = NULL;
  CHECK(treemask_llama_vocab(vocab, &bytes_vocab) == TREEMASK_OK);
  CHECK(treemask_vocab_size(bytes_vocab) == n_vocab);
  test_string_set_vocabularies(bytes_vocab, stops, n_stops);
  size_t total = 0;
  for (size_t p = 0; p < ls.n_paths; ++p) total += strlen(ls.labels[p]);
  char *joined = (char *)malloc(total + 1);
  size_t *string_offsets = (size_t *)malloc((ls.n_paths + 1) * sizeof(size_t));
  CHECK(joined && string_offsets);
  string_offsets[0] = 0;
  for (size_t p = 0; p < ls.n_paths; ++p) {
    memcpy(joined + string_offsets[p], ls.labels[p], strlen(ls.labels[p]));
    string_offsets[p + 1] = string_offsets[p] + strlen(ls.labels[p]);
  }
  treemask_strings_options so;
  treemask_strings_options_init(&so);
  so.prefix = " ";
  so.prefix_len = 1;
  treemask_trie_options so_trie = o;
  so_trie.vocab_size = 0;
  treemask_trie *strings = NULL;
  CHECK(treemask_trie_from_strings(&so_trie, bytes_vocab, joined, string_offsets, ls.n_paths, &so,
                                   &strings) == TREEMASK_OK);
  chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(chain, treemask_llama_sampler_init_vocab(bytes_vocab, strings, NULL));
  treemask_vocab_free(bytes_vocab); /* the trie keeps it */
  llama_sampler_chain_add(chain, llama_sampler_init_dist(11));
  CHECK(generate_strings(ctx, vocab, chain, &ls, runs / 2) > 0);
  llama_sampler_free(chain);
  treemask_trie_free(strings);
  free(joined);
  free(string_offsets);

  treemask_trie_free(trie);
  for (size_t p = 0; p < ls.n_paths; ++p) free(ls.labels[p]);
  free(ls.labels);
  free(ls.tokens);
  free(ls.offsets);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
}

int main(int argc, char **argv) {
  test_init_errors();
  test_walk();
  test_other_layouts();
  test_fail_closed();
  test_clone_and_copy();
  test_reset_semantics();
  test_probabilities();
  test_queues();
  test_think_mode();
  printf("sampler tests without a model: ok\n");
  if (argc >= 3) {
    test_model(argv[1], argv[2], argc >= 4 ? argv[3] : NULL);
    printf("model tests: ok\n");
  }
  return 0;
}
