// The batch and the state-array form against per-matcher results: on random
// tries and random walks, every row a batch fills (full, incremental, bound or
// not, with and without slot lists, on 0, 1 and 2 worker threads, after
// reorders, scribbles and invalidations) must equal, bit for bit, the row the
// same matcher fills on its own; every state-array row and transition must
// equal the matcher's. Plus every bad argument.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/oracle.h"
#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

constexpr int32_t kVocabs[] = {1, 2, 31, 32, 33, 100, 1000, 151936};

std::string last_error() { return treemask_last_error(); }

struct BatchHandle {
  treemask_batch *p = nullptr;
  BatchHandle() = default;
  BatchHandle(const BatchHandle &) = delete;
  ~BatchHandle() { treemask_batch_free(p); }
};

treemask_status make_batch(size_t n_slots, size_t n_threads, BatchHandle &out) {
  treemask_batch_options o;
  treemask_batch_options_init(&o);
  o.n_slots = n_slots;
  o.n_threads = n_threads;
  return treemask_batch_create(&o, &out.p);
}

void build(const oracle::RandomTrie &rt, TrieHandle &out) {
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = rt.vocab;
  opts.stop_tokens = rt.stops.data();
  opts.n_stop_tokens = rt.stops.size();
  ASSERT_EQ(
      treemask_trie_from_paths(&opts, rt.tokens.data(), rt.offsets.data(), rt.offsets.size() - 1,
                               rt.labels.empty() ? nullptr : rt.labels.data(), &out.p),
      TREEMASK_OK)
      << last_error();
}

MatcherHandle new_matcher(treemask_trie *trie, int32_t policy, bool terminate_at_leaf) {
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = policy;
  o.terminate_without_stop_token = terminate_at_leaf;
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(trie, &o, &m), TREEMASK_OK) << last_error();
  return MatcherHandle(m);
}

MatcherHandle clone(const treemask_matcher *m) {
  treemask_matcher *c = nullptr;
  EXPECT_EQ(treemask_matcher_clone(m, &c), TREEMASK_OK) << last_error();
  return MatcherHandle(c);
}

bool is_failed(const treemask_matcher *m) {
  // Only the STICKY_ERROR failed state refuses a rollback of 0 tokens while
  // listing no next tokens.
  return treemask_matcher_next_tokens(m, nullptr, 0) == 0 &&
         treemask_matcher_rollback(const_cast<treemask_matcher *>(m), 0) ==
             TREEMASK_ERR_INVALID_STATE;
}

// A token a decoder might feed: mostly allowed ones, sometimes stop tokens,
// random ids, out-of-range ids and "no token".
int32_t random_token(std::mt19937_64 &rng, const treemask_matcher *m, int32_t vocab,
                     const std::vector<int32_t> &stops) {
  const auto allowed = testutil::next_tokens(m);
  const int kind = static_cast<int>(rng() % 20);
  if (kind < 13 && !allowed.empty()) return allowed[rng() % allowed.size()];
  if (kind < 15) return stops[rng() % stops.size()];
  if (kind == 15) return -1;
  if (kind == 16) return vocab + static_cast<int32_t>(rng() % 3);
  return static_cast<int32_t>(rng() % vocab);
}

// The row a matcher fills on its own, into a buffer full of garbage.
std::vector<int32_t> own_row(const treemask_matcher *m, size_t words, bool *need_apply,
                             treemask_status *status) {
  std::vector<int32_t> row(words, 0x5A5A5A5A);
  *status = treemask_matcher_fill_next_token_bitmask(const_cast<treemask_matcher *>(m), row.data(),
                                                     words, nullptr, need_apply);
  return row;
}

// One random walk of a batch beside its reference matchers.
class BatchWalk {
 public:
  BatchWalk(const oracle::RandomTrie &rt, treemask_trie *trie, size_t n_slots, size_t n_threads,
            std::mt19937_64 &rng)
      : rt_(rt), trie_(trie), rng_(rng), n_(n_slots) {
    EXPECT_EQ(make_batch(n_slots, n_threads, batch_), TREEMASK_OK) << last_error();
    words_ = treemask_bitmask_words(rt.vocab) + rng() % 3;
    refs_.resize(n_);
    for (size_t s = 0; s < n_; ++s) {
      if (rng_() % 8 != 0) put_new_matcher(s);
    }
    bound_.assign(n_ * words_, 0x33333333);
    unbound_.assign(n_ * words_, 0x44444444);
    EXPECT_EQ(treemask_batch_bind_bitmask(batch_.p, bound_.data(), words_), TREEMASK_OK);
  }

