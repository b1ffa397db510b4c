// Property test: random tries and random walks through the public C API,
// compared at every step with the brute-force oracle (tests/common/oracle.h).
// The bitmask is written into a buffer full of garbage and compared bit for
// bit, tail bits included; every query, status and rejection is compared too.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <atomic>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "common/oracle.h"
#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

constexpr int32_t kVocabs[] = {1, 2, 31, 32, 33, 64, 100, 1000, 151936};

// One matcher under test paired with its model.
struct Pair {
  MatcherHandle real;
  oracle::Matcher model;
};

std::string describe(const oracle::Matcher &m) {
  std::string s = "prefix [";
  for (int32_t t : m.prefix) s += std::to_string(t) + " ";
  return s + "] phase " + std::to_string(static_cast<int>(m.phase));
}

void check_state(const Pair &p, std::mt19937_64 &rng, int32_t vocab) {
  const treemask_matcher *m = p.real.p;
  const oracle::Matcher &o = p.model;
  SCOPED_TRACE(describe(o));
  const size_t words = treemask_bitmask_words(vocab);
  // Buffers longer than needed must be fully written (extra words become 0).
  const size_t bitmask_row_words = words + std::uniform_int_distribution<size_t>(0, 2)(rng);
  std::vector<int32_t> row(bitmask_row_words);
  for (auto &w : row) w = static_cast<int32_t>(rng());
  bool need_apply = (rng() & 1) != 0;
  const treemask_status fs = treemask_matcher_fill_next_token_bitmask(
      const_cast<treemask_matcher *>(m), row.data(), bitmask_row_words, nullptr, &need_apply);
  EXPECT_EQ(fs, o.phase == oracle::Phase::kFailed ? TREEMASK_ERR_INVALID_STATE : TREEMASK_OK);
  const auto allowed = o.allowed();
  ASSERT_EQ(row, oracle::expected_row(allowed, bitmask_row_words));
  EXPECT_EQ(need_apply, allowed.size() != static_cast<size_t>(vocab));

  EXPECT_EQ(testutil::next_tokens(m), o.next_tokens());
  EXPECT_EQ(testutil::forced_tokens(m), o.forced_tokens());
  EXPECT_EQ(testutil::label_ids(m), o.label_ids());
  EXPECT_EQ(treemask_matcher_is_terminated(m), o.is_terminated());
  EXPECT_EQ(treemask_matcher_can_terminate(m), o.can_terminate());
  EXPECT_EQ(treemask_matcher_rollback_depth(m), o.rollback_depth());
  // A capped listing writes exactly min(cap, n) and still returns n.
  const auto all = o.next_tokens();
  if (!all.empty()) {
    std::vector<int32_t> few(all.size() + 1, -7);
    const size_t cap = all.size() / 2;
    EXPECT_EQ(treemask_matcher_next_tokens(m, few.data(), cap), all.size());
    for (size_t i = 0; i < cap; ++i) EXPECT_EQ(few[i], all[i]);
    EXPECT_EQ(few[cap], -7);
  }
}

int32_t random_token(std::mt19937_64 &rng, const oracle::Matcher &o, int32_t vocab) {
  const auto allowed = o.allowed();
  const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
  if (kind < 13 && !allowed.empty()) {
    return allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
  }
  if (kind < 15) return o.trie->stops[rng() % o.trie->stops.size()];
  if (kind == 15) return -1 - static_cast<int32_t>(rng() % 3);
  if (kind == 16) return vocab + static_cast<int32_t>(rng() % 3);
  if (kind == 17 && o.opts.pad_token >= 0) return o.opts.pad_token;
  return std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
}

