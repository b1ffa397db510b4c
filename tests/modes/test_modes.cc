// Hand-written cases for the decoding modes through the C API: the edge
// cases the issue names (think end split across steps, restarting partial
// matches, budget 0, budget reached mid-match, stop while thinking; labels
// that are prefixes of others, separator conflicts; exclusions that empty a
// subtree; the length budget), the options ABI and every error message.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "modes/modes_util.h"

namespace {

using modes_util::accept;
using modes_util::accept_all;
using modes_util::ExclusionHandle;
using modes_util::fill;
using modes_util::last_error;
using modes_util::MatcherHandle;
using modes_util::TrieHandle;
using V = std::vector<int32_t>;
using L = std::vector<int64_t>;

treemask_mode_options defaults() {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  return o;
}

treemask_status create(treemask_trie *t, const treemask_mode_options &o) {
  treemask_matcher *m = nullptr;
  const treemask_status s = treemask_matcher_create(t, &o.matcher, &m);
  treemask_matcher_free(m);
  return s;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// ---- Options ABI ----

TEST(ModeOptions, TheExperimentalFieldsStartAfterTheStableStruct) {
  // The mode options extend the stable matcher options (treemask.h,
  // "Stability tiers"): the stable struct ends with pad_token (sizeof 32 on
  // LP64 with 4 bytes of padding), and an older or stable-only caller's
  // padding must never be read as a mode field. On LP64 the layout is the
  // one the fields had when they were appended to the stable struct (0.2).
  EXPECT_GE(offsetof(treemask_mode_options, label_separator), sizeof(treemask_matcher_options));
  EXPECT_GE(sizeof(treemask_matcher_options),
            offsetof(treemask_matcher_options, pad_token) + sizeof(int32_t));
  EXPECT_EQ(offsetof(treemask_mode_options, matcher), 0u);
  if (sizeof(void *) == 8) {
    EXPECT_EQ(offsetof(treemask_mode_options, label_separator), 32u);
  }
  const treemask_mode_options o = defaults();
  EXPECT_EQ(o.matcher.struct_size, sizeof(treemask_mode_options));
  EXPECT_EQ(o.matcher.failure_policy, TREEMASK_FAILURE_REJECT);
  EXPECT_EQ(o.matcher.pad_token, -1);
  EXPECT_EQ(o.label_separator, nullptr);
  EXPECT_EQ(o.max_labels, 0u);
  EXPECT_FALSE(o.leaves_only);
  EXPECT_EQ(o.think_begin_token, -1);
  EXPECT_EQ(o.max_thinking_tokens, -1);
  EXPECT_EQ(o.max_new_tokens, -1);
  EXPECT_EQ(o.n_override_stop_tokens, 0u);
  treemask_matcher_options stable;
  treemask_matcher_options_init(&stable);
  EXPECT_EQ(stable.struct_size, sizeof(treemask_matcher_options));
  treemask_budget_fill_options fill;
  treemask_budget_fill_options_init(&fill);
  EXPECT_EQ(fill.fill.struct_size, sizeof(treemask_budget_fill_options));
  EXPECT_GE(offsetof(treemask_budget_fill_options, remaining_tokens),
            sizeof(treemask_fill_options));
}

TEST(ModeOptions, AStableOrOlderCallersStructGetsDefaultModes) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 8, {0}, t), TREEMASK_OK);
  // A stable-tier caller passes a treemask_matcher_options; whatever lies
  // after it (garbage here) is never read as a mode field.
  struct {
    treemask_mode_options o;
  } old;
  old.o = defaults();
  std::memset(reinterpret_cast<char *>(&old.o) + offsetof(treemask_mode_options, label_separator),
              0xAB, sizeof(old.o) - offsetof(treemask_mode_options, label_separator));
  treemask_matcher_options_init(&old.o.matcher);
  EXPECT_EQ(old.o.matcher.struct_size, offsetof(treemask_mode_options, label_separator));
  treemask_matcher *m = nullptr;
  ASSERT_EQ(treemask_matcher_create(t.p, &old.o.matcher, &m), TREEMASK_OK) << last_error();
  MatcherHandle hold(m);
  EXPECT_FALSE(treemask_matcher_is_thinking(m));
  EXPECT_EQ(treemask_matcher_remaining_tokens(m), -1);
  EXPECT_EQ(fill(m, 8), (V{1}));
}

// ---- Finished sequences ----

