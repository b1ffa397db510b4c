// Which label ends a matcher may still reach, per node: the data behind the
// no-dead-end rule of multi-label mode, exclusions and the length budget.
//
// A view answers, for any node, how many *available* ends its subtree holds
// and the fewest tokens to one of them. It stacks layers over the trie's
// static NodeStats (mode_index.h):
//   - a LabelFilter (immutable, shared): exclusions, per-matcher bans, an
//     allow-subset. It stores exact values for the nodes it changes (the
//     ancestors of the ends it touches); every other node reads through.
//   - up to two Deltas (mutable, small): the labels a multi-label matcher
//     has produced, and a scratch layer for "what if this label were used".
//     A Delta counts, per ancestor, the ends it blocks that were available
//     below it, and keeps exact distances, so each lookup is O(1).
// Every layer touches only ancestor-closed sets of nodes, so a node that no
// layer touches has no touched descendant: fills check one node, not its
// children, before taking the static fast path.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "matcher/mode_index.h"
#include "trie/trie.h"

namespace treemask {

struct NodeInfo {
  uint32_t ends = 0;            // available ends in the subtree, the node included
  uint32_t dist = kNoDistance;  // tokens to the nearest one; 0 = the node is one
};

class LabelFilter {
 public:
  struct Entry {
    uint32_t node;
    NodeInfo info;
  };

  // Blocks `ends` (end nodes, any order, duplicates allowed) on top of `base`
  // (nullptr: the static stats). Ends already blocked below are ignored.
  static std::shared_ptr<const LabelFilter> blocking(const Trie &trie, const NodeStats &stats,
                                                     std::shared_ptr<const LabelFilter> base,
                                                     std::vector<uint32_t> ends);
  // Makes exactly `ends` available (an allow-subset); every other node has
  // no available end. The caller passes only nodes that are ends.
  static std::shared_ptr<const LabelFilter> allowing(const Trie &trie, std::vector<uint32_t> ends);

  NodeInfo info(uint32_t node, const NodeStats &stats) const {
    const LabelFilter *f = this;
    do {
      if (const Entry *e = f->find(node)) return e->info;
      if (f->positive_) return NodeInfo{};
      f = f->base_.get();
    } while (f);
    return NodeInfo{stats.ends[node], stats.dist[node]};
  }

  // False when this filter and its bases leave node's info at the static
  // value (and so every descendant's too).
  bool touches(uint32_t node) const {
    for (const LabelFilter *f = this; f; f = f->base_.get()) {
      if (f->positive_ || f->find(node)) return true;
    }
    return false;
  }

  size_t region_size() const { return region_.size(); }

 private:
  const Entry *find(uint32_t node) const;

  std::shared_ptr<const LabelFilter> base_;
  bool positive_ = false;
  std::vector<Entry> region_;  // sorted by node
};

// Ends blocked by produced labels, relative to the layers below it.
struct Delta {
  struct Node {
    uint32_t blocked = 0;  // ends below that were available and are blocked here
    uint32_t dist = kNoDistance;
  };
  std::unordered_map<uint32_t, uint32_t> refs;  // end node -> produced labels blocking it
  std::unordered_map<uint32_t, Node> nodes;
};

class LabelView {
 public:
  LabelView(const Trie &trie, const NodeStats &stats, const LabelFilter *filter)
      : trie_(&trie), stats_(&stats), filter_(filter) {}

  LabelView with(const Delta *delta) const {
    LabelView v = *this;
    if (delta) v.deltas_[v.n_deltas_++] = delta;
    return v;
  }

  const Trie &trie() const { return *trie_; }
  const NodeStats &stats() const { return *stats_; }

  NodeInfo info(uint32_t node) const {
    NodeInfo i =
        filter_ ? filter_->info(node, *stats_) : NodeInfo{stats_->ends[node], stats_->dist[node]};
    for (int k = 0; k < n_deltas_; ++k) {
      const auto it = deltas_[k]->nodes.find(node);
      if (it != deltas_[k]->nodes.end()) {
        i.ends -= it->second.blocked;
        i.dist = it->second.dist;
      }
    }
    return i;
  }

  bool available_end(uint32_t node) const { return info(node).dist == 0; }

  bool touches(uint32_t node) const {
    if (filter_ && filter_->touches(node)) return true;
    for (int k = 0; k < n_deltas_; ++k) {
      if (deltas_[k]->nodes.count(node)) return true;
    }
    return false;
  }

 private:
  const Trie *trie_;
  const NodeStats *stats_;
  const LabelFilter *filter_;
  const Delta *deltas_[2] = {nullptr, nullptr};
  int n_deltas_ = 0;
};

// Marks every end that carries a label key of `terminal` as used, in `delta`
// laid over `below` (a view without `delta`). O(depth) per blocked end for
// the counts; distances are recomputed upwards (scanning siblings) only while
// they change, and only when track_dist is set.
void block_keys_of(const LabelView &below, Delta &delta, uint32_t terminal, bool track_dist);

// Undoes one block_keys_of(below, delta, terminal, true).
void unblock_keys_of(const LabelView &below, Delta &delta, uint32_t terminal);

}  // namespace treemask
