// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/label_view.h"

#include <algorithm>
#include <unordered_set>

namespace treemask {

namespace {

void sort_unique(std::vector<uint32_t> &v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The seeds and all their ancestors, ascending.
std::vector<uint32_t> ancestor_closure(const Trie &trie, const std::vector<uint32_t> &seeds) {
  std::unordered_set<uint32_t> seen;
  for (uint32_t node : seeds) {
    while (seen.insert(node).second && node != 0) node = parent_of(trie, node);
  }
  std::vector<uint32_t> out(seen.begin(), seen.end());
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t one_more(uint32_t dist) { return dist == kNoDistance ? kNoDistance : dist + 1; }

// Computes exact infos for the ancestor closure of seeds, children first.
// is_end(node) says whether a region node is itself an available end;
// outside(node) gives the info of a child outside the region.
template <class IsEnd, class Outside>
std::vector<std::pair<uint32_t, NodeInfo>> build_region(const Trie &trie,
                                                        const std::vector<uint32_t> &seeds,
                                                        IsEnd is_end, Outside outside) {
  const std::vector<uint32_t> nodes = ancestor_closure(trie, seeds);
  std::vector<std::pair<uint32_t, NodeInfo>> region(nodes.size());
  for (size_t i = nodes.size(); i-- > 0;) {
    const uint32_t node = nodes[i];
    NodeInfo info;
    if (is_end(node)) info = {1, 0};
    {
      const Children c = trie.children(node);
      // Region children sit after i, in the same ascending order.
      auto next = std::lower_bound(nodes.begin() + static_cast<ptrdiff_t>(i) + 1, nodes.end(),
                                   c.first_child);
      for (uint32_t k = 0; k < c.count; ++k) {
        const uint32_t child = c.first_child + k;
        NodeInfo ci;
        if (next != nodes.end() && *next == child) {
          ci = region[static_cast<size_t>(next - nodes.begin())].second;
          ++next;
        } else {
          ci = outside(child);
        }
        info.ends += ci.ends;
        info.dist = std::min(info.dist, one_more(ci.dist));
      }
    }
    region[i] = {node, info};
  }
  return region;
}

// The path from an end up to the root, the end first.
std::vector<uint32_t> path_up(const Trie &trie, uint32_t node) {
  std::vector<uint32_t> path{node};
  while (node != 0) {
    node = parent_of(trie, node);
    path.push_back(node);
  }
  return path;
}

// The distance of node in `view` computed from its children (node is not an
// available end there).
uint32_t dist_from_children(const LabelView &view, uint32_t node) {
  uint32_t dist = kNoDistance;
  view.for_each_child(view.trie().children(node), [&](uint32_t, NodeInfo info) {
    dist = std::min(dist, one_more(info.dist));
    return dist > 1;  // 1 is the best a child can give
  });
  return dist;
}

template <class F>
void for_each_end_sharing_a_key(const Trie &trie, uint32_t terminal, F &&f) {
  std::vector<uint32_t> ends;
  for_each_key(trie, terminal, [&](int64_t key) {
    for_each_terminal_with_key(trie, key, [&](uint32_t node) { ends.push_back(node); });
  });
  sort_unique(ends);
  for (uint32_t node : ends) f(node);
}

}  // namespace

std::shared_ptr<const LabelFilter> LabelFilter::blocking(const Trie &trie, const NodeStats &stats,
                                                         std::shared_ptr<const LabelFilter> base,
                                                         std::vector<uint32_t> ends) {
  auto below = [&](uint32_t node) {
    return base ? base->info(node, stats) : NodeInfo{stats.ends[node], stats.dist[node]};
  };
  std::erase_if(ends, [&](uint32_t node) { return below(node).dist != 0; });
  sort_unique(ends);
  auto out = std::make_shared<LabelFilter>();
  if (!ends.empty()) {
    out->region_.build_sorted(build_region(
        trie, ends,
        [&](uint32_t node) {
          return below(node).dist == 0 && !std::binary_search(ends.begin(), ends.end(), node);
        },
        below));
  }
  out->base_ = std::move(base);  // `below` reads base until here
  return out;
}

std::shared_ptr<const LabelFilter> LabelFilter::allowing(const Trie &trie,
                                                         std::vector<uint32_t> ends) {
  sort_unique(ends);
  auto out = std::make_shared<LabelFilter>();
  out->positive_ = true;
  out->region_.build_sorted(build_region(
      trie, ends, [&](uint32_t node) { return std::binary_search(ends.begin(), ends.end(), node); },
      [](uint32_t) { return NodeInfo{}; }));
  return out;
}

void block_keys_of(const LabelView &below, Delta &delta, uint32_t terminal, bool track_dist) {
  const Trie &trie = below.trie();
  const LabelView with = below.with(&delta);
  for_each_end_sharing_a_key(trie, terminal, [&](uint32_t end) {
    if (delta.refs[end]++ > 0) return;      // already blocked by an earlier label
    if (below.info(end).dist != 0) return;  // never available: nothing to count
    const std::vector<uint32_t> path = path_up(trie, end);
    const std::vector<uint32_t> ascending(path.rbegin(), path.rend());
    delta.nodes.merge(ascending, [&](uint32_t node, Delta::Node &entry, bool fresh) {
      if (fresh) entry.dist = below.info(node).dist;
      ++entry.blocked;
    });
    if (!track_dist) return;
    for (uint32_t node : path) {
      Delta::Node &entry = *delta.nodes.find(node);
      const bool is_end = node != end && below.info(node).dist == 0 && !delta.refs.count(node);
      const uint32_t dist = is_end ? 0 : dist_from_children(with, node);
      if (dist == entry.dist && node != end) break;  // ancestors are unchanged too
      entry.dist = dist;
    }
  });
}

void unblock_keys_of(const LabelView &below, Delta &delta, uint32_t terminal) {
  const Trie &trie = below.trie();
  const LabelView with = below.with(&delta);
  for_each_end_sharing_a_key(trie, terminal, [&](uint32_t end) {
    auto ref = delta.refs.find(end);
    if (ref == delta.refs.end() || --ref->second > 0) return;
    delta.refs.erase(ref);
    if (below.info(end).dist != 0) return;
    const std::vector<uint32_t> path = path_up(trie, end);
    for (uint32_t node : path) --delta.nodes.find(node)->blocked;
    // Every entry counts at least one blocked end until this removes it.
    delta.nodes.erase_if([](const Delta::Node &entry) { return entry.blocked == 0; });
    // Distances only shrink: each ancestor may now be closer through the
    // child on this path.
    uint32_t child_dist = 0;  // the end itself is available again
    for (uint32_t node : path) {
      if (Delta::Node *entry = delta.nodes.find(node)) {
        entry->dist = node == end ? 0 : std::min(entry->dist, one_more(child_dist));
      }
      child_dist = with.info(node).dist;
    }
  });
}

}  // namespace treemask
