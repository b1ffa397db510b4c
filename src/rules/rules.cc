// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/rules.h"

#include <algorithm>
#include <cstring>

#include "core/bits.h"

namespace treemask {

std::vector<uint32_t> ChildFilter::dropped(const Allowed &a) const {
  std::vector<uint32_t> out;
  for_each_dropped(a, [&](uint32_t k) { out.push_back(k); });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

uint64_t write_refined_row(const Trie &trie, const AllowedSet &s, std::span<const int32_t> stops,
                           uint32_t *row) {
  const size_t words = trie.row_words();
  if (s.all_but) {
    const int32_t vocab = trie.vocab_size();
    std::memset(row, 0xFF, words * sizeof(uint32_t));
    if (vocab % 32) row[words - 1] &= (uint32_t{1} << (vocab % 32)) - 1;
    if (s.excluded < 0) return static_cast<uint64_t>(vocab);
    row[s.excluded >> 5] &= ~(uint32_t{1} << (s.excluded & 31));
    return static_cast<uint64_t>(vocab) - 1;
  }
  const Allowed &a = s.base;
  const ChildFilter &f = *s.filter;
  uint64_t allowed = 0;
  if (f.dead_only) {
    // The (possibly cached) dense row, then clear the few dropped children.
    trie.write_children_row(a.children, a.n_children, a.first_child, row);
    allowed = a.n_children;
    f.for_each_dropped(a, [&](uint32_t k) {
      const int32_t token = a.children[k];
      if (!test_bit(row, token)) return;  // listed twice
      row[token >> 5] &= ~(uint32_t{1} << (token & 31));
      --allowed;
    });
  } else {
    std::memset(row, 0, words * sizeof(uint32_t));
    f.for_each_kept(a, [&](uint32_t i) {
      set_bit(row, a.children[i]);
      ++allowed;
      return true;
    });
  }
  return allowed + set_stops_and_extras(s, stops, row);
}

size_t list(const AllowedSet &s, std::span<const int32_t> stops, int32_t vocab_size, int32_t *out,
            size_t cap) {
  if (s.kind) return s.kind->list(s.kind_node, stops, out, cap);
  size_t n = 0;
  auto emit = [&](int32_t token) {
    if (n < cap) out[n] = token;
    ++n;
  };
  if (s.all_but) {
    for (int32_t token = 0; token < vocab_size && n < cap; ++token) {
      if (token != s.excluded) emit(token);
    }
    return static_cast<size_t>(vocab_size) - (s.excluded >= 0 ? 1 : 0);
  }
  const Allowed &a = s.base;
  // The tokens besides the children, ascending: the stop tokens (already
  // ascending) and the extras. They are never children, so a merge gives
  // distinct tokens.
  std::span<const int32_t> others = a.stops ? stops : std::span<const int32_t>{};
  std::vector<int32_t> merged;
  if (s.extra[0] >= 0 || s.extra[1] >= 0) {
    merged.assign(others.begin(), others.end());
    for (int32_t extra : s.extra) {
      if (extra >= 0) merged.push_back(extra);
    }
    std::sort(merged.begin(), merged.end());
    others = merged;
  }
  size_t j = 0;
  auto emit_child = [&](uint32_t i) {
    const int32_t child = a.children[i];
    while (j < others.size() && others[j] < child) emit(others[j++]);
    emit(child);
    return true;
  };
  const ChildFilter *f = s.filter ? &*s.filter : nullptr;
  if (!f) {
    for (uint32_t i = 0; i < a.n_children; ++i) emit_child(i);
  } else if (f->dead_only) {
    // Skip the dropped children instead of checking every child.
    const std::vector<uint32_t> dropped = f->dropped(a);
    size_t next = 0;
    for (uint32_t i = 0; i < a.n_children; ++i) {
      if (next < dropped.size() && dropped[next] == i) {
        ++next;
        continue;
      }
      emit_child(i);
    }
  } else {
    f->for_each_kept(a, emit_child);
  }
  while (j < others.size()) emit(others[j++]);
  return n;
}

}  // namespace treemask
