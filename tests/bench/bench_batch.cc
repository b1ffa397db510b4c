// Filling a whole batch, V = 151,936: 64 and 1,024 rows, on the caller's
// thread alone and with one worker (2 threads), full-row and incremental.
// Every slot decodes its own random walk through a semantic-ID-like
// dictionary (fanout 16 per level); the states change between fills, as in a
// real decode. The limit is a memset of the same buffer.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_util.h"

namespace {

struct Result {
  double fill_ns;    // one fill of every row
  double accept_ns;  // one accept per row
};

Result run(treemask_trie *trie, size_t rows, size_t threads, int32_t mode, std::mt19937_64 &rng) {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  std::vector<int32_t> buffer(rows * words);
  treemask_batch *batch = bench::new_batch(rows, threads);
  treemask_matcher *m = bench::new_matcher(trie);
  std::vector<std::vector<int32_t>> walks;
  std::vector<size_t> position(rows);
  for (size_t s = 0; s < rows; ++s) {
    TM_MUST(treemask_batch_set_matcher(batch, s, m));
    walks.push_back(bench::random_walk(trie, 64, rng));
    position[s] = rng() % walks[s].size();
    // Start each slot at its own point of its walk: replay up to there.
    treemask_matcher *slot = treemask_batch_get_matcher(batch, s);
    for (size_t i = 0; i < position[s]; ++i) {
      bool ok;
      if (walks[s][i] < 0) {
        treemask_matcher_reset(slot);
      } else {
        TM_MUST(treemask_matcher_accept_token(slot, walks[s][i], &ok));
      }
    }
  }
  TM_MUST(treemask_batch_bind_bitmask(batch, buffer.data(), words));
  std::vector<int32_t> tokens(rows);
  auto advance = [&] {
    for (size_t s = 0; s < rows; ++s) {
      int32_t t = walks[s][position[s]];
      position[s] = (position[s] + 1) % walks[s].size();
      if (t < 0) treemask_matcher_reset(treemask_batch_get_matcher(batch, s));
      tokens[s] = t;
    }
    const double t0 = bench::now_ns();
    TM_MUST(treemask_batch_accept_tokens(batch, tokens.data(), rows, nullptr));
    return bench::now_ns() - t0;
  };
  Result best{1e300, 1e300};
  const int steps = rows > 100 ? 20 : 200;
  for (int run = 0; run < 21; ++run) {
    double fill = 0, accept = 0;
    for (int step = 0; step < steps; ++step) {
      const double t0 = bench::now_ns();
      if (treemask_batch_fill_bound(batch, nullptr, 0, mode, nullptr) != TREEMASK_OK) {
        bench::die("batch fill");
      }
      fill += bench::now_ns() - t0;
      bench::keep(buffer.data());
      accept += advance();
    }
    best.fill_ns = std::min(best.fill_ns, fill / steps);
    best.accept_ns = std::min(best.accept_ns, accept / steps);
  }
  // What was timed is right: every row equals its matcher's own fill.
  std::vector<int32_t> want(words);
  TM_MUST(treemask_batch_fill_bound(batch, nullptr, 0, mode, nullptr));
  for (size_t s = 0; s < rows; ++s) {
    TM_MUST(treemask_matcher_fill_next_token_bitmask(treemask_batch_get_matcher(batch, s),
                                                     want.data(), words, nullptr, nullptr));
    if (!std::equal(want.begin(), want.end(), buffer.begin() + s * words)) {
      bench::die("a batch row differs from its matcher's fill");
    }
  }
  treemask_matcher_free(m);
  treemask_batch_free(batch);
  return best;
}

}  // namespace

int main() {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  std::printf(
      "batch fill of every row into a bound buffer, V = 151,936 (%zu words per row); "
      "best of 21 runs\n"
      "  memset = memset of the same buffer (the limit of a full fill)\n"
      "  threads = the caller + n_threads workers of the batch\n\n",
      words);
  std::printf("%6s %7s %-11s %11s %11s %9s %10s %9s %10s\n", "rows", "threads", "mode", "fill (us)",
              "memset (us)", "fill/mem", "ns per row", "speedup", "accept(us)");
  std::mt19937_64 rng(3);
  const bench::PrefixDict dict = bench::synthetic_dict(16, rng);
  treemask_trie *trie = dict.build_trie();
  for (size_t rows : {size_t{64}, size_t{1024}}) {
    std::vector<int32_t> buffer(rows * words);
    const double memset_ns = bench::ns_per_call([&] {
      std::memset(buffer.data(), 0, buffer.size() * 4);
      bench::keep(buffer.data());
    });
    for (int32_t mode : {TREEMASK_FILL_FULL, TREEMASK_FILL_INCREMENTAL}) {
      double one_thread = 0;
      for (size_t threads : {size_t{0}, size_t{1}}) {
        const Result r = run(trie, rows, threads, mode, rng);
        if (threads == 0) one_thread = r.fill_ns;
        std::printf("%6zu %7zu %-11s %11.1f %11.1f %8.2fx %10.1f %8.2fx %10.1f\n", rows,
                    threads + 1, mode == TREEMASK_FILL_FULL ? "full" : "incremental",
                    r.fill_ns / 1e3, memset_ns / 1e3, r.fill_ns / memset_ns, r.fill_ns / rows,
                    one_thread / r.fill_ns, r.accept_ns / 1e3);
      }
    }
  }
  treemask_trie_free(trie);
  return 0;
}