  void step() {
    const int op = static_cast<int>(rng_() % 20);
    if (op < 6) {
      fill(Buffer::kBoundIncremental);
    } else if (op < 8) {
      fill(Buffer::kBoundFull);
    } else if (op < 9) {
      fill(Buffer::kUnbound);
    } else if (op < 14) {
      accept();
    } else if (op < 16) {
      reorder();
    } else if (op < 17) {
      scribble_and_invalidate();
    } else if (op < 18) {
      roll_back_or_reset();
    } else {
      const size_t s = rng_() % n_;
      if (rng_() % 4 == 0) {
        ASSERT_EQ(treemask_batch_set_matcher(batch_.p, s, nullptr), TREEMASK_OK);
        refs_[s] = MatcherHandle();
      } else {
        put_new_matcher(s);
      }
    }
  }

  // Every non-empty slot's matcher must be in the reference's state.
  void check_matchers() {
    for (size_t s = 0; s < n_; ++s) {
      treemask_matcher *m = treemask_batch_get_matcher(batch_.p, s);
      ASSERT_EQ(m == nullptr, refs_[s].p == nullptr) << "slot " << s;
      if (!m) continue;
      EXPECT_EQ(testutil::next_tokens(m), testutil::next_tokens(refs_[s].p)) << "slot " << s;
      EXPECT_EQ(treemask_matcher_is_terminated(m), treemask_matcher_is_terminated(refs_[s].p));
      EXPECT_EQ(treemask_matcher_rollback_depth(m), treemask_matcher_rollback_depth(refs_[s].p));
    }
  }

 private:
  enum class Buffer { kBoundIncremental, kBoundFull, kUnbound };

  void put_new_matcher(size_t s) {
    MatcherHandle m = new_matcher(trie_, static_cast<int32_t>(rng_() % 3), rng_() % 4 == 0);
    ASSERT_EQ(treemask_batch_set_matcher(batch_.p, s, m.p), TREEMASK_OK) << last_error();
    refs_[s] = std::move(m);  // the batch holds a clone: the two are independent
  }

  std::vector<int32_t> random_slot_list() {
    std::vector<int32_t> slots;
    for (size_t s = 0; s < n_; ++s) {
      if (refs_[s].p && rng_() % 2) slots.push_back(static_cast<int32_t>(s));
    }
    std::shuffle(slots.begin(), slots.end(), rng_);
    return slots;
  }

  void fill(Buffer which) {
    std::vector<int32_t> &buf = which == Buffer::kUnbound ? unbound_ : bound_;
    const std::vector<int32_t> before = buf;
    const bool all = rng_() % 2 == 0;
    const std::vector<int32_t> list = all ? std::vector<int32_t>{} : random_slot_list();
    std::vector<uint8_t> listed(n_, 0);
    for (size_t s = 0; s < n_; ++s) listed[s] = all && refs_[s].p;
    for (int32_t s : list) listed[s] = 1;
    std::unique_ptr<bool[]> need_apply(new bool[n_]);
    std::fill(need_apply.get(), need_apply.get() + n_, true);
    // An empty list is a valid list of no slots: never pass it as NULL.
    const int32_t no_slot = -1;
    const int32_t *slots = all ? nullptr : list.empty() ? &no_slot : list.data();
    const size_t n_slots = all ? 0 : list.size();
    treemask_status got;
    if (which == Buffer::kUnbound) {
      got = treemask_batch_fill_next_token_bitmask(batch_.p, buf.data(), words_, slots, n_slots,
                                                   need_apply.get());
    } else {
      const int32_t mode =
          which == Buffer::kBoundFull ? TREEMASK_FILL_FULL : TREEMASK_FILL_INCREMENTAL;
      got = treemask_batch_fill_bound(batch_.p, slots, n_slots, mode, need_apply.get());
    }
    treemask_status want = TREEMASK_OK;
    for (size_t s = 0; s < n_; ++s) {
      SCOPED_TRACE("slot " + std::to_string(s) + " mode " + std::to_string(int(which)));
      const int32_t *row = buf.data() + s * words_;
      if (!listed[s]) {
        ASSERT_TRUE(std::equal(row, row + words_, before.begin() + s * words_))
            << "a row that was not listed changed";
        continue;
      }
      bool want_need = true;
      treemask_status own = TREEMASK_OK;
      const auto expected = own_row(refs_[s].p, words_, &want_need, &own);
      if (own != TREEMASK_OK && want == TREEMASK_OK) want = own;
      ASSERT_EQ(std::vector<int32_t>(row, row + words_), expected);
      EXPECT_EQ(need_apply[s], want_need);
    }
    ASSERT_EQ(got, want) << last_error();
  }

