// Trie build speed and memory: 1M random paths of length 4 over V = 151,936
// (almost no shared prefixes: the worst case for bytes per edge) and a
// semantic-ID-like set (4 levels of a 256-entry codebook: heavy sharing).
// Prints absolute numbers and, as the baseline, the bytes of the input CSR.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "common/test_util.h"

namespace {

struct Input {
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
};

void report(const char *name, const Input &in, int32_t vocab) {
  const int32_t stop = 151645;
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = vocab;
  opts.stop_tokens = &stop;
  opts.n_stop_tokens = 1;
  const size_t n_paths = in.offsets.size() - 1;
  const auto t0 = std::chrono::steady_clock::now();
  treemask_trie *t = nullptr;
  if (treemask_trie_from_paths(&opts, in.tokens.data(), in.offsets.data(), n_paths, nullptr, &t) !=
      TREEMASK_OK) {
    std::fprintf(stderr, "build failed: %s\n", treemask_last_error());
    std::exit(1);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  (void)treemask_trie_get_stats(t, &s);
  const double input_bytes = in.tokens.size() * 4.0 + in.offsets.size() * 8.0;
  std::printf("%-34s %10zu paths %11llu nodes %11llu edges  build %6.2f s (%5.1f M tokens/s)\n",
              name, n_paths, (unsigned long long)s.n_nodes, (unsigned long long)s.n_edges, secs,
              in.tokens.size() / secs / 1e6);
  std::printf("%-34s trie %8.1f MiB = %5.2f bytes/edge (labels included); input CSR %8.1f MiB\n",
              "", s.bytes / 1048576.0, double(s.bytes) / double(s.n_edges),
              input_bytes / 1048576.0);
  treemask_trie_free(t);
}

}  // namespace

int main() {
  const int32_t vocab = 151936;
  const size_t n = static_cast<size_t>(1000000 * testutil::scale());
  std::mt19937_64 rng(1);
  Input random;
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < 4; ++j) random.tokens.push_back(static_cast<int32_t>(rng() % 151000));
    random.offsets.push_back(random.tokens.size());
  }
  report("random paths, length 4", random, vocab);

  Input sid;
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < 4; ++j) {
      sid.tokens.push_back(static_cast<int32_t>(151000 + j * 256 - 151000 + 100000 + rng() % 256));
    }
    sid.offsets.push_back(sid.tokens.size());
  }
  report("semantic IDs, 4 x 256 codebook", sid, vocab);
  return 0;
}
