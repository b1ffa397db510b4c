// Concurrency: what treemask.h promises about threads, exercised under
// ThreadSanitizer by `./dev test` (suite `concurrency`). One trie shared by
// many threads each driving its own matchers (the lazily built dense-row
// cache and the derived per-node data race to be built), clones of one
// matcher taken at once (the copy-on-write history), batches with worker
// threads filled from several threads, reference counts retained and
// released everywhere, the log callback swapped while others log, and the
// const functions of one matcher called together. Every mask is also
// checked against the brute-force oracle, so a race that corrupts a row
// fails even without the sanitizer.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/oracle.h"
#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

constexpr int kThreads = 4;

// Runs body(thread_index) on kThreads threads started together.
void run_threads(const std::function<void(int)> &body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      body(t);
    });
  }
  for (auto &th : threads) th.join();
}

// A trie with several wide nodes (their rows go to the dense-row cache,
// whose budget holds only some of them) and deep narrow paths, plus its
// oracle.
struct SharedTrie {
  static constexpr int32_t kVocab = 4096;
  oracle::Trie model;
  TrieHandle trie;

  explicit SharedTrie(size_t cache_bytes = 3 * (kVocab / 8)) {
    std::mt19937_64 rng(7);
    std::vector<std::vector<int32_t>> paths;
    for (int32_t wide = 0; wide < 8; ++wide) {
      for (int32_t t = 1; t < 400; t += 1 + wide) paths.push_back({10 + wide, t});
    }
    for (int i = 0; i < 200; ++i) {
      std::vector<int32_t> p(1 + rng() % 12);
      for (auto &t : p) t = 1 + static_cast<int32_t>(rng() % 40);
      paths.push_back(p);
    }
    std::vector<int32_t> tokens;
    std::vector<size_t> offsets{0};
    for (const auto &p : paths) {
      tokens.insert(tokens.end(), p.begin(), p.end());
      offsets.push_back(tokens.size());
      model.seqs.insert(p);
      model.labels[p].insert(static_cast<int64_t>(offsets.size() - 2));
    }
    model.stops = {0};
    model.vocab = kVocab;
    treemask_trie_options o = testutil::trie_options(kVocab, model.stops);
    o.dense_row_cache_bytes = cache_bytes;
    EXPECT_EQ(
        treemask_trie_from_paths(&o, tokens.data(), offsets.data(), paths.size(), nullptr, &trie.p),
        TREEMASK_OK)
        << treemask_last_error();
  }
};

// A random walk with a matcher, each row compared with the oracle; the first
// token is `first` unless that is -1.
void walk_and_check(treemask_trie *trie, const oracle::Trie &model, std::mt19937_64 &rng, int steps,
                    int32_t first = -1) {
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(trie, nullptr, &raw), TREEMASK_OK);
  MatcherHandle m(raw);
  oracle::Matcher o(model, {});
  std::vector<int32_t> row(treemask_bitmask_words(model.vocab));
  for (int i = 0; i < steps; ++i) {
    ASSERT_EQ(
        treemask_matcher_fill_next_token_bitmask(m.p, row.data(), row.size(), nullptr, nullptr),
        TREEMASK_OK);
    const auto allowed = o.allowed();
    ASSERT_EQ(testutil::decode_row(row.data(), row.size()), allowed);
    const bool start = i == 0 && first >= 0;
    if (!start && (o.is_terminated() || rng() % 16 == 0)) {
      treemask_matcher_reset(m.p);
      o.reset();
      continue;
    }
    const int32_t t = start ? first : allowed[rng() % allowed.size()];
    bool a = false, b = false;
    ASSERT_EQ(treemask_matcher_accept_token(m.p, t, &a), TREEMASK_OK);
    o.accept(t, &b);
    ASSERT_EQ(a, b);
  }
}

TEST(Concurrency, OneTrieManyThreadsEachWithItsOwnMatchers) {
  SharedTrie shared;
  const int steps = testutil::scaled(400);
  run_threads([&](int t) {
    std::mt19937_64 rng(100 + t);
    // Every thread starts at a wide node: their rows race into the cache.
    walk_and_check(shared.trie.p, shared.model, rng, steps, 10 + t);
  });
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  ASSERT_EQ(treemask_trie_get_stats(shared.trie.p, &s), TREEMASK_OK);
  EXPECT_GT(s.dense_row_cache_bytes, 0u);
  EXPECT_LE(s.dense_row_cache_bytes, 3u * (SharedTrie::kVocab / 8));  // never over budget
}

