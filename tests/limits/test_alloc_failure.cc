// Allocation failure: this program replaces the global operator new with
// one that can be armed to throw std::bad_alloc at the k-th allocation from
// now, links the library statically (so the library's own allocations go
// through it too), and for every entry point and every k runs the call
// until it no longer meets an injected failure. Each failed run must return
// TREEMASK_ERR_OUT_OF_MEMORY (or, where the library tolerates a failed
// allocation, a correct result), leak nothing, report the failure to the log
// callback, and leave the process fully usable: no crash, no exception
// through the C ABI, no std::terminate.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace {

// Allocations made through operator new that are not yet freed, and the
// countdown: -1 disarmed, otherwise the allocations left before one fails.
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_countdown{-1};
std::atomic<bool> g_fired{false};

void *allocate(size_t n, size_t align, bool nothrow) {
  int64_t left = g_countdown.load(std::memory_order_relaxed);
  while (left >= 0) {
    if (g_countdown.compare_exchange_weak(left, left - 1)) {
      if (left == 0) {
        g_fired = true;
        if (nothrow) return nullptr;
        throw std::bad_alloc();
      }
      break;
    }
  }
  void *p = nullptr;
  if (align > alignof(std::max_align_t)) {
    if (posix_memalign(&p, align, n ? n : 1) != 0) p = nullptr;
  } else {
    p = std::malloc(n ? n : 1);
  }
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  g_live.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void release(void *p) {
  if (!p) return;
  g_live.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void *operator new(size_t n) { return allocate(n, 0, false); }
void *operator new[](size_t n) { return allocate(n, 0, false); }
void *operator new(size_t n, const std::nothrow_t &) noexcept { return allocate(n, 0, true); }
void *operator new[](size_t n, const std::nothrow_t &) noexcept { return allocate(n, 0, true); }
void *operator new(size_t n, std::align_val_t a) { return allocate(n, size_t(a), false); }
void *operator new[](size_t n, std::align_val_t a) { return allocate(n, size_t(a), false); }
void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate(n, size_t(a), true);
}
void *operator new[](size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate(n, size_t(a), true);
}
void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, size_t) noexcept { release(p); }
void operator delete[](void *p, size_t) noexcept { release(p); }
void operator delete(void *p, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { release(p); }

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

std::atomic<int> g_error_lines{0};

void count_errors(int32_t level, const char *, void *) {
  if (level == TREEMASK_LOG_ERROR) g_error_lines.fetch_add(1);
}

std::string source_path(const std::string &relative) {
  const char *root = std::getenv("TREEMASK_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/" + relative;
}

class AllocationFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    treemask_set_log_callback(count_errors, nullptr);
    // This thread's error message buffer grows once, here, to the size a
    // long message needs, so that later errors never allocate it anew.
    const std::string key(4096, 'x');
    const std::string json =
        R"({"start_token_id":1,"end_token_id":0,"prefix_dict":{")" + key + R"(":[]}})";
    const treemask_trie_options o = testutil::trie_options(10);
    treemask_trie *t = nullptr;
    ASSERT_NE(treemask_trie_from_rtp_json(&o, nullptr, json.data(), json.size(), &t), TREEMASK_OK);
  }
  void TearDown() override { treemask_set_log_callback(nullptr, nullptr); }

  // Runs call with the k-th allocation failing, for k = 0, 1, ... until a
  // run meets no failure. call returns its status; cleanup frees what a
  // successful call made, check verifies it. Returns the number of failed
  // runs.
  int for_every_failure(
      const char *name, const std::function<treemask_status()> &call,
      const std::function<void()> &cleanup, const std::function<void()> &check = [] {}) {
    call();  // warm up: one-time allocations (simdjson's kernel choice, ...)
    cleanup();
    int failures = 0;
    std::string message;
    message.reserve(1 << 16);  // so that keeping a copy allocates nothing
    for (int64_t k = 0;; ++k) {
      const int64_t live_before = g_live.load();
      const int errors_before = g_error_lines.load();
      g_fired = false;
      g_countdown = k;
      const treemask_status s = call();
      g_countdown = -1;
      const bool fired = g_fired;
      message.assign(treemask_last_error());
      if (s == TREEMASK_OK) check();
      cleanup();
      EXPECT_EQ(g_live.load(), live_before) << name << ": leak after failing allocation " << k;
      if (!fired) {
        EXPECT_EQ(s, TREEMASK_OK) << name << ": " << message;
        std::printf("%-40s %3lld allocations, %3d failed runs returned out of memory\n", name,
                    static_cast<long long>(k), failures);
        return failures;
      }
      if (s == TREEMASK_OK) continue;  // a failed allocation the library tolerates
      ++failures;
      EXPECT_EQ(s, TREEMASK_ERR_OUT_OF_MEMORY) << name << " at allocation " << k << ": " << message;
      EXPECT_TRUE(message.find("out of memory") != std::string::npos ||
                  message.find("cannot allocate") != std::string::npos)
          << name << ": " << message;
      EXPECT_GT(g_error_lines.load(), errors_before) << name << ": not logged at allocation " << k;
      if (::testing::Test::HasFailure()) return failures;
    }
  }
};