TEST(FinishedSequences, ATerminatedRowAllowsOnlyTheStopTokens) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1}}, 40, {0, 33}, t), TREEMASK_OK);
  treemask_mode_options o = defaults();
  const V override_stops = {34, 3};
  o.override_stop_tokens = override_stops.data();
  o.n_override_stop_tokens = override_stops.size();
  MatcherHandle plain = modes_util::make_matcher(t.p, defaults());
  MatcherHandle custom = modes_util::make_matcher(t.p, o);
  EXPECT_EQ(modes_util::stop_tokens(custom.p), (V{3, 34}));
  EXPECT_EQ(modes_util::stop_tokens(plain.p), (V{0, 33}));
  accept_all(plain.p, {1, 33});
  accept_all(custom.p, {1});
  EXPECT_EQ(fill(custom.p, 40), (V{2, 3, 34}));
  EXPECT_FALSE(accept(custom.p, 0));  // the trie's stop token is not one of this matcher's
  ASSERT_TRUE(accept(custom.p, 34));
  bool need_apply = false;
  EXPECT_EQ(fill(plain.p, 40, &need_apply), (V{0, 33}));
  EXPECT_TRUE(need_apply);
  EXPECT_EQ(fill(custom.p, 40), (V{3, 34}));
  EXPECT_TRUE(accept(custom.p, 3));  // more stop tokens change nothing
  EXPECT_EQ(testutil::label_ids(custom.p), (L{1}));
}

TEST(FinishedSequences, OverrideStopTokensInsideAPathIsACreationError) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{5, 6, 7}}, 10, {0}, t), TREEMASK_OK);
  treemask_mode_options o = defaults();
  const V stops = {9, 6};
  o.override_stop_tokens = stops.data();
  o.n_override_stop_tokens = stops.size();
  EXPECT_EQ(create(t.p, o), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: override_stop_tokens[1] = 6 occurs inside a path (it ends "
            "the path [5 6]); a stop token may only end a sequence");
  const V out_of_range = {10};
  o.override_stop_tokens = out_of_range.data();
  o.n_override_stop_tokens = 1;
  EXPECT_EQ(create(t.p, o), TREEMASK_ERR_OUT_OF_RANGE);
  o.override_stop_tokens = nullptr;
  EXPECT_EQ(create(t.p, o), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: opts->override_stop_tokens is NULL but its count is 1");
}

// ---- Multi-label ----

struct MultiLabel {
  TrieHandle t;
  // Labels: 0 = [10], 1 = [10 11] (label 0 is a prefix of it), 2 = [12 13].
  void build() {
    ASSERT_EQ(testutil::make_trie({{10}, {10, 11}, {12, 13}}, 32, {0}, t), TREEMASK_OK);
  }
  const V separator = {20, 21};
  treemask_mode_options options(size_t max_labels = 0) const {
    treemask_mode_options o = defaults();
    o.label_separator = separator.data();
    o.n_label_separator = separator.size();
    o.max_labels = max_labels;
    return o;
  }
};

TEST(MultiLabel, LabelsThatArePrefixesOfOthersAreEachProducedOnce) {
  MultiLabel f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options());
  EXPECT_EQ(fill(m.p, 32), (V{10, 12}));
  ASSERT_TRUE(accept(m.p, 10));
  EXPECT_EQ(fill(m.p, 32), (V{0, 11, 20}));  // end, continue to [10 11], or separate
  ASSERT_TRUE(accept(m.p, 20));
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{0}));
  EXPECT_EQ(fill(m.p, 32), (V{21}));  // the rest of the separator is forced
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  ASSERT_TRUE(accept(m.p, 21));
  EXPECT_EQ(fill(m.p, 32), (V{10, 12}));  // [10 11] is still available
  ASSERT_TRUE(accept(m.p, 10));
  EXPECT_EQ(fill(m.p, 32), (V{11}));  // [10] was produced: no stop, no separator
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{11, 20, 21, 12, 13}));
  ASSERT_TRUE(accept(m.p, 11));
  EXPECT_EQ(fill(m.p, 32), (V{0, 20}));
  ASSERT_TRUE(accept(m.p, 0));
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{0, 1}));
  EXPECT_EQ(testutil::label_ids(m.p), (L{1}));
}

TEST(MultiLabel, ForcedTokensAtALeafReturnTheSeparatorAndNoDeadEndRemains) {
  MultiLabel f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options());
  accept_all(m.p, {12, 13});
  EXPECT_EQ(fill(m.p, 32), (V{0, 20}));
  EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
  // The separator, then the only label left that starts the root's chain.
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{20, 21, 10}));
  accept_all(m.p, {20, 21, 10, 20, 21});
  EXPECT_EQ(fill(m.p, 32), (V{10}));
  // The last label: after it only stop tokens remain.
  accept_all(m.p, {10, 11});
  EXPECT_EQ(fill(m.p, 32), (V{0}));
  EXPECT_EQ(testutil::forced_tokens(m.p), V{});
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{2, 0}));
  // Rollback across label boundaries makes labels available again.
  ASSERT_EQ(treemask_matcher_rollback(m.p, 5), TREEMASK_OK);
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{2}));
  EXPECT_EQ(fill(m.p, 32), (V{10}));
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);  // back inside the separator
  EXPECT_EQ(fill(m.p, 32), (V{21}));
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{2}));
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);  // before the separator
  EXPECT_EQ(modes_util::produced_labels(m.p), L{});
  EXPECT_EQ(fill(m.p, 32), (V{0, 20}));
}