  void accept() {
    std::vector<int32_t> tokens(n_, -1);
    for (size_t s = 0; s < n_; ++s) {
      if (refs_[s].p) tokens[s] = random_token(rng_, refs_[s].p, rt_.vocab, rt_.model.stops);
    }
    std::unique_ptr<bool[]> accepted(new bool[n_]);
    const treemask_status got =
        treemask_batch_accept_tokens(batch_.p, tokens.data(), tokens.size(), accepted.get());
    treemask_status want = TREEMASK_OK;
    for (size_t s = 0; s < n_; ++s) {
      bool ok = true;
      if (tokens[s] >= 0) {
        const treemask_status st = treemask_matcher_accept_token(refs_[s].p, tokens[s], &ok);
        if (st != TREEMASK_OK && want == TREEMASK_OK) want = st;
      }
      EXPECT_EQ(accepted[s], ok) << "slot " << s << " token " << tokens[s];
    }
    ASSERT_EQ(got, want);
  }

  void reorder() {
    std::vector<int32_t> src(n_);
    for (auto &v : src) v = static_cast<int32_t>(rng_() % (n_ + 1)) - 1;
    // A failed matcher cannot be cloned: taking one twice must fail and
    // change nothing.
    std::vector<int> takes(n_, 0);
    for (int32_t v : src) {
      if (v >= 0) ++takes[v];
    }
    bool refused = false;
    for (size_t s = 0; s < n_; ++s) refused |= takes[s] > 1 && refs_[s].p && is_failed(refs_[s].p);
    const treemask_status got = treemask_batch_reorder(batch_.p, src.data(), src.size());
    if (refused) {
      ASSERT_EQ(got, TREEMASK_ERR_INVALID_STATE);
      return;
    }
    ASSERT_EQ(got, TREEMASK_OK) << last_error();
    // A source taken once moves (a failed matcher may move), others clone.
    std::vector<MatcherHandle> next(n_);
    for (size_t i = 0; i < n_; ++i) {
      if (src[i] >= 0 && takes[src[i]] > 1 && refs_[src[i]].p) next[i] = clone(refs_[src[i]].p);
    }
    for (size_t i = 0; i < n_; ++i) {
      if (src[i] >= 0 && takes[src[i]] == 1) next[i] = std::move(refs_[src[i]]);
    }
    refs_ = std::move(next);
  }

  void scribble_and_invalidate() {
    if (rng_() % 3 == 0) {
      for (auto &w : bound_) w = static_cast<int32_t>(rng_());
      ASSERT_EQ(treemask_batch_invalidate(batch_.p, nullptr, 0), TREEMASK_OK);
      return;
    }
    std::vector<int32_t> rows;
    for (size_t s = 0; s < n_; ++s) {
      if (rng_() % 2) continue;
      rows.push_back(static_cast<int32_t>(s));
      for (size_t w = 0; w < words_; ++w) bound_[s * words_ + w] = static_cast<int32_t>(rng_());
    }
    ASSERT_EQ(treemask_batch_invalidate(batch_.p, rows.data(), rows.size()), TREEMASK_OK);
  }

  // Matchers borrowed from the batch may be driven directly between calls.
  void roll_back_or_reset() {
    const size_t s = rng_() % n_;
    treemask_matcher *m = treemask_batch_get_matcher(batch_.p, s);
    if (!m) return;
    if (rng_() % 3 == 0) {
      treemask_matcher_reset(m);
      treemask_matcher_reset(refs_[s].p);
      return;
    }
    const size_t n = rng_() % 3;
    ASSERT_EQ(treemask_matcher_rollback(m, n), treemask_matcher_rollback(refs_[s].p, n));
  }

  const oracle::RandomTrie &rt_;
  treemask_trie *trie_;
  std::mt19937_64 &rng_;
  size_t n_;
  size_t words_ = 0;
  BatchHandle batch_;
  std::vector<MatcherHandle> refs_;
  std::vector<int32_t> bound_, unbound_;
};

TEST(Batch, RandomWalksEqualPerMatcherResults) {
  std::mt19937_64 rng(2026);
  const int n_tries = testutil::scaled(1500);
  for (int i = 0; i < n_tries; ++i) {
    const int32_t vocab = kVocabs[i % std::size(kVocabs)];
    const size_t n_threads = static_cast<size_t>(i % 3);
    const uint64_t seed = rng();
    SCOPED_TRACE("walk " + std::to_string(i) + " vocab " + std::to_string(vocab) + " threads " +
                 std::to_string(n_threads) + " seed " + std::to_string(seed));
    std::mt19937_64 local(seed);
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    TrieHandle trie;
    ASSERT_NO_FATAL_FAILURE(build(rt, trie));
    BatchWalk walk(rt, trie.p, 1 + local() % 16, n_threads, local);
    for (int step = 0; step < (vocab > 10000 ? 30 : 80); ++step) {
      ASSERT_NO_FATAL_FAILURE(walk.step());
      ASSERT_NO_FATAL_FAILURE(walk.check_matchers());
    }
  }
}

