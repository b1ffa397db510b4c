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

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "rules/mode_index.h"
#include "trie/trie.h"

namespace treemask {

struct NodeInfo {
  uint32_t ends = 0;            // available ends in the subtree, the node included
  uint32_t dist = kNoDistance;  // tokens to the nearest one; 0 = the node is one
};

// A small map from node to T kept sorted by node, so that the children of a
// node (consecutive ids) are looked up with one forward-moving cursor.
template <class T>
class NodeMap {
 public:
  using Item = std::pair<uint32_t, T>;

  const std::vector<Item> &items() const { return items_; }
  bool empty() const { return items_.empty(); }
  size_t lower_index(uint32_t node) const {
    return static_cast<size_t>(
        std::lower_bound(items_.begin(), items_.end(), node,
                         [](const Item &item, uint32_t n) { return item.first < n; }) -
        items_.begin());
  }
  const T *find(uint32_t node) const {
    const size_t i = lower_index(node);
    return i < items_.size() && items_[i].first == node ? &items_[i].second : nullptr;
  }
  T *find(uint32_t node) { return const_cast<T *>(std::as_const(*this).find(node)); }
  // Visits the entries of nodes (ascending, distinct) as visit(node, entry,
  // fresh), creating the missing ones value-initialised. One merge pass:
  // inserting a deep path's nodes one by one would shift the vector once per
  // node, quadratic in the depth.
  template <class Visit>
  void merge(std::span<const uint32_t> nodes, Visit &&visit) {
    std::vector<Item> merged;
    merged.reserve(items_.size() + nodes.size());
    size_t i = 0;
    for (const uint32_t node : nodes) {
      while (i < items_.size() && items_[i].first < node) merged.push_back(std::move(items_[i++]));
      const bool fresh = i == items_.size() || items_[i].first != node;
      merged.push_back(fresh ? Item{node, T{}} : std::move(items_[i++]));
      visit(node, merged.back().second, fresh);
    }
    while (i < items_.size()) merged.push_back(std::move(items_[i++]));
    items_ = std::move(merged);
  }
  // Removes every entry whose value satisfies pred, in one pass.
  template <class Pred>
  void erase_if(Pred &&pred) {
    std::erase_if(items_, [&](const Item &item) { return pred(item.second); });
  }

  // Moves a cursor (an index into items()) forward to node; the entry of
  // node if there is one.
  const T *seek(size_t &cursor, uint32_t node) const {
    while (cursor < items_.size() && items_[cursor].first < node) ++cursor;
    return cursor < items_.size() && items_[cursor].first == node ? &items_[cursor].second
                                                                  : nullptr;
  }

  void build_sorted(std::vector<Item> items) { items_ = std::move(items); }

 private:
  std::vector<Item> items_;
};

class LabelFilter {
 public:
  // Blocks `ends` (end nodes, any order, duplicates allowed) on top of `base`
  // (nullptr: the static stats). Ends already blocked below are ignored.
  // `base` must have no base itself: chains are at most two filters deep.
  static std::shared_ptr<const LabelFilter> blocking(const Trie &trie, const NodeStats &stats,
                                                     std::shared_ptr<const LabelFilter> base,
                                                     std::vector<uint32_t> ends);
  // Makes exactly `ends` available (an allow-subset); every other node has
  // no available end. The caller passes only nodes that are ends.
  static std::shared_ptr<const LabelFilter> allowing(const Trie &trie, std::vector<uint32_t> ends);

  static constexpr int kMaxChain = 2;

  NodeInfo info(uint32_t node, const NodeStats &stats) const {
    for (const LabelFilter *f = this; f; f = f->base_.get()) {
      if (const NodeInfo *e = f->region_.find(node)) return *e;
      if (f->positive_) return NodeInfo{};
    }
    return NodeInfo{stats.ends[node], stats.dist[node]};
  }

  // False when this filter and its bases leave node's info at the static
  // value (and so every descendant's too).
  bool touches(uint32_t node) const {
    for (const LabelFilter *f = this; f; f = f->base_.get()) {
      if (f->positive_ || f->region_.find(node)) return true;
    }
    return false;
  }