TEST(MultiLabel, MaxLabelsStopsTheSeparator) {
  MultiLabel f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options(2));
  accept_all(m.p, {12, 13, 20, 21, 10});
  EXPECT_EQ(fill(m.p, 32), (V{0, 11}));
  EXPECT_FALSE(accept(m.p, 20));  // the separator is not allowed here
  ASSERT_TRUE(accept(m.p, 0));
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{2, 0}));
}

TEST(MultiLabel, ProducingALabelBansEveryPathCarryingItsId) {
  TrieHandle t;
  // Synonyms: [1 2] and [3] both carry label 7; [4] carries 8.
  const L labels = {7, 7, 8};
  ASSERT_EQ(testutil::make_trie({{1, 2}, {3}, {4}}, 16, {0}, t, &labels), TREEMASK_OK);
  const V sep = {9};
  treemask_mode_options o = defaults();
  o.label_separator = sep.data();
  o.n_label_separator = 1;
  MatcherHandle m = modes_util::make_matcher(t.p, o);
  accept_all(m.p, {3, 9});
  EXPECT_EQ(fill(m.p, 16), (V{4}));
  EXPECT_EQ(modes_util::produced_labels(m.p), (L{7}));
  // A clone shares the used labels until one of them changes them.
  treemask_matcher *c = nullptr;
  ASSERT_EQ(treemask_matcher_clone(m.p, &c), TREEMASK_OK);
  MatcherHandle clone(c);
  ASSERT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 16), (V{1, 3, 4}));
  EXPECT_EQ(fill(clone.p, 16), (V{4}));
  accept_all(clone.p, {4, 0});
  EXPECT_EQ(modes_util::produced_labels(clone.p), (L{7, 8}));
}

TEST(MultiLabel, ASeparatorThatCouldContinueALabelIsACreationError) {
  MultiLabel f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  const V conflict = {11, 21};
  treemask_mode_options o = f.options();
  o.label_separator = conflict.data();
  EXPECT_EQ(create(f.t.p, o), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: label_separator[0] = 11 is also a child token of a terminal "
            "node (the label [10] continues with it), so after that label it would be ambiguous");
  const V stop_inside = {20, 0};
  o.label_separator = stop_inside.data();
  EXPECT_EQ(create(f.t.p, o), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: label_separator[1] = 0 is a stop token; a stop token may "
            "only end a sequence");
  // Later separator tokens may be anything but stop tokens: 13 is a label token.
  const V fine = {20, 13};
  o.label_separator = fine.data();
  EXPECT_EQ(create(f.t.p, o), TREEMASK_OK) << last_error();
  treemask_mode_options no_sep = defaults();
  no_sep.max_labels = 3;
  EXPECT_EQ(create(f.t.p, no_sep), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: max_labels = 3 needs a label_separator (multi-label mode)");
}

TEST(Hierarchy, LeavesOnlyEndsOnlyAtLeavesOfASharedTrie) {
  // "A", "A > B", "A > B > C", "A > D" as tokens: A=1, " >"=2, B=3, C=4, D=5.
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1}, {1, 2, 3}, {1, 2, 3, 2, 4}, {1, 2, 5}}, 8, {0}, t),
            TREEMASK_OK);
  treemask_mode_options leaves = defaults();
  leaves.leaves_only = true;
  MatcherHandle any_level = modes_util::make_matcher(t.p, defaults());
  MatcherHandle leaf = modes_util::make_matcher(t.p, leaves);
  accept_all(any_level.p, {1});
  accept_all(leaf.p, {1});
  EXPECT_EQ(fill(any_level.p, 8), (V{0, 2}));
  EXPECT_EQ(fill(leaf.p, 8), (V{2}));
  accept_all(leaf.p, {2, 3});
  EXPECT_EQ(fill(leaf.p, 8), (V{2}));
  EXPECT_FALSE(accept(leaf.p, 0));
  EXPECT_EQ(testutil::forced_tokens(leaf.p), (V{2, 4}));
  accept_all(leaf.p, {2, 4, 0});
  EXPECT_EQ(modes_util::produced_labels(leaf.p), (L{2}));
}

