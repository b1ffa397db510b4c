// Resource limits (release build only): a dictionary with 10 M keys, a path
// of 100,000 tokens, nodes whose fanout is the whole vocabulary, and the
// largest vocabularies an int32 allows. Each gives the right answer or a
// clear error, never a crash, an overflow or a silently wrong row.
// TREEMASK_TEST_SCALE scales the big inputs (1 = the sizes above).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

std::string last_error() { return treemask_last_error(); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

treemask_trie_stats stats_of(const treemask_trie *t) {
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  EXPECT_EQ(treemask_trie_get_stats(t, &s), TREEMASK_OK);
  return s;
}

MatcherHandle matcher(treemask_trie *t, const treemask_mode_options *o = nullptr) {
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(t, o ? &o->matcher : nullptr, &m), TREEMASK_OK) << last_error();
  return MatcherHandle(m);
}

bool accept(treemask_matcher *m, int32_t token) {
  bool ok = false;
  EXPECT_EQ(treemask_matcher_accept_token(m, token, &ok), TREEMASK_OK) << last_error();
  return ok;
}

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/treemask-limits-XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  ~ScratchDir() { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// ---- A dictionary with 10 M keys ----

// RTP-LLM keys of a 3-level catalogue: "225" lists a level-1 ids, each
// "225_x" lists b ids, each "225_x_y" lists c ids and each leaf key
// "225_x_y_z" lists only end_token_id 2.
struct Catalogue {
  int a = 200, b = 200, c = 250;
  static int32_t id(int level, int i) {
    return (level == 1 ? 1000 : level == 2 ? 10000 : 20000) + i;
  }
  uint64_t keys() const { return 1 + uint64_t(a) + uint64_t(a) * b + uint64_t(a) * b * c; }

  std::string tsv() const {
    std::string out;
    out.reserve(keys() * 22);
    auto list = [&](int level, int n) {
      for (int i = 0; i < n; ++i) {
        if (i) out += '\x02';
        out += std::to_string(id(level, i));
      }
      out += '\n';
    };
    out += "225\t";
    list(1, a);
    for (int x = 0; x < a; ++x) {
      const std::string kx = "225_" + std::to_string(id(1, x));
      out += kx + "\t";
      list(2, b);
      for (int y = 0; y < b; ++y) {
        const std::string ky = kx + "_" + std::to_string(id(2, y));
        out += ky + "\t";
        list(3, c);
        for (int z = 0; z < c; ++z) out += ky + "_" + std::to_string(id(3, z)) + "\t2\n";
      }
    }
    return out;
  }
};

void expect_catalogue_walks(treemask_trie *t, const Catalogue &cat, int walks) {
  std::mt19937 rng(1);
  MatcherHandle m = matcher(t);
  for (int w = 0; w < walks; ++w) {
    treemask_matcher_reset(m.p);
    ASSERT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), size_t(cat.a));
    ASSERT_TRUE(accept(m.p, Catalogue::id(1, int(rng() % cat.a))));
    ASSERT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), size_t(cat.b));
    ASSERT_TRUE(accept(m.p, Catalogue::id(2, int(rng() % cat.b))));
    ASSERT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), size_t(cat.c));
    ASSERT_FALSE(accept(m.p, Catalogue::id(3, cat.c)));  // one past the list
    ASSERT_TRUE(accept(m.p, Catalogue::id(3, int(rng() % cat.c))));
    ASSERT_EQ(testutil::next_tokens(m.p), std::vector<int32_t>{2});
    ASSERT_TRUE(accept(m.p, 2));
    ASSERT_TRUE(treemask_matcher_is_terminated(m.p));
  }
}

