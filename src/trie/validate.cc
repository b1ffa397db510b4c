// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <bit>
#include <vector>

#include "trie/trie.h"

namespace treemask {

namespace {

// Answers "is t a stop token" for every edge without a search per edge: one
// compare for a single stop token, else a bitmap over [min, max] of the stop
// tokens (bounded by vocab_size / 8 bytes; 16 MiB at most, beyond which it
// falls back to a binary search).
class StopSet {
 public:
  explicit StopSet(std::span<const int32_t> stops) : stops_(stops) {
    lo_ = stops.front();
    hi_ = stops.back();
    const uint64_t span = uint64_t(uint32_t(hi_ - lo_)) + 1;
    if (stops.size() > 1 && span <= (uint64_t{16} << 23)) {
      bits_.assign((span + 63) / 64, 0);
      for (int32_t s : stops) {
        const uint32_t k = uint32_t(s - lo_);
        bits_[k >> 6] |= uint64_t{1} << (k & 63);
      }
    }
  }
  bool contains(int32_t t) const {
    if (t < lo_ || t > hi_) return false;
    if (stops_.size() == 1) return true;
    if (!bits_.empty()) {
      const uint32_t k = uint32_t(t - lo_);
      return (bits_[k >> 6] >> (k & 63)) & 1;
    }
    return std::binary_search(stops_.begin(), stops_.end(), t);
  }

 private:
  std::span<const int32_t> stops_;
  int32_t lo_ = 0, hi_ = -1;
  std::vector<uint64_t> bits_;
};

Status corrupt(auto &&...parts) { return error(Code::kCorruptFile, "trie arrays: ", parts...); }

// The structural checks of nodes and edges in two passes, one over
// node_offsets and one over edge_tokens (the bulk of a trie's bytes): true
// when they all hold. validate_trie_arrays locates the first failure with
// the slower loop of locate_structure_error.
//
// Pass 1, per node (in blocks of 64, one terminal word each): begin <= end,
// begin >= node id, fanout, leaves terminal, and children ascending (only
// nodes with two or more children have a loop). Pass 2, per edge (a loop
// the compiler vectorises): token < vocab_size, and near a stop token
// (checked exactly afterwards, rarely).
bool structure_holds(const TrieArrays &a, uint32_t &max_fanout, bool &near_stop) {
  const uint64_t n = a.n_nodes;
  const uint64_t n_edges = n - 1;
  const uint32_t *off = a.node_offsets;
  const int32_t *tok = a.edge_tokens;
  if (off[0] != 0 || off[n] != n_edges) return false;
  bool bad = false;
  uint32_t fanout = 0;
  for (uint64_t w = 0; w < a.terminal_words() && !bad; ++w) {
    const uint64_t base = w * 64;
    const uint64_t count = std::min<uint64_t>(64, n - base);
    uint64_t leaves = 0;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t node = base + i;
      const uint32_t b = off[node], e = off[node + 1];
      const bool range_bad = (e < b) | (b < node) | (e > n_edges);
      bad |= range_bad;
      fanout = std::max(fanout, e - b);
      leaves |= uint64_t{b == e} << i;
      if (e - b >= 2 && !range_bad) {
        bool unordered = false;
        for (uint32_t k = b + 1; k < e; ++k) unordered |= tok[k] <= tok[k - 1];
        bad |= unordered;
      }
    }
    bad |= (leaves & ~a.terminal_bits[w]) != 0;
  }
  if (bad) return false;