// ---- Think mode ----

struct Think {
  TrieHandle t;
  // Labels [1 2] and [3]; vocab 16; stop 0; "</think>" = 7 8, "<think>" = 6.
  void build() { ASSERT_EQ(testutil::make_trie({{1, 2}, {3}}, 16, {0}, t), TREEMASK_OK); }
  V end = {7, 8};
  treemask_mode_options options(int64_t max_thinking = -1, bool start_in = true,
                                int32_t begin = -1) const {
    treemask_mode_options o = defaults();
    o.think_end_tokens = end.data();
    o.n_think_end_tokens = end.size();
    o.max_thinking_tokens = max_thinking;
    o.start_in_thinking = start_in;
    o.think_begin_token = begin;
    return o;
  }
};

V all_but(int32_t vocab, V excluded) {
  V out;
  for (int32_t t = 0; t < vocab; ++t) {
    if (std::find(excluded.begin(), excluded.end(), t) == excluded.end()) out.push_back(t);
  }
  return out;
}

TEST(Think, EndSequenceSplitAcrossStepsStartsTheTrie) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options());
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
  bool need_apply = true;
  EXPECT_EQ(fill(m.p, 16, &need_apply), all_but(16, {}));
  EXPECT_FALSE(need_apply);  // nothing is disallowed while thinking
  EXPECT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), 16u);
  EXPECT_EQ(testutil::forced_tokens(m.p), V{});
  accept_all(m.p, {5, 7});
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
  EXPECT_EQ(fill(m.p, 16), all_but(16, {}));  // a partial match forces nothing
  ASSERT_TRUE(accept(m.p, 8));
  EXPECT_FALSE(treemask_matcher_is_thinking(m.p));
  EXPECT_EQ(fill(m.p, 16), (V{1, 3}));
  // Rollback crosses the boundary both ways.
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
  ASSERT_TRUE(accept(m.p, 8));
  accept_all(m.p, {1});
  ASSERT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_OK);
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
}

TEST(Think, PartialMatchesThatBreakAndRestartAreFollowedExactly) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  f.end = {7, 7, 8};
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options());
  // "7 7 7 8": the third 7 breaks "7 7 |8" but is itself "7 7" again.
  accept_all(m.p, {7, 7, 7});
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
  ASSERT_TRUE(accept(m.p, 8));
  EXPECT_FALSE(treemask_matcher_is_thinking(m.p));
  MatcherHandle n = modes_util::make_matcher(f.t.p, f.options());
  accept_all(n.p, {7, 8, 7, 5, 7, 7, 5, 8});  // no "7 7 8" anywhere
  EXPECT_TRUE(treemask_matcher_is_thinking(n.p));
}

TEST(Think, BudgetZeroForcesTheEndAtOnce) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options(0));
  EXPECT_EQ(fill(m.p, 16), (V{7}));
  EXPECT_EQ(testutil::next_tokens(m.p), (V{7}));
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{7, 8}));  // then the root has two labels
  EXPECT_FALSE(accept(m.p, 0));  // not even a stop token: only think_end_tokens[0] = 7
  size_t n = 0;
  int32_t chain[4] = {};
  ASSERT_EQ(treemask_matcher_accept_forced_tokens(m.p, chain, 4, &n), TREEMASK_OK);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(chain[1], 8);
  EXPECT_EQ(fill(m.p, 16), (V{1, 3}));
}

TEST(Think, BudgetReachedMidMatchForcesOnlyTheMissingSuffix) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  f.end = {7, 8, 9};
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options(3));
  accept_all(m.p, {4, 7, 8});  // budget reached with "7 8" matched
  EXPECT_EQ(fill(m.p, 16), (V{9}));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{9}));
  ASSERT_TRUE(accept(m.p, 9));
  EXPECT_EQ(fill(m.p, 16), (V{1, 3}));
}