TEST(Limits, DictionaryWithTenMillionKeys) {
  Catalogue cat;
  cat.c = std::max(1, int(std::lround(cat.c * testutil::scale())));
  auto start = std::chrono::steady_clock::now();
  const std::string tsv = cat.tsv();
  const double made = seconds_since(start);
  const treemask_trie_options o = testutil::trie_options(151936);
  TrieHandle t;
  start = std::chrono::steady_clock::now();
  ASSERT_EQ(treemask_trie_from_rtp_tsv(&o, testutil::Rtp(225, 2, nullptr).get(), tsv.data(),
                                       tsv.size(), &t.p),
            TREEMASK_OK)
      << last_error();
  const double loaded = seconds_since(start);
  const treemask_trie_stats s = stats_of(t.p);
  EXPECT_EQ(s.n_nodes, cat.keys());
  EXPECT_EQ(s.n_terminals, uint64_t(cat.a) * cat.b * cat.c);
  EXPECT_EQ(s.max_depth, 3u);
  EXPECT_EQ(s.max_fanout, uint32_t(std::max({cat.a, cat.b, cat.c})));
  EXPECT_EQ(s.n_warnings, 0u);
  std::printf("%llu keys, %.0f MB of TSV (made in %.2f s): loaded in %.2f s, %.1f bytes/edge\n",
              static_cast<unsigned long long>(cat.keys()), tsv.size() / 1e6, made, loaded,
              double(s.bytes) / double(s.n_edges));
  expect_catalogue_walks(t.p, cat, 1000);

  // Compiled and mapped back, it is the same trie.
  ScratchDir dir;
  const std::string file = dir.path("catalogue.tmtrie");
  ASSERT_EQ(treemask_trie_save(t.p, file.c_str(), nullptr), TREEMASK_OK) << last_error();
  TrieHandle mapped;
  start = std::chrono::steady_clock::now();
  ASSERT_EQ(treemask_trie_load(file.c_str(), 0, &mapped.p), TREEMASK_OK) << last_error();
  std::printf("saved and loaded back (checksum verified) in %.3f s\n", seconds_since(start));
  EXPECT_EQ(stats_of(mapped.p).n_nodes, s.n_nodes);
  expect_catalogue_walks(mapped.p, cat, 200);
}

// ---- A path of 100,000 tokens ----

TEST(Limits, PathOfOneHundredThousandTokens) {
  constexpr size_t kLength = 100000;
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < kLength; ++i) tokens.push_back(1 + int32_t(i % 1000));
  // A second path shares the first half, then turns off.
  tokens.insert(tokens.end(), tokens.begin(), tokens.begin() + kLength / 2);
  tokens.push_back(5000);
  const std::vector<size_t> offsets{0, kLength, tokens.size()};
  const std::vector<int32_t> stops{0};
  const treemask_trie_options o = testutil::trie_options(8192, stops);
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_paths(&o, tokens.data(), offsets.data(), 2, nullptr, &t.p),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats_of(t.p).max_depth, kLength);

  MatcherHandle m = matcher(t.p);
  EXPECT_EQ(treemask_matcher_forced_tokens(m.p, nullptr, 0), kLength / 2);
  size_t n = 0;
  ASSERT_EQ(treemask_matcher_accept_tokens(m.p, tokens.data(), kLength, &n), TREEMASK_OK);
  EXPECT_EQ(n, kLength);
  EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
  EXPECT_EQ(treemask_matcher_rollback_depth(m.p), kLength);
  treemask_matcher *copy = nullptr;  // a clone shares 1,563 history chunks
  ASSERT_EQ(treemask_matcher_clone(m.p, &copy), TREEMASK_OK);
  MatcherHandle c(copy);
  ASSERT_EQ(treemask_matcher_rollback(c.p, kLength), TREEMASK_OK);
  EXPECT_EQ(treemask_matcher_forced_tokens(c.p, nullptr, 0), kLength / 2);
  EXPECT_EQ(treemask_matcher_rollback_depth(m.p), kLength);  // the original keeps its history
  std::vector<char> text(treemask_matcher_debug_string(m.p, nullptr, 0) + 1);
  treemask_matcher_debug_string(m.p, text.data(), text.size());

  // Modes derive per-node distances over the whole depth, and the budget
  // keeps the only label that fits.
  treemask_mode_options mo;
  treemask_mode_options_init(&mo);
  mo.max_new_tokens = kLength / 2 + 2;
  mo.leaves_only = true;
  MatcherHandle budget = matcher(t.p, &mo);
  ASSERT_EQ(treemask_matcher_accept_tokens(budget.p, tokens.data(), kLength / 2, &n), TREEMASK_OK);
  EXPECT_EQ(testutil::next_tokens(budget.p), std::vector<int32_t>{5000});
  const int32_t separator = 7000;
  treemask_mode_options_init(&mo);
  mo.label_separator = &separator;
  mo.n_label_separator = 1;
  MatcherHandle multi = matcher(t.p, &mo);
  ASSERT_EQ(treemask_matcher_accept_tokens(multi.p, tokens.data(), kLength, &n), TREEMASK_OK);
  EXPECT_EQ(testutil::next_tokens(multi.p), (std::vector<int32_t>{0, separator}));

  // State arrays walk it too, and the file form keeps it.
  uint32_t state = TREEMASK_STATE_ROOT;
  for (size_t i = 0; i < kLength; ++i) {
    bool ok = false;
    ASSERT_EQ(treemask_trie_advance_states(t.p, &state, &tokens[i], 1, 0, &ok), TREEMASK_OK);
    ASSERT_TRUE(ok) << i;
  }
  ScratchDir dir;
  const std::string file = dir.path("deep.tmtrie");
  ASSERT_EQ(treemask_trie_save(t.p, file.c_str(), nullptr), TREEMASK_OK);
  TrieHandle loaded;
  ASSERT_EQ(treemask_trie_load(file.c_str(), TREEMASK_LOAD_TRUSTED, &loaded.p), TREEMASK_OK);
  MatcherHandle lm = matcher(loaded.p);
  ASSERT_EQ(treemask_matcher_accept_tokens(lm.p, tokens.data(), kLength, &n), TREEMASK_OK);
  EXPECT_EQ(n, kLength);

  // The same path as one JSON line.
  std::string line = "[";
  for (size_t i = 0; i < kLength; ++i) line += (i ? "," : "") + std::to_string(tokens[i]);
  line += "]\n";
  TrieHandle from_jsonl;
  ASSERT_EQ(treemask_trie_from_jsonl(&o, line.data(), line.size(), &from_jsonl.p), TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats_of(from_jsonl.p).max_depth, kLength);
}

