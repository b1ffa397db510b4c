// Observability through the C API: the log callback (load / save events,
// tolerated problems, re-entrant and throwing callbacks) and the
// per-matcher counters, which every accept path, fill path, clone and the
// batch must keep exactly.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

struct Line {
  int32_t level;
  std::string text;
};

// Collects log lines while alive; silences the library again afterwards.
class LogCapture {
 public:
  LogCapture() { treemask_set_log_callback(&LogCapture::collect, this); }
  ~LogCapture() { treemask_set_log_callback(nullptr, nullptr); }
  LogCapture(const LogCapture &) = delete;
  LogCapture &operator=(const LogCapture &) = delete;

  std::vector<Line> lines;

 private:
  static void collect(int32_t level, const char *message, void *user_data) {
    static_cast<LogCapture *>(user_data)->lines.push_back({level, message});
  }
};

std::string source_path(const std::string &relative) {
  const char *root = std::getenv("TREEMASK_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/" + relative;
}

treemask_trie_stats stats_of(const treemask_trie *t) {
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  EXPECT_EQ(treemask_trie_get_stats(t, &s), TREEMASK_OK);
  return s;
}

std::string shape(const treemask_trie *t) {
  const treemask_trie_stats s = stats_of(t);
  return std::to_string(s.n_terminals) + " paths, " + std::to_string(s.n_nodes) + " nodes, " +
         std::to_string(s.bytes) + " bytes";
}

treemask_trie_options rtp_options() { return testutil::trie_options(100000); }

TEST(LogCallback, ReportsAFileLoadWithItsShape) {
  LogCapture log;
  const std::string path = source_path("tests/data/rtp-llm/gir_prefix_dict.json");
  const treemask_trie_options o = rtp_options();
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_json_file(&o, nullptr, path.c_str(), &t.p), TREEMASK_OK)
      << treemask_last_error();
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_EQ(log.lines[0].level, TREEMASK_LOG_INFO);
  // The fixture: 5 candidates at the root, 4 of them with one child that ends.
  EXPECT_EQ(log.lines[0].text, "loaded " + path + ": 5 paths, 10 nodes, " +
                                   std::to_string(stats_of(t.p).bytes) + " bytes");
}

TEST(LogCallback, ReportsEveryToleratedProblemAsAWarning) {
  LogCapture log;
  const std::string json =
      R"({"start_token_id": 225, "end_token_id": 2, "weight_dict": {},
          "prefix_dict": {"225": [7], "225_7": [2], "225_8": [9]}})";
  const treemask_trie_options o = rtp_options();
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_json(&o, nullptr, json.data(), json.size(), &t.p), TREEMASK_OK)
      << treemask_last_error();
  const std::string source = "RTP-LLM JSON (" + std::to_string(json.size()) + " bytes)";
  ASSERT_EQ(log.lines.size(), 3u);
  EXPECT_EQ(stats_of(t.p).n_warnings, 2u);
  EXPECT_EQ(log.lines[0].level, TREEMASK_LOG_WARNING);
  EXPECT_NE(log.lines[0].text.find("weight_dict"), std::string::npos) << log.lines[0].text;
  EXPECT_EQ(log.lines[0].text.rfind(source + ": ", 0), 0u) << log.lines[0].text;
  EXPECT_EQ(log.lines[1].level, TREEMASK_LOG_WARNING);
  EXPECT_NE(log.lines[1].text.find("key \"225_8\" is unreachable"), std::string::npos)
      << log.lines[1].text;
  EXPECT_EQ(log.lines[2].level, TREEMASK_LOG_INFO);
  EXPECT_EQ(log.lines[2].text, "loaded " + source + ": " + shape(t.p));
}

TEST(LogCallback, CapsTheWarningsOfOneLoadAndCountsTheRest) {
  LogCapture log;
  std::string tsv = "225\t7\n225_7\t2\n";
  const int unreachable = 250;
  for (int i = 0; i < unreachable; ++i) tsv += "225_" + std::to_string(1000 + i) + "\t2\n";
  const treemask_trie_options o = rtp_options();
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_tsv(&o, testutil::Rtp(225, 2, nullptr).get(), tsv.data(),
                                       tsv.size(), &t.p),
            TREEMASK_OK)
      << treemask_last_error();
  EXPECT_EQ(stats_of(t.p).n_warnings, uint64_t{unreachable});
  size_t warnings = 0;
  for (const Line &l : log.lines) warnings += l.level == TREEMASK_LOG_WARNING;
  EXPECT_EQ(warnings, 201u);  // 200 kept, one line for the rest
  ASSERT_GE(log.lines.size(), 2u);
  const std::string &rest = log.lines[log.lines.size() - 2].text;
  EXPECT_NE(rest.find("50 more warnings not shown (250 in all)"), std::string::npos) << rest;
}

