// Hierarchical and multi-label decoding on real taxonomies: the IAB Tech Lab
// Content Taxonomy 3.1 (tests/data/iab, CC BY 3.0) and, when ../shared is
// present, the Google product taxonomy. Labels are "Tier 1 > Tier 2 > ..."
// paths, tokenized by a small deterministic word tokenizer, so every level
// of the hierarchy is a label and deeper labels extend shallower ones.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "modes/modes_util.h"

namespace {

using modes_util::accept;
using modes_util::fill;
using modes_util::last_error;
using modes_util::MatcherHandle;
using modes_util::TrieHandle;
using V = std::vector<int32_t>;

constexpr int32_t kStop = 0;

// Splits text into words with their leading space and single punctuation
// characters (" >", " &"), like a byte-level BPE would at word boundaries,
// and numbers each new piece. Deterministic: ids follow first appearance.
class WordTokenizer {
 public:
  V encode(const std::string &text) {
    V out;
    size_t i = 0;
    while (i < text.size()) {
      size_t j = i;
      if (text[j] == ' ') ++j;
      if (j < text.size() && std::isalnum(static_cast<unsigned char>(text[j]))) {
        while (j < text.size() && std::isalnum(static_cast<unsigned char>(text[j]))) ++j;
      } else if (j < text.size()) {
        ++j;  // one punctuation (or other) byte
      }
      out.push_back(id(text.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  int32_t id(const std::string &piece) {
    auto [it, fresh] = ids_.try_emplace(piece, next_);
    if (fresh) ++next_;
    return it->second;
  }
  int32_t vocab_size() const { return next_; }

 private:
  std::map<std::string, int32_t> ids_;
  int32_t next_ = kStop + 1;
};

struct Taxonomy {
  std::vector<std::string> paths;  // "A > B > C"
  std::vector<int64_t> ids;
  std::vector<V> tokens;
  std::set<std::string> inner;  // categories that have a subcategory
  std::set<size_t> extended;    // labels whose tokens another label's tokens extend
  WordTokenizer tok;
  TrieHandle trie;
  int32_t vocab = 0;

  void add(const std::vector<std::string> &tiers, int64_t id) {
    std::string path;
    for (size_t i = 0; i < tiers.size(); ++i) {
      if (i > 0) inner.insert(path);
      path += (i ? " > " : "") + tiers[i];
    }
    paths.push_back(path);
    ids.push_back(id);
  }

  void build(int32_t extra_tokens) {
    for (const auto &p : paths) tokens.push_back(tok.encode(p));
    vocab = tok.vocab_size() + extra_tokens;
    ASSERT_EQ(testutil::make_trie(tokens, vocab, {kStop}, trie, &ids), TREEMASK_OK) << last_error();
    // A trie leaf is a label no other label extends token by token: every
    // category with subcategories, and also a name that is a word-prefix of
    // a sibling's ("Cat Furniture" beside "Cat Furniture Accessories").
    std::vector<size_t> order(tokens.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tokens[a] < tokens[b]; });
    for (size_t k = 0; k + 1 < order.size(); ++k) {
      const V &a = tokens[order[k]], &b = tokens[order[k + 1]];
      if (b.size() > a.size() && std::equal(a.begin(), a.end(), b.begin()))
        extended.insert(order[k]);
    }
  }

  bool is_leaf(size_t label) const { return !extended.count(label); }
};

std::string data_path(const std::string &relative) {
  const char *root = std::getenv("TREEMASK_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/" + relative;
}

std::vector<std::string> split_tabs(const std::string &line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, '\t')) out.push_back(cell);
  if (!line.empty() && line.back() == '\t') out.emplace_back();
  return out;
}

// tests/data/iab: two header rows, then Unique ID, Parent, Name, Tier 1..4.
void load_iab(Taxonomy &t) {
  std::ifstream in(data_path("tests/data/iab/content-taxonomy-3.1.tsv"), std::ios::binary);
  ASSERT_TRUE(in) << "tests/data/iab/content-taxonomy-3.1.tsv is missing";
  std::string line;
  int row = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (row++ < 2) continue;
    const auto cells = split_tabs(line);
    ASSERT_GE(cells.size(), 7u) << "row " << row;
    std::vector<std::string> tiers;
    for (size_t c = 3; c < 7 && !cells[c].empty(); ++c) tiers.push_back(cells[c]);
    t.add(tiers, static_cast<int64_t>(t.paths.size()));
  }
  ASSERT_EQ(t.paths.size(), 704u);
}

// Walks every label through the masks: each token must be offered, and a
// stop token exactly where the label may end in this mode.
void walk_every_label(Taxonomy &t, bool leaves_only) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.leaves_only = leaves_only;
  MatcherHandle m = modes_util::make_matcher(t.trie.p, o);
  size_t stops_offered = 0;
  for (size_t i = 0; i < t.paths.size(); ++i) {
    treemask_matcher_reset(m.p);
    for (int32_t token : t.tokens[i]) {
      const V allowed = testutil::next_tokens(m.p);
      ASSERT_TRUE(std::binary_search(allowed.begin(), allowed.end(), token)) << t.paths[i];
      ASSERT_TRUE(accept(m.p, token));
    }
    const bool may_end = !leaves_only || t.is_leaf(i);
    ASSERT_EQ(treemask_matcher_can_terminate(m.p), may_end) << t.paths[i];
    const V allowed = testutil::next_tokens(m.p);
    ASSERT_EQ(std::binary_search(allowed.begin(), allowed.end(), kStop), may_end) << t.paths[i];
    stops_offered += may_end;
    if (may_end) {
      ASSERT_TRUE(accept(m.p, kStop));
      ASSERT_EQ(modes_util::produced_labels(m.p), std::vector<int64_t>{t.ids[i]}) << t.paths[i];
    }
  }
  EXPECT_EQ(stops_offered, leaves_only ? t.paths.size() - t.extended.size() : t.paths.size());
}

class Iab : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load_iab(t));
    // Pieces that no label uses, numbered before the vocabulary is fixed.
    separator = t.tok.encode(" |");
    think_end = t.tok.encode("</think>\n");
    thinking = t.tok.encode("Let me see");
    ASSERT_NO_FATAL_FAILURE(t.build(0));
  }
  Taxonomy t;
  V separator, think_end, thinking;
};