// Issue 14 item 16: RTP-LLM forces the rest of the end sequence once a
// prefix of it has been emitted naturally (its tests
// testThinkingForcesRemainingThinkEndAfterNaturalPrefix and the DSv4
// trailing-newline cases); think_force_end_after_prefix does the same.
TEST(Think, ForceEndAfterANaturalPrefix) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  f.end = {7, 8, 9};
  treemask_mode_options o = f.options();
  o.think_force_end_after_prefix = true;
  MatcherHandle m = modes_util::make_matcher(f.t.p, o);
  EXPECT_EQ(fill(m.p, 16), all_but(16, {}));  // no prefix yet: free
  accept_all(m.p, {5, 7});                    // "7" starts the end sequence
  EXPECT_EQ(fill(m.p, 16), (V{8}));
  EXPECT_EQ(testutil::next_tokens(m.p), (V{8}));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{8, 9}));
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  EXPECT_FALSE(accept(m.p, 5));  // anything else is refused
  ASSERT_TRUE(accept(m.p, 8));
  EXPECT_EQ(fill(m.p, 16), (V{9}));
  ASSERT_TRUE(accept(m.p, 9));
  EXPECT_FALSE(treemask_matcher_is_thinking(m.p));
  EXPECT_EQ(fill(m.p, 16), (V{1, 3}));
  // Rollback to before the prefix frees thinking again.
  ASSERT_EQ(treemask_matcher_rollback(m.p, 3), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 16), all_but(16, {}));
  // Off (the default), the same prefix forces nothing.
  MatcherHandle plain = modes_util::make_matcher(f.t.p, f.options());
  accept_all(plain.p, {5, 7});
  EXPECT_EQ(fill(plain.p, 16), all_but(16, {}));
  // The option needs think mode.
  treemask_mode_options bad = defaults();
  bad.think_force_end_after_prefix = true;
  treemask_matcher *raw = nullptr;
  EXPECT_EQ(treemask_matcher_create(f.t.p, &bad.matcher, &raw), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("think_force_end_after_prefix need think_end_tokens"),
            std::string::npos)
      << last_error();
}

TEST(Think, AStopTokenWhileThinkingEndsTheSequenceWithoutALabel) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options());
  accept_all(m.p, {5});
  EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
  ASSERT_TRUE(accept(m.p, 0));
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  EXPECT_EQ(testutil::label_ids(m.p), L{});
  EXPECT_EQ(modes_util::produced_labels(m.p), L{});
  EXPECT_EQ(fill(m.p, 16), (V{0}));
}

TEST(Think, TheBeginTokenOpensThinkingOnlyAsTheFirstToken) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  MatcherHandle m = modes_util::make_matcher(f.t.p, f.options(-1, false, 6));
  EXPECT_FALSE(treemask_matcher_is_thinking(m.p));
  EXPECT_EQ(fill(m.p, 16), (V{1, 3, 6}));
  ASSERT_TRUE(accept(m.p, 6));
  EXPECT_TRUE(treemask_matcher_is_thinking(m.p));
  bool need_apply = false;
  EXPECT_EQ(fill(m.p, 16, &need_apply), all_but(16, {6}));
  EXPECT_TRUE(need_apply);
  EXPECT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), 15u);
  EXPECT_FALSE(accept(m.p, 6));  // think_begin_token is not allowed while thinking
  accept_all(m.p, {7, 8});
  EXPECT_EQ(fill(m.p, 16), (V{1, 3}));  // not again after thinking
  // Without the begin token the trie starts at once and 6 never comes back.
  MatcherHandle direct = modes_util::make_matcher(f.t.p, f.options(-1, false, 6));
  accept_all(direct.p, {1});
  EXPECT_EQ(fill(direct.p, 16), (V{2}));
}

TEST(Think, OptionErrorsNameTheProblem) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  EXPECT_EQ(create(f.t.p, f.options(-1, false, 1)), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: think_begin_token = 1 is also a child token of the root, so "
            "the first token would be ambiguous");
  EXPECT_EQ(create(f.t.p, f.options(-1, false, -1)), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "thinking can never start")) << last_error();
  EXPECT_EQ(create(f.t.p, f.options(-1, true, 8)), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: think_begin_token = 8 occurs in think_end_tokens at position "
            "1; it is not allowed while thinking, so thinking could never end");
  EXPECT_EQ(create(f.t.p, f.options(-2)), TREEMASK_ERR_INVALID_ARGUMENT);
  f.end = {7, 0};
  EXPECT_EQ(create(f.t.p, f.options()), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_create: think_end_tokens[1] = 0 is a stop token; a stop token may "
            "only end a sequence");
  f.end = {16};
  EXPECT_EQ(create(f.t.p, f.options()), TREEMASK_ERR_OUT_OF_RANGE);
  treemask_mode_options no_end = defaults();
  no_end.max_thinking_tokens = 5;
  EXPECT_EQ(create(f.t.p, no_end), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "need think_end_tokens")) << last_error();
}

// ---- Length budget ----

