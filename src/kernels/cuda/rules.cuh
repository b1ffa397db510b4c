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

__device__ __forceinline__ PlainRules rules_of(const launch::TrieView &t) { return PlainRules{t}; }

}  // namespace treemask::cuda::device
