/* The beam step over a batch of matchers, for engines that keep a matcher
 * per sequence: each slot's candidates are what its matcher allows, so the
 * decoding modes apply. Here every request bans the items the user has
 * already seen (treemask_matcher_set_label_filter: labels are item numbers),
 * as a recommender does. 2 requests x 4 beams over a catalogue of semantic
 * IDs (three codes per item); per step one call normalizes, gathers the
 * allowed candidates, picks the best 4 per request, and leaves slot r*B+i
 * holding a copy of its parent's matcher that has accepted the new token.
 * Logits come from a seeded generator. Checks that every result is a
 * catalogue item that was not banned, and prints them.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#define TREEMASK_EXPERIMENTAL 1 /* the beam step and label filters are experimental */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <treemask/treemask.h>

enum { BASE = 151936, CODES = 16, LEVELS = 3, VOCAB = BASE + LEVELS * CODES };
enum { EOS = 151643, ITEMS = 400, REQUESTS = 2, BEAMS = 4, SLOTS = REQUESTS * BEAMS };
enum { SEEN = 60 }; /* items each request has already shown its user */

static uint64_t rng_state = 11;
static uint32_t next_u32(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, treemask_last_error());
  return 1;
}

int main(void) {
  int32_t *paths = malloc(ITEMS * LEVELS * sizeof *paths);
  size_t *offsets = malloc((ITEMS + 1) * sizeof *offsets);
  float *logits = malloc((size_t)SLOTS * VOCAB * sizeof *logits);
  int64_t seen[REQUESTS][SEEN];
  float scores[SLOTS];
  int32_t parents[SLOTS], tokens[SLOTS];
  const int32_t stop = EOS;
  treemask_trie_options opts;
  treemask_beam_options bopts;
  treemask_batch_options batch_opts;
  treemask_logits lg;
  treemask_trie *trie = NULL;
  treemask_beam *beam = NULL;
  treemask_batch *batch = NULL;
  int i, l, step, r, s, k;
  size_t c;

  /* The catalogue (level l's code k is token BASE + l * CODES + k); item i
   * gets label i, the default of treemask_trie_from_paths. */
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
  if (treemask_trie_from_paths(&opts, paths, offsets, ITEMS, NULL, &trie) != TREEMASK_OK)
    return fail("trie");

  /* One matcher per request, with its user's seen items banned, put in each
   * of the request's slots. */
  treemask_batch_options_init(&batch_opts);
  batch_opts.n_slots = SLOTS;
  if (treemask_batch_create(&batch_opts, &batch) != TREEMASK_OK) return fail("batch");
  for (r = 0; r < REQUESTS; ++r) {
    treemask_matcher *m = NULL;
    for (k = 0; k < SEEN; ++k) seen[r][k] = (int64_t)(next_u32() % ITEMS);
    if (treemask_matcher_create(trie, NULL, &m) != TREEMASK_OK) return fail("matcher");
    if (treemask_matcher_set_label_filter(m, NULL, seen[r], SEEN, NULL, 0) != TREEMASK_OK)
      return fail("label filter");
    for (i = 0; i < BEAMS; ++i)
      if (treemask_batch_set_matcher(batch, (size_t)(r * BEAMS + i), m) != TREEMASK_OK)
        return fail("set matcher");
    treemask_matcher_free(m); /* the batch holds clones */
  }

  treemask_beam_options_init(&bopts);
  bopts.beam_width = BEAMS;
  if (treemask_beam_create(&bopts, &beam) != TREEMASK_OK) return fail("beam");
  treemask_logits_init(&lg);
  lg.data = logits; /* fp32 rows of VOCAB columns, one per slot */
  /* First step: one live beam per request (scores 0, -inf, ...). */
  for (i = 0; i < SLOTS; ++i) scores[i] = i % BEAMS == 0 ? 0.0f : -INFINITY;
  for (step = 0; step <= LEVELS; ++step) {
    for (c = 0; c < (size_t)SLOTS * VOCAB; ++c) logits[c] = (float)(next_u32() >> 8) / 1048576.0f;
    if (treemask_beam_step_batch(beam, batch, REQUESTS, &lg, scores, parents, tokens) !=
        TREEMASK_OK)
      return fail("beam step");
    /* The engine reorders its KV cache by parents; the matchers already moved. */
  }

  for (r = 0; r < REQUESTS; ++r) {
    printf("request %d (%d seen items banned):\n", r, SEEN);
    for (i = 0; i < BEAMS; ++i) {
      treemask_matcher *m = treemask_batch_get_matcher(batch, (size_t)(r * BEAMS + i));
      int64_t item = -1;
      if (!m || !treemask_matcher_is_terminated(m) ||
          treemask_matcher_label_ids(m, &item, 1) != 1) {
        fprintf(stderr, "slot %d did not end at a catalogue item\n", r * BEAMS + i);
        return 1;
      }
      for (k = 0; k < SEEN; ++k) {
        if (seen[r][k] == item) {
          fprintf(stderr, "slot %d produced the banned item %lld\n", r * BEAMS + i,
                  (long long)item);
          return 1;
        }
      }
      s = (int)item;
      printf("  item %3d <%d, %d, %d>  log-probability %.3f\n", s, paths[s * LEVELS] - BASE,
             paths[s * LEVELS + 1] - BASE - CODES, paths[s * LEVELS + 2] - BASE - 2 * CODES,
             scores[r * BEAMS + i]);
    }
  }
  treemask_beam_free(beam);
  treemask_batch_free(batch);
  treemask_trie_free(trie);
  free(paths);
  free(offsets);
  free(logits);
  return 0;
}
