// White-box tests of the compiled trie layout, the builder and the history.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "matcher/history.h"
#include "trie/bfs_builder.h"
#include "trie/trie.h"

namespace treemask {
namespace {

struct Paths {
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  explicit Paths(std::initializer_list<std::vector<int32_t>> ps) {
    for (const auto &p : ps) {
      tokens.insert(tokens.end(), p.begin(), p.end());
      offsets.push_back(tokens.size());
    }
  }
};

Result<Ref<Trie>> build(const Paths &p, int32_t vocab, std::vector<int32_t> stops,
                        const int64_t *labels = nullptr) {
  TrieBuildOptions o;
  o.vocab_size = vocab;
  o.stop_tokens = std::move(stops);
  return build_trie_from_paths(o, p.tokens, p.offsets, labels);
}

template <class T>
std::vector<T> vec(const T *p, size_t n) {
  return {p, p + n};
}

TEST(Builder, NumbersNodesBreadthFirstWithImplicitChildren) {
  // Paths: [5 1] [5 2] [3]. Root children in token order: 3 -> node 1, 5 -> node 2;
  // node 2's children: 1 -> node 3, 2 -> node 4.
  auto r = build(Paths{{5, 1}, {5, 2}, {3}}, 10, {0});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const TrieArrays &a = r.value()->arrays();
  EXPECT_EQ(a.n_nodes, 5u);
  EXPECT_EQ(vec(a.node_offsets, 6), (std::vector<uint32_t>{0, 2, 2, 4, 4, 4}));
  EXPECT_EQ(vec(a.edge_tokens, 4), (std::vector<int32_t>{3, 5, 1, 2}));
  EXPECT_EQ(a.terminal_bits[0], (1u << 1) | (1u << 3) | (1u << 4));
  EXPECT_EQ(a.n_terminals, 3u);
  // Labels by terminal rank: node 1 (path 2), node 3 (path 0), node 4 (path 1);
  // one label each, so the overflow table is empty.
  EXPECT_EQ(vec(a.first_labels32, 3), (std::vector<uint32_t>{2, 0, 1}));  // all fit 32 bits
  EXPECT_EQ(a.n_multi, 0u);
  EXPECT_EQ(a.n_labels(), 3u);
  EXPECT_EQ(a.max_depth, 2u);
  EXPECT_EQ(a.max_fanout, 2u);

  const Children c = r.value()->children(2);
  EXPECT_EQ(c.first_child, 3u);
  EXPECT_EQ(Trie::find_child(c, 2), 1);
  EXPECT_EQ(Trie::find_child(c, 7), -1);
}

TEST(Builder, StoresUnaryChainsDownToALeafAsTails) {
  // Paths: [5 1 2 3] [5 4] [7 8 9]. CSR nodes: root, 5 -> 1, 7 -> 2, then
  // node 1's children 1 -> 3 and 4 -> 4 (a leaf). Nodes 2 and 3 each head a
  // tail, in head order: node 2's [8 9] is nodes 5, 6; node 3's [2 3] is
  // nodes 7, 8. Tail tokens are deltas from the smallest token, 1.
  auto r = build(Paths{{5, 1, 2, 3}, {5, 4}, {7, 8, 9}}, 10, {0});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Trie &t = *r.value();
  const TrieArrays &a = t.arrays();
  EXPECT_EQ(a.n_nodes, 9u);
  EXPECT_EQ(a.n_explicit, 5u);
  EXPECT_EQ(a.n_heads, 2u);
  EXPECT_EQ(vec(a.node_offsets, 6), (std::vector<uint32_t>{0, 2, 4, 4, 4, 4}));
  EXPECT_EQ(vec(a.edge_tokens, 4), (std::vector<int32_t>{5, 7, 1, 4}));
  EXPECT_EQ(a.head_bits[0], (1u << 2) | (1u << 3));
  EXPECT_EQ(vec(a.tail_lengths, 2), (std::vector<uint8_t>{2, 2}));
  EXPECT_EQ(vec(a.tail_samples, 1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(a.tail_base, 1);
  EXPECT_EQ(vec(a.tail_tokens, 4), (std::vector<uint16_t>{7, 8, 1, 2}));
  EXPECT_EQ(a.tail_range, 9u);
  EXPECT_EQ(a.terminal_bits[0], (1u << 4) | (1u << 6) | (1u << 8));
  EXPECT_EQ(vec(a.first_labels32, 3), (std::vector<uint32_t>{1, 2, 0}));  // by terminal rank
  EXPECT_EQ(a.max_depth, 4u);
  EXPECT_EQ(a.max_fanout, 2u);
  // The head's one child is the first node of its tail; inside a tail the
  // next id; the leaf has none.
  Children c = t.children(3);
  ASSERT_EQ(c.count, 1u);
  EXPECT_EQ(c.tokens[0], 2);
  EXPECT_EQ(c.first_child, 7u);
  c = t.children(7);
  ASSERT_EQ(c.count, 1u);
  EXPECT_EQ(c.tokens[0], 3);
  EXPECT_EQ(c.first_child, 8u);
  EXPECT_EQ(t.children(8).count, 0u);
  EXPECT_EQ(t.labels(8).size(), 1u);
  EXPECT_EQ(t.labels(8)[0], 0);
  // Parents and incoming tokens, across the CSR / tail boundary.
  const std::vector<uint32_t> parent{0, 0, 0, 1, 1, 2, 5, 3, 7};
  const std::vector<int32_t> into{0, 5, 7, 1, 4, 8, 9, 2, 3};
  for (uint32_t n = 1; n < 9; ++n) {
    EXPECT_EQ(t.parent(n), parent[n]) << "node " << n;
    EXPECT_EQ(t.token_into(n), into[n]) << "node " << n;
  }
  // A token more than 65535 above the smallest stays in the CSR arrays; the
  // chain below it is a tail.
  auto wide = build(Paths{{1, 70000, 2}, {3}}, 70001, {0});
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide.value()->arrays().n_heads, 1u);
  EXPECT_EQ(wide.value()->arrays().n_explicit, 4u);
  EXPECT_EQ(wide.value()->children(1).tokens[0], 70000);
}

// Every path and its labels, walked through children(), in token order.
void walk_all(const Trie &t, uint32_t node, std::vector<int32_t> &path,
              std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>> &out) {
  if (t.is_terminal(node)) {
    const auto l = t.labels(node);
    out.push_back({path, {l.begin(), l.end()}});
  }
  const Children c = t.children(node);
  for (uint32_t i = 0; i < c.count; ++i) {
    ASSERT_GT(c.first_child + i, node);
    ASSERT_EQ(t.parent(c.first_child + i), node);
    ASSERT_EQ(t.token_into(c.first_child + i), c.tokens[i]);
    path.push_back(c.tokens[i]);
    walk_all(t, c.first_child + i, path, out);
    path.pop_back();
  }
}

TEST(Builder, TailsAndCsrLayoutsHoldTheSamePaths) {
  // Random tries (shared prefixes, duplicates, prefixes of other paths,
  // tokens far apart) built with and without tails: the same paths with the
  // same labels, the same depth and fanout, fewer bytes with tails.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int32_t> tokens;
    std::vector<size_t> offsets{0};
    const int n = 1 + static_cast<int>(rng() % 300);
    const int32_t spread = trial % 3 == 0 ? 200000 : 50;
    for (int i = 0; i < n; ++i) {
      const int len = static_cast<int>(rng() % 9);
      for (int j = 0; j < len; ++j)
        tokens.push_back(1 + static_cast<int32_t>(rng() % (j < 2 ? 4 : spread)));
      offsets.push_back(tokens.size());
    }
    TrieBuildOptions o;
    o.vocab_size = 200001;
    o.stop_tokens = {0};
    auto with = build_trie_from_paths(o, tokens, offsets, nullptr);
    o.compress_tails = false;
    auto without = build_trie_from_paths(o, tokens, offsets, nullptr);
    ASSERT_TRUE(with.ok()) << with.status().message();
    ASSERT_TRUE(without.ok()) << without.status().message();
    std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>> pw, po;
    std::vector<int32_t> path;
    walk_all(*with.value(), 0, path, pw);
    walk_all(*without.value(), 0, path, po);
    ASSERT_EQ(pw, po) << "trial " << trial;
    const TrieArrays &a = with.value()->arrays(), &b = without.value()->arrays();
    EXPECT_EQ(a.n_nodes, b.n_nodes);
    EXPECT_EQ(a.max_depth, b.max_depth);
    EXPECT_EQ(a.max_fanout, b.max_fanout);
    EXPECT_EQ(b.n_heads, 0u);
    if (a.n_heads > 0) {
      EXPECT_LT(a.bytes(), b.bytes());
    }
  }
}

TEST(Builder, DuplicatePathsMergeAndKeepEveryLabel) {
  const int64_t labels[] = {7, 3, 7, 9};
  auto r = build(Paths{{1, 2}, {1, 2}, {1, 2}, {1}}, 4, {0}, labels);
  ASSERT_TRUE(r.ok());
  const Trie &t = *r.value();
  EXPECT_EQ(t.n_nodes(), 3u);
  LabelIds got = t.labels(2);
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), (std::vector<int64_t>{3, 7}));
  got = t.labels(1);
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), (std::vector<int64_t>{9}));
  got = t.labels(0);
  EXPECT_TRUE(got.empty());
  // Node 2 (rank 1) is the one multi-label terminal.
  EXPECT_EQ(t.arrays().n_multi, 1u);
  EXPECT_EQ(t.arrays().multi_ranks[0], 1u);
  EXPECT_EQ(t.arrays().n_labels(), 3u);
  EXPECT_EQ(t.arrays().label_bytes, 4u);
}

