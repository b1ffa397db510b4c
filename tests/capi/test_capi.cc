// Behaviour of the public C API: every core rule of treemask.h sections 1-5
// on small hand-made tries, bad arguments, and the pinned bit layout.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;
using V = std::vector<int32_t>;

std::string last_error() { return treemask_last_error(); }

MatcherHandle matcher(treemask_trie *t, const treemask_matcher_options *o = nullptr) {
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(t, o, &m), TREEMASK_OK) << last_error();
  return MatcherHandle(m);
}

bool accept(treemask_matcher *m, int32_t t) {
  bool ok = false;
  EXPECT_EQ(treemask_matcher_accept_token(m, t, &ok), TREEMASK_OK) << last_error();
  return ok;
}

V fill(treemask_matcher *m, int32_t vocab) {
  std::vector<int32_t> row(treemask_bitmask_words(vocab), -1);
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr, nullptr),
            TREEMASK_OK);
  return testutil::decode_row(row.data(), row.size());
}

TEST(Version, MatchesTheHeader) {
  EXPECT_EQ(treemask_version(), uint32_t{TREEMASK_VERSION_NUMBER});
  EXPECT_STREQ(treemask_version_string(), TREEMASK_VERSION_STRING);
  EXPECT_EQ(TREEMASK_VERSION_NUMBER,
            TREEMASK_VERSION_MAJOR * 10000 + TREEMASK_VERSION_MINOR * 100 + TREEMASK_VERSION_PATCH);
}

TEST(Status, StringsArePinned) {
  EXPECT_STREQ(treemask_status_string(TREEMASK_OK), "ok");
  EXPECT_STREQ(treemask_status_string(TREEMASK_ERR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(treemask_status_string(TREEMASK_ERR_INTERNAL), "internal error");
  EXPECT_STREQ(treemask_status_string(12345), "unknown status");
  EXPECT_STREQ(treemask_status_string(-1), "unknown status");
  // Pinned numeric values.
  EXPECT_EQ(TREEMASK_ERR_OUT_OF_RANGE, 2);
  EXPECT_EQ(TREEMASK_ERR_BUFFER_TOO_SMALL, 3);
  EXPECT_EQ(TREEMASK_ERR_INVALID_STATE, 4);
  EXPECT_EQ(TREEMASK_ERR_OUT_OF_MEMORY, 5);
  EXPECT_EQ(TREEMASK_ERR_PARSE, 6);
  EXPECT_EQ(TREEMASK_ERR_IO, 7);
  EXPECT_EQ(TREEMASK_ERR_CORRUPT_FILE, 8);
  EXPECT_EQ(TREEMASK_ERR_VERSION_MISMATCH, 9);
  EXPECT_EQ(TREEMASK_ERR_UNSUPPORTED, 10);
}

TEST(LastError, IsPerThreadAndNeverNull) {
  std::string other;
  std::thread([&] { other = treemask_last_error(); }).join();
  EXPECT_EQ(other, "");
  TrieHandle t;
  EXPECT_EQ(testutil::make_trie({{1}}, 0, {0}, t), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: vocab_size must be positive, got 0");
  std::thread([&] { other = treemask_last_error(); }).join();
  EXPECT_EQ(other, "");
}

TEST(BitmaskWords, IsCeilOfVocabOver32) {
  EXPECT_EQ(treemask_bitmask_words(0), 0u);
  EXPECT_EQ(treemask_bitmask_words(-5), 0u);
  EXPECT_EQ(treemask_bitmask_words(1), 1u);
  EXPECT_EQ(treemask_bitmask_words(32), 1u);
  EXPECT_EQ(treemask_bitmask_words(33), 2u);
  EXPECT_EQ(treemask_bitmask_words(151936), 4748u);
  EXPECT_EQ(treemask_bitmask_words(INT32_MAX), 67108864u);
}

// xgrammar's layout: token t is bit t % 32 of int32 word t / 32.
TEST(Layout, PinsXgrammarBitOrder) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1}, {31}, {32}, {63}, {64}, {69}}, 70, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  int32_t row[4] = {123, 456, 789, 1011};
  bool need_apply = false;
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 4, nullptr, &need_apply),
            TREEMASK_OK);
  // Word 0: tokens 1 and 31 -> bits 1 and 31.
  EXPECT_EQ(row[0], static_cast<int32_t>(0x80000002u));
  EXPECT_EQ(row[0], -2147483646);
  // Word 1: tokens 32 and 63 -> bits 0 and 31.
  EXPECT_EQ(row[1], -2147483647);
  // Word 2: tokens 64 and 69 -> bits 0 and 5; tail bits past 69 are 0.
  EXPECT_EQ(row[2], 33);
  // Extra words past ceil(70 / 32) are cleared.
  EXPECT_EQ(row[3], 0);
  EXPECT_TRUE(need_apply);
  // The root is not terminal: no stop token.
  ASSERT_TRUE(accept(m.p, 69));
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 3, nullptr, nullptr), TREEMASK_OK);
  EXPECT_EQ(row[0], 1);  // only stop token 0
  EXPECT_EQ(row[1], 0);
  EXPECT_EQ(row[2], 0);
}