TEST(LengthBudget, OnlyBranchesThatFitAreOffered) {
  TrieHandle t;
  // [1] is one token; [2 3 4] three; [2 5] two.
  ASSERT_EQ(testutil::make_trie({{1}, {2, 3, 4}, {2, 5}}, 8, {0}, t), TREEMASK_OK);
  treemask_mode_options o = defaults();
  o.max_new_tokens = 2;
  MatcherHandle m = modes_util::make_matcher(t.p, o);
  EXPECT_EQ(treemask_matcher_remaining_tokens(m.p), 2);
  EXPECT_EQ(fill(m.p, 8), (V{1, 2}));
  ASSERT_TRUE(accept(m.p, 2));
  EXPECT_EQ(fill(m.p, 8), (V{5}));  // [2 3 4] no longer fits
  EXPECT_FALSE(accept(m.p, 3));     // [2 3 4] cannot end within the length budget
  // A budget for one fill only; -1 is the matcher's own.
  std::vector<int32_t> row(1);
  treemask_budget_fill_options fo;
  treemask_budget_fill_options_init(&fo);
  EXPECT_EQ(fo.remaining_tokens, -1);
  fo.remaining_tokens = 5;
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), 1, &fo.fill, nullptr),
            TREEMASK_OK);
  EXPECT_EQ(testutil::decode_row(row.data(), 1), (V{3, 5}));
  fo.remaining_tokens = -1;
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), 1, &fo.fill, nullptr),
            TREEMASK_OK);
  EXPECT_EQ(testutil::decode_row(row.data(), 1), (V{5}));
  fo.remaining_tokens = -2;
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), 1, &fo.fill, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "opts->remaining_tokens is -2")) << last_error();
  // The engine lowers the budget below what any branch needs: the shortest
  // branch is still offered, never nothing.
  ASSERT_EQ(treemask_matcher_set_remaining_tokens(m.p, 0), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{5}));
  ASSERT_EQ(treemask_matcher_set_remaining_tokens(m.p, -1), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{3, 5}));
  EXPECT_EQ(treemask_matcher_set_remaining_tokens(m.p, -2), TREEMASK_ERR_INVALID_ARGUMENT);
  // Rollback gives tokens back; reset restores max_new_tokens.
  ASSERT_EQ(treemask_matcher_set_remaining_tokens(m.p, 1), TREEMASK_OK);
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);
  EXPECT_EQ(treemask_matcher_remaining_tokens(m.p), 2);
  accept_all(m.p, {1});
  treemask_matcher_reset(m.p);
  EXPECT_EQ(treemask_matcher_remaining_tokens(m.p), 2);
}

TEST(LengthBudget, ThinkingEndsEarlyEnoughForALabel) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  treemask_mode_options o = f.options();
  o.max_new_tokens = 5;  // end (2) + shortest label [3] (1) + 2 free thinking tokens
  MatcherHandle m = modes_util::make_matcher(f.t.p, o);
  accept_all(m.p, {4});
  EXPECT_EQ(fill(m.p, 16), all_but(16, {}));
  accept_all(m.p, {5});
  EXPECT_EQ(fill(m.p, 16), (V{7}));
  accept_all(m.p, {7, 8});
  EXPECT_EQ(fill(m.p, 16), (V{3}));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{3}));
}

// ---- Exclusions ----

TEST(Exclusions, BanningEveryLabelUnderASubtreeHidesItsPrefix) {
  TrieHandle t;
  // Labels 0 = [1 2], 1 = [1 3], 2 = [4], 3 = [1 3 5].
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}, {4}, {1, 3, 5}}, 8, {0}, t), TREEMASK_OK);
  const L shared_ids = {0, 1, 42};
  treemask_exclusion_set *s = nullptr;
  ASSERT_EQ(treemask_exclusion_set_create(t.p, shared_ids.data(), shared_ids.size(), &s),
            TREEMASK_OK);
  ExclusionHandle set(s);
  EXPECT_EQ(treemask_exclusion_set_n_terminals(s), 2u);  // 42 is carried by no path
  MatcherHandle m = modes_util::make_matcher(t.p, defaults());
  ASSERT_EQ(treemask_matcher_set_label_filter(m.p, s, nullptr, 0, nullptr, 0), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{1, 4}));  // [1 3 5] is still there
  const L more = {3};
  ASSERT_EQ(treemask_matcher_set_label_filter(m.p, s, more.data(), 1, nullptr, 0), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{4}));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{4}));
  // An allow-subset, on top of the shared set.
  const L subset = {1, 3};
  ASSERT_EQ(treemask_matcher_set_label_filter(m.p, s, nullptr, 0, subset.data(), 2), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{1}));
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{1, 3, 5}));
  // Removing the filter.
  ASSERT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, nullptr, 0, nullptr, 0), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{1, 4}));
}