TEST(LogCallback, ReportsBuildsSavesAndMappedLoads) {
  char dir[] = "/tmp/treemask-observability-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/t.tmtrie";
  {
    LogCapture log;
    TrieHandle t;
    ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}, {4}}, 10, {0}, t), TREEMASK_OK);
    ASSERT_EQ(treemask_trie_save(t.p, file.c_str(), nullptr), TREEMASK_OK) << treemask_last_error();
    TrieHandle loaded;
    ASSERT_EQ(treemask_trie_load(file.c_str(), 0, &loaded.p), TREEMASK_OK);
    ASSERT_EQ(log.lines.size(), 3u);
    EXPECT_EQ(log.lines[0].text, "built trie from 3 token paths: 3 paths, 5 nodes, " +
                                     std::to_string(stats_of(t.p).bytes) + " bytes");
    EXPECT_EQ(log.lines[1].text, "saved " + file + ": " + shape(t.p));
    EXPECT_EQ(log.lines[2].text, "loaded " + file + ": " + shape(loaded.p));
    for (const Line &l : log.lines) EXPECT_EQ(l.level, TREEMASK_LOG_INFO);
  }
  unlink(file.c_str());
  rmdir(dir);
}

TEST(LogCallback, IsSilentForOrdinaryFailuresAndAfterRemoval) {
  LogCapture log;
  const treemask_trie_options o = rtp_options();
  TrieHandle t;
  EXPECT_EQ(treemask_trie_from_rtp_json(&o, nullptr, "{", 1, &t.p), TREEMASK_ERR_PARSE);
  EXPECT_EQ(testutil::make_trie({{1}}, 0, {0}, t), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(log.lines.empty());
  treemask_set_log_callback(nullptr, nullptr);
  TrieHandle ok;
  ASSERT_EQ(testutil::make_trie({{1}}, 10, {0}, ok), TREEMASK_OK);
  EXPECT_TRUE(log.lines.empty());
}

// A callback may call treemask, including treemask_set_log_callback, without
// deadlocking.
struct Reentrant {
  int calls = 0;
  std::string nested_line;
};

void reentrant_callback(int32_t, const char *message, void *user_data) {
  auto *r = static_cast<Reentrant *>(user_data);
  if (++r->calls == 1) {
    TrieHandle inner;  // logs again, on this thread, from inside the callback
    EXPECT_EQ(testutil::make_trie({{5}}, 10, {0}, inner), TREEMASK_OK);
    treemask_trie *bad = nullptr;
    const std::vector<int32_t> stops{0};
    const treemask_trie_options o = testutil::trie_options(-1, stops);
    const size_t offsets[] = {0, 0};
    EXPECT_NE(treemask_trie_from_paths(&o, nullptr, offsets, 1, nullptr, &bad), TREEMASK_OK);
  } else {
    r->nested_line = message;
    treemask_set_log_callback(nullptr, nullptr);
  }
}

TEST(LogCallback, MayCallTreemaskAndReplaceItself) {
  Reentrant r;
  treemask_set_log_callback(&reentrant_callback, &r);
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1}}, 10, {0}, t), TREEMASK_OK);
  EXPECT_EQ(r.calls, 2);
  EXPECT_EQ(r.nested_line.rfind("built trie from 1 token paths", 0), 0u) << r.nested_line;
  TrieHandle after;  // the callback removed itself
  ASSERT_EQ(testutil::make_trie({{2}}, 10, {0}, after), TREEMASK_OK);
  EXPECT_EQ(r.calls, 2);
}

void throwing_callback(int32_t, const char *, void *) { throw std::runtime_error("sink failed"); }

TEST(LogCallback, SwallowsExceptionsFromTheCallback) {
  treemask_set_log_callback(&throwing_callback, nullptr);
  TrieHandle t;
  EXPECT_EQ(testutil::make_trie({{1}}, 10, {0}, t), TREEMASK_OK);
  EXPECT_NE(t.p, nullptr);
  treemask_set_log_callback(nullptr, nullptr);
}

// ---- Counters ----

treemask_matcher_counters counters(const treemask_matcher *m) {
  treemask_matcher_counters c;
  c.struct_size = sizeof(c);
  EXPECT_EQ(treemask_matcher_get_counters(m, &c), TREEMASK_OK) << treemask_last_error();
  return c;
}