// Enough slots that fills and accepts are split into chunks across the
// worker threads.
TEST(Batch, ManySlotsSplitAcrossThreads) {
  std::mt19937_64 rng(404);
  for (int i = 0; i < testutil::scaled(8); ++i) {
    const int32_t vocab = i % 2 ? 1000 : 151936;
    const uint64_t seed = rng();
    SCOPED_TRACE("walk " + std::to_string(i) + " seed " + std::to_string(seed));
    std::mt19937_64 local(seed);
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    TrieHandle trie;
    ASSERT_NO_FATAL_FAILURE(build(rt, trie));
    BatchWalk walk(rt, trie.p, vocab > 10000 ? 40 : 700, 1 + i % 2, local);
    for (int step = 0; step < 25; ++step) {
      ASSERT_NO_FATAL_FAILURE(walk.step());
      ASSERT_NO_FATAL_FAILURE(walk.check_matchers());
    }
  }
}

// A trie whose root has more children than an incremental row may hold:
// rows switch between the full-write fallback and the O(fanout) path.
TEST(Batch, HighFanoutRowsFallBackToFullWrites) {
  const int32_t vocab = 151936, stop = 151645;
  std::mt19937_64 rng(9);
  std::vector<std::vector<int32_t>> paths;
  for (int i = 0; i < 700; ++i) {
    paths.push_back({static_cast<int32_t>(i * 200 + 3), static_cast<int32_t>(rng() % 1000)});
  }
  paths.push_back({});  // the root is terminal too
  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie(paths, vocab, {stop}, trie), TREEMASK_OK) << last_error();
  for (size_t threads : {0, 2}) {
    const size_t n = 64;
    BatchHandle batch;
    ASSERT_EQ(make_batch(n, threads, batch), TREEMASK_OK);
    std::vector<MatcherHandle> refs;
    for (size_t s = 0; s < n; ++s) {
      refs.push_back(new_matcher(trie.p, TREEMASK_FAILURE_REJECT, false));
      ASSERT_EQ(treemask_batch_set_matcher(batch.p, s, refs[s].p), TREEMASK_OK);
    }
    const size_t words = treemask_bitmask_words(vocab);
    std::vector<int32_t> buf(n * words, -1);
    ASSERT_EQ(treemask_batch_bind_bitmask(batch.p, buf.data(), words), TREEMASK_OK);
    for (int step = 0; step < 12; ++step) {
      ASSERT_EQ(treemask_batch_fill_bound(batch.p, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
                TREEMASK_OK);
      std::vector<int32_t> tokens(n);
      for (size_t s = 0; s < n; ++s) {
        bool need = false;
        treemask_status st;
        const auto want = own_row(refs[s].p, words, &need, &st);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), buf.begin() + s * words))
            << "slot " << s << " step " << step;
        const auto allowed = testutil::next_tokens(refs[s].p);
        tokens[s] = allowed[rng() % allowed.size()];
        bool ok = false;
        ASSERT_EQ(treemask_matcher_accept_token(refs[s].p, tokens[s], &ok), TREEMASK_OK);
        if (treemask_matcher_is_terminated(refs[s].p)) tokens[s] = -1;  // reset below
      }
      ASSERT_EQ(treemask_batch_accept_tokens(batch.p, tokens.data(), n, nullptr), TREEMASK_OK);
      for (size_t s = 0; s < n; ++s) {
        if (tokens[s] >= 0) continue;
        treemask_matcher_reset(refs[s].p);
        treemask_matcher_reset(treemask_batch_get_matcher(batch.p, s));
      }
    }
  }
}