TEST(Concurrency, StateArraysOnOneTrieFromManyThreads) {
  SharedTrie shared;
  const int rounds = testutil::scaled(200);
  const size_t words = treemask_bitmask_words(SharedTrie::kVocab);
  run_threads([&](int t) {
    std::mt19937_64 rng(200 + t);
    std::vector<uint32_t> states(8, TREEMASK_STATE_ROOT);
    std::vector<oracle::Matcher> models(8, oracle::Matcher(shared.model, {}));
    std::vector<int32_t> rows(8 * words), tokens(8);
    for (int r = 0; r < rounds; ++r) {
      ASSERT_EQ(treemask_trie_fill_states(shared.trie.p, states.data(), 8, rows.data(), words),
                TREEMASK_OK);
      for (size_t i = 0; i < 8; ++i) {
        const auto allowed = models[i].allowed();
        ASSERT_EQ(testutil::decode_row(rows.data() + i * words, words), allowed);
        tokens[i] = allowed[rng() % allowed.size()];
        bool ok = false;
        models[i].accept(tokens[i], &ok);
        if (models[i].is_terminated()) {
          models[i].reset();
          tokens[i] = -1;
        }
      }
      ASSERT_EQ(treemask_trie_advance_states(shared.trie.p, states.data(), tokens.data(), 8,
                                             TREEMASK_FAILURE_REJECT, nullptr),
                TREEMASK_OK);
      for (size_t i = 0; i < 8; ++i) {
        if (tokens[i] < 0) states[i] = TREEMASK_STATE_ROOT;
      }
    }
  });
}

TEST(Concurrency, ClonesOfOneMatcherTakenAtOnceShareTheirHistory) {
  SharedTrie shared;
  // A long history (several 64-entry chunks) shared by every clone.
  std::vector<int32_t> path(150, 7);
  std::vector<size_t> offsets{0, path.size()};
  TrieHandle deep;
  const std::vector<int32_t> stops{0};
  const treemask_trie_options o = testutil::trie_options(16, stops);
  ASSERT_EQ(treemask_trie_from_paths(&o, path.data(), offsets.data(), 1, nullptr, &deep.p),
            TREEMASK_OK);
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(deep.p, nullptr, &raw), TREEMASK_OK);
  MatcherHandle proto(raw);
  bool ok = false;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(treemask_matcher_accept_token(proto.p, 7, &ok), 0);
  const int rounds = testutil::scaled(50);
  run_threads([&](int t) {
    std::mt19937_64 rng(300 + t);
    for (int r = 0; r < rounds; ++r) {
      treemask_matcher *copy = nullptr;
      ASSERT_EQ(treemask_matcher_clone(proto.p, &copy), TREEMASK_OK);  // concurrent const calls
      MatcherHandle c(copy);
      const size_t back = 1 + rng() % 90;
      ASSERT_EQ(treemask_matcher_rollback(c.p, back), TREEMASK_OK);
      for (size_t i = 0; i < back + 20; ++i) {  // writes into chunks the clones share
        bool accepted = false;
        ASSERT_EQ(treemask_matcher_accept_token(c.p, 7, &accepted), TREEMASK_OK);
        ASSERT_TRUE(accepted);
      }
      ASSERT_EQ(treemask_matcher_rollback_depth(c.p), 120u);
      ASSERT_EQ(treemask_matcher_rollback(c.p, 120), TREEMASK_OK);
      ASSERT_EQ(testutil::next_tokens(c.p), std::vector<int32_t>{7});
    }
  });
  EXPECT_EQ(treemask_matcher_rollback_depth(proto.p), 100u);
  (void)shared;
}

