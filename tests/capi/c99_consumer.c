/* A plain C99 program using only the public header, compiled with
 * -std=c99 -Wall -Wextra -Werror -pedantic: the constrained decode loop an
 * engine would write, with its results checked.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <treemask/treemask.h>

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              treemask_last_error());                                                          \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

/* Highest-scoring allowed token: a stand-in for sampling. */
static int32_t argmax_allowed(const float *logits, const int32_t *mask, int32_t vocab) {
  int32_t best = -1, t;
  for (t = 0; t < vocab; ++t) {
    if (((uint32_t)mask[t / 32] >> (t % 32)) & 1u) {
      if (best < 0 || logits[t] > logits[best]) best = t;
    }
  }
  return best;
}

int main(void) {
  enum { VOCAB = 1000 };
  /* Three labels: [5 6 7], [5 9], [42]; EOS = 2. */
  const int32_t tokens[] = {5, 6, 7, 5, 9, 42};
  const size_t offsets[] = {0, 3, 5, 6};
  const int32_t eos = 2;
  treemask_trie_options topts;
  treemask_matcher_options mopts;
  treemask_trie *trie = NULL;
  treemask_matcher *m = NULL;
  size_t words = treemask_bitmask_words(VOCAB);
  int32_t *mask = (int32_t *)malloc(words * sizeof(int32_t));
  float logits[VOCAB];
  int32_t out[8];
  int64_t labels[4];
  int step, t;
  bool accepted = false, need_apply = false;

  CHECK(treemask_version() == TREEMASK_VERSION_NUMBER);
  treemask_trie_options_init(&topts);
  topts.vocab_size = VOCAB;
  topts.stop_tokens = &eos;
  topts.n_stop_tokens = 1;
  CHECK(treemask_trie_from_paths(&topts, tokens, offsets, 3, NULL, &trie) == TREEMASK_OK);

  treemask_matcher_options_init(&mopts);
  CHECK(treemask_matcher_create(trie, &mopts, &m) == TREEMASK_OK);
  treemask_trie_free(trie); /* the matcher keeps its own reference */

  /* Logits that prefer 9 over 6: the loop must produce [5 9 EOS]. */
  for (t = 0; t < VOCAB; ++t) logits[t] = (float)(t % 13);
  logits[5] = 1.0f;
  logits[9] = 3.0f;
  logits[6] = 2.0f;
  logits[eos] = 0.5f;
  logits[42] = 0.0f;
  for (step = 0; step < 10 && !treemask_matcher_is_terminated(m); ++step) {
    CHECK(treemask_matcher_fill_next_token_bitmask(m, mask, words, NULL, &need_apply) ==
          TREEMASK_OK);
    CHECK(need_apply);
    t = argmax_allowed(logits, mask, VOCAB);
    CHECK(t >= 0);
    out[step] = t;
    CHECK(treemask_matcher_accept_token(m, t, &accepted) == TREEMASK_OK && accepted);
  }
  CHECK(step == 3 && out[0] == 5 && out[1] == 9 && out[2] == eos);
  CHECK(treemask_matcher_label_ids(m, labels, 4) == 1 && labels[0] == 1);

  /* A rejected token leaves the state and the last error unchanged. */
  treemask_matcher_reset(m);
  CHECK(treemask_matcher_rollback(m, 1) == TREEMASK_ERR_OUT_OF_RANGE);
  CHECK(strstr(treemask_last_error(), "treemask_matcher_rollback") != NULL);
  CHECK(treemask_matcher_accept_token(m, 6, &accepted) == TREEMASK_OK && !accepted);
  CHECK(strstr(treemask_last_error(), "treemask_matcher_rollback") != NULL);
  CHECK(treemask_matcher_next_tokens(m, out, 8) == 2 && out[0] == 5 && out[1] == 42);

  treemask_matcher_free(m);
  free(mask);
  printf("c99 consumer: ok\n");
  return 0;
}