// The caller's promise, both ways: after a scribble plus invalidate the row
// is right; after a scribble without it the stale bits show (which is why
// the promise is in the header).
TEST(Batch, ScribbledRowsNeedInvalidate) {
  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{5, 6}, {5, 7}, {9}}, 64, {0}, trie), TREEMASK_OK);
  BatchHandle batch;
  ASSERT_EQ(make_batch(2, 0, batch), TREEMASK_OK);
  MatcherHandle m = new_matcher(trie.p, TREEMASK_FAILURE_REJECT, false);
  ASSERT_EQ(treemask_batch_set_matcher(batch.p, 0, m.p), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_set_matcher(batch.p, 1, m.p), TREEMASK_OK);
  std::vector<int32_t> buf(4, 0);
  ASSERT_EQ(treemask_batch_bind_bitmask(batch.p, buf.data(), 2), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_fill_bound(batch.p, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
            TREEMASK_OK);
  const std::vector<int32_t> root = {(1 << 5) | (1 << 9), 0};
  EXPECT_EQ(std::vector<int32_t>(buf.begin(), buf.begin() + 2), root);
  const int32_t tokens[2] = {5, 5};
  ASSERT_EQ(treemask_batch_accept_tokens(batch.p, tokens, 2, nullptr), TREEMASK_OK);
  std::fill(buf.begin(), buf.end(), -1);  // e.g. a sampler reused the buffer
  const int32_t row0 = 0;
  ASSERT_EQ(treemask_batch_invalidate(batch.p, &row0, 1), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_fill_bound(batch.p, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
            TREEMASK_OK);
  const std::vector<int32_t> after5 = {(1 << 6) | (1 << 7), 0};
  EXPECT_EQ(std::vector<int32_t>(buf.begin(), buf.begin() + 2), after5);
  EXPECT_NE(std::vector<int32_t>(buf.begin() + 2, buf.end()), after5) << "row 1 broke the promise";
  // A full fill repairs any row.
  ASSERT_EQ(treemask_batch_fill_bound(batch.p, nullptr, 0, TREEMASK_FILL_FULL, nullptr),
            TREEMASK_OK);
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + 2, buf.end()), after5);
}

// Reordering moves matchers without copying their histories: a permutation
// keeps the very same matcher objects, and clones still roll back.
TEST(Batch, ReorderMovesAndClonesShareHistory) {
  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{1, 2, 3}, {1, 4}}, 8, {0}, trie), TREEMASK_OK);
  BatchHandle batch;
  ASSERT_EQ(make_batch(3, 1, batch), TREEMASK_OK);
  MatcherHandle m = new_matcher(trie.p, TREEMASK_FAILURE_REJECT, false);
  for (size_t s = 0; s < 3; ++s)
    ASSERT_EQ(treemask_batch_set_matcher(batch.p, s, m.p), TREEMASK_OK);
  const int32_t tokens[3] = {1, -1, 1};
  ASSERT_EQ(treemask_batch_accept_tokens(batch.p, tokens, 3, nullptr), TREEMASK_OK);
  treemask_matcher *first = treemask_batch_get_matcher(batch.p, 0);
  const int32_t permutation[3] = {2, 0, 1};
  ASSERT_EQ(treemask_batch_reorder(batch.p, permutation, 3), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_get_matcher(batch.p, 1), first);
  const int32_t fan_out[3] = {1, 1, -1};  // slot 1 (advanced) to slots 0 and 1; slot 2 empty
  ASSERT_EQ(treemask_batch_reorder(batch.p, fan_out, 3), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_get_matcher(batch.p, 2), nullptr);
  for (size_t s = 0; s < 2; ++s) {
    treemask_matcher *c = treemask_batch_get_matcher(batch.p, s);
    EXPECT_EQ(testutil::next_tokens(c), (std::vector<int32_t>{2, 4}));
    EXPECT_EQ(treemask_matcher_rollback(c, 1), TREEMASK_OK);
    EXPECT_EQ(testutil::next_tokens(c), (std::vector<int32_t>{1}));
  }
}

// A huge n_slots is refused before anything is allocated (issue: a batch of
// 10^9 slots was granted by the kernel's overcommit, then written, and the
// OOM killer ended the process). The refusal is cheap: it returns at once.
TEST(Batch, ASlotTableLargerThanTheMachineIsRefused) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  const uint64_t have = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  const uint64_t n = have / 48 + 1;
  if (n > static_cast<uint64_t>(INT32_MAX)) {
    GTEST_SKIP() << "this machine has " << (have >> 30)
                 << " GiB: every n_slots up to 2^31 - 1 fits (48 bytes a slot)";
  }
  for (const uint64_t slots : {n, uint64_t{INT32_MAX}}) {
    BatchHandle b;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(make_batch(slots, 0, b), TREEMASK_ERR_OUT_OF_MEMORY);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    EXPECT_NE(last_error().find("n_slots " + std::to_string(slots) + " needs"), std::string::npos)
        << last_error();
    EXPECT_NE(last_error().find("MiB available ("), std::string::npos) << last_error();
    EXPECT_EQ(b.p, nullptr);
  }
  // A size that fits is still created.
  BatchHandle ok;
  EXPECT_EQ(make_batch(1 << 20, 0, ok), TREEMASK_OK) << last_error();
}

