// The batch with matchers in decoding modes: a batch drives matchers only
// through their own fill / next_tokens / accept, so every row it writes (full
// or incremental, including rows that switch between a tiny allowed set and
// "everything but one token" while thinking) must equal the row the same
// matcher fills on its own. And the state-array form must refuse matchers
// whose behaviour a bare node id cannot reproduce.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

constexpr int32_t kVocab = 200;
constexpr int32_t kStop = 1;
constexpr int32_t kSeparator = 5;
const int32_t kThinkEnd[] = {7, 8};

struct Batch {
  treemask_batch *p = nullptr;
  ~Batch() { treemask_batch_free(p); }
};

MatcherHandle make(treemask_trie *trie, int kind) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  switch (kind) {
    case 0:  // multi-label
      o.label_separator = &kSeparator;
      o.n_label_separator = 1;
      o.max_labels = 3;
      break;
    case 1:  // think budget, starting inside thinking
      o.think_end_tokens = kThinkEnd;
      o.n_think_end_tokens = 2;
      o.start_in_thinking = true;
      o.max_thinking_tokens = 4;
      break;
    case 2:  // length budget
      o.max_new_tokens = 3;
      break;
    case 3:  // leaves only
      o.leaves_only = true;
      break;
    default:  // plain
      break;
  }
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(trie, &o.matcher, &m), TREEMASK_OK) << treemask_last_error();
  if (kind == 5) {  // a label filter on a plain matcher
    const int64_t banned[] = {0};
    EXPECT_EQ(treemask_matcher_set_label_filter(m, nullptr, banned, 1, nullptr, 0), TREEMASK_OK)
        << treemask_last_error();
  }
  return MatcherHandle(m);
}

TEST(BatchModes, RowsEqualEachMatchersOwnFill) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < testutil::scaled(40); ++round) {
    std::vector<std::vector<int32_t>> paths;
    const int n_paths = 4 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n_paths; ++i) {
      std::vector<int32_t> p(1 + rng() % 4);
      for (auto &t : p) t = 20 + static_cast<int32_t>(rng() % 6);
      paths.push_back(p);
    }
    paths[1] = {30};  // a label the filter leaves available whatever path 0 is
    TrieHandle trie;
    ASSERT_EQ(testutil::make_trie(paths, kVocab, {kStop}, trie), TREEMASK_OK)
        << treemask_last_error();
    constexpr int kKinds = 6;
    treemask_batch_options bo;
    treemask_batch_options_init(&bo);
    bo.n_slots = kKinds;
    bo.n_threads = round % 2;
    Batch batch;
    ASSERT_EQ(treemask_batch_create(&bo, &batch.p), TREEMASK_OK) << treemask_last_error();
    for (int k = 0; k < kKinds; ++k) {
      MatcherHandle m = make(trie.p, k);
      ASSERT_NE(m.p, nullptr);
      uint32_t state = 0;
      EXPECT_EQ(treemask_matcher_get_state(m.p, &state),
                k == 4 ? TREEMASK_OK : TREEMASK_ERR_INVALID_STATE)
          << "kind " << k;
      ASSERT_EQ(treemask_batch_set_matcher(batch.p, k, m.p), TREEMASK_OK) << treemask_last_error();
    }
    const size_t words = treemask_bitmask_words(kVocab);
    std::vector<int32_t> bound(kKinds * words, -1), own(words);
    ASSERT_EQ(treemask_batch_bind_bitmask(batch.p, bound.data(), words), TREEMASK_OK);
    for (int step = 0; step < 30; ++step) {
      const int32_t mode = rng() % 4 == 0 ? TREEMASK_FILL_FULL : TREEMASK_FILL_INCREMENTAL;
      bool need_apply[kKinds];
      ASSERT_EQ(treemask_batch_fill_bound(batch.p, nullptr, 0, mode, need_apply), TREEMASK_OK)
          << treemask_last_error();
      std::vector<int32_t> tokens(kKinds);
      for (int k = 0; k < kKinds; ++k) {
        treemask_matcher *m = treemask_batch_get_matcher(batch.p, k);
        bool own_need = false;
        ASSERT_EQ(
            treemask_matcher_fill_next_token_bitmask(m, own.data(), words, nullptr, &own_need),
            TREEMASK_OK);
        ASSERT_EQ(std::vector<int32_t>(bound.begin() + k * words, bound.begin() + (k + 1) * words),
                  own)
            << "round " << round << " step " << step << " kind " << k << " mode " << mode;
        EXPECT_EQ(need_apply[k], own_need);
        const std::vector<int32_t> allowed = testutil::next_tokens(m);
        tokens[k] = allowed.empty() ? kStop : allowed[rng() % allowed.size()];
      }
      bool accepted[kKinds];
      ASSERT_EQ(treemask_batch_accept_tokens(batch.p, tokens.data(), kKinds, accepted), TREEMASK_OK)
          << treemask_last_error();
      for (int k = 0; k < kKinds; ++k) {
        EXPECT_TRUE(accepted[k]) << "kind " << k << " token " << tokens[k];
        treemask_matcher *m = treemask_batch_get_matcher(batch.p, k);
        if (treemask_matcher_is_terminated(m) && rng() % 2) treemask_matcher_reset(m);
      }
    }
  }
}

}  // namespace
