// Per-node and per-token data the decoding modes need, derived from a trie's
// arrays on first use and cached inside the trie (Trie::derived): built once,
// shared by every matcher and thread, freed with the trie. Nothing here is
// stored in the trie's own arrays, so the .tmtrie format does not change.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "trie/trie.h"

namespace treemask {

inline constexpr uint32_t kNoDistance = 0xFFFFFFFFu;

// For every node: how many *ends* its subtree holds (the node included) and
// the fewest tokens from it to one (kNoDistance when there is none). An end
// is a terminal node, or in leaves-only mode a terminal node without children.
struct NodeStats {
  std::vector<uint32_t> ends;
  std::vector<uint32_t> dist;
};

// Built on first use.
const NodeStats &node_stats(const Trie &trie, bool leaves_only);

// Two bitsets over the vocabulary: tokens on some edge, and tokens that are a
// child of some terminal node. Used to reject option tokens that would make a
// step ambiguous (a stop token inside a path, a separator after a label).
struct TokenIndex {
  std::vector<uint64_t> on_edge;
  std::vector<uint64_t> after_terminal;

  static bool test(const std::vector<uint64_t> &bits, int32_t token) {
    const auto t = static_cast<uint32_t>(token);
    return (bits[t >> 6] >> (t & 63)) & 1u;
  }
};

const TokenIndex &token_index(const Trie &trie);

// Label key -> the terminal nodes that carry it, sorted by (key, node). A key
// is a label id; a trie without labels (an RTP-LLM prefix dictionary) gives
// every terminal node its own id as its only key.
struct LabelIndex {
  std::vector<std::pair<int64_t, uint32_t>> by_key;
};

const LabelIndex &label_index(const Trie &trie);

inline bool trie_has_labels(const Trie &trie) { return trie.arrays().has_labels(); }

// Calls f(key) for each label key of a terminal node, ascending.
template <class F>
void for_each_key(const Trie &trie, uint32_t terminal, F &&f) {
  if (!trie_has_labels(trie)) {
    if (trie.is_terminal(terminal)) f(int64_t{terminal});
    return;
  }
  for (int64_t label : trie.labels(terminal)) f(label);
}

// Calls f(node) for each terminal node carrying key, ascending.
template <class F>
void for_each_terminal_with_key(const Trie &trie, int64_t key, F &&f) {
  if (!trie_has_labels(trie)) {
    if (key >= 0 && static_cast<uint64_t>(key) < trie.n_nodes() &&
        trie.is_terminal(static_cast<uint32_t>(key))) {
      f(static_cast<uint32_t>(key));
    }
    return;
  }
  const auto &index = label_index(trie).by_key;
  auto it = std::lower_bound(index.begin(), index.end(), std::pair<int64_t, uint32_t>{key, 0});
  for (; it != index.end() && it->first == key; ++it) f(it->second);
}

// The parent of node (> 0): edge e leads to node e + 1, so the parent is the
// node whose edge range holds node - 1.
uint32_t parent_of(const Trie &trie, uint32_t node);

// The tokens from the root to node, for messages.
std::vector<int32_t> path_to(const Trie &trie, uint32_t node);

}  // namespace treemask
