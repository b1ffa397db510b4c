// Sorting a string list for the byte-trie builder: an MSD radix sort of
// string indices (one byte a level, a counting pass and a scatter per range,
// insertion sort below 32 strings), then the longest common prefix of each
// string with the one before it. Linear in the bytes that tell strings apart;
// 4 + 4 bytes per string beside the strings, plus 2 during the sort.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace treemask {

struct SortedStrings {
  std::vector<uint32_t> order;  // string indices, ascending by bytes (ties by nothing)
  std::vector<uint32_t> lcp;    // lcp[i]: common prefix of order[i - 1] and order[i]; lcp[0] = 0
};

// String i is bytes[offsets[i], offsets[i + 1]); n < 2^32, every string
// shorter than 2^32 bytes (the builder checks).
SortedStrings sort_strings(const uint8_t *bytes, const uint64_t *offsets, size_t n);

}  // namespace treemask
