// A node's outgoing edges in the tail-compressed layout of trie.h: the one
// function the trie (trie.h), the plain rule (rules/plain_rules.h) and the
// CUDA kernels share. Includable by nvcc: no standard-library types,
// callable on host and device.
//
// Works on any view V with the fields of PlainTrieView (trie/layout.h) that
// it names: the view itself, TrieArrays, a device copy.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdint.h>

#include "trie/find_token.h"
#include "trie/layout.h"

namespace treemask {

// tokens[i] leads to node first_child + i. For a node in a tail (or the head
// of one) tokens points at one entry of the trie's tail_values table, whose
// entry k holds the token tail_base + k: storage owned by the trie, so the
// pointer stays valid as long as the trie does, like a CSR edge's.
struct NodeEdges {
  const int32_t *tokens;
  uint32_t count;
  uint32_t first_child;
};

TREEMASK_HD bool test_bit64(const uint64_t *bits, uint32_t i) {
  return (bits[i >> 6] >> (i & 63)) & 1u;
}

// The number of set bits before bit i (rank directory: one uint32 per word).
TREEMASK_HD uint32_t rank64(const uint64_t *bits, const uint32_t *rank, uint32_t i) {
  const uint64_t below = bits[i >> 6] & ((uint64_t{1} << (i & 63)) - 1);
#if defined(__CUDA_ARCH__)
  return rank[i >> 6] + static_cast<uint32_t>(__popcll(below));
#else
  return rank[i >> 6] + static_cast<uint32_t>(__builtin_popcountll(below));
#endif
}

// Where tail k starts among the tail nodes: the sample of its group of 16
// plus the lengths of the tails before it in the group.
template <class V>
TREEMASK_HD uint32_t tail_start(const V &v, uint32_t k) {
  uint32_t start = v.tail_samples[k / kTailSample];
  for (uint32_t j = k & ~(kTailSample - 1); j < k; ++j) start += v.tail_lengths[j];
  return start;
}

template <class V>
TREEMASK_HD NodeEdges node_edges(const V &v, uint32_t node) {
  if (node < v.n_explicit) {
    const uint32_t b = v.node_offsets[node], e = v.node_offsets[node + 1];
    if (b != e || v.n_heads == 0 || !test_bit64(v.head_bits, node)) {
      return {v.edge_tokens + b, e - b, b + 1};  // CSR: edge k leads to node k + 1
    }
    const uint32_t start = tail_start(v, rank64(v.head_bits, v.head_rank, node));
    return {v.tail_values + v.tail_tokens[start], 1, static_cast<uint32_t>(v.n_explicit) + start};
  }
  // A tail node: its terminal bit marks the last node of its tail.
  if (test_bit64(v.terminal_bits, node)) return {v.tail_values, 0, node + 1};
  return {v.tail_values + v.tail_tokens[node + 1 - static_cast<uint32_t>(v.n_explicit)], 1,
          node + 1};
}

}  // namespace treemask