TEST(Fill, NeedApplyIsFalseOnlyWhenEverythingIsAllowed) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{}, {1}, {2}}, 3, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  int32_t row[1];
  bool need_apply = true;
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 1, nullptr, &need_apply),
            TREEMASK_OK);
  EXPECT_EQ(row[0], 0b111);
  EXPECT_FALSE(need_apply);
  ASSERT_TRUE(accept(m.p, 1));
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 1, nullptr, &need_apply),
            TREEMASK_OK);
  EXPECT_EQ(row[0], 0b001);
  EXPECT_TRUE(need_apply);
}

TEST(Fill, ShortBufferIsAnErrorAndTouchesNothing) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{40}}, 70, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  int32_t row[3] = {7, 7, 7};
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 2, nullptr, nullptr),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(
      last_error(),
      "treemask_matcher_fill_next_token_bitmask: bitmask_row_words is 2, vocab_size 70 needs 3");
  EXPECT_EQ(row[0], 7);
  EXPECT_EQ(row[1], 7);
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, nullptr, 3, nullptr, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_matcher_fill_next_token_bitmask: bitmask is NULL");
}

TEST(Matcher, WalksATerminalNodeWithChildrenAndSeveralStopTokens) {
  // "ab" and "abc": node "ab" is terminal and has a child.
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{10, 11}, {10, 11, 12}}, 20, {2, 1}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  EXPECT_EQ(testutil::forced_tokens(m.p), (V{10, 11}));  // stops at the terminal node
  ASSERT_TRUE(accept(m.p, 10));
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  ASSERT_TRUE(accept(m.p, 11));
  EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(fill(m.p, 20), (V{1, 2, 12}));
  EXPECT_EQ(testutil::next_tokens(m.p), (V{1, 2, 12}));
  EXPECT_EQ(testutil::forced_tokens(m.p), V{});
  EXPECT_EQ(testutil::label_ids(m.p), (std::vector<int64_t>{0}));
  ASSERT_TRUE(accept(m.p, 1));  // either stop token terminates
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(testutil::label_ids(m.p), (std::vector<int64_t>{0}));  // readable after termination
  EXPECT_EQ(fill(m.p, 20), (V{1, 2}));
  EXPECT_TRUE(accept(m.p, 2));  // stop tokens after termination change nothing
  EXPECT_FALSE(accept(m.p, 12));
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  // Rollback undoes termination, then the 11.
  ASSERT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_OK);
  EXPECT_FALSE(treemask_matcher_is_terminated(m.p));
  EXPECT_EQ(fill(m.p, 20), (V{11}));
}

TEST(Matcher, RejectLeavesStateUnchanged) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 8, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  EXPECT_FALSE(accept(m.p, 4));
  EXPECT_FALSE(accept(m.p, 9));  // out of range [0, vocab_size=8)
  EXPECT_FALSE(accept(m.p, -1));
  EXPECT_FALSE(accept(m.p, 0));  // a stop token at a non-terminal node
  EXPECT_EQ(fill(m.p, 8), (V{3}));
  EXPECT_EQ(treemask_matcher_rollback_depth(m.p), 0u);
}