// A temporary LabelIds may hold its one label itself, so it must not
// convert to a span that would outlive it (the fuzzers' ASan build caught
// matcher.cc doing that).
static_assert(!std::is_constructible_v<std::span<const int64_t>, LabelIds>);
static_assert(!std::is_constructible_v<std::span<const int64_t>, const LabelIds &>);

TEST(Builder, LabelsOutsideUint32KeepEightBytes) {
  // A negative label or one past 2^32 - 1 keeps the int64 array; both widths
  // report the same labels.
  for (int64_t big : {int64_t{-1}, int64_t{1} << 32, int64_t{0xFFFFFFFF}}) {
    const int64_t labels[] = {big, 5, 6};
    auto r = build(Paths{{1, 2}, {1, 3}, {4}}, 10, {0}, labels);
    ASSERT_TRUE(r.ok());
    const Trie &t = *r.value();
    EXPECT_EQ(t.arrays().label_bytes, big == int64_t{0xFFFFFFFF} ? 4u : 8u);
    // Nodes: 1 (token 1), 2 (token 4, path 2), 3 (1 2, path 0), 4 (1 3, path 1).
    EXPECT_EQ(t.labels(3)[0], big);
    EXPECT_EQ(t.labels(4)[0], 5);
    EXPECT_EQ(t.labels(2)[0], 6);
    EXPECT_EQ(t.arrays().n_terminals, 3u);
  }
}

