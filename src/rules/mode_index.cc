// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/mode_index.h"

#include <algorithm>
#include <memory>

namespace treemask {

namespace {

// Keys of the trie's derived cache.
struct TerminalStatsKey;
struct LeafStatsKey;

std::shared_ptr<const NodeStats> build_node_stats(const Trie &trie, bool leaves_only) {
  auto out = std::make_shared<NodeStats>();
  const auto n = static_cast<uint32_t>(trie.n_nodes());
  out->ends.assign(n, 0);
  out->dist.assign(n, kNoDistance);
  // Children have larger ids than their parent, so one backward pass sees
  // every child before its parent.
  for (uint32_t node = n; node-- > 0;) {
    const Children c = trie.children(node);
    const bool is_end = trie.is_terminal(node) && (!leaves_only || c.count == 0);
    uint32_t ends = is_end ? 1 : 0;
    uint32_t dist = is_end ? 0 : kNoDistance;
    for (uint32_t i = 0; i < c.count; ++i) {
      const uint32_t child = c.first_child + i;
      ends += out->ends[child];
      if (out->dist[child] != kNoDistance) dist = std::min(dist, out->dist[child] + 1);
    }
    out->ends[node] = ends;
    out->dist[node] = dist;
  }
  return out;
}

std::shared_ptr<const TokenIndex> build_token_index(const Trie &trie) {
  auto out = std::make_shared<TokenIndex>();
  const size_t words = (static_cast<size_t>(trie.vocab_size()) + 63) / 64;
  out->on_edge.assign(words, 0);
  out->after_terminal.assign(words, 0);
  for (uint32_t node = 0; node < trie.n_nodes(); ++node) {
    const bool terminal = trie.is_terminal(node);
    for (int32_t token : trie.children(node).span()) {
      const auto t = static_cast<uint32_t>(token);
      out->on_edge[t >> 6] |= uint64_t{1} << (t & 63);
      if (terminal) out->after_terminal[t >> 6] |= uint64_t{1} << (t & 63);
    }
  }
  return out;
}

std::shared_ptr<const LabelIndex> build_label_index(const Trie &trie) {
  auto out = std::make_shared<LabelIndex>();
  if (!trie_has_labels(trie)) return out;
  out->by_key.reserve(trie.arrays().n_terminals);
  for (uint32_t node = 0; node < trie.n_nodes(); ++node) {
    if (!trie.is_terminal(node)) continue;
    for (int64_t label : trie.labels(node)) out->by_key.emplace_back(label, node);
  }
  std::sort(out->by_key.begin(), out->by_key.end());
  return out;
}

}  // namespace

const NodeStats &node_stats(const Trie &trie, bool leaves_only) {
  auto build = [&] { return build_node_stats(trie, leaves_only); };
  return leaves_only ? trie.derived<LeafStatsKey, NodeStats>(build)
                     : trie.derived<TerminalStatsKey, NodeStats>(build);
}

const TokenIndex &token_index(const Trie &trie) {
  return trie.derived<TokenIndex>([&] { return build_token_index(trie); });
}

const LabelIndex &label_index(const Trie &trie) {
  return trie.derived<LabelIndex>([&] { return build_label_index(trie); });
}

uint32_t parent_of(const Trie &trie, uint32_t node) { return trie.parent(node); }

std::vector<int32_t> path_to(const Trie &trie, uint32_t node) {
  std::vector<int32_t> path;
  while (node != 0 && node < trie.n_nodes()) {
    path.push_back(trie.token_into(node));
    node = trie.parent(node);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace treemask
