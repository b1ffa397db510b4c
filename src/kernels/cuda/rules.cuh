// The plain trie rule (rules/plain_rules.h) over the device trie arrays:
// the same code the CPU matcher and state arrays run, shared by the fused
// trie step and the beam step. States that are neither nodes nor reserved
// behave as FAILED.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"
#include "rules/plain_rules.h"

namespace treemask::cuda::device {

__device__ __forceinline__ PlainRules rules_of(const launch::TrieView &t) {
  PlainTrieView v;
  v.node_offsets = t.node_offsets;
  v.edge_tokens = t.edge_tokens;
  v.terminal_bits = t.terminal_bits;
  v.head_bits = t.head_bits;
  v.head_rank = t.head_rank;
  v.tail_lengths = t.tail_lengths;
  v.tail_samples = t.tail_samples;
  v.tail_tokens = t.tail_tokens;
  v.tail_values = t.tail_values;
  v.stop_tokens = t.stop_tokens;
  v.n_stop_tokens = t.n_stop_tokens;
  v.n_nodes = t.n_nodes;
  v.n_explicit = t.n_explicit;
  v.n_heads = t.n_heads;
  v.vocab_size = t.vocab_size;
  return PlainRules{v};
}

}  // namespace treemask::cuda::device
