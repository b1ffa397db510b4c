// The structural validation of a trie's arrays (validate_trie_arrays,
// trie.h): counts, stop tokens, nodes and edges (the scan of
// validate_scan.cc, located here when it fails), tails, depth, terminals and
// labels; a string set's byte trie in validate_bytes.cc.
//
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

Status validate_terminals(const TrieArrays &a);

// A bitset over n ids and its rank directory (one uint32 per word: the set
// bits before it): no bit past id n - 1, every rank right. *set receives
// the number of set bits. `ids` names what the bits are over, for messages.
Status check_ranked_bits(const char *bits_name, const char *rank_name, const char *ids,
                         const uint64_t *bits, const uint32_t *rank, uint64_t n, uint64_t *set) {
  const uint64_t words = (n + 63) / 64;
  if (n % 64 != 0 && (bits[words - 1] >> (n % 64)) != 0) {
    return corrupt(bits_name, " has bits set past the last ", ids);
  }
  uint64_t running = 0;
  for (uint64_t w = 0; w < words; ++w) {
    if (rank[w] != running) {
      return corrupt(rank_name, "[", w, "] is ", rank[w], ", expected ", running);
    }
    running += static_cast<uint64_t>(std::popcount(bits[w]));
  }
  *set = running;
  return Status::Ok();
}