TEST_F(Iab, EveryLevelOrOnlyLeavesEndASequence) {
  // 704 categories, 87 with subcategories; no name is a word-prefix of a sibling's.
  EXPECT_EQ(t.inner.size(), 87u);
  EXPECT_EQ(t.extended.size(), t.inner.size());
  ASSERT_NO_FATAL_FAILURE(walk_every_label(t, false));
  ASSERT_NO_FATAL_FAILURE(walk_every_label(t, true));
}

TEST_F(Iab, MultiLabelProducesDistinctLabelsUntilTheCap) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.label_separator = separator.data();
  o.n_label_separator = separator.size();
  o.max_labels = 3;
  std::mt19937_64 rng(5);
  for (int round = 0; round < testutil::scaled(40); ++round) {
    MatcherHandle m = modes_util::make_matcher(t.trie.p, o);
    int steps = 0;
    while (!treemask_matcher_is_terminated(m.p)) {
      ASSERT_LT(++steps, 500);
      const V allowed = fill(m.p, t.vocab);
      ASSERT_FALSE(allowed.empty()) << modes_util::debug_string(m.p);
      // Prefer continuing labels and separators, so sequences get long.
      int32_t pick = allowed[rng() % allowed.size()];
      if (pick == kStop && allowed.size() > 1 && rng() % 4) pick = allowed.back();
      ASSERT_TRUE(accept(m.p, pick)) << pick;
    }
    const auto labels = modes_util::produced_labels(m.p);
    ASSERT_GE(labels.size(), 1u);
    ASSERT_LE(labels.size(), 3u);
    EXPECT_EQ(std::set<int64_t>(labels.begin(), labels.end()).size(), labels.size());
  }
}

TEST_F(Iab, ASeparatorStartingWithTheHierarchyMarkIsRejected) {
  const V conflict = t.tok.encode(" > |");
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.label_separator = conflict.data();
  o.n_label_separator = conflict.size();
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(t.trie.p, &o.matcher, &m), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("label_separator[0] = " + std::to_string(conflict[0]) +
                              " is also a child token of a terminal node"),
            std::string::npos)
      << last_error();
}

TEST_F(Iab, BanningATier1SubtreeHidesItsFirstToken) {
  std::vector<int64_t> banned;
  for (size_t i = 0; i < t.paths.size(); ++i) {
    if (t.paths[i].rfind("Attractions", 0) == 0) banned.push_back(t.ids[i]);
  }
  ASSERT_GT(banned.size(), 5u);
  treemask_exclusion_set *s = nullptr;
  ASSERT_EQ(treemask_exclusion_set_create(t.trie.p, banned.data(), banned.size(), &s), TREEMASK_OK);
  modes_util::ExclusionHandle set(s);
  EXPECT_EQ(treemask_exclusion_set_n_terminals(s), banned.size());
  MatcherHandle m = modes_util::make_matcher(t.trie.p, modes_util::c_options({}));
  const V before = fill(m.p, t.vocab);
  ASSERT_EQ(treemask_matcher_set_label_filter(m.p, s, nullptr, 0, nullptr, 0), TREEMASK_OK);
  const V after = fill(m.p, t.vocab);
  const int32_t attractions = t.tok.id("Attractions");
  EXPECT_TRUE(std::binary_search(before.begin(), before.end(), attractions));
  EXPECT_FALSE(std::binary_search(after.begin(), after.end(), attractions));
  EXPECT_EQ(after.size() + 1, before.size());
}