void run_walk(const oracle::RandomTrie &rt, treemask_trie *trie, std::mt19937_64 &rng, int steps) {
  const int32_t vocab = rt.vocab;
  oracle::Options oo;
  oo.failure_policy = static_cast<int32_t>(rng() % 3);
  oo.terminate_without_stop_token = rng() % 4 == 0;
  oo.max_rollback_tokens = rng() % 3 == 0 ? 1 + rng() % 4 : 0;
  oo.pad_token = rng() % 3 == 0 ? static_cast<int32_t>(rng() % vocab) : -1;

  treemask_matcher_options opts;
  treemask_matcher_options_init(&opts);
  opts.failure_policy = oo.failure_policy;
  opts.terminate_without_stop_token = oo.terminate_without_stop_token;
  opts.max_rollback_tokens = oo.max_rollback_tokens;
  opts.pad_token = oo.pad_token;

  std::vector<std::unique_ptr<Pair>> pairs;
  treemask_matcher *m = nullptr;
  ASSERT_EQ(treemask_matcher_create(trie, &opts, &m), TREEMASK_OK) << treemask_last_error();
  pairs.push_back(std::unique_ptr<Pair>(new Pair{MatcherHandle(m), oracle::Matcher(rt.model, oo)}));

  for (int step = 0; step < steps; ++step) {
    Pair &p = *pairs[rng() % pairs.size()];
    ASSERT_NO_FATAL_FAILURE(check_state(p, rng, vocab));
    const int action = std::uniform_int_distribution<int>(0, 99)(rng);
    if (action < 70) {
      const int32_t t = random_token(rng, p.model, vocab);
      bool got = true, want = true;
      const treemask_status s = treemask_matcher_accept_token(p.real.p, t, &got);
      const treemask_status ws = p.model.accept(t, &want);
      ASSERT_EQ(s, ws) << "token " << t;
      ASSERT_EQ(got, want) << "token " << t;
      if (!got) {
        EXPECT_NE(std::string(treemask_last_error()), "");
      }
    } else if (action < 82) {
      const size_t n = rng() % 4;
      ASSERT_EQ(treemask_matcher_rollback(p.real.p, n), p.model.rollback(n)) << "rollback " << n;
    } else if (action < 92) {
      treemask_matcher *c = nullptr;
      const treemask_status s = treemask_matcher_clone(p.real.p, &c);
      if (p.model.phase == oracle::Phase::kFailed) {
        ASSERT_EQ(s, TREEMASK_ERR_INVALID_STATE);
        ASSERT_EQ(c, nullptr);
      } else {
        ASSERT_EQ(s, TREEMASK_OK);
        pairs.push_back(std::unique_ptr<Pair>(new Pair{MatcherHandle(c), p.model}));
        if (pairs.size() > 4) pairs.erase(pairs.begin() + static_cast<long>(rng() % pairs.size()));
      }
    } else if (action < 95) {
      treemask_matcher_reset(p.real.p);
      p.model.reset();
    } else {
      // Walk the forced chain as accepts.
      for (int32_t t : p.model.forced_tokens()) {
        bool got = false, want = false;
        ASSERT_EQ(treemask_matcher_accept_token(p.real.p, t, &got), p.model.accept(t, &want));
        ASSERT_EQ(got, want);
        ASSERT_TRUE(got);
      }
    }
  }
  for (auto &p : pairs) ASSERT_NO_FATAL_FAILURE(check_state(*p, rng, vocab));
}

