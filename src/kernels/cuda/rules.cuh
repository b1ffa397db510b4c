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
  v.stop_tokens = t.stop_tokens;
  v.n_stop_tokens = t.n_stop_tokens;
  v.n_nodes = t.n_nodes;
  v.vocab_size = t.vocab_size;
  return PlainRules{v};
}

}  // namespace treemask::cuda::device
