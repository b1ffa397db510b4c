/* Constrained beam search without full-vocabulary masks, the shape of a
 * generative-recommendation decode loop: a catalogue of semantic IDs (three
 * codes per item) as a trie, 2 requests x 4 beams kept as state arrays, and
 * per step one call that normalizes, gathers the allowed candidates, picks
 * the best 4 per request and advances the states. The engine only reorders
 * its KV cache by `parents`. Logits come from a seeded generator instead of
 * a model. Prints the 4 items found per request, best first.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#define TREEMASK_EXPERIMENTAL 1 /* the beam step is in the experimental tier */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <treemask/treemask.h>

enum { BASE = 151936, CODES = 256, LEVELS = 3, VOCAB = BASE + LEVELS * CODES };
enum { EOS = 151643, ITEMS = 5000, REQUESTS = 2, BEAMS = 4, SLOTS = REQUESTS * BEAMS };

static uint64_t rng_state = 7;
static uint32_t next_u32(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

/* Whether items[0 .. n) holds the item spelled by ids (a check for this
 * example; the trie guarantees it). */
static int in_catalogue(const int32_t *items, int n, const int32_t *ids) {
  int i, l;
  for (i = 0; i < n; ++i) {
    for (l = 0; l < LEVELS && items[i * LEVELS + l] == ids[l]; ++l) {
    }
    if (l == LEVELS) return 1;
  }
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, treemask_last_error());
  return 1;
}

int main(void) {
  int32_t *paths = malloc(ITEMS * LEVELS * sizeof *paths);
  size_t *offsets = malloc((ITEMS + 1) * sizeof *offsets);
  float *logits = malloc((size_t)SLOTS * VOCAB * sizeof *logits);
  int32_t history[SLOTS][LEVELS + 1], next_history[SLOTS][LEVELS + 1];
  uint32_t states[SLOTS];
  float scores[SLOTS];
  int32_t parents[SLOTS], tokens[SLOTS];
  const int32_t stop = EOS;
  treemask_trie_options opts;
  treemask_beam_options bopts;
  treemask_logits lg;
  treemask_trie *trie = NULL;
  treemask_beam *beam = NULL;
  int i, l, step, r, b;
  size_t c;

  /* The catalogue: level l's code k is token BASE + l * CODES + k
   * (MiniOneRec's layout); duplicates merge. */
  offsets[0] = 0;
  for (i = 0; i < ITEMS; ++i) {
    for (l = 0; l < LEVELS; ++l)
      paths[i * LEVELS + l] = BASE + l * CODES + (int32_t)(next_u32() % CODES);
    offsets[i + 1] = (size_t)(i + 1) * LEVELS;
  }
  treemask_trie_options_init(&opts);
  opts.vocab_size = VOCAB;
  opts.stop_tokens = &stop;
  opts.n_stop_tokens = 1;
  opts.no_labels = 1; /* the paths are the items: no label array */
  if (treemask_trie_from_paths(&opts, paths, offsets, ITEMS, NULL, &trie) != TREEMASK_OK)
    return fail("trie");

  treemask_beam_options_init(&bopts);
  bopts.beam_width = BEAMS;
  if (treemask_beam_create(&bopts, &beam) != TREEMASK_OK) return fail("beam");
  treemask_logits_init(&lg);
  lg.data = logits; /* fp32 rows of VOCAB columns, one per slot */

  /* First step: every request starts with one live beam (scores 0, -inf...),
   * so the identical initial beams do not fill the beam. */
  for (i = 0; i < SLOTS; ++i) {
    states[i] = TREEMASK_STATE_ROOT;
    scores[i] = i % BEAMS == 0 ? 0.0f : -INFINITY;
  }
  for (step = 0; step <= LEVELS; ++step) {
    for (c = 0; c < (size_t)SLOTS * VOCAB; ++c) logits[c] = (float)(next_u32() >> 8) / 1048576.0f;
    if (treemask_beam_step_states(beam, trie, REQUESTS, &lg, states, scores, parents, tokens) !=
        TREEMASK_OK)
      return fail("beam step");
    /* The engine reorders its KV cache by parents; here, the token history. */
    for (i = 0; i < SLOTS; ++i) {
      if (parents[i] < 0) continue; /* fewer candidates than beams */
      for (l = 0; l < step; ++l) next_history[i][l] = history[i / BEAMS * BEAMS + parents[i]][l];
      next_history[i][step] = tokens[i];
    }
    for (i = 0; i < SLOTS; ++i)
      for (l = 0; l <= step; ++l) history[i][l] = next_history[i][l];
  }
  for (r = 0; r < REQUESTS; ++r) {
    printf("request %d:\n", r);
    for (b = 0; b < BEAMS; ++b) {
      i = r * BEAMS + b;
      if (states[i] != TREEMASK_STATE_TERMINATED || history[i][LEVELS] != EOS ||
          !in_catalogue(paths, ITEMS, history[i])) {
        fprintf(stderr, "slot %d is not a catalogue item followed by the stop token\n", i);
        return 1;
      }
      printf("  item <%d, %d, %d>  log-probability %.3f\n", history[i][0] - BASE,
             history[i][1] - BASE - CODES, history[i][2] - BASE - 2 * CODES, scores[i]);
    }
  }
  treemask_beam_free(beam);
  treemask_trie_free(trie);
  free(paths);
  free(offsets);
  free(logits);
  return 0;
}