// ---- Building tries ----

TEST_F(AllocationFailure, BuildingFromPaths) {
  // Enough paths that the builder's arrays grow several times, a duplicate
  // (multi-label terminals) and a prefix of another path.
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (int i = 0; i < 300; ++i) {
    for (int j = 0; j <= i % 5; ++j) tokens.push_back(1 + (i * 7 + j * 13) % 97);
    offsets.push_back(tokens.size());
  }
  tokens.insert(tokens.end(), {1, 2});
  offsets.push_back(tokens.size());
  tokens.insert(tokens.end(), {1, 2});
  offsets.push_back(tokens.size());
  const std::vector<int32_t> stops{0};
  const treemask_trie_options o = testutil::trie_options(100, stops);
  TrieHandle t;
  const int failures = for_every_failure(
      "treemask_trie_from_paths",
      [&] {
        return treemask_trie_from_paths(&o, tokens.data(), offsets.data(), offsets.size() - 1,
                                        nullptr, &t.p);
      },
      [&] {
        treemask_trie_free(t.p);
        t.p = nullptr;
      });
  EXPECT_GT(failures, 10);
}

TEST_F(AllocationFailure, LoadingDictionariesAndJsonLines) {
  const treemask_trie_options rtp = testutil::trie_options(100000);
  const std::vector<int32_t> stops{0, 1023};
  const treemask_trie_options paths = testutil::trie_options(1024, stops);
  const std::string json = R"({"start_token_id": 225, "end_token_id": 2, "weight_dict": {},
      "prefix_dict": {"225": [64000, 64003, 2], "225_64000": [7, 8], "225_9": [2]}})";
  const std::string tsv =
      "225\t64000\x02"
      "64003\n225_64000\t7\x02"
      "8\n225_64003\t2\n";
  const std::string jsonl = "[1, 2, 3]\n{\"tokens\": [1, 4], \"label\": 9, \"x\": 1}\n[5]\n";
  const std::string gir_json = source_path("tests/data/rtp-llm/gir_prefix_dict.json");
  const std::string gir_tsv = source_path("tests/data/rtp-llm/gir_prefix_dict.txt");
  char dir[] = "/tmp/treemask-alloc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string jsonl_file = std::string(dir) + "/paths.jsonl";
  FILE *f = std::fopen(jsonl_file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(jsonl.c_str(), f);
  std::fclose(f);

  TrieHandle t;
  auto free_trie = [&] {
    treemask_trie_free(t.p);
    t.p = nullptr;
  };
  const std::vector<std::pair<const char *, std::function<treemask_status()>>> loaders = {
      {"treemask_trie_from_rtp_json",
       [&] { return treemask_trie_from_rtp_json(&rtp, nullptr, json.data(), json.size(), &t.p); }},
      {"treemask_trie_from_rtp_json_file",
       [&] { return treemask_trie_from_rtp_json_file(&rtp, nullptr, gir_json.c_str(), &t.p); }},
      {"treemask_trie_from_rtp_tsv",
       [&] {
         return treemask_trie_from_rtp_tsv(&rtp, testutil::Rtp(225, 2, "_").get(), tsv.data(),
                                           tsv.size(), &t.p);
       }},
      {"treemask_trie_from_rtp_tsv_file",
       [&] {
         return treemask_trie_from_rtp_tsv_file(&rtp, testutil::Rtp(225, 2, nullptr).get(),
                                                gir_tsv.c_str(), &t.p);
       }},
      {"treemask_trie_from_jsonl",
       [&] { return treemask_trie_from_jsonl(&paths, jsonl.data(), jsonl.size(), &t.p); }},
      {"treemask_trie_from_jsonl_file",
       [&] { return treemask_trie_from_jsonl_file(&paths, jsonl_file.c_str(), &t.p); }},
  };
  for (const auto &[name, load] : loaders) {
    EXPECT_GT(for_every_failure(name, load, free_trie), 0) << name;
  }
  unlink(jsonl_file.c_str());
  rmdir(dir);
}