TEST(Concurrency, BatchesWithWorkersFilledFromSeveralThreads) {
  SharedTrie shared;
  const int rounds = testutil::scaled(60);
  const size_t words = treemask_bitmask_words(SharedTrie::kVocab);
  constexpr size_t kSlots = 48;  // enough rows that the workers share the work
  run_threads([&](int t) {
    std::mt19937_64 rng(400 + t);
    treemask_batch_options bo;
    treemask_batch_options_init(&bo);
    bo.n_slots = kSlots;
    bo.n_threads = 2;
    treemask_batch *batch = nullptr;
    ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
    treemask_matcher *proto = nullptr;
    ASSERT_EQ(treemask_matcher_create(shared.trie.p, nullptr, &proto), TREEMASK_OK);
    std::vector<oracle::Matcher> models(kSlots, oracle::Matcher(shared.model, {}));
    for (size_t s = 0; s < kSlots; ++s) {
      ASSERT_EQ(treemask_batch_set_matcher(batch, s, proto), TREEMASK_OK);
    }
    treemask_matcher_free(proto);
    std::vector<int32_t> rows(kSlots * words);
    ASSERT_EQ(treemask_batch_bind_bitmask(batch, rows.data(), words), TREEMASK_OK);
    std::vector<int32_t> tokens(kSlots), src(kSlots);
    for (int r = 0; r < rounds; ++r) {
      const int32_t mode = r % 2 ? TREEMASK_FILL_INCREMENTAL : TREEMASK_FILL_FULL;
      ASSERT_EQ(treemask_batch_fill_bound(batch, nullptr, 0, mode, nullptr), TREEMASK_OK);
      for (size_t s = 0; s < kSlots; ++s) {
        const auto allowed = models[s].allowed();
        ASSERT_EQ(testutil::decode_row(rows.data() + s * words, words), allowed);
        tokens[s] = allowed[rng() % allowed.size()];
        bool ok = false;
        models[s].accept(tokens[s], &ok);
      }
      ASSERT_EQ(treemask_batch_accept_tokens(batch, tokens.data(), kSlots, nullptr), TREEMASK_OK);
      // Beam reordering: every slot takes a random survivor; finished ones restart.
      std::vector<oracle::Matcher> next;
      for (size_t s = 0; s < kSlots; ++s) {
        src[s] = static_cast<int32_t>(rng() % kSlots);
        next.push_back(models[src[s]]);
      }
      ASSERT_EQ(treemask_batch_reorder(batch, src.data(), kSlots), TREEMASK_OK);
      for (size_t s = 0; s < kSlots; ++s) {
        if (!next[s].is_terminated()) continue;
        treemask_matcher_reset(treemask_batch_get_matcher(batch, s));
        next[s].reset();
      }
      models = std::move(next);
    }
    treemask_batch_free(batch);
  });
}

TEST(Concurrency, ReferencesRetainedAndReleasedOnEveryThread) {
  const int rounds = testutil::scaled(100);
  for (int r = 0; r < rounds; ++r) {
    auto *shared = new SharedTrie(0);
    treemask_trie *trie = shared->trie.p;
    shared->trie.p = nullptr;  // the threads own the references from here on
    treemask_exclusion_set *set = nullptr;
    const int64_t banned[] = {3, 5, 8};
    ASSERT_EQ(treemask_exclusion_set_create(trie, banned, 3, &set), TREEMASK_OK);
    for (int t = 1; t < kThreads; ++t) {
      treemask_trie_retain(trie);
      treemask_exclusion_set_retain(set);
    }
    run_threads([&](int t) {
      treemask_matcher *m = nullptr;
      ASSERT_EQ(treemask_matcher_create(trie, nullptr, &m), TREEMASK_OK);
      ASSERT_EQ(treemask_matcher_set_label_filter(m, set, nullptr, 0, nullptr, 0), TREEMASK_OK);
      treemask_exclusion_set_free(set);  // the matcher keeps what it needs
      if (t % 2) treemask_trie_free(trie);
      std::vector<int32_t> row(treemask_bitmask_words(SharedTrie::kVocab));
      EXPECT_EQ(
          treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr, nullptr),
          TREEMASK_OK);
      treemask_matcher_free(m);  // may release the last reference
      if (t % 2 == 0) treemask_trie_free(trie);
    });
    delete shared;
  }
}

TEST(Concurrency, DerivedDataBuiltOnceWhileThreadsRaceForIt) {
  const int rounds = testutil::scaled(20);
  for (int r = 0; r < rounds; ++r) {
    SharedTrie shared(0);  // fresh: nothing derived yet
    std::vector<std::vector<int32_t>> first_rows(kThreads);
    run_threads([&](int t) {
      treemask_mode_options o;
      treemask_mode_options_init(&o);
      o.leaves_only = t % 2 == 0;
      o.max_new_tokens = 5;
      treemask_matcher *m = nullptr;
      ASSERT_EQ(treemask_matcher_create(shared.trie.p, &o.matcher, &m), TREEMASK_OK);
      treemask_exclusion_set *set = nullptr;
      const int64_t banned[] = {1, 2};
      ASSERT_EQ(treemask_exclusion_set_create(shared.trie.p, banned, 2, &set), TREEMASK_OK);
      ASSERT_EQ(treemask_matcher_set_label_filter(m, set, nullptr, 0, nullptr, 0), TREEMASK_OK);
      first_rows[t].resize(treemask_bitmask_words(SharedTrie::kVocab));
      EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m, first_rows[t].data(),
                                                         first_rows[t].size(), nullptr, nullptr),
                TREEMASK_OK);
      treemask_exclusion_set_free(set);
      treemask_matcher_free(m);
    });
    for (int t = 2; t < kThreads; ++t) EXPECT_EQ(first_rows[t], first_rows[t % 2]);
  }
}