TEST(MatcherProperty, RandomTriesAgreeWithOracle) {
  const int n_tries = testutil::scaled(12000);
  std::mt19937_64 rng(20261122);
  for (int i = 0; i < n_tries; ++i) {
    const int32_t vocab = kVocabs[i % std::size(kVocabs)];
    const uint64_t seed = rng();
    SCOPED_TRACE("trie " + std::to_string(i) + " vocab " + std::to_string(vocab) + " seed " +
                 std::to_string(seed));
    std::mt19937_64 local(seed);
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    treemask_trie_options opts;
    treemask_trie_options_init(&opts);
    opts.vocab_size = vocab;
    opts.stop_tokens = rt.stops.data();
    opts.n_stop_tokens = rt.stops.size();
    // Exercise the dense-row cache on some tries (tiny thresholds are not
    // reachable here, so use a budget that is sometimes 0).
    if (local() % 2) opts.dense_row_cache_bytes = 0;
    treemask_trie *t = nullptr;
    ASSERT_EQ(
        treemask_trie_from_paths(&opts, rt.tokens.data(), rt.offsets.data(), rt.offsets.size() - 1,
                                 rt.labels.empty() ? nullptr : rt.labels.data(), &t),
        TREEMASK_OK)
        << treemask_last_error();
    TrieHandle trie(t);
    ASSERT_NO_FATAL_FAILURE(run_walk(rt, trie.p, local, vocab > 10000 ? 16 : 60));
  }
}

// High-fanout nodes take the cached dense-row path; the rows must be the
// same as the bit-by-bit path, with and without the cache, from many threads.
TEST(MatcherProperty, DenseRowCacheMatchesOracle) {
  std::mt19937_64 rng(7);
  const int32_t vocab = 151936;
  for (int round = 0; round < testutil::scaled(6); ++round) {
    std::set<std::vector<int32_t>> seqs;
    std::vector<std::vector<int32_t>> paths;
    const int fanout = 600 + static_cast<int>(rng() % 8000);
    for (int i = 0; i < fanout; ++i) {
      std::vector<int32_t> p{static_cast<int32_t>(1 + rng() % (vocab - 1))};
      if (rng() % 2) p.push_back(static_cast<int32_t>(1 + rng() % (vocab - 1)));
      paths.push_back(p);
      seqs.insert(p);
    }
    for (size_t budget : {size_t{0}, size_t{64} << 20, size_t{4} * 4748}) {
      std::vector<int32_t> tokens;
      std::vector<size_t> offsets{0};
      for (auto &p : paths) {
        tokens.insert(tokens.end(), p.begin(), p.end());
        offsets.push_back(tokens.size());
      }
      const int32_t stop = 0;
      treemask_trie_options opts;
      treemask_trie_options_init(&opts);
      opts.vocab_size = vocab;
      opts.stop_tokens = &stop;
      opts.n_stop_tokens = 1;
      opts.dense_row_cache_bytes = budget;
      treemask_trie *t = nullptr;
      ASSERT_EQ(
          treemask_trie_from_paths(&opts, tokens.data(), offsets.data(), paths.size(), nullptr, &t),
          TREEMASK_OK);
      TrieHandle trie(t);
      oracle::Trie model;
      model.seqs = seqs;
      model.stops = {0};
      model.vocab = vocab;
      const auto want = oracle::expected_row(model.children({}), treemask_bitmask_words(vocab));
      std::vector<std::thread> threads;
      std::atomic<int> mismatches{0};
      for (int th = 0; th < 4; ++th) {
        threads.emplace_back([&] {
          treemask_matcher *m = nullptr;
          if (treemask_matcher_create(trie.p, nullptr, &m) != TREEMASK_OK) {
            ++mismatches;
            return;
          }
          std::vector<int32_t> row(want.size());
          for (int k = 0; k < 20; ++k) {
            if (treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr,
                                                         nullptr) != TREEMASK_OK ||
                row != want) {
              ++mismatches;
            }
          }
          treemask_matcher_free(m);
        });
      }
      for (auto &th : threads) th.join();
      EXPECT_EQ(mismatches.load(), 0) << "budget " << budget;
      treemask_trie_stats stats;
      stats.struct_size = sizeof(stats);
      ASSERT_EQ(treemask_trie_get_stats(trie.p, &stats), TREEMASK_OK);
      EXPECT_LE(stats.dense_row_cache_bytes, budget);
      if (budget >= 4748 * 4) {
        EXPECT_GT(stats.dense_row_cache_bytes, 0u) << "fanout " << fanout;
      }
    }
  }
}

}  // namespace