// The first failure of trie_structure_holds, named.
Status locate_structure_error(const TrieArrays &a, const StopSet &stops) {
  const uint64_t n = a.n_explicit;
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
    const auto id = static_cast<uint32_t>(node);
    const bool head = a.head_bits && test_bit64(a.head_bits, id);
    if (head && b != e) return corrupt("node ", node, " heads a tail but has CSR edges");
    if (b == e && !test_bit64(a.terminal_bits, id) && !head) {
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
  if (a.head_bits) {  // the scan also refuses head bits past the last node
    uint64_t set = 0;
    TM_TRY(
        check_ranked_bits("head_bits", "head_rank", "CSR node", a.head_bits, a.head_rank, n, &set));
  }
  return Status::Ok();
}

// The pass/fail check of the tails inside validate_tails (see there).
bool tails_hold(const TrieArrays &a) {
  const uint64_t ne = a.n_explicit, n_tail = a.n_tail_nodes(), heads = a.n_heads;
  const uint64_t *bits = a.terminal_bits;
  uint64_t at = 0;
  bool ok = true;
  for (uint64_t g = 0; g * kTailSample < heads; ++g) {
    const uint64_t k0 = g * kTailSample, k1 = std::min<uint64_t>(heads, k0 + kTailSample);
    ok &= a.tail_samples[g] == at;
    // A group spans at most 16 * 255 nodes: past n_tail, check each tail.
    if (at + kTailSample * 255 > n_tail) {
      for (uint64_t k = k0; k < k1; ++k) {
        at += a.tail_lengths[k];
        if (a.tail_lengths[k] == 0 || at > n_tail) return false;
        const uint64_t leaf = ne + at - 1;
        ok &= test_bit64(bits, static_cast<uint32_t>(leaf));
      }
      continue;
    }
    uint32_t min_len = 255;
    for (uint64_t k = k0; k < k1; ++k) {
      const uint32_t len = a.tail_lengths[k];
      min_len = std::min(min_len, len);
      at += len;
      const uint64_t leaf = ne + at - 1;
      ok &= test_bit64(bits, static_cast<uint32_t>(leaf));
    }
    ok &= min_len > 0;
  }
  if (!ok || at != n_tail) return false;
  // Each tail's last node is terminal; then exactly `heads` terminal tail
  // nodes means no other one is.
  const uint64_t first = ne / 64;
  uint64_t count = static_cast<uint64_t>(std::popcount(bits[first] >> (ne % 64)));
  for (uint64_t w = first + 1; w < a.terminal_words(); ++w) {
    count += static_cast<uint64_t>(std::popcount(bits[w]));
  }
  return count == heads;
}

// Heads and tails (trie.h): head bits only on CSR nodes without edges, with
// their rank; tail lengths >= 1, covering the tail nodes exactly, with
// every 16th start sampled; in the tail nodes exactly the last node of each tail is
// terminal; tail tokens below tail_range, inside [0, vocab_size) and never a
// stop token.
Status validate_tails(const TrieArrays &a, const StopSet &stops) {
  const uint64_t ne = a.n_explicit, n_tail = a.n_tail_nodes(), heads = a.n_heads;
  if (heads == 0) {
    if (n_tail != 0) return corrupt("no tail heads for ", n_tail, " tail nodes");
    return Status::Ok();
  }
  uint64_t set = 0;
  TM_TRY(
      check_ranked_bits("head_bits", "head_rank", "CSR node", a.head_bits, a.head_rank, ne, &set));
  if (set != heads) return corrupt(set, " head bits set but n_heads is ", heads);
  if (n_tail == 0) return corrupt(heads, " tail heads for no tail nodes");
  // The tails: every 16th start sampled, lengths >= 1 and covering the tail
  // nodes, and the terminal bits of the tail nodes exactly the tails' last
  // nodes. A fast pass decides, a group of 16 tails at a time without
  // branches (each tail's last node terminal, then as many terminal tail
  // nodes as tails); only a failure runs the naming pass below.
  if (!tails_hold(a)) {
    const uint64_t first = ne / 64, csr_bits = (uint64_t{1} << (ne % 64)) - 1;
    uint64_t w = first, expect = 0;
    auto compare_to = [&](uint64_t upto) -> Status {
      for (; w < upto; ++w, expect = 0) {
        const uint64_t actual = a.terminal_bits[w] & (w == first ? ~csr_bits : ~uint64_t{0});
        if (actual == expect) continue;
        const uint64_t node = w * 64 + static_cast<uint64_t>(std::countr_zero(actual ^ expect));
        return corrupt("tail node ", node,
                       (actual & ~expect) ? " is terminal but not" : " is not terminal but is",
                       " the last node of its tail");
      }
      return Status::Ok();
    };
    uint64_t at = 0;
    for (uint64_t k = 0; k < heads; ++k) {
      if (k % kTailSample == 0 && a.tail_samples[k / kTailSample] != at) {
        return corrupt("tail_samples[", k / kTailSample, "] is ", a.tail_samples[k / kTailSample],
                       ", but tail ", k, " starts at ", at);
      }
      const uint32_t len = a.tail_lengths[k];
      if (len == 0) return corrupt("tail ", k, " is empty");
      at += len;
      if (at > n_tail) return corrupt("the tails hold more than the ", n_tail, " tail nodes");
      const uint64_t leaf = ne + at - 1;
      if (leaf / 64 != w) TM_TRY(compare_to(leaf / 64));
      expect |= uint64_t{1} << (leaf % 64);
    }
    if (at != n_tail) return corrupt("the tails hold ", at, " nodes, not ", n_tail);
    TM_TRY(compare_to(a.terminal_words()));
    return corrupt("the tail arrays are inconsistent");
  }
  uint32_t top = 0;
  for (uint64_t i = 0; i < n_tail; ++i) top = std::max<uint32_t>(top, a.tail_tokens[i]);
  if (top >= a.tail_range) {
    for (uint64_t i = 0; i < n_tail; ++i) {
      if (a.tail_tokens[i] < a.tail_range) continue;
      return corrupt("tail node ", ne + i, " has token ", int64_t{a.tail_base} + a.tail_tokens[i],
                     ", out of range of the tail tokens [", a.tail_base, ", ",
                     int64_t{a.tail_base} + a.tail_range, ")");
    }
  }
  const int32_t lo = a.tail_base, hi = a.tail_base + static_cast<int32_t>(a.tail_range) - 1;
  if (a.stop_tokens[a.n_stop_tokens - 1] >= lo && a.stop_tokens[0] <= hi) {
    for (uint64_t i = 0; i < n_tail; ++i) {
      if (stops.contains(lo + a.tail_tokens[i])) {
        return corrupt("tail node ", ne + i, " is reached by the stop token ",
                       lo + a.tail_tokens[i]);
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
Status check_counts(const TrieCounts &c) {
  const uint64_t n = c.n_nodes;
  if (n == 0 || n > kMaxNodes) return corrupt("node count ", n, " is outside [1, ", kMaxNodes, "]");
  if (c.vocab_size <= 0) return corrupt("vocab_size ", c.vocab_size, " <= 0");
  if (c.is_string_set()) {
    // No token-path arrays; the byte trie's tables and the vocabulary
    // within what their types index.
    if (c.n_explicit != 0 || c.n_heads != 0 || c.tail_range != 0 || c.tail_base != 0) {
      return corrupt("a string-set trie has token-path counts (", c.n_explicit, " CSR nodes, ",
                     c.n_heads, " tails)");
    }
    if (c.n_branches > n || c.n_branch_children > 0xFFFFFFFFull) {
      return corrupt("inconsistent counts: ", c.n_branches, " branching nodes with ",
                     c.n_branch_children, " children, for ", n, " nodes");
    }
    if (c.n_vocab_tokens > static_cast<uint32_t>(c.vocab_size) || c.n_vocab_bytes > 0xFFFFFFFFull) {
      return corrupt("the vocabulary has ", c.n_vocab_tokens, " tokens of ", c.n_vocab_bytes,
                     " bytes for vocab_size ", c.vocab_size);
    }
  } else {
    if (c.n_branches != 0 || c.n_branch_children != 0 || c.n_vocab_bytes != 0) {
      return corrupt("a token-path trie has string-set counts (", c.n_branches,
                     " branching nodes, ", c.n_vocab_bytes, " vocabulary bytes)");
    }
    if (c.n_explicit == 0 || c.n_explicit > n || c.n_heads > c.n_explicit) {
      return corrupt("inconsistent counts: ", c.n_explicit, " CSR nodes and ", c.n_heads,
                     " tails for ", n, " nodes");
    }
  }
  if (c.n_terminals > n || c.n_multi > c.n_terminals || c.n_multi_labels > 0xFFFFFFFFull) {
    return corrupt("inconsistent counts: ", c.n_terminals, " terminals, ", c.n_multi,
                   " multi-label terminals, ", c.n_multi_labels, " labels, for ", n, " nodes");
  }
  if (c.n_stop_tokens == 0 || c.n_stop_tokens > static_cast<uint32_t>(c.vocab_size)) {
    return corrupt("stop token count ", c.n_stop_tokens, " is outside [1, ", c.vocab_size, "]");
  }
  if (c.label_bytes != 0 && c.label_bytes != 4 && c.label_bytes != 8) {
    return corrupt("label_bytes is ", c.label_bytes, " (expected 0, 4 or 8)");
  }
  if (c.label_bytes == 0 && (c.n_multi != 0 || c.n_multi_labels != 0)) {
    return corrupt("a trie without labels lists ", c.n_multi, " multi-label terminals");
  }
  // The tail token range sizes a table the trie allocates (tail_values):
  // without tails it must be empty, with them at most 65,536 entries.
  if (c.n_heads == 0 && (c.tail_range != 0 || c.tail_base != 0)) {
    return corrupt("a trie without tails has tail tokens [", c.tail_base, ", +", c.tail_range, ")");
  }
  if (c.n_heads > 0 && (c.tail_range == 0 || c.tail_range > 0x10000u || c.tail_base < 0 ||
                        int64_t{c.tail_base} + c.tail_range > c.vocab_size)) {
    return corrupt("tail tokens [", c.tail_base, ", +", c.tail_range,
                   ") are not inside [0, vocab_size=", c.vocab_size, ") or span more than 65536");
  }
  return Status::Ok();
}

Status validate_trie_arrays(const TrieArrays &a) {
  TM_TRY(check_counts(a));
  Status missing;
  for_each_array(a, [&](const ArrayInfo &info, const auto *p) {
    if (missing.ok() && info.kind != ArrayKind::kDerived && info.count > 0 && !p) {
      missing = corrupt(info.name, " is missing (", info.count, " entries expected)");
    }
  });
  TM_TRY(std::move(missing));
  const uint64_t ne = a.n_explicit;

  // Stop tokens: at least one, ascending, distinct, < vocab_size.
  for (uint32_t i = 0; i < a.n_stop_tokens; ++i) {
    const int32_t s = a.stop_tokens[i];
    if (s < 0 || s >= a.vocab_size || (i > 0 && s <= a.stop_tokens[i - 1])) {
      return corrupt("stop token ", s, " (", i, ") is out of range [0, vocab_size=", a.vocab_size,
                     ") or out of order");
    }
  }
  if (a.is_string_set()) {
    TM_TRY(validate_byte_trie(a));
    return validate_terminals(a);
  }
  const StopSet stops({a.stop_tokens, a.n_stop_tokens});

  // Nodes and edges: CSR over the edges in breadth-first order (node k's
  // first edge is at index >= k, so child ids grow along every walk and each
  // node but the root has exactly one parent), children strictly ascending,
  // in [0, vocab_size) and never a stop token, and every node without
  // children terminal (a walk can always end).
  uint32_t max_fanout = 0;
  bool near_stop = false;
  if (!trie_structure_holds(a, /*vector=*/true, &max_fanout, &near_stop)) {
    TM_TRY(locate_structure_error(a, stops));
    return corrupt("node_offsets and edge_tokens are inconsistent");
  }
  if (near_stop) {
    for (uint64_t e = 0; e < ne - 1; ++e) {
      if (stops.contains(a.edge_tokens[e])) {
        return corrupt("edge ", e, " has the stop token ", a.edge_tokens[e]);
      }
    }
  }
  TM_TRY(validate_tails(a, stops));
  if (a.n_heads > 0) max_fanout = std::max(max_fanout, 1u);
  if (max_fanout != a.max_fanout) {
    return corrupt("max_fanout is ", a.max_fanout, " but the nodes have up to ", max_fanout);
  }
  {
    // Depth: level d + 1 of the CSR nodes is the children of level d, a
    // contiguous id range; the heads in a level are a rank range, and a
    // tail reaches its length below its head.
    auto heads_before = [&](uint64_t x) -> uint64_t {
      return x >= ne ? a.n_heads : rank64(a.head_bits, a.head_rank, static_cast<uint32_t>(x));
    };
    uint32_t depth = 0;
    for (uint64_t begin = 0, end = 1, d = 0; begin < ne; ++d) {
      uint32_t longest_tail = 0;
      if (a.n_heads > 0) {
        for (uint64_t r = heads_before(begin), r1 = heads_before(end); r < r1; ++r) {
          longest_tail = std::max<uint32_t>(longest_tail, a.tail_lengths[r]);
        }
      }
      depth = std::max(depth, static_cast<uint32_t>(d) + longest_tail);
      begin = end;
      if (end < ne) end = uint64_t{a.node_offsets[end]} + 1;
    }
    if (depth != a.max_depth) {
      return corrupt("max_depth is ", a.max_depth, " but the paths are up to ", depth,
                     " tokens long");
    }
  }

  return validate_terminals(a);
}

namespace {

Status validate_terminals(const TrieArrays &a) {
  // Terminal bits and their rank directory.
  {
    uint64_t set = 0;
    TM_TRY(check_ranked_bits("terminal_bits", "terminal_rank", "node", a.terminal_bits,
                             a.terminal_rank, a.n_nodes, &set));
    if (set != a.n_terminals) {
      return corrupt(set, " terminal bits set but n_terminals is ", a.n_terminals);
    }
  }

  // Labels: the multi-label terminals ascending by rank, each with >= 2
  // strictly ascending labels, the first of which is its first_labels entry.
  if (a.multi_offsets[0] != 0 || a.multi_offsets[a.n_multi] != a.n_multi_labels) {
    return corrupt("multi_offsets does not span the ", a.n_multi_labels, " labels");
  }
  if (a.has_labels()) {
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
      if (a.first_label(rank) != a.multi_labels[b]) {
        return corrupt("first label of terminal rank ", rank, " is not its smallest label");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

}  // namespace treemask