TEST(Limits, DictionaryChainTwoThousandKeysDeep) {
  // RTP-LLM keys repeat the whole prefix, so depth d costs O(d^2) bytes.
  constexpr int kDepth = 2000;
  std::string tsv, key = "225";
  for (int d = 0; d < kDepth; ++d) {
    const int32_t next = 100 + d;
    tsv.append(key).append("\t").append(std::to_string(next)).append("\n");
    key.append("_").append(std::to_string(next));
  }
  tsv += key + "\t2\n";
  const treemask_trie_options o = testutil::trie_options(151936);
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_tsv(&o, testutil::Rtp(225, 2, "_").get(), tsv.data(), tsv.size(),
                                       &t.p),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats_of(t.p).max_depth, uint32_t(kDepth));
  MatcherHandle m = matcher(t.p);
  EXPECT_EQ(treemask_matcher_forced_tokens(m.p, nullptr, 0), size_t(kDepth));
}

// ---- Fanout of the whole vocabulary ----

TEST(Limits, NodesWhoseFanoutIsTheWholeVocabulary) {
  constexpr int32_t kVocab = 151936;
  const std::vector<int32_t> stops{151643, 151645};
  constexpr int32_t kWide = 7;  // not terminal, its children are every other token
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0, 0};  // the empty path: the root is terminal
  for (int32_t t = 0; t < kVocab; ++t) {
    if (t == stops[0] || t == stops[1]) continue;
    if (t != kWide) tokens.push_back(t);
    offsets.push_back(tokens.size());
    tokens.insert(tokens.end(), {kWide, t});
    offsets.push_back(tokens.size());
  }
  const treemask_trie_options o = testutil::trie_options(kVocab, stops);
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_paths(&o, tokens.data(), offsets.data(), offsets.size() - 1, nullptr,
                                     &t.p),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats_of(t.p).max_fanout, uint32_t(kVocab - 2));

  const size_t words = treemask_bitmask_words(kVocab);
  std::vector<int32_t> row(words + 1, 0);
  MatcherHandle m = matcher(t.p);
  bool need_apply = true;
  ASSERT_EQ(
      treemask_matcher_fill_next_token_bitmask(m.p, row.data(), words + 1, nullptr, &need_apply),
      TREEMASK_OK);
  EXPECT_FALSE(need_apply);  // every token is allowed at the root: nothing to mask
  for (size_t w = 0; w < words; ++w) ASSERT_EQ(row[w], -1) << w;
  EXPECT_EQ(row[words], 0);
  EXPECT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), size_t(kVocab));

  ASSERT_TRUE(accept(m.p, kWide));
  ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), words, nullptr, &need_apply),
            TREEMASK_OK);
  EXPECT_TRUE(need_apply);
  EXPECT_EQ(testutil::decode_row(row.data(), words).size(), size_t(kVocab - 2));
  for (int32_t s : stops) EXPECT_EQ((uint32_t(row[s / 32]) >> (s % 32)) & 1, 0u);

  // Masking with that row removes exactly the two stop tokens.
  std::vector<float> logits(kVocab, 1.0f);
  ASSERT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 1, kVocab, kVocab,
                                             row.data(), words, 1, kVocab, nullptr, 0),
            TREEMASK_OK);
  size_t masked = 0;
  for (float x : logits) masked += std::isinf(x);
  EXPECT_EQ(masked, 2u);

  // A batch's incremental fill writes such rows in full; state arrays agree.
  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 2;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  MatcherHandle root = matcher(t.p);
  ASSERT_EQ(treemask_batch_set_matcher(batch, 0, root.p), TREEMASK_OK);
  ASSERT_EQ(treemask_batch_set_matcher(batch, 1, m.p), TREEMASK_OK);
  std::vector<int32_t> rows(2 * words, 0x5A5A5A5A);
  ASSERT_EQ(treemask_batch_bind_bitmask(batch, rows.data(), words), TREEMASK_OK);
  for (int32_t mode : {TREEMASK_FILL_FULL, TREEMASK_FILL_INCREMENTAL}) {
    ASSERT_EQ(treemask_batch_fill_bound(batch, nullptr, 0, mode, nullptr), TREEMASK_OK);
    EXPECT_TRUE(std::equal(row.begin(), row.begin() + words, rows.begin() + words));
  }
  treemask_batch_free(batch);
  uint32_t states[2] = {TREEMASK_STATE_ROOT, 0};
  ASSERT_EQ(treemask_matcher_get_state(m.p, &states[1]), TREEMASK_OK);
  ASSERT_EQ(treemask_trie_fill_states(t.p, states, 2, rows.data(), words), TREEMASK_OK);
  EXPECT_EQ(testutil::decode_row(rows.data(), words).size(), size_t(kVocab));
  EXPECT_TRUE(std::equal(row.begin(), row.begin() + words, rows.begin() + words));
}

