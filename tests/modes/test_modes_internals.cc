// White-box tests of the decoding modes' internals: tries without label ids
// (an RTP-LLM prefix dictionary identifies a label by its terminal node),
// the derived per-node data, and the used-label delta's exact undo.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/test_util.h"
#include "matcher/matcher.h"
#include "rules/mode_index.h"
#include "rules/mode_rules.h"

namespace treemask {
namespace {

using V = std::vector<int32_t>;

Ref<const Trie> build(const std::vector<V> &paths, int32_t vocab, bool no_labels) {
  V tokens;
  std::vector<size_t> offsets{0};
  for (const V &p : paths) {
    tokens.insert(tokens.end(), p.begin(), p.end());
    offsets.push_back(tokens.size());
  }
  TrieBuildOptions opts;
  opts.vocab_size = vocab;
  opts.stop_tokens = {0};
  opts.no_labels = no_labels;
  auto trie = build_trie_from_paths(opts, tokens, offsets, nullptr);
  EXPECT_TRUE(trie.ok()) << trie.status().message();
  return Ref<const Trie>::share(trie.value().get());
}

V allowed(const Matcher &m) {
  V out(m.next_tokens(nullptr, 0));
  m.next_tokens(out.data(), out.size());
  return out;
}

std::vector<int64_t> produced(const Matcher &m) {
  std::vector<int64_t> out(m.produced_labels(nullptr, 0));
  m.produced_labels(out.data(), out.size());
  return out;
}

void take(Matcher &m, const V &tokens) {
  for (int32_t t : tokens) {
    bool ok = false;
    std::string why;
    ASSERT_TRUE(m.accept(t, &ok, &why).ok());
    ASSERT_TRUE(ok) << why;
  }
}

bool same_state(const ModeState &a, const ModeState &b) {
  return a.at.node == b.at.node && a.at.phase == b.at.phase && a.at.step == b.at.step &&
         a.at.labels == b.at.labels && a.at.think_tokens == b.at.think_tokens &&
         a.at.accepted == b.at.accepted && a.used == b.used && a.budget_end == b.budget_end;
}

TEST(ModeRules, AllowedAndAdvanceAgreeOnRandomWalks) {
  // Multi-label, leaves-only, think mode and a budget over a random trie:
  // at every state the row, the list, the sole token and can_end describe
  // one set; every listed token advances a copy of the state and every
  // other token leaves it exactly as it was; stepping a copy never changes
  // the original (its produced labels included: copy-on-write).
  std::mt19937 rng(11);
  std::vector<V> paths;
  for (int i = 0; i < 60; ++i) {
    V p;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < len; ++j) p.push_back(3 + static_cast<int32_t>(rng() % 6));
    paths.push_back(p);
  }
  const int32_t vocab = 16;
  Ref<const Trie> trie = build(paths, vocab, false);
  size_t steps = 0, phases_seen = 0;
  for (int config = 0; config < 4; ++config) {
    ModeOptions o;
    o.label_separator = {12, 11};
    o.max_labels = 3;
    o.leaves_only = config % 2 == 1;
    if (config >= 2) {
      o.think_end_tokens = {13, 14};
      o.think_begin_token = 15;
      o.max_thinking_tokens = 3;
      o.max_new_tokens = 14;
    }
    auto cfg = make_mode_config(*trie, o);
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    const ModeRules rules(trie, cfg.value(), nullptr, config == 1);
    for (int walk = 0; walk < 40; ++walk) {
      ModeState s = rules.initial();
      for (int depth = 0; depth < 30; ++depth) {
        if (s.at.phase == Phase::kTerminated) break;
        const AllowedSet a = rules.allowed(s, s.remaining());
        std::vector<uint32_t> row(trie->row_words());
        const uint64_t n_row = write_row(*trie, a, rules.stops(), row.data());
        V list(treemask::list(a, rules.stops(), vocab, nullptr, 0));
        ASSERT_EQ(treemask::list(a, rules.stops(), vocab, list.data(), list.size()), list.size());
        ASSERT_EQ(n_row, list.size());
        ASSERT_TRUE(std::is_sorted(list.begin(), list.end()));
        for (int32_t t = 0; t < vocab; ++t) {
          const bool listed = std::binary_search(list.begin(), list.end(), t);
          ASSERT_EQ(test_bit(row.data(), t), listed) << "token " << t;
          ModeState copy = s;
          auto r = rules.advance(copy, a, t);
          ASSERT_TRUE(r.ok());
          ASSERT_EQ(r.value(), listed) << "token " << t << " config " << config;
          if (!listed) {
            ASSERT_TRUE(same_state(copy, s)) << "a rejection changed the state";
          }
        }
        const auto sole = sole_token(a);
        if (sole) {
          ASSERT_TRUE(std::binary_search(list.begin(), list.end(), *sole));
        } else if (list.size() == 1) {
          ASSERT_TRUE(can_end(a));  // one token, and it is a stop token
        }
        ASSERT_FALSE(list.empty());
        const ModeState before = s;
        const auto before_used = s.used ? std::make_optional(s.used->produced) : std::nullopt;
        ModeState next = s;
        ASSERT_TRUE(rules.advance(next, a, list[rng() % list.size()]).value());
        ++steps;
        phases_seen |= 1u << static_cast<int>(next.at.phase);
        ASSERT_TRUE(same_state(s, before)) << "stepping a copy changed the original";
        if (before_used) {
          ASSERT_EQ(s.used->produced, *before_used);
        }
        s = std::move(next);
      }
    }
  }
  EXPECT_GT(steps, 1000u);
  // Active, terminated, thinking and separator states were all visited.
  EXPECT_EQ(phases_seen, (1u << 0) | (1u << 2) | (1u << 4) | (1u << 5));
}

TEST(ModeIndex, EndsAndDistancesPerNode) {
  // Nodes (BFS): 0 root, 1 [1], 2 [4], 3 [1 2], 4 [1 2 3].
  Ref<const Trie> trie = build({{1}, {1, 2, 3}, {4}}, 8, false);
  const NodeStats &all = node_stats(*trie, false);
  const NodeStats &leaves = node_stats(*trie, true);
  EXPECT_EQ(all.ends, (std::vector<uint32_t>{3, 2, 1, 1, 1}));
  EXPECT_EQ(all.dist, (std::vector<uint32_t>{1, 0, 0, 1, 0}));
  EXPECT_EQ(leaves.ends, (std::vector<uint32_t>{2, 1, 1, 1, 1}));
  EXPECT_EQ(leaves.dist, (std::vector<uint32_t>{1, 2, 0, 1, 0}));
  EXPECT_EQ(&node_stats(*trie, false), &all);  // built once, then cached
  for (uint32_t node = 1; node < 5; ++node) EXPECT_LT(parent_of(*trie, node), node);
  EXPECT_EQ(parent_of(*trie, 4), 3u);
  EXPECT_EQ(path_to(*trie, 4), (V{1, 2, 3}));
  const TokenIndex &tokens = token_index(*trie);
  EXPECT_TRUE(TokenIndex::test(tokens.on_edge, 3));
  EXPECT_FALSE(TokenIndex::test(tokens.on_edge, 5));
  EXPECT_TRUE(TokenIndex::test(tokens.after_terminal, 2));  // [1] is terminal, 2 follows it
  EXPECT_FALSE(TokenIndex::test(tokens.after_terminal, 1));
}

TEST(NoLabels, ALabelIsItsTerminalNode) {
  // Without label ids, [1 2] and [3] are two labels even if paths repeat.
  Ref<const Trie> trie = build({{1, 2}, {3}, {1, 2}}, 8, true);
  ModeOptions modes;
  modes.label_separator = {5};
  auto made = Matcher::create(trie, MatcherOptions{}, modes);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Matcher &m = *made.value();
  ASSERT_NO_FATAL_FAILURE(take(m, {1, 2}));
  EXPECT_EQ(m.label_ids(nullptr, 0), 0u);  // no label ids: label_ids reports nothing
  ASSERT_NO_FATAL_FAILURE(take(m, {5}));
  EXPECT_EQ(allowed(m), (V{3}));
  const auto ids = produced(m);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(path_to(*trie, static_cast<uint32_t>(ids[0])), (V{1, 2}));
  // Exclusions by node id.
  auto set = ExclusionSet::create(trie, std::vector<int64_t>{ids[0], 999});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set.value()->terminals().size(), 1u);
  auto fresh = Matcher::create(trie, MatcherOptions{}, modes);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh.value()->set_label_filter(set.value().get(), {}, nullptr).ok());
  EXPECT_EQ(allowed(*fresh.value()), (V{3}));
}