TEST(Batch, BadArgumentsAreNamed) {
  BatchHandle none;
  treemask_batch_options o;
  treemask_batch_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(o));
  EXPECT_EQ(treemask_batch_create(&o, &none.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("n_slots must be in [1, 2^31 - 1], got 0"), std::string::npos);
  o.n_slots = 2;
  o.n_threads = 1000;
  EXPECT_EQ(treemask_batch_create(&o, &none.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("n_threads must be at most 256, got 1000"), std::string::npos);
  EXPECT_EQ(treemask_batch_create(nullptr, &none.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_batch_create: opts is NULL");
  EXPECT_EQ(none.p, nullptr);

  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 40, {0}, trie), TREEMASK_OK);
  BatchHandle b;
  ASSERT_EQ(make_batch(3, 0, b), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_n_slots(b.p), 3u);
  MatcherHandle m = new_matcher(trie.p, TREEMASK_FAILURE_STICKY_ERROR, false);
  EXPECT_EQ(treemask_batch_set_matcher(b.p, 3, m.p), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("slot 3 is out of range [0, n_slots=3)"), std::string::npos);
  ASSERT_EQ(treemask_batch_set_matcher(b.p, 0, m.p), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_set_matcher(b.p, 2, m.p), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_get_matcher(b.p, 1), nullptr);
  EXPECT_EQ(treemask_batch_get_matcher(b.p, 9), nullptr);

  std::vector<int32_t> buf(6, 0);
  const std::vector<int32_t> untouched = buf;
  const int32_t out_of_range[1] = {3}, empty_slot[1] = {1}, twice[2] = {2, 2};
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data(), 2, out_of_range, 1, nullptr),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("slots[0] = 3 is out of range [0, n_slots=3)"), std::string::npos);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data(), 2, empty_slot, 1, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("slots[0] = 1 is empty"), std::string::npos);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data(), 2, twice, 2, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("slots[1] = 2 is listed twice"), std::string::npos);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data(), 1, nullptr, 0, nullptr),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(last_error().find("bitmask_row_words 1 < 2, the words slot 0's vocab_size 40 needs"),
            std::string::npos);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data(), 2, nullptr, 1, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("slots is NULL but n_slots is 1"), std::string::npos);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, nullptr, 2, nullptr, 0, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(buf, untouched);
  EXPECT_EQ(treemask_batch_fill_bound(b.p, nullptr, 0, TREEMASK_FILL_FULL, nullptr),
            TREEMASK_ERR_INVALID_STATE);
  EXPECT_NE(last_error().find("no bitmask is bound"), std::string::npos);
  EXPECT_EQ(treemask_batch_bind_bitmask(b.p, buf.data(), 0), TREEMASK_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(treemask_batch_bind_bitmask(b.p, buf.data(), 2), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_fill_bound(b.p, nullptr, 0, 5, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown mode 5"), std::string::npos);
  std::vector<int32_t> other(8, 0);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(b.p, buf.data() + 1, 2, nullptr, 0, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("overlaps the bound buffer"), std::string::npos);
  EXPECT_EQ(treemask_batch_invalidate(b.p, out_of_range, 1), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("rows[0] = 3 is out of range"), std::string::npos);

  // Accept: one token per slot, none for empty slots.
  const int32_t to_empty[3] = {1, 1, -1};
  EXPECT_EQ(treemask_batch_accept_tokens(b.p, to_empty, 3, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("tokens[1] = 1 but slot 1 is empty"), std::string::npos);
  EXPECT_EQ(treemask_batch_accept_tokens(b.p, to_empty, 2, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("n_tokens is 2"), std::string::npos);
  EXPECT_EQ(treemask_batch_get_matcher(b.p, 0) != nullptr, true);
  EXPECT_EQ(testutil::next_tokens(treemask_batch_get_matcher(b.p, 0)), (std::vector<int32_t>{1}));

  // A rejection is no error; STICKY_ERROR then fails, naming the lowest slot.
  bool accepted[3] = {true, false, true};
  const int32_t bad[3] = {7, -1, 9};
  EXPECT_EQ(treemask_batch_accept_tokens(b.p, bad, 3, accepted), TREEMASK_OK);
  EXPECT_FALSE(accepted[0]);
  EXPECT_TRUE(accepted[1]);
  EXPECT_FALSE(accepted[2]);
  EXPECT_EQ(last_error().find("token 7"), std::string::npos) << last_error();  // no error
  EXPECT_EQ(treemask_batch_accept_tokens(b.p, bad, 3, accepted), TREEMASK_ERR_INVALID_STATE);
  EXPECT_NE(last_error().find("slot 0: the matcher failed after rejecting token 7"),
            std::string::npos)
      << last_error();
  // Its row is still written (stop tokens only), with the error.
  EXPECT_EQ(treemask_batch_fill_bound(b.p, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
            TREEMASK_ERR_INVALID_STATE);
  EXPECT_EQ(testutil::decode_row(buf.data(), 2), (std::vector<int32_t>{0}));
  const int32_t twice_failed[3] = {0, 0, 2};
  EXPECT_EQ(treemask_batch_reorder(b.p, twice_failed, 3), TREEMASK_ERR_INVALID_STATE);
  const int32_t src_bad[3] = {0, -2, 1};
  EXPECT_EQ(treemask_batch_reorder(b.p, src_bad, 3), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("src[1] = -2 is out of range [-1, n_slots=3)"), std::string::npos);
  EXPECT_EQ(treemask_batch_reorder(b.p, src_bad, 2), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(treemask_batch_get_matcher(b.p, 0), nullptr);  // unchanged

  EXPECT_EQ(treemask_batch_n_slots(nullptr), 0u);
  EXPECT_EQ(treemask_batch_get_matcher(nullptr, 0), nullptr);
  EXPECT_EQ(treemask_batch_accept_tokens(nullptr, bad, 3, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_batch_accept_tokens: batch is NULL");
  treemask_batch_free(nullptr);
}

// ---- State arrays ----

TEST(StateArrays, RandomWalksEqualPerMatcherResults) {
  std::mt19937_64 rng(77);
  const int n_tries = testutil::scaled(3000);
  for (int i = 0; i < n_tries; ++i) {
    const int32_t vocab = kVocabs[i % std::size(kVocabs)];
    const int32_t policy = i % 3;
    const uint64_t seed = rng();
    SCOPED_TRACE("walk " + std::to_string(i) + " vocab " + std::to_string(vocab) + " policy " +
                 std::to_string(policy) + " seed " + std::to_string(seed));
    std::mt19937_64 local(seed);
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    TrieHandle trie;
    ASSERT_NO_FATAL_FAILURE(build(rt, trie));
    const size_t n = 1 + local() % 6;
    const size_t words = treemask_bitmask_words(vocab) + local() % 2;
    std::vector<uint32_t> states(n, TREEMASK_STATE_ROOT);
    std::vector<MatcherHandle> refs;
    for (size_t k = 0; k < n; ++k) refs.push_back(new_matcher(trie.p, policy, false));
    for (int step = 0; step < (vocab > 10000 ? 10 : 40); ++step) {
      std::vector<int32_t> rows(n * words, 0x77777777);
      ASSERT_EQ(treemask_trie_fill_states(trie.p, states.data(), n, rows.data(), words),
                TREEMASK_OK)
          << last_error();
      std::vector<int32_t> tokens(n);
      for (size_t k = 0; k < n; ++k) {
        uint32_t id = 0;
        ASSERT_EQ(treemask_matcher_get_state(refs[k].p, &id), TREEMASK_OK);
        ASSERT_EQ(states[k], id) << "row " << k;
        bool need;
        treemask_status st;
        const auto want = own_row(refs[k].p, words, &need, &st);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), rows.begin() + k * words)) << "row " << k;
        tokens[k] = random_token(local, refs[k].p, vocab, rt.model.stops);
      }
      bool accepted[8];
      ASSERT_EQ(
          treemask_trie_advance_states(trie.p, states.data(), tokens.data(), n, policy, accepted),
          TREEMASK_OK);
      for (size_t k = 0; k < n; ++k) {
        bool ok = true;
        if (tokens[k] >= 0) {
          // A STICKY_ERROR failed matcher refuses every accept.
          const treemask_status s = treemask_matcher_accept_token(refs[k].p, tokens[k], &ok);
          EXPECT_TRUE(s == TREEMASK_OK ||
                      (s == TREEMASK_ERR_INVALID_STATE && policy == TREEMASK_FAILURE_STICKY_ERROR))
              << last_error();
        }
        EXPECT_EQ(accepted[k], ok) << "row " << k << " token " << tokens[k];
      }
      if (local() % 5 == 0) {  // a beam reorder is a gather of states
        std::vector<uint32_t> gathered(n);
        std::vector<MatcherHandle> next;
        for (size_t k = 0; k < n; ++k) {
          const size_t from = local() % n;
          gathered[k] = states[from];
          if (is_failed(refs[from].p)) {  // cannot be cloned; a fresh failed one is the same
            next.push_back(new_matcher(trie.p, policy, false));
            bool ok;
            EXPECT_EQ(treemask_matcher_accept_token(next.back().p, -1, &ok), TREEMASK_OK);
          } else {
            next.push_back(clone(refs[from].p));
          }
        }
        states = gathered;
        refs = std::move(next);
      }
    }
  }
}

TEST(StateArrays, MatcherStatesMapOntoTheReservedValues) {
  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{3, 4}, {3}}, 16, {1}, trie), TREEMASK_OK);
  EXPECT_EQ(TREEMASK_STATE_TERMINATED, 0xFFFFFFFEu);
  EXPECT_EQ(TREEMASK_STATE_FAILED, 0xFFFFFFFFu);
  uint32_t id = 7;
  MatcherHandle m = new_matcher(trie.p, TREEMASK_FAILURE_FAIL_CLOSED, false);
  ASSERT_EQ(treemask_matcher_get_state(m.p, &id), TREEMASK_OK);
  EXPECT_EQ(id, TREEMASK_STATE_ROOT);
  bool ok;
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 3, &ok), TREEMASK_OK);
  ASSERT_EQ(treemask_matcher_get_state(m.p, &id), TREEMASK_OK);
  EXPECT_EQ(id, 1u);  // breadth-first: the root's only child
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 1, &ok), TREEMASK_OK);
  ASSERT_EQ(treemask_matcher_get_state(m.p, &id), TREEMASK_OK);
  EXPECT_EQ(id, TREEMASK_STATE_TERMINATED);
  treemask_matcher_reset(m.p);
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 9, &ok), TREEMASK_OK);
  ASSERT_EQ(treemask_matcher_get_state(m.p, &id), TREEMASK_OK);
  EXPECT_EQ(id, TREEMASK_STATE_FAILED);
  // FAILED then a stop token: terminated unless STICKY_ERROR.
  uint32_t states[3] = {TREEMASK_STATE_FAILED, TREEMASK_STATE_FAILED, TREEMASK_STATE_TERMINATED};
  const int32_t stop[3] = {1, 1, 1};
  bool accepted[3];
  ASSERT_EQ(
      treemask_trie_advance_states(trie.p, states, stop, 1, TREEMASK_FAILURE_FAIL_CLOSED, accepted),
      TREEMASK_OK);
  ASSERT_EQ(treemask_trie_advance_states(trie.p, states + 1, stop, 2, TREEMASK_FAILURE_STICKY_ERROR,
                                         accepted + 1),
            TREEMASK_OK);
  EXPECT_EQ(states[0], TREEMASK_STATE_TERMINATED);
  EXPECT_EQ(states[1], TREEMASK_STATE_FAILED);
  EXPECT_EQ(states[2], TREEMASK_STATE_TERMINATED);
  EXPECT_TRUE(accepted[0]);
  EXPECT_FALSE(accepted[1]);
  EXPECT_TRUE(accepted[2]);
}

