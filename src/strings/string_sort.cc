// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/string_sort.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace treemask {

namespace {

struct Range {
  size_t begin, end;
  size_t depth;  // every string in the range shares its first `depth` bytes
};

constexpr size_t kInsertionSortBelow = 32;

struct Strings {
  const uint8_t *bytes;
  const uint64_t *offsets;

  size_t size(uint32_t i) const { return offsets[i + 1] - offsets[i]; }
  const uint8_t *data(uint32_t i) const { return bytes + offsets[i]; }
  // 0 past the end, else 1 + the byte: strings that end sort first.
  unsigned key(uint32_t i, size_t depth) const {
    return depth < size(i) ? 1u + data(i)[depth] : 0u;
  }
  // a < b comparing from depth on (both share the bytes before it). No
  // memcmp of nothing: the bytes of a set of empty strings may be NULL, and
  // memcmp's pointers must be valid even for 0 bytes.
  bool less(uint32_t a, uint32_t b, size_t depth) const {
    const size_t na = size(a) - depth, nb = size(b) - depth;
    const size_t common = std::min(na, nb);
    const int c = common == 0 ? 0 : std::memcmp(data(a) + depth, data(b) + depth, common);
    return c != 0 ? c < 0 : na < nb;
  }
};

void insertion_sort(const Strings &s, uint32_t *order, size_t n, size_t depth) {
  for (size_t i = 1; i < n; ++i) {
    const uint32_t x = order[i];
    size_t j = i;
    while (j > 0 && s.less(x, order[j - 1], depth)) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = x;
  }
}

}  // namespace

SortedStrings sort_strings(const uint8_t *bytes, const uint64_t *offsets, size_t n) {
  const Strings s{bytes, offsets};
  SortedStrings out;
  out.order.resize(n);
  for (size_t i = 0; i < n; ++i) out.order[i] = static_cast<uint32_t>(i);
  std::vector<uint32_t> scratch(n);
  {
    std::vector<uint16_t> keys(n);
    std::vector<Range> todo{{0, n, 0}};
    uint32_t *order = out.order.data();
    while (!todo.empty()) {
      Range r = todo.back();
      todo.pop_back();
      for (;;) {  // a range whose strings all share the next byte loops here
        const size_t m = r.end - r.begin;
        if (m < kInsertionSortBelow) {
          insertion_sort(s, order + r.begin, m, r.depth);
          break;
        }
        std::array<size_t, 258> count{};
        for (size_t i = r.begin; i < r.end; ++i) {
          const unsigned k = s.key(order[i], r.depth);
          keys[i] = static_cast<uint16_t>(k);
          ++count[k + 1];
        }
        const unsigned k0 = keys[r.begin];
        if (count[k0 + 1] == m) {
          if (k0 == 0) break;  // all end here: equal
          ++r.depth;
          continue;
        }
        for (size_t k = 1; k < count.size(); ++k) count[k] += count[k - 1];
        // count[k] is now where bucket k starts.
        std::array<size_t, 258> next = count;
        for (size_t i = r.begin; i < r.end; ++i) scratch[r.begin + next[keys[i]]++] = order[i];
        std::memcpy(order + r.begin, scratch.data() + r.begin, m * sizeof(uint32_t));
        // Bucket 0 (strings that end at this depth) is sorted: all equal.
        for (unsigned k = 1; k <= 256; ++k) {
          if (count[k + 1] - count[k] > 1) {
            todo.push_back({r.begin + count[k], r.begin + count[k + 1], r.depth + 1});
          }
        }
        break;
      }
    }
  }
  // The scratch space becomes the lcp array.
  out.lcp = std::move(scratch);
  if (n > 0) out.lcp[0] = 0;
  for (size_t i = 1; i < n; ++i) {
    const uint32_t a = out.order[i - 1], b = out.order[i];
    const size_t m = std::min(s.size(a), s.size(b));
    const uint8_t *x = s.data(a), *y = s.data(b);
    size_t l = 0;
    while (l < m && x[l] == y[l]) ++l;
    out.lcp[i] = static_cast<uint32_t>(l);
  }
  return out;
}

}  // namespace treemask