TEST(Matcher, FailClosedAllowsOnlyStopTokensThenTerminates) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 8, {0, 7}, t), TREEMASK_OK);
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = TREEMASK_FAILURE_FAIL_CLOSED;
  MatcherHandle m = matcher(t.p, &o);
  ASSERT_TRUE(accept(m.p, 3));
  EXPECT_FALSE(accept(m.p, 5));
  EXPECT_EQ(fill(m.p, 8), (V{0, 7}));
  EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_ERR_INVALID_STATE);
  EXPECT_FALSE(accept(m.p, 4));  // the old child is gone too
  EXPECT_TRUE(accept(m.p, 7));
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  EXPECT_EQ(testutil::label_ids(m.p), std::vector<int64_t>{});
  treemask_matcher_reset(m.p);
  EXPECT_EQ(fill(m.p, 8), (V{3}));
}

// treemask_last_error() is set only by a failing call: successful calls and
// rejected tokens (matcher, draft and batch accepts) leave it as it was.
TEST(LastError, SetOnlyByFailuresNeverByRejections) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 8, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p, nullptr);
  EXPECT_EQ(treemask_matcher_rollback(m.p, 5), TREEMASK_ERR_OUT_OF_RANGE);
  const std::string failure = last_error();
  EXPECT_NE(failure.find("treemask_matcher_rollback"), std::string::npos) << failure;

  EXPECT_FALSE(accept(m.p, 6));  // rejected: not a child of the root
  EXPECT_EQ(last_error(), failure);
  EXPECT_TRUE(accept(m.p, 3));  // a success does not clear it either
  EXPECT_EQ(last_error(), failure);
  const int32_t draft[2] = {4, 7};
  size_t n = 0;
  ASSERT_EQ(treemask_matcher_accept_tokens(m.p, draft, 2, &n), TREEMASK_OK);
  EXPECT_EQ(n, 1u);  // 7 ends the draft: no failure
  EXPECT_EQ(last_error(), failure);

  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 1;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  treemask_matcher_reset(m.p);
  ASSERT_EQ(treemask_batch_set_matcher(batch, 0, m.p), TREEMASK_OK);
  const int32_t token = 5;
  bool accepted = true;
  ASSERT_EQ(treemask_batch_accept_tokens(batch, &token, 1, &accepted), TREEMASK_OK);
  EXPECT_FALSE(accepted);
  EXPECT_EQ(last_error(), failure);
  treemask_batch_free(batch);

  // The next failure replaces it.
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, nullptr, 1, nullptr, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error(), failure);
  EXPECT_NE(last_error().find("treemask_matcher_fill_next_token_bitmask"), std::string::npos);
}

TEST(Matcher, StickyErrorFailsEveryCallButResetAndFillStillWritesStops) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 8, {0}, t), TREEMASK_OK);
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = TREEMASK_FAILURE_STICKY_ERROR;
  MatcherHandle m = matcher(t.p, &o);
  EXPECT_FALSE(accept(m.p, 6));
  bool ok = true;
  EXPECT_EQ(treemask_matcher_accept_token(m.p, 3, &ok), TREEMASK_ERR_INVALID_STATE);
  EXPECT_FALSE(ok);
  EXPECT_NE(last_error().find("after rejecting token 6"), std::string::npos);
  int32_t row[1] = {-1};
  EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row, 1, nullptr, nullptr),
            TREEMASK_ERR_INVALID_STATE);
  EXPECT_EQ(row[0], 1);
  EXPECT_EQ(treemask_matcher_rollback(m.p, 0), TREEMASK_ERR_INVALID_STATE);
  treemask_matcher *c = nullptr;
  EXPECT_EQ(treemask_matcher_clone(m.p, &c), TREEMASK_ERR_INVALID_STATE);
  EXPECT_EQ(c, nullptr);
  EXPECT_FALSE(treemask_matcher_is_terminated(m.p));
  EXPECT_FALSE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), 0u);
  treemask_matcher_reset(m.p);
  EXPECT_TRUE(accept(m.p, 3));
}

