// Finding a token among a node's ascending children: the one search the
// trie, the rules (rules/plain_rules.h) and the CUDA trie step share.
// Includable by nvcc: no standard-library types, callable on host and device.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdint.h>

#include "core/hd.h"

namespace treemask {

// Index of token among tokens[0 .. count) (ascending), or -1. Short lists
// are scanned; longer ones searched without branches.
TREEMASK_HD int64_t find_token(const int32_t *tokens, uint32_t count, int32_t token) {
  if (count <= 16) {
    for (uint32_t i = 0; i < count; ++i) {
      if (tokens[i] == token) return i;
    }
    return -1;
  }
  uint32_t lo = 0, n = count;
  while (n > 1) {
    const uint32_t half = n / 2;
    lo = (tokens[lo + half] <= token) ? lo + half : lo;
    n -= half;
  }
  return tokens[lo] == token ? int64_t{lo} : -1;
}

}  // namespace treemask