TEST(Builder, EmptyPathMakesRootTerminal) {
  auto r = build(Paths{{}, {4}}, 8, {2, 2, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value()->is_terminal(0));
  EXPECT_EQ(std::vector<int32_t>(r.value()->stop_tokens().begin(), r.value()->stop_tokens().end()),
            (std::vector<int32_t>{1, 2}));
}

TEST(Builder, ErrorsNameThePathAndPosition) {
  auto r = build(Paths{{1, 2}, {1, 2, 99}}, 10, {0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);
  EXPECT_EQ(r.status().message(),
            "path 1, position 2: token 99 is out of range [0, vocab_size=10)");

  r = build(Paths{{1, 2}, {3, 7, 4}}, 10, {7});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("path 1, position 1: stop token 7 may not appear in a path"),
            std::string::npos);
  // Issue 14 item 10: a stop token as the last element is not "inside" the
  // path; the message says a stop token may not be in a path at all.
  r = build(Paths{{1, 7}}, 10, {7});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("path 0, position 1: stop token 7 may not appear in a path "
                                      "at all (not even last"),
            std::string::npos)
      << r.status().message();

  r = build(Paths{{1}}, 10, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "at least one stop token is required");

  r = build(Paths{{1}}, 10, {10});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kOutOfRange);

  r = build(Paths{{1}}, 0, {0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "vocab_size must be positive, got 0");

  Paths bad{{1}, {2}};
  bad.offsets = {0, 2, 1};
  r = build(bad, 10, {0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("offsets must be non-decreasing: offsets[2] = 1 < offsets[1] = 2"),
      std::string::npos);
}

TEST(Builder, LargeRandomTrieHasConsistentLayout) {
  std::mt19937 rng(1);
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (int i = 0; i < 20000; ++i) {
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int j = 0; j < len; ++j)
      tokens.push_back(1 + static_cast<int32_t>(rng() % (j == 0 ? 50 : 5000)));
    offsets.push_back(tokens.size());
  }
  TrieBuildOptions o;
  o.vocab_size = 5001;
  o.stop_tokens = {0};
  auto r = build_trie_from_paths(o, tokens, offsets, nullptr);
  ASSERT_TRUE(r.ok());
  const TrieArrays &a = r.value()->arrays();
  // Every node: edges sorted, first edge index >= node id (the invariant the
  // accessors rely on), every path reachable.
  for (uint32_t n = 0; n < a.n_nodes; ++n) {
    const Children c = r.value()->children(n);
    for (uint32_t i = 1; i < c.count; ++i) ASSERT_LT(c.tokens[i - 1], c.tokens[i]);
  }
  for (size_t p = 0; p + 1 < offsets.size(); ++p) {
    uint32_t node = 0;
    for (size_t j = offsets[p]; j < offsets[p + 1]; ++j) {
      const Children c = r.value()->children(node);
      const int64_t idx = Trie::find_child(c, tokens[j]);
      ASSERT_GE(idx, 0);
      node = c.first_child + static_cast<uint32_t>(idx);
    }
    ASSERT_TRUE(r.value()->is_terminal(node));
  }
}