TEST(Matcher, TerminateWithoutStopTokenEndsAtALeaf) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{3, 4}, {3}}, 8, {0}, t), TREEMASK_OK);
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.terminate_without_stop_token = true;
  o.pad_token = 5;
  MatcherHandle m = matcher(t.p, &o);
  ASSERT_TRUE(accept(m.p, 3));
  EXPECT_FALSE(treemask_matcher_is_terminated(m.p));  // "3" is terminal but has a child
  ASSERT_TRUE(accept(m.p, 4));
  EXPECT_TRUE(treemask_matcher_is_terminated(m.p));
  EXPECT_TRUE(accept(m.p, 5));  // pad after termination
  EXPECT_TRUE(accept(m.p, 0));
  EXPECT_FALSE(accept(m.p, 4));
  EXPECT_EQ(testutil::label_ids(m.p), (std::vector<int64_t>{0}));
  EXPECT_EQ(treemask_matcher_rollback_depth(m.p), 2u);
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);  // one accept did both
  EXPECT_EQ(fill(m.p, 8), (V{0, 4}));
}

TEST(Matcher, RollbackPastHistoryOrLimitChangesNothing) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2, 3, 4}}, 8, {0}, t), TREEMASK_OK);
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.max_rollback_tokens = 2;
  MatcherHandle m = matcher(t.p, &o);
  for (int32_t tok : {1, 2, 3}) ASSERT_TRUE(accept(m.p, tok));
  EXPECT_EQ(treemask_matcher_rollback(m.p, 3), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(last_error(),
            "treemask_matcher_rollback: cannot roll back 3 tokens: only 2 can be undone (history "
            "holds 3, max_rollback_tokens = 2)");
  EXPECT_EQ(fill(m.p, 8), (V{4}));
  ASSERT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{2}));
  EXPECT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_ERR_OUT_OF_RANGE);  // only [1] is left
  ASSERT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_OK);
  EXPECT_EQ(fill(m.p, 8), (V{1}));
}

TEST(Matcher, CloneIsIndependent) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}}, 8, {0}, t), TREEMASK_OK);
  MatcherHandle a = matcher(t.p);
  ASSERT_TRUE(accept(a.p, 1));
  treemask_matcher *c = nullptr;
  ASSERT_EQ(treemask_matcher_clone(a.p, &c), TREEMASK_OK);
  MatcherHandle b(c);
  ASSERT_TRUE(accept(a.p, 2));
  ASSERT_TRUE(accept(b.p, 3));
  EXPECT_EQ(testutil::label_ids(a.p), (std::vector<int64_t>{0}));
  EXPECT_EQ(testutil::label_ids(b.p), (std::vector<int64_t>{1}));
  ASSERT_EQ(treemask_matcher_rollback(b.p, 2), TREEMASK_OK);
  EXPECT_EQ(fill(b.p, 8), (V{1}));
  EXPECT_EQ(fill(a.p, 8), (V{0}));
}

TEST(Matcher, OutlivesTheCallersTrieReference) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 8, {0}, t), TREEMASK_OK);
  MatcherHandle m = matcher(t.p);
  EXPECT_EQ(treemask_matcher_trie(m.p), t.p);
  treemask_trie_free(t.p);
  t.p = nullptr;
  ASSERT_TRUE(accept(m.p, 1));
  EXPECT_EQ(fill(m.p, 8), (V{2}));
}

TEST(Trie, RetainAndFreeBalance) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1}}, 8, {0}, t), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_retain(t.p), t.p);
  treemask_trie_free(t.p);  // back to one reference
  EXPECT_EQ(treemask_trie_vocab_size(t.p), 8);
  EXPECT_EQ(treemask_trie_retain(nullptr), nullptr);
  treemask_trie_free(nullptr);
  treemask_matcher_free(nullptr);
  treemask_matcher_reset(nullptr);
}

TEST(Trie, StatsAndStopTokens) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}, {4}}, 8, {7, 0, 7}, t), TREEMASK_OK);
  int32_t stops[4] = {-1, -1, -1, -1};
  EXPECT_EQ(treemask_trie_stop_tokens(t.p, stops, 4), 2u);
  EXPECT_EQ(stops[0], 0);
  EXPECT_EQ(stops[1], 7);
  EXPECT_EQ(stops[2], -1);
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  ASSERT_EQ(treemask_trie_get_stats(t.p, &s), TREEMASK_OK);
  EXPECT_EQ(s.n_nodes, 5u);
  EXPECT_EQ(s.n_edges, 4u);
  EXPECT_EQ(s.n_terminals, 3u);
  EXPECT_EQ(s.n_labels, 3u);
  EXPECT_EQ(s.max_depth, 2u);
  EXPECT_EQ(s.max_fanout, 2u);
  EXPECT_GT(s.bytes, 0u);
  // An older, shorter stats struct gets only its own fields.
  struct {
    treemask_trie_stats s;
    uint64_t canary;
  } small;
  small.canary = 0xABCDEFu;
  small.s.struct_size = offsetof(treemask_trie_stats, n_terminals);
  small.s.n_terminals = 999;
  ASSERT_EQ(treemask_trie_get_stats(t.p, &small.s), TREEMASK_OK);
  EXPECT_EQ(small.s.n_edges, 4u);
  EXPECT_EQ(small.s.n_terminals, 999u);
}