TEST(Exclusions, ErrorsAndTheFreshStateRule) {
  TrieHandle t, other;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {4}}, 8, {0}, t), TREEMASK_OK);
  ASSERT_EQ(testutil::make_trie({{1}}, 8, {0}, other), TREEMASK_OK);
  MatcherHandle m = modes_util::make_matcher(t.p, defaults());
  const L everything = {0, 1};
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, everything.data(), 2, nullptr, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_matcher_set_label_filter: the label filter leaves no label available: every "
            "end is banned");
  const int64_t empty_subset = 0;  // non-NULL with n_allowed = 0: nothing is allowed
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, nullptr, 0, &empty_subset, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
  treemask_exclusion_set *s = nullptr;
  ASSERT_EQ(treemask_exclusion_set_create(other.p, nullptr, 0, &s), TREEMASK_OK);
  ExclusionHandle foreign(s);
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, s, nullptr, 0, nullptr, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "another trie")) << last_error();
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, nullptr, 3, nullptr, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_matcher_set_label_filter: banned is NULL but n_banned is 3");
  EXPECT_EQ(treemask_exclusion_set_create(t.p, nullptr, 2, &s), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_exclusion_set_create(nullptr, nullptr, 0, &s), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fill(m.p, 8), (V{1, 4}));  // failed calls changed nothing
  accept_all(m.p, {1});
  const L one = {0};
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, one.data(), 1, nullptr, 0),
            TREEMASK_ERR_INVALID_STATE);
  treemask_matcher_reset(m.p);
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, one.data(), 1, nullptr, 0),
            TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{4}));
  EXPECT_EQ(treemask_exclusion_set_retain(nullptr), nullptr);
  treemask_exclusion_set_free(nullptr);
  EXPECT_EQ(treemask_exclusion_set_n_terminals(nullptr), 0u);
}

TEST(Exclusions, OneSetServesManyMatchersOnManyThreads) {
  TrieHandle t;
  std::vector<std::vector<int32_t>> paths;
  for (int32_t a = 1; a <= 40; ++a) {
    for (int32_t b = 1; b <= 40; ++b) paths.push_back({a, 100 + b});
  }
  ASSERT_EQ(testutil::make_trie(paths, 200, {0}, t), TREEMASK_OK);
  L banned;  // every label under first token 7, and half of those under 8
  for (int64_t b = 0; b < 40; ++b) banned.push_back(6 * 40 + b);
  for (int64_t b = 0; b < 40; b += 2) banned.push_back(7 * 40 + b);
  treemask_exclusion_set *s = nullptr;
  ASSERT_EQ(treemask_exclusion_set_create(t.p, banned.data(), banned.size(), &s), TREEMASK_OK);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < 50; ++i) {
        treemask_matcher *m = nullptr;
        if (treemask_matcher_create(t.p, nullptr, &m) != TREEMASK_OK ||
            treemask_matcher_set_label_filter(m, s, nullptr, 0, nullptr, 0) != TREEMASK_OK) {
          ++failures[th];
          treemask_matcher_free(m);
          continue;
        }
        const V root = testutil::next_tokens(m);
        failures[th] += root.size() != 39 || std::count(root.begin(), root.end(), 7) != 0;
        bool ok = false;
        EXPECT_EQ(treemask_matcher_accept_token(m, 8, &ok), TREEMASK_OK);
        failures[th] += !ok || testutil::next_tokens(m).size() != 20;
        treemask_matcher_free(m);
      }
    });
  }
  for (auto &th : threads) th.join();
  treemask_exclusion_set_free(s);  // matchers are gone; the set goes too
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

// ---- Speculative decoding ----