TEST(TrieAccessors, RejectCorruptOffsetsInsteadOfWalkingOutOfBounds) {
  // A hand-made corrupt layout: node 1's offsets point backwards and node 2's
  // past the end. The structural validation (run on every load and build)
  // refuses it, so no accessor ever walks it.
  std::vector<uint32_t> offsets{0, 2, 1, 9};
  std::vector<int32_t> tokens{1, 2};
  std::vector<uint64_t> bits{0};
  std::vector<uint32_t> rank{0};
  std::vector<int32_t> stops{0};
  std::vector<uint32_t> multi_offsets{0};  // no multi-label terminals
  TrieArrays a;
  a.node_offsets = offsets.data();
  a.edge_tokens = tokens.data();
  a.terminal_bits = bits.data();
  a.terminal_rank = rank.data();
  a.stop_tokens = stops.data();
  a.multi_offsets = multi_offsets.data();
  a.n_stop_tokens = 1;
  a.n_nodes = 3;
  a.n_explicit = 3;  // no tails
  a.vocab_size = 4;
  Status s = validate_trie_arrays(a);
  EXPECT_EQ(s.code(), Code::kCorruptFile);
  EXPECT_NE(s.message().find("does not span"), std::string::npos) << s.message();
  offsets = {0, 2, 1, 2};  // begin 2 > end 1
  s = validate_trie_arrays(a);
  EXPECT_EQ(s.code(), Code::kCorruptFile);
  EXPECT_NE(s.message().find("node 1 has edges [2, 1)"), std::string::npos) << s.message();
  // The sound layout of the same shape (root -> 1, 2; both leaves, terminal).
  offsets = {0, 2, 2, 2};
  bits = {0b110};
  a.n_terminals = 2;
  a.max_depth = 1;
  a.max_fanout = 2;
  EXPECT_TRUE(validate_trie_arrays(a).ok()) << validate_trie_arrays(a).message();
  tokens = {2, 1};  // children out of order
  s = validate_trie_arrays(a);
  EXPECT_NE(s.message().find("not strictly ascending"), std::string::npos) << s.message();
  tokens = {1, 4};  // a token past vocab_size
  s = validate_trie_arrays(a);
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  tokens = {0, 1};  // a stop token on an edge
  s = validate_trie_arrays(a);
  EXPECT_NE(s.message().find("stop token"), std::string::npos) << s.message();
  tokens = {1, 2};
  bits = {0b010};  // node 2 is a leaf that is not terminal
  a.n_terminals = 1;
  s = validate_trie_arrays(a);
  EXPECT_NE(s.message().find("node 2 has no children and is not terminal"), std::string::npos)
      << s.message();
}