TEST_F(AllocationFailure, SavingAndLoadingCompiledFiles) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}, {4}, {4}}, 10, {0}, t), TREEMASK_OK);
  char dir[] = "/tmp/treemask-alloc-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/t.tmtrie";
  const char *keys[] = {"tokenizer"};
  const char *values[] = {"qwen2.5"};
  treemask_save_options so;
  treemask_save_options_init(&so);
  so.metadata_keys = keys;
  so.metadata_values = values;
  so.n_metadata = 1;
  EXPECT_GT(for_every_failure(
                "treemask_trie_save_with_options",
                [&] { return treemask_trie_save(t.p, file.c_str(), &so); }, [] {}),
            0);
  TrieHandle loaded;
  EXPECT_GT(
      for_every_failure(
          "treemask_trie_load", [&] { return treemask_trie_load(file.c_str(), 0, &loaded.p); },
          [&] {
            treemask_trie_free(loaded.p);
            loaded.p = nullptr;
          }),
      0);
  unlink(file.c_str());
  rmdir(dir);
}

// ---- Matchers, batches, exclusion sets ----

TEST_F(AllocationFailure, MatcherCalls) {
  TrieHandle t;
  std::vector<std::vector<int32_t>> paths;
  for (int32_t i = 1; i < 90; ++i) paths.push_back({i, i + 1, i + 2});
  paths.push_back(std::vector<int32_t>(130, 5));  // deep enough for history chunks
  ASSERT_EQ(testutil::make_trie(paths, 100, {0}, t), TREEMASK_OK);
  MatcherHandle m;
  auto free_m = [&] {
    treemask_matcher_free(m.p);
    m.p = nullptr;
  };
  EXPECT_GT(for_every_failure(
                "treemask_matcher_create",
                [&] { return treemask_matcher_create(t.p, nullptr, &m.p); }, free_m),
            0);

  const int32_t separator = 99;
  treemask_mode_options mo;
  treemask_mode_options_init(&mo);
  mo.label_separator = &separator;
  mo.n_label_separator = 1;
  mo.max_new_tokens = 40;
  EXPECT_GT(for_every_failure(
                "treemask_matcher_create (modes)",
                [&] { return treemask_matcher_create(t.p, &mo.matcher, &m.p); }, free_m),
            0);

  // Accepting a long path allocates history chunks. A failed accept leaves
  // the matcher consistent (the accepts before it stand); cleanup resets it.
  MatcherHandle walker;
  ASSERT_EQ(treemask_matcher_create(t.p, nullptr, &walker.p), TREEMASK_OK);
  const std::vector<int32_t> deep(130, 5);
  size_t n = 0;
  EXPECT_GT(
      for_every_failure(
          "treemask_matcher_accept_tokens",
          [&] { return treemask_matcher_accept_tokens(walker.p, deep.data(), deep.size(), &n); },
          [&] { treemask_matcher_reset(walker.p); }, [&] { EXPECT_EQ(n, deep.size()); }),
      0);

  MatcherHandle proto;
  ASSERT_EQ(treemask_matcher_create(t.p, &mo.matcher, &proto.p), TREEMASK_OK);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(proto.p, 7, &ok), TREEMASK_OK);
  EXPECT_GT(
      for_every_failure(
          "treemask_matcher_clone", [&] { return treemask_matcher_clone(proto.p, &m.p); }, free_m),
      0);
  std::vector<int32_t> rows(5 * 4);
  const int32_t draft[] = {8, 9, separator, 3};
  for_every_failure(
      "treemask_matcher_fill_draft_bitmasks",
      [&] {
        return treemask_matcher_fill_draft_bitmasks(proto.p, draft, nullptr, 4, rows.data(),
                                                    rows.size(), 4, nullptr);
      },
      [] {});
}

