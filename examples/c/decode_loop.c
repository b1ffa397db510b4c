/* A constrained greedy decode loop, the shape an engine's sampler takes:
 * build a trie once, then per step fill the mask, mask the logits, pick a
 * token and accept it. Logits come from a seeded generator instead of a model.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include <treemask/treemask.h>

enum { VOCAB = 151936, EOS = 151645 };

static uint64_t rng_state = 42;
static float next_logit(void) { /* xorshift64*: deterministic "model" output */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (float)((rng_state * 0x2545F4914F6CDD1DULL) >> 40) / (float)(1 << 24);
}

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, treemask_last_error());
  return 1;
}

int main(void) {
  /* Four "labels" as token paths (a real engine tokenizes label strings). */
  const int32_t tokens[] = {785, 2906, 12, 785, 2906, 7071, 9707, 1001, 151000};
  const size_t offsets[] = {0, 3, 6, 8, 9};
  const int32_t stop = EOS;
  treemask_trie_options opts;
  treemask_trie *trie = NULL;
  treemask_matcher *m = NULL;
  const size_t words = treemask_bitmask_words(VOCAB);
  int32_t *mask = malloc(words * sizeof *mask);
  float *logits = malloc(VOCAB * sizeof *logits);
  int32_t t, best;
  int64_t label;
  bool accepted, need_apply;
  int step;

  treemask_trie_options_init(&opts);
  opts.vocab_size = VOCAB;
  opts.stop_tokens = &stop;
  opts.n_stop_tokens = 1;
  if (treemask_trie_from_paths(&opts, tokens, offsets, 4, NULL, &trie) != TREEMASK_OK)
    return fail("trie");
  if (treemask_matcher_create(trie, NULL, &m) != TREEMASK_OK) return fail("matcher");

  for (step = 0; !treemask_matcher_is_terminated(m); ++step) {
    for (t = 0; t < VOCAB; ++t) logits[t] = next_logit(); /* model forward */
    if (treemask_matcher_fill_next_token_bitmask(m, mask, words, NULL, &need_apply) != TREEMASK_OK)
      return fail("fill");
    /* mask: disallowed logits become -inf */
    if (need_apply && treemask_cpu_apply_token_bitmask(logits, TREEMASK_F32, 1, VOCAB, VOCAB, mask,
                                                       words, 1, VOCAB, NULL, 0) != TREEMASK_OK)
      return fail("mask");
    for (best = 0, t = 1; t < VOCAB; ++t) /* greedy */
      if (logits[t] > logits[best]) best = t;
    if (treemask_matcher_accept_token(m, best, &accepted) != TREEMASK_OK || !accepted)
      return fail("accept");
    printf("step %d: token %d\n", step, best);
  }
  if (treemask_matcher_label_ids(m, &label, 1) != 1) return fail("label");
  printf("generated label %lld in %d steps\n", (long long)label, step);
  treemask_matcher_free(m);
  treemask_trie_free(trie);
  free(mask);
  free(logits);
  return 0;
}