TEST(Options, StructSizeSelectsKnownFields) {
  const int32_t stop = 0;
  const int32_t tokens[] = {1};
  const size_t offsets[] = {0, 1};
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 4;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  o.struct_size = offsetof(treemask_trie_options, dense_row_cache_bytes);  // an older caller
  treemask_trie *t = nullptr;
  ASSERT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 1, nullptr, &t), TREEMASK_OK);
  TrieHandle hold(t);
  o.struct_size = 0;
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("struct_size is 0"), std::string::npos);

  treemask_matcher_options mo;
  treemask_matcher_options_init(&mo);
  mo.failure_policy = 9;
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(hold.p, &mo, &m), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown failure_policy 9"), std::string::npos);
  treemask_matcher_options_init(&mo);
  mo.pad_token = 4;
  EXPECT_EQ(treemask_matcher_create(hold.p, &mo, &m), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("pad_token 4 is out of range [-1, vocab_size=4)"), std::string::npos);
  EXPECT_EQ(m, nullptr);
}

TEST(Errors, NullArgumentsAreNamed) {
  const int32_t stop = 0;
  const int32_t tokens[] = {1};
  const size_t offsets[] = {0, 1};
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 4;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  treemask_trie *t = nullptr;
  EXPECT_EQ(treemask_trie_from_paths(nullptr, tokens, offsets, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: opts is NULL");
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 1, nullptr, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: out is NULL");
  EXPECT_EQ(treemask_trie_from_paths(&o, nullptr, offsets, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: tokens is NULL but offsets[n_paths] is 1");
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, nullptr, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 0, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: at least one path is required");
  o.stop_tokens = nullptr;
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_trie_from_paths: opts->stop_tokens is NULL but opts->n_stop_tokens is 1");
  o.n_stop_tokens = 0;
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 1, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_trie_from_paths: at least one stop token is required");
  EXPECT_EQ(t, nullptr);

  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(nullptr, nullptr, &m), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_matcher_create: trie is NULL");
  EXPECT_EQ(treemask_matcher_clone(nullptr, &m), TREEMASK_ERR_INVALID_ARGUMENT);
  bool ok;
  EXPECT_EQ(treemask_matcher_accept_token(nullptr, 1, &ok), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_matcher_rollback(nullptr, 1), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_get_stats(nullptr, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);

  TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{1}}, 4, {0}, trie), TREEMASK_OK);
  MatcherHandle mm = matcher(trie.p);
  EXPECT_EQ(treemask_matcher_accept_token(mm.p, 1, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "treemask_matcher_accept_token: accepted is NULL");
  EXPECT_EQ(treemask_matcher_next_tokens(nullptr, nullptr, 0), 0u);
  EXPECT_FALSE(treemask_matcher_is_terminated(nullptr));
  EXPECT_EQ(treemask_trie_stop_tokens(nullptr, nullptr, 0), 0u);
  // A size query with a NULL buffer and a non-zero cap writes nothing.
  EXPECT_EQ(treemask_matcher_next_tokens(mm.p, nullptr, 5), 1u);
}

TEST(Errors, OffsetsThatPointPastTheEndAreRejectedBeforeReading) {
  const int32_t stop = 0;
  const int32_t tokens[] = {1, 2};
  const size_t offsets[] = {0, 1000, 2};
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 4;
  o.stop_tokens = &stop;
  o.n_stop_tokens = 1;
  treemask_trie *t = nullptr;
  EXPECT_EQ(treemask_trie_from_paths(&o, tokens, offsets, 2, nullptr, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "treemask_trie_from_paths: offsets[1] = 1000 exceeds offsets[n_paths] = 2");
}

}  // namespace
