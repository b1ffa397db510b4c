// The rule interface on the host: "what is allowed now" (Allowed, from
// plain_rules.h) and the few functions every consumer derives from it, so
// that fill, next_tokens, forced_tokens and can_terminate are written once
// over Allowed: the row of a state, the merged ascending list, the forced
// chain.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstring>
#include <span>

#include "core/bits.h"
#include "rules/plain_rules.h"
#include "trie/trie.h"

namespace treemask {

// The plain rule over trie's arrays with the given stop tokens (the trie's
// own, or a matcher's override).
inline PlainRules plain_rules(const Trie &trie, std::span<const int32_t> stops) {
  PlainRules r{trie.arrays()};
  r.t.stop_tokens = stops.data();
  r.t.n_stop_tokens = static_cast<uint32_t>(stops.size());
  return r;
}

inline std::span<const int32_t> children_of(const Allowed &a) { return {a.children, a.n_children}; }
inline std::span<const int32_t> stops_of(const Allowed &a, const PlainRules &r) {
  return a.stops ? std::span<const int32_t>(r.t.stop_tokens, r.t.n_stop_tokens)
                 : std::span<const int32_t>{};
}
// Distinct tokens allowed (the two lists are disjoint).
inline uint64_t count_allowed(const Allowed &a, const PlainRules &r) {
  return uint64_t{a.n_children} + (a.stops ? r.t.n_stop_tokens : 0);
}

// Writes the whole row of `state` (bitmask_row_words >= row_words(); the extra words
// zeroed): the node's children through the trie's dense-row cache, then the
// stop tokens. Returns the number of allowed tokens.
inline uint64_t write_allowed_row(const Trie &trie, const PlainRules &r, uint32_t state,
                                  uint32_t *row, size_t bitmask_row_words) {
  const Allowed a = r.allowed(state);
  const size_t words = trie.row_words();
  if (r.is_node(state)) {
    trie.write_children_row(state, row);
  } else {
    std::memset(row, 0, words * sizeof(uint32_t));
  }
  for (int32_t s : stops_of(a, r)) set_bit(row, s);
  if (bitmask_row_words > words)
    std::memset(row + words, 0, (bitmask_row_words - words) * sizeof(uint32_t));
  return count_allowed(a, r);
}

// The allowed tokens in ascending order (the two lists merged), at most cap
// written to out; returns how many there are.
inline size_t list_allowed(const Allowed &a, const PlainRules &r, int32_t *out, size_t cap) {
  const auto kids = children_of(a);
  const auto stops = stops_of(a, r);
  const size_t n = kids.size() + stops.size();
  size_t i = 0, j = 0, k = 0;
  while (k < cap && (i < kids.size() || j < stops.size())) {
    out[k++] =
        (j >= stops.size() || (i < kids.size() && kids[i] < stops[j])) ? kids[i++] : stops[j++];
  }
  return n;
}

// The forced chain from node: while a state allows exactly one token (one
// child, not terminal), that token. Child ids strictly increase, so this
// ends within n_nodes steps.
inline size_t forced_chain(const PlainRules &r, uint32_t node, int32_t *out, size_t cap) {
  size_t k = 0;
  for (Allowed a = r.allowed(node); !a.stops && a.n_children == 1; a = r.allowed(a.first_child)) {
    if (k < cap) out[k] = a.children[0];
    ++k;
  }
  return k;
}

}  // namespace treemask