TEST_F(AllocationFailure, BatchesAndExclusionSets) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {1, 3}, {4}, {5, 6}}, 40, {0}, t), TREEMASK_OK);
  MatcherHandle m;
  ASSERT_EQ(treemask_matcher_create(t.p, nullptr, &m.p), TREEMASK_OK);

  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 64;
  bo.n_threads = 2;
  treemask_batch *batch = nullptr;
  auto free_batch = [&] {
    treemask_batch_free(batch);
    batch = nullptr;
  };
  EXPECT_GT(
      for_every_failure(
          "treemask_batch_create", [&] { return treemask_batch_create(&bo, &batch); }, free_batch),
      0);
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  EXPECT_GT(for_every_failure(
                "treemask_batch_set_matcher",
                [&] { return treemask_batch_set_matcher(batch, 3, m.p); }, [] {}),
            0);
  for (size_t s = 0; s < 64; ++s) ASSERT_EQ(treemask_batch_set_matcher(batch, s, m.p), 0);
  std::vector<int32_t> rows(64 * 2);
  for_every_failure(
      "treemask_batch_fill_next_token_bitmask",
      [&] {
        return treemask_batch_fill_next_token_bitmask(batch, rows.data(), 2, nullptr, 0, nullptr);
      },
      [] {});
  ASSERT_EQ(treemask_batch_bind_bitmask(batch, rows.data(), 2), TREEMASK_OK);
  for_every_failure(
      "treemask_batch_fill_bound",
      [&] {
        return treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr);
      },
      [] {});
  std::vector<int32_t> src(64);
  for (size_t i = 0; i < 64; ++i) src[i] = int32_t(i % 4);
  EXPECT_GT(for_every_failure(
                "treemask_batch_reorder",
                [&] { return treemask_batch_reorder(batch, src.data(), 64); }, [] {}),
            0);
  free_batch();

  treemask_exclusion_set *set = nullptr;
  const int64_t banned[] = {0, 2};
  EXPECT_GT(for_every_failure(
                "treemask_exclusion_set_create",
                [&] { return treemask_exclusion_set_create(t.p, banned, 2, &set); },
                [&] {
                  treemask_exclusion_set_free(set);
                  set = nullptr;
                }),
            0);
  ASSERT_EQ(treemask_exclusion_set_create(t.p, banned, 2, &set), TREEMASK_OK);
  EXPECT_GT(
      for_every_failure(
          "treemask_matcher_set_label_filter",
          [&] { return treemask_matcher_set_label_filter(m.p, set, banned + 1, 1, nullptr, 0); },
          [] {}),
      0);
  treemask_exclusion_set_free(set);
}

}  // namespace