  const auto vocab = static_cast<uint32_t>(a.vocab_size);
  const auto lo = static_cast<uint32_t>(a.stop_tokens[0]);
  const auto stop_span = static_cast<uint32_t>(a.stop_tokens[a.n_stop_tokens - 1]) - lo;
  const auto *utok = reinterpret_cast<const uint32_t *>(tok);
  uint32_t out = 0, close = 0;
  for (uint64_t e = 0; e < n_edges; ++e) {
    out |= utok[e] >= vocab;
    close |= utok[e] - lo <= stop_span;
  }
  max_fanout = fanout;
  near_stop = close != 0;
  return out == 0;
}

// The first failure of structure_holds, named.
Status locate_structure_error(const TrieArrays &a, const StopSet &stops) {
  const uint64_t n = a.n_nodes;
  const uint64_t n_edges = n - 1;
  const uint32_t *off = a.node_offsets;
  const int32_t *tok = a.edge_tokens;
  if (off[0] != 0 || off[n] != n_edges) {
    return corrupt("node_offsets does not span the ", n_edges, " edges");
  }
  for (uint64_t node = 0; node < n; ++node) {
    const uint32_t b = off[node], e = off[node + 1];
    if (e < b || b < node || e > n_edges) {
      return corrupt("node ", node, " has edges [", b, ", ", e, "): not a breadth-first CSR range");
    }
    if (b == e && !((a.terminal_bits[node / 64] >> (node % 64)) & 1)) {
      return corrupt("node ", node, " has no children and is not terminal");
    }
    for (uint32_t k = b; k < e; ++k) {
      if (tok[k] < 0 || tok[k] >= a.vocab_size || stops.contains(tok[k])) {
        return corrupt("edge ", k, " (of node ", node, ") has token ", tok[k],
                       ", out of range [0, vocab_size=", a.vocab_size, ") or a stop token");
      }
      if (k > b && tok[k] <= tok[k - 1]) {
        return corrupt("children of node ", node, " are not strictly ascending (token ", tok[k],
                       " after ", tok[k - 1], ")");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

// Everything the accessors (trie.h) and the step rules assume, checked once
// here so that the hot paths can trust the arrays. Linear: one fused pass
// over node_offsets and edge_tokens, one over the terminal bits, one over the
// few multi-label terminals.
Status validate_trie_arrays(const TrieArrays &a) {
  const uint64_t n = a.n_nodes;
  if (n == 0 || n > kMaxNodes) return corrupt("node count ", n, " is outside [1, ", kMaxNodes, "]");
  if (a.vocab_size <= 0) return corrupt("vocab_size ", a.vocab_size, " <= 0");

  // Stop tokens: at least one, ascending, distinct, < vocab_size.
  if (a.n_stop_tokens == 0) return corrupt("no stop tokens");
  for (uint32_t i = 0; i < a.n_stop_tokens; ++i) {
    const int32_t s = a.stop_tokens[i];
    if (s < 0 || s >= a.vocab_size || (i > 0 && s <= a.stop_tokens[i - 1])) {
      return corrupt("stop token ", s, " (", i, ") is out of range [0, vocab_size=", a.vocab_size,
                     ") or out of order");
    }
  }
  const StopSet stops({a.stop_tokens, a.n_stop_tokens});

  // Nodes and edges: CSR over the edges in breadth-first order (node k's
  // first edge is at index >= k, so child ids grow along every walk and each
  // node but the root has exactly one parent), children strictly ascending,
  // in [0, vocab_size) and never a stop token, and every node without
  // children terminal (a walk can always end).
  uint32_t max_fanout = 0;
  bool near_stop = false;
  if (!structure_holds(a, max_fanout, near_stop)) {
    TM_TRY(locate_structure_error(a, stops));
    return corrupt("node_offsets and edge_tokens are inconsistent");
  }
  if (near_stop) {
    for (uint64_t e = 0; e < n - 1; ++e) {
      if (stops.contains(a.edge_tokens[e])) {
        return corrupt("edge ", e, " has the stop token ", a.edge_tokens[e]);
      }
    }
  }
  if (max_fanout != a.max_fanout) {
    return corrupt("max_fanout is ", a.max_fanout, " but the nodes have up to ", max_fanout);
  }
  {
    // Depth: level l + 1 is the children of level l, a contiguous id range.
    uint64_t level_end = 1;
    uint32_t depth = 0;
    while (level_end < n) {
      level_end = uint64_t{a.node_offsets[level_end]} + 1;
      ++depth;
    }
    if (depth != a.max_depth) {
      return corrupt("max_depth is ", a.max_depth, " but the paths are up to ", depth,
                     " tokens long");
    }
  }

  // Terminal bits and their rank directory.
  {
    const uint64_t words = a.terminal_words();
    if (n % 64 != 0 && (a.terminal_bits[words - 1] >> (n % 64)) != 0) {
      return corrupt("terminal_bits has bits set past the last node");
    }
    uint64_t running = 0;
    for (uint64_t w = 0; w < words; ++w) {
      if (a.terminal_rank[w] != running) {
        return corrupt("terminal_rank[", w, "] is ", a.terminal_rank[w], ", expected ", running);
      }
      running += static_cast<uint64_t>(std::popcount(a.terminal_bits[w]));
    }
    if (running != a.n_terminals) {
      return corrupt(running, " terminal bits set but n_terminals is ", a.n_terminals);
    }
  }

  // Labels: the multi-label terminals ascending by rank, each with >= 2
  // strictly ascending labels, the first of which is its first_labels entry.
  if (!a.first_labels) {
    if (a.n_multi != 0 || a.n_multi_labels != 0) {
      return corrupt("a trie without labels lists ", a.n_multi, " multi-label terminals");
    }
  } else {
    if (a.multi_offsets[0] != 0 || a.multi_offsets[a.n_multi] != a.n_multi_labels) {
      return corrupt("multi_offsets does not span the ", a.n_multi_labels, " labels");
    }
    for (uint64_t i = 0; i < a.n_multi; ++i) {
      const uint32_t rank = a.multi_ranks[i];
      const uint32_t b = a.multi_offsets[i], e = a.multi_offsets[i + 1];
      if (rank >= a.n_terminals || (i > 0 && rank <= a.multi_ranks[i - 1])) {
        return corrupt("multi_ranks[", i, "] = ", rank, " is out of range or out of order");
      }
      if (e < b || e - b < 2 || e > a.n_multi_labels) {
        return corrupt("multi-label terminal ", i, " has labels [", b, ", ", e, ")");
      }
      for (uint32_t k = b + 1; k < e; ++k) {
        if (a.multi_labels[k] <= a.multi_labels[k - 1]) {
          return corrupt("labels of multi-label terminal ", i, " are not strictly ascending");
        }
      }
      if (a.first_labels[rank] != a.multi_labels[b]) {
        return corrupt("first label of terminal rank ", rank, " is not its smallest label");
      }
    }
  }
  return Status::Ok();
}

}  // namespace treemask