// fills, accepted, rejected, fail_closed, rolled_back, resets
using Counts = std::vector<uint64_t>;
Counts counts(const treemask_matcher *m) {
  const treemask_matcher_counters c = counters(m);
  return {c.n_fills,       c.n_accepted_tokens,    c.n_rejected_tokens,
          c.n_fail_closed, c.n_rolled_back_tokens, c.n_resets};
}

MatcherHandle make_matcher(treemask_trie *t, int32_t policy) {
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.failure_policy = policy;
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(t, &o, &m), TREEMASK_OK) << treemask_last_error();
  return MatcherHandle(m);
}

bool accept(treemask_matcher *m, int32_t token) {
  bool ok = false;
  EXPECT_EQ(treemask_matcher_accept_token(m, token, &ok), TREEMASK_OK) << treemask_last_error();
  return ok;
}

class Counters : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testutil::make_trie({{1, 2, 3}, {1, 4}, {5}}, 40, {0}, trie_), TREEMASK_OK);
  }
  void fill(treemask_matcher *m) {
    std::vector<int32_t> row(2);
    EXPECT_EQ(treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr, nullptr),
              TREEMASK_OK);
  }
  TrieHandle trie_;
};

TEST_F(Counters, CountEveryMatcherCall) {
  MatcherHandle m = make_matcher(trie_.p, TREEMASK_FAILURE_REJECT);
  EXPECT_EQ(counts(m.p), (Counts{0, 0, 0, 0, 0, 0}));
  fill(m.p);
  EXPECT_TRUE(accept(m.p, 1));
  EXPECT_FALSE(accept(m.p, 9));
  fill(m.p);
  EXPECT_TRUE(accept(m.p, 2));
  EXPECT_EQ(counts(m.p), (Counts{2, 2, 1, 0, 0, 0}));
  ASSERT_EQ(treemask_matcher_rollback(m.p, 2), TREEMASK_OK);
  EXPECT_EQ(treemask_matcher_rollback(m.p, 1), TREEMASK_ERR_OUT_OF_RANGE);  // nothing undone
  treemask_matcher_reset(m.p);
  EXPECT_EQ(counts(m.p), (Counts{2, 2, 1, 0, 2, 1}));
  // Termination is a step; what is accepted after it changes nothing and
  // is not, while a refused token after it is a rejection.
  EXPECT_TRUE(accept(m.p, 5));
  EXPECT_TRUE(accept(m.p, 0));
  EXPECT_TRUE(accept(m.p, 0));
  EXPECT_FALSE(accept(m.p, 5));
  EXPECT_EQ(counts(m.p), (Counts{2, 4, 2, 0, 2, 1}));
}

TEST_F(Counters, CountFailClosedAndStickyErrorsOnce) {
  MatcherHandle closed = make_matcher(trie_.p, TREEMASK_FAILURE_FAIL_CLOSED);
  EXPECT_FALSE(accept(closed.p, 9));
  EXPECT_FALSE(accept(closed.p, 8));  // already closed: a rejection, not a new event
  EXPECT_TRUE(accept(closed.p, 0));   // the stop token ends the closed sequence
  EXPECT_EQ(counts(closed.p), (Counts{0, 1, 2, 1, 0, 0}));

  MatcherHandle sticky = make_matcher(trie_.p, TREEMASK_FAILURE_STICKY_ERROR);
  EXPECT_FALSE(accept(sticky.p, 9));
  bool ok = true;
  EXPECT_EQ(treemask_matcher_accept_token(sticky.p, 1, &ok), TREEMASK_ERR_INVALID_STATE);
  EXPECT_EQ(counts(sticky.p), (Counts{0, 0, 1, 1, 0, 0}));
}

TEST_F(Counters, CountDraftAndForcedTokensButNotDraftMisses) {
  MatcherHandle m = make_matcher(trie_.p, TREEMASK_FAILURE_FAIL_CLOSED);
  const int32_t draft[] = {1, 2, 7};
  size_t n = 0;
  ASSERT_EQ(treemask_matcher_accept_tokens(m.p, draft, 3, &n), TREEMASK_OK);
  EXPECT_EQ(n, 2u);
  int32_t forced[4];
  ASSERT_EQ(treemask_matcher_accept_forced_tokens(m.p, forced, 4, &n), TREEMASK_OK);
  EXPECT_EQ(n, 1u);  // 3
  std::vector<int32_t> rows(4 * 2);
  ASSERT_EQ(treemask_matcher_fill_draft_bitmasks(m.p, draft, nullptr, 3, rows.data(), rows.size(),
                                                 2, nullptr),
            TREEMASK_OK);  // looks ahead on copies: nothing counted
  EXPECT_EQ(counts(m.p), (Counts{0, 3, 0, 0, 0, 0}));
}