// Blocking and unblocking labels in any order restores every node's info
// exactly, and matches a from-scratch filter of the same ends.
TEST(UsedLabelDelta, UndoIsExactAndMatchesAFilter) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < testutil::scaled(200); ++round) {
    std::vector<V> paths;
    const int n = 2 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      V p;
      const int len = static_cast<int>(rng() % 5);
      for (int j = 0; j < len; ++j) p.push_back(1 + static_cast<int32_t>(rng() % 4));
      paths.push_back(p);
    }
    Ref<const Trie> trie = build(paths, 8, round % 2 == 0);
    const bool leaves_only = rng() % 2;
    const NodeStats &stats = node_stats(*trie, leaves_only);
    const LabelView below(*trie, stats, nullptr);
    std::vector<uint32_t> ends;
    for (uint32_t node = 0; node < trie->n_nodes(); ++node) {
      if (stats.dist[node] == 0) ends.push_back(node);
    }
    std::vector<uint32_t> blocked;
    Delta delta;
    for (int step = 0; step < 12; ++step) {
      if (!blocked.empty() && rng() % 3 == 0) {
        unblock_keys_of(below, delta, blocked.back());
        blocked.pop_back();
      } else {
        blocked.push_back(ends[rng() % ends.size()]);
        block_keys_of(below, delta, blocked.back(), true);
      }
      // The same ends blocked by a filter built from scratch.
      std::vector<uint32_t> unique_blocked = blocked;
      const auto filter = LabelFilter::blocking(*trie, stats, nullptr, unique_blocked);
      const LabelView with = below.with(&delta);
      const LabelView fresh(*trie, stats, filter.get());
      for (uint32_t node = 0; node < trie->n_nodes(); ++node) {
        ASSERT_EQ(with.info(node).ends, fresh.info(node).ends) << "node " << node;
        ASSERT_EQ(with.info(node).dist, fresh.info(node).dist) << "node " << node;
      }
    }
    while (!blocked.empty()) {
      unblock_keys_of(below, delta, blocked.back());
      blocked.pop_back();
    }
    EXPECT_TRUE(delta.nodes.empty());
    EXPECT_TRUE(delta.refs.empty());
  }
}

}  // namespace
}  // namespace treemask