TEST(Limits, DictionaryKeyListingTheWholeVocabulary) {
  constexpr int32_t kVocab = 151936;
  std::string json = R"({"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"225": [)";
  for (int32_t t = 0; t < kVocab; ++t) json.append(t ? "," : "").append(std::to_string(t));
  json += "]}}";
  const treemask_trie_options o = testutil::trie_options(kVocab);
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_json(&o, nullptr, json.data(), json.size(), &t.p), TREEMASK_OK)
      << last_error();
  MatcherHandle m = matcher(t.p);
  EXPECT_EQ(treemask_matcher_next_tokens(m.p, nullptr, 0), size_t(kVocab));
  std::vector<int32_t> row(treemask_bitmask_words(kVocab));
  bool need_apply = true;
  ASSERT_EQ(
      treemask_matcher_fill_next_token_bitmask(m.p, row.data(), row.size(), nullptr, &need_apply),
      TREEMASK_OK);
  EXPECT_FALSE(need_apply);
}

// ---- The largest vocabularies ----

// vocab_size up to INT32_MAX: rows of up to 2^26 words (256 MiB), token ids
// next to the int32 limit, word counts that no longer fit in an int32 row
// index computation done in 32 bits.
TEST(Limits, VocabularySizesAtTheInt32Limit) {
  for (const int32_t vocab : {INT32_MAX / 32, INT32_MAX - 31, INT32_MAX}) {
    SCOPED_TRACE(vocab);
    const size_t words = treemask_bitmask_words(vocab);
    EXPECT_EQ(words, (size_t(vocab) + 31) / 32);
    const int32_t top = vocab - 1, below = vocab - 2;
    const std::vector<int32_t> stops{top};
    const std::vector<int32_t> tokens{below, 0, below};
    const std::vector<size_t> offsets{0, 1, 3};
    const treemask_trie_options o = testutil::trie_options(vocab, stops);
    TrieHandle t;
    ASSERT_EQ(treemask_trie_from_paths(&o, tokens.data(), offsets.data(), 2, nullptr, &t.p),
              TREEMASK_OK)
        << last_error();

    std::vector<int32_t> row(words + 1, -1);
    MatcherHandle m = matcher(t.p);
    ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), words, nullptr, nullptr),
              TREEMASK_OK);
    EXPECT_EQ(row[words], -1);  // not one word past the row
    EXPECT_EQ(row[0], 1);
    for (size_t w = 1; w + 1 < words; ++w) ASSERT_EQ(row[w], 0) << w;
    EXPECT_EQ(uint32_t(row[words - 1]), uint32_t{1} << (below % 32));
    EXPECT_EQ(testutil::next_tokens(m.p), (std::vector<int32_t>{0, below}));

    bool ok = true;
    ASSERT_EQ(treemask_matcher_accept_token(m.p, INT32_MIN, &ok), TREEMASK_OK);
    EXPECT_FALSE(ok);
    if (vocab == INT32_MAX) {
      ASSERT_EQ(treemask_matcher_accept_token(m.p, INT32_MAX, &ok), TREEMASK_OK);
      EXPECT_FALSE(ok);
      EXPECT_NE(last_error().find("out of range"), std::string::npos) << last_error();
    }
    ASSERT_TRUE(accept(m.p, below));
    ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m.p, row.data(), words, nullptr, nullptr),
              TREEMASK_OK);
    EXPECT_EQ(uint32_t(row[words - 1]), uint32_t{1} << (top % 32));  // the stop token only
    ASSERT_TRUE(accept(m.p, top));
    EXPECT_TRUE(treemask_matcher_is_terminated(m.p));

    uint32_t state = TREEMASK_STATE_ROOT;
    ASSERT_EQ(treemask_trie_fill_states(t.p, &state, 1, row.data(), words), TREEMASK_OK);
    EXPECT_EQ(row[0], 1);
    EXPECT_EQ(uint32_t(row[words - 1]), uint32_t{1} << (below % 32));

    // Logits narrower than the vocabulary need only the mask words they use.
    std::vector<float> logits(64, 0.0f);
    ASSERT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 1, 64, 64, row.data(),
                                               2, 1, vocab, nullptr, 0),
              TREEMASK_OK);
    EXPECT_EQ(logits[0], 0.0f);
    EXPECT_TRUE(std::isinf(logits[1]));

    // The top id is fine in a dictionary; one past it is an error naming it.
    const std::string ok_tsv = "225\t" + std::to_string(below) + "\n";
    const treemask_trie_options ro = testutil::trie_options(vocab);
    TrieHandle d;
    EXPECT_EQ(treemask_trie_from_rtp_tsv(&ro, testutil::Rtp(225, 2, nullptr).get(), ok_tsv.data(),
                                         ok_tsv.size(), &d.p),
              TREEMASK_OK)
        << last_error();
    const std::string bad_tsv = "225\t" + std::to_string(int64_t{vocab}) + "\n";
    TrieHandle bad;
    EXPECT_EQ(treemask_trie_from_rtp_tsv(&ro, testutil::Rtp(225, 2, nullptr).get(), bad_tsv.data(),
                                         bad_tsv.size(), &bad.p),
              TREEMASK_ERR_OUT_OF_RANGE);
    EXPECT_NE(last_error().find(std::to_string(int64_t{vocab})), std::string::npos) << last_error();
  }
}

}  // namespace