// An independent statement of the node and edge rules, one node at a time.
bool structure_sound(const TrieArrays &a) {
  const uint64_t n = a.n_nodes, n_edges = n - 1;
  const uint32_t *off = a.node_offsets;
  if (off[0] != 0 || off[n] != n_edges) return false;
  for (uint64_t node = 0; node < n; ++node) {
    const uint32_t b = off[node], e = off[node + 1];
    if (e < b || b < node || e > n_edges) return false;
    if (b == e && !((a.terminal_bits[node / 64] >> (node % 64)) & 1)) return false;
    for (uint32_t k = b; k < e; ++k) {
      const int32_t t = a.edge_tokens[k];
      if (t < 0 || t >= a.vocab_size) return false;
      if (k > b && t <= a.edge_tokens[k - 1]) return false;
    }
  }
  return true;
}

TEST(BfsBuilder, CompressesTailsLikeThePathBuilder) {
  // Random tries fed node by node in breadth-first order (as the RTP-LLM
  // loader does) come out with tails, holding the same paths as the CSR
  // layout; chains longer than 255 keep CSR nodes above their tail.
  std::mt19937 rng(13);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<int32_t> tokens;
    std::vector<size_t> offsets{0};
    const int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) {
      const int len = trial == 0 && i == 0 ? 600 : static_cast<int>(rng() % 10);
      for (int j = 0; j < len; ++j) {
        tokens.push_back(1 + static_cast<int32_t>(rng() % (j < 2 ? 3 : 90000)));
      }
      offsets.push_back(tokens.size());
    }
    TrieBuildOptions o;
    o.vocab_size = 90001;
    o.stop_tokens = {0};
    o.no_labels = true;
    o.compress_tails = false;
    auto csr = build_trie_from_paths(o, tokens, offsets, nullptr);
    ASSERT_TRUE(csr.ok()) << csr.status().message();
    const Trie &ref = *csr.value();
    std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>> want;
    std::vector<int32_t> path;
    walk_all(ref, 0, path, want);
    for (bool compress : {false, true}) {
      o.compress_tails = compress;
      auto b = BfsTrieBuilder::create(o);
      ASSERT_TRUE(b.ok());
      for (uint32_t v = 0; v < ref.n_nodes(); ++v) {
        const Children c = ref.children(v);
        ASSERT_TRUE(b.value().add_node(c.span(), ref.is_terminal(v)).ok());
      }
      auto got = b.value().finish();
      ASSERT_TRUE(got.ok()) << got.status().message();
      std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>> have;
      walk_all(*got.value(), 0, path, have);
      EXPECT_EQ(have, want) << "trial " << trial;
      const TrieArrays &a = got.value()->arrays();
      EXPECT_EQ(a.n_nodes, ref.n_nodes());
      EXPECT_EQ(a.max_depth, ref.arrays().max_depth);
      if (!compress) {
        EXPECT_EQ(a.n_heads, 0u);
      } else if (trial == 0) {
        EXPECT_GT(a.n_heads, 0u);
      }
    }
  }
}