TEST_F(Counters, StartAtZeroInEveryClone) {
  MatcherHandle m = make_matcher(trie_.p, TREEMASK_FAILURE_REJECT);
  EXPECT_TRUE(accept(m.p, 1));
  treemask_matcher *copy = nullptr;
  ASSERT_EQ(treemask_matcher_clone(m.p, &copy), TREEMASK_OK);
  MatcherHandle c(copy);
  EXPECT_EQ(counts(c.p), (Counts{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(treemask_matcher_rollback_depth(c.p), 1u);  // the state itself is copied
  EXPECT_EQ(counts(m.p), (Counts{0, 1, 0, 0, 0, 0}));
}

TEST_F(Counters, CountBatchFillsAndAccepts) {
  MatcherHandle m = make_matcher(trie_.p, TREEMASK_FAILURE_REJECT);
  EXPECT_TRUE(accept(m.p, 1));
  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 2;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_set_matcher(batch, 0, m.p), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_set_matcher(batch, 1, m.p), TREEMASK_OK);
  treemask_matcher *slot0 = treemask_batch_get_matcher(batch, 0);
  EXPECT_EQ(counts(slot0), (Counts{0, 0, 0, 0, 0, 0}));  // the batch holds clones
  std::vector<int32_t> rows(2 * 2);
  ASSERT_EQ(treemask_batch_fill_next_token_bitmask(batch, rows.data(), 2, nullptr, 0, nullptr),
            TREEMASK_OK);
  ASSERT_EQ(treemask_batch_bind_bitmask(batch, rows.data(), 2), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_FULL, nullptr), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
            TREEMASK_OK);
  const int32_t tokens[] = {2, 9};
  ASSERT_EQ(treemask_batch_accept_tokens(batch, tokens, 2, nullptr), TREEMASK_OK);
  EXPECT_EQ(counts(treemask_batch_get_matcher(batch, 0)), (Counts{3, 1, 0, 0, 0, 0}));
  EXPECT_EQ(counts(treemask_batch_get_matcher(batch, 1)), (Counts{3, 0, 1, 0, 0, 0}));
  // A reorder moves a slot taken once (its counts with it) and clones one
  // taken twice (the copy starts at zero).
  const int32_t src[] = {1, 1};
  ASSERT_EQ(treemask_batch_reorder(batch, src, 2), TREEMASK_OK);
  const Counts moved{3, 0, 1, 0, 0, 0}, fresh{0, 0, 0, 0, 0, 0};
  const Counts a = counts(treemask_batch_get_matcher(batch, 0));
  const Counts b = counts(treemask_batch_get_matcher(batch, 1));
  EXPECT_TRUE((a == moved && b == fresh) || (a == fresh && b == moved));
  treemask_batch_free(batch);
  EXPECT_EQ(counts(m.p), (Counts{0, 1, 0, 0, 0, 0}));
}

TEST_F(Counters, WriteOnlyWhatTheCallerStructHolds) {
  MatcherHandle m = make_matcher(trie_.p, TREEMASK_FAILURE_REJECT);
  EXPECT_TRUE(accept(m.p, 1));
  // An older caller whose struct ends after n_accepted_tokens.
  struct {
    treemask_matcher_counters c;
    uint64_t guard;
  } old;
  std::memset(&old, 0xAB, sizeof(old));
  old.c.struct_size = offsetof(treemask_matcher_counters, n_rejected_tokens);
  ASSERT_EQ(treemask_matcher_get_counters(m.p, &old.c), TREEMASK_OK);
  EXPECT_EQ(old.c.struct_size, offsetof(treemask_matcher_counters, n_rejected_tokens));
  EXPECT_EQ(old.c.n_accepted_tokens, 1u);
  EXPECT_EQ(old.c.n_rejected_tokens, 0xABABABABABABABABull);  // untouched
  EXPECT_EQ(old.guard, 0xABABABABABABABABull);

  treemask_matcher_counters c;
  c.struct_size = 0;
  EXPECT_EQ(treemask_matcher_get_counters(m.p, &c), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(treemask_last_error()).find("struct_size"), std::string::npos);
  EXPECT_EQ(treemask_matcher_get_counters(nullptr, &c), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_matcher_get_counters(m.p, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
}

}  // namespace
