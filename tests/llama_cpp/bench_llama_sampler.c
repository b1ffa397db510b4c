/* Time per token of llama.cpp sampler chains with and without the treemask
 * sampler, and of the treemask sampler alone, at V = 151,936.
 *
 * Each token is what llama_sampler_sample does on the CPU after a decode:
 * fill the candidate array from the logits (data[i] = {i, logit_i, 0}: one
 * pass over 1.8 MB, the baseline every chain pays), apply the chain, accept
 * the pick. The logits change every token (a cheap LCG stands in for the
 * model). The trie: 20,000 semantic IDs of 4 levels x 256 codes plus a stop
 * token, so a token has at most 256 allowed successors; a sequence is 4
 * tokens + the stop token, then only the treemask sampler is reset.
 *
 * Printed: the array fill alone (the floor), each chain without and with
 * treemask in front, the ratio, and treemask's apply + accept alone on the
 * filled array.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* strdup, clock_gettime */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "treemask_llama.h"

enum { V = 151936, STOP = 151645, LEVELS = 4, CODES = 256, N_PATHS = 20000 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static float *g_logits;
static llama_token_data *g_data;
static unsigned g_seed = 12345;

static void next_logits(void) { /* a different row per token, cheaply */
  g_seed = g_seed * 1103515245u + 12345u;
  const unsigned shift = g_seed % V;
  for (int i = 0; i < 64; ++i) g_logits[(shift + (unsigned)i * 2371u) % V] += 0.25f;
}

static void fill_candidates(llama_token_data_array *arr) {
  for (int i = 0; i < V; ++i) g_data[i] = (llama_token_data){i, g_logits[i], 0.0f};
  arr->data = g_data;
  arr->size = V;
  arr->selected = -1;
  arr->sorted = false;
}

static treemask_trie *semantic_id_trie(void) {
  int32_t *tokens = malloc(sizeof(int32_t) * N_PATHS * LEVELS);
  size_t *offsets = malloc(sizeof(size_t) * (N_PATHS + 1));
  unsigned s = 7;
  for (int p = 0; p < N_PATHS; ++p) {
    offsets[p] = (size_t)p * LEVELS;
    for (int l = 0; l < LEVELS; ++l) {
      s = s * 1664525u + 1013904223u;
      tokens[p * LEVELS + l] = 150000 - (LEVELS - l) * CODES + (int32_t)((s >> 8) % CODES);
    }
  }
  offsets[N_PATHS] = (size_t)N_PATHS * LEVELS;
  const int32_t stop = STOP;
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = V;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  treemask_trie *trie = NULL;
  if (treemask_trie_from_paths(&o, tokens, offsets, N_PATHS, NULL, &trie) != TREEMASK_OK) {
    fprintf(stderr, "trie: %s\n", treemask_last_error());
    exit(1);
  }
  free(tokens);
  free(offsets);
  return trie;
}

typedef struct {
  const char *name;
  int with_treemask;
  const char *rest; /* k = top_k(40), t = temp(0.8), d = dist, p = top_p(0.95), m = min_p(0.05) */
} chain_spec;

static struct llama_sampler *make_chain(const chain_spec *c, treemask_trie *trie,
                                        struct llama_sampler **ours) {
  struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  *ours = NULL;
  if (c->with_treemask) {
    *ours = treemask_llama_sampler_init(V, trie, NULL);
    llama_sampler_chain_add(chain, *ours);
  }
  for (const char *r = c->rest; *r; ++r) {
    switch (*r) {
      case 'k': llama_sampler_chain_add(chain, llama_sampler_init_top_k(40)); break;
      case 'p': llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.95f, 1)); break;
      case 'm': llama_sampler_chain_add(chain, llama_sampler_init_min_p(0.05f, 1)); break;
      case 't': llama_sampler_chain_add(chain, llama_sampler_init_temp(0.8f)); break;
      case 'd': llama_sampler_chain_add(chain, llama_sampler_init_dist(42)); break;
      case 'g': llama_sampler_chain_add(chain, llama_sampler_init_greedy()); break;
    }
  }
  return chain;
}