  // True if this filter or a base makes untouched nodes unavailable.
  bool any_positive() const {
    for (const LabelFilter *f = this; f; f = f->base_.get()) {
      if (f->positive_) return true;
    }
    return false;
  }

  const LabelFilter *base() const { return base_.get(); }
  bool positive() const { return positive_; }
  const NodeMap<NodeInfo> &region() const { return region_; }

 private:
  std::shared_ptr<const LabelFilter> base_;
  bool positive_ = false;
  NodeMap<NodeInfo> region_;
};

// Ends blocked by produced labels, relative to the layers below it.
struct Delta {
  struct Node {
    uint32_t blocked = 0;  // ends below that were available and are blocked here
    uint32_t dist = kNoDistance;
  };
  std::unordered_map<uint32_t, uint32_t> refs;  // end node -> produced labels blocking it
  NodeMap<Node> nodes;
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
      if (const Delta::Node *d = deltas_[k]->nodes.find(node)) {
        i.ends -= d->blocked;
        i.dist = d->dist;
      }
    }
    return i;
  }

  bool any_positive_filter() const { return filter_ && filter_->any_positive(); }

  bool touches(uint32_t node) const {
    if (filter_ && filter_->touches(node)) return true;
    for (int k = 0; k < n_deltas_; ++k) {
      if (deltas_[k]->nodes.find(node)) return true;
    }
    return false;
  }

  // Calls f(k) for each child first_child + k of c that has no available end
  // left, in no particular order and possibly twice. Only the children some
  // layer touches are visited, so the cost is the number of layer entries
  // among the children, not the fanout. Needs a view without positive
  // filters (under which every untouched child would be dead).
  template <class F>
  void for_each_dead_child(const Children &c, F &&f) const {
    const uint32_t first = c.first_child, last = c.first_child + c.count;
    // A blocking filter only removes ends, so a node its base (or it) sees
    // as dead is dead whatever the other layers say...
    for (const LabelFilter *fl = filter_; fl; fl = fl->base()) {
      const auto &items = fl->region().items();
      for (size_t i = fl->region().lower_index(first); i < items.size(); ++i) {
        if (items[i].first >= last) break;
        if (items[i].second.ends == 0) f(items[i].first - first);
      }
    }
    // ...and every other dead child has a delta entry.
    for (int d = 0; d < n_deltas_; ++d) {
      const auto &items = deltas_[d]->nodes.items();
      for (size_t i = deltas_[d]->nodes.lower_index(first); i < items.size(); ++i) {
        if (items[i].first >= last) break;
        if (info(items[i].first).ends == 0) f(items[i].first - first);
      }
    }
  }

  // Calls f(k, info) for the children first_child + k of c in order, while
  // f returns true: one pass with a cursor per layer instead of a search per
  // child, so a root with thousands of children costs O(fanout).
  template <class F>
  void for_each_child(const Children &c, F &&f) const {
    const LabelFilter *filters[LabelFilter::kMaxChain] = {};
    size_t filter_at[LabelFilter::kMaxChain] = {};
    int n_filters = 0;
    for (const LabelFilter *fl = filter_; fl && n_filters < LabelFilter::kMaxChain;
         fl = fl->base()) {
      filters[n_filters] = fl;
      filter_at[n_filters++] = fl->region().lower_index(c.first_child);
    }
    size_t delta_at[2] = {};
    for (int k = 0; k < n_deltas_; ++k) delta_at[k] = deltas_[k]->nodes.lower_index(c.first_child);
    for (uint32_t k = 0; k < c.count; ++k) {
      const uint32_t node = c.first_child + k;
      NodeInfo i{stats_->ends[node], stats_->dist[node]};
      for (int j = 0; j < n_filters; ++j) {
        if (const NodeInfo *e = filters[j]->region().seek(filter_at[j], node)) {
          i = *e;
          break;
        }
        if (filters[j]->positive()) {
          i = NodeInfo{};
          break;
        }
      }
      for (int d = 0; d < n_deltas_; ++d) {
        if (const Delta::Node *e = deltas_[d]->nodes.seek(delta_at[d], node)) {
          i.ends -= e->blocked;
          i.dist = e->dist;
        }
      }
      if (!f(k, i)) return;
    }
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