TEST(Validation, VectorAndScalarScansAgreeWithTheOracleOnCorruptions) {
  // A trie of a few thousand 64-node words, then single corruptions of the
  // offsets, the tokens and the terminal bits (small nudges, random values,
  // swaps of neighbours): the AVX2 scan (where the CPU has it), the scalar
  // scan and the oracle agree on every one, and whenever they refuse,
  // validate_trie_arrays fails naming the problem.
  std::mt19937 rng(7);
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (int i = 0; i < 30000; ++i) {
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < len; ++j) {
      tokens.push_back(1 + static_cast<int32_t>(rng() % (j < 2 ? 40 : 3000)));
    }
    offsets.push_back(tokens.size());
  }
  TrieBuildOptions o;
  o.vocab_size = 3001;
  o.stop_tokens = {0};
  o.compress_tails = false;  // every node in the CSR arrays these scans check
  auto r = build_trie_from_paths(o, tokens, offsets, nullptr);
  ASSERT_TRUE(r.ok());
  const TrieArrays &orig = r.value()->arrays();
  ASSERT_GT(orig.n_nodes, 64u * 100);
  auto off = vec(orig.node_offsets, orig.n_nodes + 1);
  auto tok = vec(orig.edge_tokens, orig.n_edges());
  auto bits = vec(orig.terminal_bits, orig.terminal_words());
  TrieArrays a = orig;
  a.node_offsets = off.data();
  a.edge_tokens = tok.data();
  a.terminal_bits = bits.data();
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const auto saved_off = off;
    const auto saved_tok = tok;
    const auto saved_bits = bits;
    const int what = static_cast<int>(rng() % 3);
    const int how = static_cast<int>(rng() % 3);
    if (what == 0) {
      const size_t i = rng() % off.size();
      if (how == 0) off[i] += (rng() % 2) ? 1 : -1;
      if (how == 1) off[i] = static_cast<uint32_t>(rng() % (off.back() + 2));
      if (how == 2 && i + 1 < off.size()) std::swap(off[i], off[i + 1]);
    } else if (what == 1) {
      const size_t i = rng() % tok.size();
      if (how == 0) tok[i] += (rng() % 2) ? 1 : -1;
      if (how == 1) tok[i] = static_cast<int32_t>(rng() % 3010) - 3;
      if (how == 2 && i + 1 < tok.size()) std::swap(tok[i], tok[i + 1]);
    } else {
      const size_t node = rng() % orig.n_nodes;
      bits[node / 64] ^= uint64_t{1} << (node % 64);
    }
    uint32_t fan_v = 0, fan_s = 0;
    bool near_v = false, near_s = false;
    const bool vector = trie_structure_holds(a, true, &fan_v, &near_v);
    const bool scalar = trie_structure_holds(a, false, &fan_s, &near_s);
    const bool oracle = structure_sound(a);
    ASSERT_EQ(vector, oracle) << "trial " << trial;
    ASSERT_EQ(scalar, oracle) << "trial " << trial;
    if (oracle) {
      EXPECT_EQ(fan_v, fan_s);
      EXPECT_EQ(near_v, near_s);
    } else {
      ++refused;
      const Status s = validate_trie_arrays(a);
      ASSERT_EQ(s.code(), Code::kCorruptFile);
      EXPECT_EQ(s.message().find("inconsistent"), std::string::npos)
          << "the naming loop found nothing the scan refused: " << s.message();
    }
    off = saved_off;
    tok = saved_tok;
    bits = saved_bits;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_TRUE(validate_trie_arrays(a).ok());
}