TEST(Concurrency, ConstFunctionsOfOneMatcherRunTogether) {
  SharedTrie shared;
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(shared.trie.p, nullptr, &raw), TREEMASK_OK);
  MatcherHandle m(raw);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 10, &ok), TREEMASK_OK);
  const std::vector<int32_t> want = testutil::next_tokens(m.p);
  const int rounds = testutil::scaled(200);
  const size_t words = treemask_bitmask_words(SharedTrie::kVocab);
  run_threads([&](int) {
    std::vector<int32_t> rows(3 * words);
    const int32_t draft[] = {1, 0};
    char text[256];
    for (int r = 0; r < rounds; ++r) {
      ASSERT_EQ(testutil::next_tokens(m.p), want);
      ASSERT_TRUE(testutil::forced_tokens(m.p).empty());
      size_t n_valid = 0;
      ASSERT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, draft, nullptr, 2, rows.data(),
                                                     rows.size(), words, &n_valid),
                TREEMASK_OK);
      ASSERT_EQ(testutil::decode_row(rows.data(), words), want);
      ASSERT_GT(treemask_matcher_debug_string(m.p, text, sizeof text), 0u);
      uint32_t state = 0;
      ASSERT_EQ(treemask_matcher_get_state(m.p, &state), TREEMASK_OK);
      treemask_matcher_counters c;
      c.struct_size = sizeof(c);
      ASSERT_EQ(treemask_matcher_get_counters(m.p, &c), TREEMASK_OK);
      ASSERT_EQ(c.n_accepted_tokens, 1u);
    }
  });
}

TEST(Concurrency, LastErrorIsPerThread) {
  const int rounds = testutil::scaled(300);
  run_threads([&](int t) {
    for (int r = 0; r < rounds; ++r) {
      TrieHandle bad;
      const int32_t vocab = -(t * 1000 + r);
      ASSERT_EQ(testutil::make_trie({{1}}, vocab, {0}, bad), TREEMASK_ERR_INVALID_ARGUMENT);
      ASSERT_EQ(
          std::string(treemask_last_error()),
          "treemask_trie_from_paths: vocab_size must be positive, got " + std::to_string(vocab));
    }
  });
}

// Two sinks swapped by one thread while the others load tries and log.
struct Sink {
  std::atomic<int> calls{0};
  std::atomic<bool> removed{false};
  std::atomic<int> calls_after_removal{0};
};

void count_line(int32_t, const char *message, void *user_data) {
  auto *s = static_cast<Sink *>(user_data);
  if (s->removed.load()) s->calls_after_removal.fetch_add(1);
  s->calls.fetch_add(1);
  EXPECT_EQ(std::string(message).rfind("built trie from", 0), 0u) << message;
}

TEST(Concurrency, LogCallbackSwappedWhileOtherThreadsLog) {
  Sink a, b;
  const int rounds = testutil::scaled(200);
  std::atomic<bool> stop{false};
  treemask_set_log_callback(count_line, &a);  // a sink is set before anyone logs
  std::thread swapper([&] {
    for (int r = 0; !stop.load(); ++r) treemask_set_log_callback(count_line, r % 2 ? &a : &b);
    treemask_set_log_callback(nullptr, nullptr);
    a.removed = true;  // from here on neither sink may be called
    b.removed = true;
  });
  run_threads([&](int) {
    for (int r = 0; r < rounds; ++r) {
      TrieHandle t;
      ASSERT_EQ(testutil::make_trie({{1, 2}, {3}}, 10, {0}, t), TREEMASK_OK);
    }
  });
  stop = true;
  swapper.join();
  TrieHandle after;
  ASSERT_EQ(testutil::make_trie({{1}}, 10, {0}, after), TREEMASK_OK);
  EXPECT_GT(a.calls + b.calls, 0);
  EXPECT_EQ(a.calls_after_removal + b.calls_after_removal, 0);
}

TEST(Concurrency, OneMappedFileLoadedAndUsedByManyThreads) {
  char dir[] = "/tmp/treemask-concurrency-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/shared.tmtrie";
  SharedTrie shared;
  ASSERT_EQ(treemask_trie_save(shared.trie.p, path.c_str(), nullptr), TREEMASK_OK);
  const int steps = testutil::scaled(150);
  run_threads([&](int t) {
    TrieHandle loaded;
    ASSERT_EQ(treemask_trie_load(path.c_str(), t % 2 ? TREEMASK_LOAD_TRUSTED : 0, &loaded.p),
              TREEMASK_OK);
    std::mt19937_64 rng(500 + t);
    walk_and_check(loaded.p, shared.model, rng, steps);
  });
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
