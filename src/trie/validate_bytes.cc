// The structural checks of a string-set trie's byte trie (the byte-trie
// rows of trie/layout.h, whose layout strings/string_trie.h describes): each
// node's own fields (validate_byte_trie_arrays), then the depth-first
// nesting of the ids and the exact max_depth and max_fanout. The trie layer
// checks every array it loads, of either kind; what a string set's nodes
// mean is the strings layer's.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <bit>
#include <vector>

#include "trie/trie.h"

namespace treemask {

namespace {

Status corrupt_byte_trie(auto &&...parts) {
  return error(Code::kCorruptFile, "trie arrays: ", parts...);
}

bool test(const uint64_t *bits, uint64_t n) { return (bits[n >> 6] >> (n & 63)) & 1; }

// The depth-first nesting of a byte trie (validate_byte_trie_arrays checks
// each node's own fields): the ids must be the preorder of the trie its
// child tables describe. Node n follows n - 1: as its one child (n - 1
// unary), as its first child (n - 1 a branch, whose first child
// validate_byte_trie_arrays checked is n), or, after a leaf, as the next
// child of the deepest branch that still has children to visit; at the end
// no branch has any left. A stack holds the branches with children left
// (not every node of a chain), so the pass is O(nodes) with O(depth)
// memory. Then max_depth is the longest path and max_fanout the most
// children, both exact.
Status validate_byte_nesting(const TrieArrays &a) {
  const TrieArrays &b = a;
  struct Branch {
    uint32_t node;
    uint32_t next, last;  // children [next, last) of the table are still to come
    uint64_t depth;
  };
  auto bit = [](const uint64_t *bits, uint64_t n) { return (bits[n >> 6] >> (n & 63)) & 1; };
  std::vector<Branch> open;
  uint64_t depth = 0, max_depth = 0, k = 0;  // k: branch nodes seen, the next one's rank
  for (uint64_t n = 1; n < b.n_nodes; ++n) {
    const uint64_t prev = n - 1;
    if (bit(b.unary_bits, prev)) {
      ++depth;
    } else if (bit(b.branch_bits, prev)) {
      open.push_back(
          {static_cast<uint32_t>(prev), b.branch_first[k] + 1, b.branch_first[k + 1], depth});
      ++k;
      ++depth;
    } else {
      if (open.empty()) {
        return corrupt_byte_trie("byte trie node ", n, " follows the leaf ", prev,
                                 " but no branch has a child left");
      }
      Branch &top = open.back();
      if (b.child_ids[top.next] != n) {
        return corrupt_byte_trie("byte trie node ", n, " follows the leaf ", prev,
                                 "; the next child of ", top.node, " is ", b.child_ids[top.next]);
      }
      depth = top.depth + 1;
      if (++top.next == top.last) open.pop_back();
    }
    // A branch's children are all visited before its last one's subtree
    // ends: drop branches whose children are all placed.
    max_depth = std::max(max_depth, depth);
  }
  if (!open.empty()) {
    return corrupt_byte_trie("byte trie: the child ", b.child_ids[open.back().next], " of node ",
                             open.back().node, " is never reached in depth-first order");
  }
  uint32_t fanout = 0;
  for (uint64_t i = 0; i < b.n_branches; ++i) {
    fanout = std::max(fanout, b.branch_first[i + 1] - b.branch_first[i]);
  }
  if (fanout == 0) {
    for (uint64_t w = 0; w < b.byte_words(); ++w) {
      if (b.unary_bits[w]) fanout = 1;
    }
  }
  if (max_depth != a.max_depth) {
    return corrupt_byte_trie("max_depth is ", a.max_depth, " but the strings are up to ", max_depth,
                             " bytes long");
  }
  if (fanout != a.max_fanout) {
    return corrupt_byte_trie("max_fanout is ", a.max_fanout, " but the nodes have up to ", fanout);
  }
  return Status::Ok();
}

}  // namespace

Status validate_byte_trie_arrays(const TrieArrays &a) {
  if (a.n_nodes == 0 || a.n_nodes > kMaxNodes) {
    return error(Code::kCorruptFile, "byte trie: ", a.n_nodes, " nodes");
  }
  if (a.n_branch_children > UINT32_MAX || a.n_branches > a.n_nodes) {
    return error(Code::kCorruptFile, "byte trie: branch table of ", a.n_branches, " nodes and ",
                 a.n_branch_children, " children");
  }
  if (a.byte_labels[0] != 0) return error(Code::kCorruptFile, "byte trie: the root has a label");
  const uint64_t words = a.byte_words();
  uint64_t rank = 0;
  for (uint64_t w = 0; w < words; ++w) {
    if (a.branch_rank[w] != rank) {
      return error(Code::kCorruptFile, "byte trie: branch_rank[", w, "] = ", a.branch_rank[w],
                   ", expected ", rank);
    }
    rank += std::popcount(a.branch_bits[w]);
  }
  const uint64_t tail = a.n_nodes & 63;
  const uint64_t past = tail ? ~((uint64_t{1} << tail) - 1) : 0;
  if ((a.terminal_bits[words - 1] | a.unary_bits[words - 1] | a.branch_bits[words - 1]) & past) {
    return error(Code::kCorruptFile, "byte trie: bits set past the last node");
  }
  if (rank != a.n_branches) {
    return error(Code::kCorruptFile, "byte trie: ", rank, " branch nodes, the table has ",
                 a.n_branches);
  }
  if (a.branch_first[0] != 0 || a.branch_first[a.n_branches] != a.n_branch_children) {
    return error(Code::kCorruptFile, "byte trie: branch offsets do not span the child table");
  }
  // The bits a word at a time (the tail past the last node is zero, checked
  // above): unary and branch exclusive, every leaf (neither) terminal.
  for (uint64_t w = 0; w < words; ++w) {
    const uint64_t valid = w + 1 < words || tail == 0 ? ~uint64_t{0} : (uint64_t{1} << tail) - 1;
    const uint64_t both = a.unary_bits[w] & a.branch_bits[w];
    const uint64_t bad_leaf = valid & ~(a.unary_bits[w] | a.branch_bits[w] | a.terminal_bits[w]);
    if (both) {
      return error(Code::kCorruptFile, "byte trie: node ", w * 64 + std::countr_zero(both),
                   " is unary and a branch");
    }
    if (bad_leaf) {
      return error(Code::kCorruptFile, "byte trie: leaf ", w * 64 + std::countr_zero(bad_leaf),
                   " is not terminal");
    }
  }
  if (test(a.unary_bits, a.n_nodes - 1)) {
    return error(Code::kCorruptFile, "byte trie: unary node ", a.n_nodes - 1, " has no next node");
  }
  // The branch table, branch by branch (k-th set branch bit).
  uint64_t k = 0;
  for (uint64_t w = 0; w < words; ++w) {
    for (uint64_t bits = a.branch_bits[w]; bits != 0; bits &= bits - 1, ++k) {
      const uint64_t n = w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      const uint32_t first = a.branch_first[k], end = a.branch_first[k + 1];
      if (end < first || end - first < 2) {
        return error(Code::kCorruptFile, "byte trie: branch node ", n, " has children [", first,
                     ", ", end, ")");
      }
      for (uint32_t c = first; c < end; ++c) {
        const uint32_t id = a.child_ids[c];
        const bool ok =
            id > n && id < a.n_nodes && a.byte_labels[id] == a.child_bytes[c] &&
            (c == first ? id == n + 1
                        : a.child_bytes[c] > a.child_bytes[c - 1] && id > a.child_ids[c - 1]);
        if (!ok) {
          return error(Code::kCorruptFile, "byte trie: branch node ", n, ", child ", c - first,
                       " (byte ", int{a.child_bytes[c]}, ", node ", id,
                       ") is out of order or range");
        }
      }
    }
  }
  return Status::Ok();
}

Status validate_byte_trie(const TrieArrays &a) {
  TM_TRY(validate_byte_trie_arrays(a));
  return validate_byte_nesting(a);
}

}  // namespace treemask
