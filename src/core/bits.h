// Bit helpers for xgrammar-layout bitmask rows: int32 words, token t is bit
// (t % 32) of word (t / 32). Internally rows are handled as uint32_t so that
// shifts are well defined; the bit patterns are identical.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

namespace treemask {

constexpr size_t words_for_vocab(int32_t vocab_size) {
  return vocab_size <= 0 ? 0 : (static_cast<size_t>(vocab_size) + 31) / 32;
}

inline void set_bit(uint32_t *row, int32_t token) {
  const auto t = static_cast<uint32_t>(token);
  row[t >> 5] |= uint32_t{1} << (t & 31);
}

inline bool test_bit(const uint32_t *row, int32_t token) {
  const auto t = static_cast<uint32_t>(token);
  return (row[t >> 5] >> (t & 31)) & 1u;
}

}  // namespace treemask