TEST(Validation, TailCorruptionsAreRefusedByNameOrStillWalkable) {
  // A catalogue-like trie (3 branching levels, then chains), then single
  // corruptions of the head bits, tail lengths, samples, tokens and the
  // terminal bits: each is refused with a message naming the problem, or,
  // when the result is still a well-formed trie, every node is reached
  // exactly once by walking it.
  std::mt19937 rng(5);
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (int i = 0; i < 4000; ++i) {
    const int len = 3 + static_cast<int>(rng() % 6);
    for (int j = 0; j < len; ++j) tokens.push_back(1 + j * 8 + static_cast<int32_t>(rng() % 8));
    offsets.push_back(tokens.size());
  }
  TrieBuildOptions o;
  o.vocab_size = 100;
  o.stop_tokens = {0};
  auto r = build_trie_from_paths(o, tokens, offsets, nullptr);
  ASSERT_TRUE(r.ok());
  const TrieArrays &orig = r.value()->arrays();
  ASSERT_GT(orig.n_heads, 1000u);
  auto heads = vec(orig.head_bits, orig.head_words());
  auto lengths = vec(orig.tail_lengths, orig.n_heads);
  auto samples = vec(orig.tail_samples, orig.n_tail_samples());
  auto tail = vec(orig.tail_tokens, orig.n_tail_nodes());
  auto bits = vec(orig.terminal_bits, orig.terminal_words());
  TrieArrays a = orig;
  a.head_bits = heads.data();
  a.tail_lengths = lengths.data();
  a.tail_samples = samples.data();
  a.tail_tokens = tail.data();
  a.terminal_bits = bits.data();
  int refused = 0, kept = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const auto h0 = heads;
    const auto l0 = lengths;
    const auto s0 = samples;
    const auto t0 = tail;
    const auto b0 = bits;
    switch (rng() % 5) {
      case 0: heads[rng() % heads.size()] ^= uint64_t{1} << (rng() % 64); break;
      case 1: lengths[rng() % lengths.size()] += (rng() % 2) ? 1 : 255; break;
      case 2: samples[rng() % samples.size()] += (rng() % 2) ? 1 : ~0u; break;
      case 3: tail[rng() % tail.size()] = static_cast<uint16_t>(rng() % 120); break;
      default: {
        const uint64_t node = orig.n_explicit + rng() % orig.n_tail_nodes();
        bits[node / 64] ^= uint64_t{1} << (node % 64);
      }
    }
    const Status st = validate_trie_arrays(a);
    if (!st.ok()) {
      ++refused;
      ASSERT_EQ(st.code(), Code::kCorruptFile);
      EXPECT_EQ(st.message().find("inconsistent"), std::string::npos) << st.message();
    } else {
      ++kept;  // e.g. a tail token changed to another in range
      const Trie t(std::make_unique<VectorTrieStorage>(), a, 0);
      std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>> paths;
      std::vector<int32_t> path;
      walk_all(t, 0, path, paths);
      EXPECT_EQ(paths.size(), a.n_terminals) << "trial " << trial;
    }
    heads = h0;
    lengths = l0;
    samples = s0;
    tail = t0;
    bits = b0;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(kept, 0);
}

TEST(History, ClonesShareChunksCopyOnWrite) {
  History<uint32_t> a;
  for (uint32_t i = 0; i < 100; ++i) a.push(i);
  History<uint32_t> b = a;  // shares both chunks
  a.push(1000);
  b.push(2000);
  EXPECT_EQ(a.from_top(1), 1000u);
  EXPECT_EQ(b.from_top(1), 2000u);
  EXPECT_EQ(a.from_top(2), 99u);
  b.pop(50);
  b.push(3000);
  EXPECT_EQ(a.from_top(1), 1000u);
  EXPECT_EQ(a.from_top(50), 51u);
  EXPECT_EQ(b.from_top(1), 3000u);
  EXPECT_EQ(b.from_top(2), 50u);
  EXPECT_EQ(a.size(), 101u);
  EXPECT_EQ(b.size(), 52u);
}

TEST(History, LimitKeepsMemoryBoundedAndNewestEntries) {
  History<uint32_t> h(10);
  for (uint32_t i = 0; i < 100000; ++i) h.push(i);
  EXPECT_LT(h.size(), 10u + 2 * History<uint32_t>::kChunk);
  for (uint32_t n = 1; n <= 10; ++n) EXPECT_EQ(h.from_top(n), 100000u - n);
}

}  // namespace
}  // namespace treemask