TEST(StateArrays, BadArgumentsAreNamed) {
  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 40, {1}, trie), TREEMASK_OK);  // nodes 0, 1, 2
  std::vector<int32_t> rows(4, 0x12345678);
  const std::vector<int32_t> untouched = rows;
  uint32_t states[2] = {0, 3};
  EXPECT_EQ(treemask_trie_fill_states(trie.p, states, 2, rows.data(), 2),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("states[1] = 3 is neither a node id (< n_nodes = 3)"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(rows, untouched);
  states[1] = 2;
  EXPECT_EQ(treemask_trie_fill_states(trie.p, states, 2, rows.data(), 1),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(last_error().find("bitmask_row_words 1 < 2"), std::string::npos);
  EXPECT_EQ(treemask_trie_fill_states(trie.p, states, 2, nullptr, 2),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_fill_states(nullptr, states, 2, rows.data(), 2),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_fill_states(trie.p, nullptr, 2, rows.data(), 2),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_fill_states(trie.p, nullptr, 0, nullptr, 2), TREEMASK_OK);

  const int32_t tokens[2] = {3, 3};
  uint32_t bad_states[2] = {0, 0xFFFFFFFDu};
  EXPECT_EQ(treemask_trie_advance_states(trie.p, bad_states, tokens, 2, 0, nullptr),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("states[1] = 4294967293"), std::string::npos);
  EXPECT_EQ(bad_states[0], 0u) << "nothing advances when a state is bad";
  EXPECT_EQ(treemask_trie_advance_states(trie.p, states, tokens, 2, 3, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown failure_policy 3"), std::string::npos);
  EXPECT_EQ(treemask_trie_advance_states(trie.p, states, nullptr, 2, 0, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_advance_states: tokens is NULL");
  uint32_t id;
  EXPECT_EQ(treemask_matcher_get_state(nullptr, &id), TREEMASK_ERR_INVALID_ARGUMENT);
}

}  // namespace
