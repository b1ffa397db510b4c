// Turns a fuzzer's input bytes into choices. Every read is defined however
// short the input is (an exhausted input reads as zeros), so a target never
// needs to check lengths and every prefix of an input is a valid input.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fuzz {

class Input {
 public:
  Input(const uint8_t *data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }

  bool flag() { return byte() & 1; }

  // A value in [lo, hi] (lo <= hi), from as few bytes as the range needs.
  int64_t range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo);
    uint64_t v = byte();
    if (span > 0xFF) v = v << 8 | byte();
    if (span > 0xFFFF) v = v << 16 | (u32() & 0xFFFF);
    return lo + static_cast<int64_t>(span == UINT64_MAX ? v : v % (span + 1));
  }

 private:
  const uint8_t *data_;
  size_t size_;
  size_t pos_ = 0;
};

// A broken invariant: report and abort, which libFuzzer records as a crash
// (and the regression replay as a failed test).
[[noreturn]] inline void fail(const char *file, int line, const char *what) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  std::abort();
}

}  // namespace fuzz

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::fuzz::fail(__FILE__, __LINE__, #cond))
