// The state-array rule of a string-set trie (strings/string_trie.h): the
// plain rule's contract (treemask.h, "state arrays") with a byte-trie node
// as the state. A node allows the tokens whose bytes spell a path from it,
// plus the stop tokens where a string ends; a token steps along its bytes,
// a stop token at a string end terminates. The reserved states and the
// failure policies are the plain rule's (advance_state, plain_rules.h).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "rules/plain_rules.h"
#include "rules/rules.h"
#include "strings/string_trie.h"

namespace treemask {

struct StringRules {
  const StringTrie *t;
  std::span<const int32_t> stops;  // ascending

  bool is_node(uint32_t s) const { return s < t->n_nodes(); }
  bool is_stop(int32_t token) const { return std::binary_search(stops.begin(), stops.end(), token); }
  // A node, kStateTerminated (a stop token at a string end) or kStateFailed.
  uint32_t step_node(uint32_t node, int32_t token) const {
    const TokenStep r = t->step_token(node, token, stops);
    return r.kind == TokenStep::kAdvanced     ? r.node
           : r.kind == TokenStep::kTerminated ? kStateTerminated
                                              : kStateFailed;
  }
  Advanced advance(uint32_t s, int32_t token, int32_t policy) const {
    return advance_state(*this, s, token, policy);
  }
};

// What state s of trie allows, for either kind of trie: a string set's node
// walks its vocabulary; any other state is the plain rule's (a reserved
// state allows the stop tokens; the plain rule is never asked about a
// string set's node).
inline AllowedSet state_allowed(const Trie &trie, const PlainRules &plain, uint32_t s) {
  if (trie.strings() && s < trie.n_nodes()) return AllowedSet::string_set(*trie.strings(), s);
  return AllowedSet(plain.allowed(trie.strings() ? kStateTerminated : s));
}

}  // namespace treemask