TEST(Speculative, AcceptTokensStopsAtTheFirstRejectionWithoutThePolicy) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2, 3}, {1, 4}}, 8, {0}, t), TREEMASK_OK);
  treemask_mode_options o = defaults();
  o.matcher.failure_policy = TREEMASK_FAILURE_FAIL_CLOSED;
  MatcherHandle m = modes_util::make_matcher(t.p, o);
  const V draft = {1, 2, 5, 3};
  size_t n = 99;
  ASSERT_EQ(treemask_matcher_accept_tokens(m.p, draft.data(), draft.size(), &n), TREEMASK_OK);
  EXPECT_EQ(n, 2u);  // token 5 rejected, and that is no error
  EXPECT_FALSE(contains(last_error(), "token 5")) << last_error();
  EXPECT_EQ(fill(m.p, 8), (V{3}));  // not closed: a draft miss is not a failure
  const V finish = {3, 0, 0};
  ASSERT_EQ(treemask_matcher_accept_tokens(m.p, finish.data(), finish.size(), &n), TREEMASK_OK);
  EXPECT_EQ(n, 2u);  // stops after the terminating token
  ASSERT_EQ(treemask_matcher_rollback(m.p, 4), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{1}));
  EXPECT_EQ(treemask_matcher_accept_tokens(m.p, nullptr, 1, &n), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_matcher_accept_tokens(m.p, draft.data(), 1, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
}

TEST(Speculative, DraftTreeRowsAndErrors) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2, 3}, {1, 4}}, 40, {0}, t), TREEMASK_OK);
  MatcherHandle m = modes_util::make_matcher(t.p, defaults());
  // Root -> 1 -> {2 -> 3, 5 (invalid) -> 3 (unreachable), 4}.
  const V tokens = {1, 2, 3, 5, 3, 4};
  const std::vector<int32_t> parents = {-1, 0, 1, 0, 3, 0};
  const size_t w = 2;
  std::vector<int32_t> rows((tokens.size() + 1) * w, -1);
  size_t valid = 0;
  ASSERT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, tokens.data(), parents.data(), tokens.size(),
                                                 rows.data(), rows.size(), w, &valid),
            TREEMASK_OK)
      << last_error();
  const std::vector<V> want = {{1}, {2, 4}, {3}, {0}, {}, {}, {0}};
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(testutil::decode_row(rows.data() + r * w, w), want[r]) << "row " << r;
  }
  EXPECT_EQ(valid, 5u);
  EXPECT_EQ(fill(m.p, 40), (V{1}));  // the matcher did not move
  const std::vector<int32_t> bad = {-1, 1, 0, 0, 0, 0};
  EXPECT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, tokens.data(), bad.data(), tokens.size(),
                                                 rows.data(), rows.size(), w, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      last_error(),
      "treemask_matcher_fill_draft_bitmasks: parents[1] = 1; a draft node's parent must be -1 "
      "(the current state) or an earlier node");
  EXPECT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, tokens.data(), nullptr, tokens.size(),
                                                 rows.data(), rows.size() - 1, w, nullptr),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, tokens.data(), nullptr, 1, rows.data(),
                                                 rows.size(), 1, nullptr),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
}

// ---- xgrammar parity: getters, debug string, forced chain ----

TEST(Parity, GettersAndDebugString) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2, 3}, {1, 2, 4}}, 8, {0}, t), TREEMASK_OK);
  treemask_mode_options o = defaults();
  o.matcher.max_rollback_tokens = 7;
  MatcherHandle m = modes_util::make_matcher(t.p, o);
  EXPECT_EQ(treemask_matcher_max_rollback_tokens(m.p), 7u);
  EXPECT_EQ(treemask_matcher_max_rollback_tokens(nullptr), 0u);
  EXPECT_EQ(modes_util::stop_tokens(m.p), (V{0}));
  int32_t chain[1] = {-1};
  size_t n = 0;
  ASSERT_EQ(treemask_matcher_accept_forced_tokens(m.p, chain, 1, &n), TREEMASK_OK);
  EXPECT_EQ(n, 2u);  // both accepted, only the first written
  EXPECT_EQ(chain[0], 1);
  EXPECT_EQ(modes_util::debug_string(m.p),
            "phase=label node=2 path=[1 2] allowed=2 can_terminate=false accepted=2 "
            "rollback_depth=2");
  char small[6];
  const size_t full = treemask_matcher_debug_string(m.p, small, sizeof small);
  EXPECT_EQ(full, modes_util::debug_string(m.p).size());
  EXPECT_STREQ(small, "phase");
  EXPECT_EQ(treemask_matcher_debug_string(nullptr, small, sizeof small), 0u);
  EXPECT_STREQ(small, "");
  EXPECT_EQ(treemask_matcher_accept_forced_tokens(m.p, nullptr, 0, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
}

TEST(Parity, DebugStringShowsModeState) {
  Think f;
  ASSERT_NO_FATAL_FAILURE(f.build());
  treemask_mode_options o = f.options(5);
  const V sep = {9};
  o.label_separator = sep.data();
  o.n_label_separator = 1;
  o.max_new_tokens = 20;
  MatcherHandle m = modes_util::make_matcher(f.t.p, o);
  accept_all(m.p, {4, 7});
  EXPECT_EQ(modes_util::debug_string(m.p),
            "phase=thinking think_tokens=2 end_matched=1/2 allowed=16 can_terminate=true "
            "accepted=2 labels=[] remaining_tokens=18 rollback_depth=2");
  accept_all(m.p, {8, 3, 9});
  EXPECT_EQ(modes_util::debug_string(m.p),
            "phase=label node=0 path=[] allowed=1 can_terminate=false accepted=5 labels=[1] "
            "remaining_tokens=15 rollback_depth=5");
}

}  // namespace