TEST_F(Iab, ALengthBudgetNeverCutsALabel) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < testutil::scaled(60); ++round) {
    const int64_t budget = 1 + static_cast<int64_t>(rng() % 8);
    treemask_mode_options o;
    treemask_mode_options_init(&o);
    o.max_new_tokens = budget;
    o.matcher.terminate_without_stop_token = true;
    MatcherHandle m = modes_util::make_matcher(t.trie.p, o);
    V taken;
    for (int64_t i = 0; i < budget && !treemask_matcher_is_terminated(m.p); ++i) {
      const V allowed = fill(m.p, t.vocab);
      ASSERT_FALSE(allowed.empty());
      taken.push_back(allowed[rng() % allowed.size()]);
      ASSERT_TRUE(accept(m.p, taken.back()));
    }
    if (taken.back() == kStop) taken.pop_back();
    // What was generated is a whole label.
    EXPECT_TRUE(std::find(t.tokens.begin(), t.tokens.end(), taken) != t.tokens.end())
        << "budget " << budget << ": " << modes_util::debug_string(m.p);
  }
}

TEST_F(Iab, ThinkingThenAHierarchicalLabel) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.think_end_tokens = think_end.data();
  o.n_think_end_tokens = think_end.size();
  o.start_in_thinking = true;
  o.max_thinking_tokens = static_cast<int64_t>(thinking.size()) + 1;
  o.leaves_only = true;
  MatcherHandle m = modes_util::make_matcher(t.trie.p, o);
  for (int32_t token : thinking) ASSERT_TRUE(accept(m.p, token));
  ASSERT_TRUE(accept(m.p, think_end[0]));  // the thinking budget is now spent
  EXPECT_EQ(testutil::next_tokens(m.p), V{think_end[1]});
  size_t n = 0;
  ASSERT_EQ(treemask_matcher_accept_forced_tokens(m.p, nullptr, 0, &n), TREEMASK_OK);
  EXPECT_EQ(n, think_end.size() - 1);
  EXPECT_FALSE(treemask_matcher_is_thinking(m.p));
  size_t leaf = 0;
  while (!t.is_leaf(leaf) || t.tokens[leaf].size() < 3) ++leaf;
  for (int32_t token : t.tokens[leaf]) ASSERT_TRUE(accept(m.p, token)) << t.paths[leaf];
  ASSERT_TRUE(accept(m.p, kStop));
  EXPECT_EQ(modes_util::produced_labels(m.p), std::vector<int64_t>{t.ids[leaf]});
}

// The Google product taxonomy (5,582 categories, 7 levels) from ../shared.
TEST(GoogleProductTaxonomy, LeavesAndLevelsOnTheRealHierarchy) {
  const std::string file =
      data_path("../shared/data/taxonomies/google-product-taxonomy/taxonomy-with-ids.en-US.txt");
  std::ifstream in(file, std::ios::binary);
  if (!in) GTEST_SKIP() << file << " not found (../shared is absent); skipping";
  Taxonomy t;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t dash = line.find(" - ");
    ASSERT_NE(dash, std::string::npos) << line;
    std::vector<std::string> tiers;
    std::string rest = line.substr(dash + 3);
    for (size_t at; (at = rest.find(" > ")) != std::string::npos; rest = rest.substr(at + 3)) {
      tiers.push_back(rest.substr(0, at));
    }
    tiers.push_back(rest);
    t.add(tiers, std::stoll(line.substr(0, dash)));
  }
  ASSERT_EQ(t.paths.size(), 5582u);
  ASSERT_NO_FATAL_FAILURE(t.build(0));
  EXPECT_EQ(t.paths.size() - t.inner.size(), 4709u) << "leaf categories per the data README";
  EXPECT_GT(t.extended.size(), t.inner.size()) << "some names are word-prefixes of a sibling's";
  ASSERT_NO_FATAL_FAILURE(walk_every_label(t, true));
  ASSERT_NO_FATAL_FAILURE(walk_every_label(t, false));
}

}  // namespace