/* us per token: fill + chain apply + accept (+ resetting ours per sequence) */
static double time_chain(const chain_spec *c, treemask_trie *trie, int n_tokens) {
  struct llama_sampler *ours;
  struct llama_sampler *chain = make_chain(c, trie, &ours);
  llama_token_data_array arr;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_us();
    for (int i = 0; i < n_tokens; ++i) {
      next_logits();
      fill_candidates(&arr);
      llama_sampler_apply(chain, &arr);
      const llama_token t = arr.data[arr.selected].id;
      llama_sampler_accept(chain, t);
      if (ours && treemask_llama_sampler_is_terminated(ours)) llama_sampler_reset(ours);
    }
    const double us = (now_us() - t0) / n_tokens;
    if (us < best) best = us;
  }
  llama_sampler_free(chain);
  return best;
}

int main(void) {
  g_logits = malloc(sizeof(float) * V);
  g_data = malloc(sizeof(llama_token_data) * V);
  for (int i = 0; i < V; ++i) g_logits[i] = (float)((i * 2654435761u) >> 16) / 65536.0f;
  treemask_trie *trie = semantic_id_trie();
  const int n = 400;

  /* the floor: the candidate array fill llama_sampler_sample does per token */
  llama_token_data_array arr;
  double fill_us = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_us();
    for (int i = 0; i < n; ++i) {
      next_logits();
      fill_candidates(&arr);
    }
    const double us = (now_us() - t0) / n;
    if (us < fill_us) fill_us = us;
  }

  /* treemask alone: apply + accept on a filled array (fill excluded), on
   * llama.cpp's id == index array and on a reversed one (one bit test per
   * candidate); best of 3 runs */
  double alone_us = 1e30, reordered_us = 1e30;
  for (int reversed = 0; reversed < 2; ++reversed) {
    for (int rep = 0; rep < 3; ++rep) {
      struct llama_sampler *ours = treemask_llama_sampler_init(V, trie, NULL);
      double total = 0;
      for (int i = 0; i < n; ++i) {
        next_logits();
        fill_candidates(&arr);
        if (reversed) {
          for (int j = 0; j < V / 2; ++j) {
            const llama_token_data t = g_data[j];
            g_data[j] = g_data[V - 1 - j];
            g_data[V - 1 - j] = t;
          }
        }
        const double t0 = now_us();
        llama_sampler_apply(ours, &arr);
        const llama_token t = arr.data[arr.size - 1].id;
        llama_sampler_accept(ours, t);
        if (treemask_llama_sampler_is_terminated(ours)) llama_sampler_reset(ours);
        total += now_us() - t0;
      }
      llama_sampler_free(ours);
      double *best = reversed ? &reordered_us : &alone_us;
      if (total / n < *best) *best = total / n;
    }
  }

  printf("llama.cpp sampler chains, V = %d, %d tokens per run, best of 3 (us per token)\n", V, n);
  printf("  candidate array fill alone (llama_sampler_sample's floor): %8.1f us\n", fill_us);
  printf("  treemask sampler alone (apply + accept, fill excluded):   %8.2f us\n", alone_us);
  printf("    same on a reordered array (bit test per candidate):     %8.2f us\n", reordered_us);
  printf("  %-34s %12s %12s %8s\n", "chain after the fill", "without", "with treemask", "ratio");
  const chain_spec specs[][2] = {
      {{"greedy", 0, "g"}, {"greedy", 1, "g"}},
      {{"dist", 0, "d"}, {"dist", 1, "d"}},
      {{"top_k(40), temp, dist", 0, "ktd"}, {"", 1, "ktd"}},
      {{"top_k, top_p, min_p, temp, dist", 0, "kpmtd"}, {"", 1, "kpmtd"}},
      {{"temp, dist (no top_k)", 0, "td"}, {"", 1, "td"}},
  };
  for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); ++i) {
    const double without = time_chain(&specs[i][0], trie, n);
    const double with = time_chain(&specs[i][1], trie, n);
    printf("  %-34s %9.1f us %9.1f us %7.2fx\n", specs[i][0].name, without, with, with / without);
  }
  printf(
      "(ratio = with / without, both including the fill; below 1: the chain is faster with "
      "treemask in front, since the samplers after it see <= %d candidates instead of %d)\n",
      CODES + 1, V);
  treemask_trie_free(trie);
  free(g_logits);
  free(g_data);
  return 0;
}
