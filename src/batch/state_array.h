// The state-array form: an engine keeps one uint32 state per sequence (a node
// id, or kStateTerminated / kStateFailed) and treemask fills rows from, and
// advances, arrays of them. Works on the trie alone: no history, no modes.
// treemask.h, section 6, states the rules; the CUDA kernels mirror them.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "matcher/matcher.h"
#include "trie/trie.h"

namespace treemask {

// Every state is a node id of trie or a reserved state (kStateTerminated,
// kStateFailed); kOutOfRange names the first that is not. The one check of
// every entry point that takes states (fill, advance, the beam step, top-k).
Status check_states(const Trie &trie, std::span<const uint32_t> states);

// Row i of bitmask (bitmask_row_words words) gets the allowed set of states[i].
// Every state is checked before any row is written.
Status fill_states(const Trie &trie, std::span<const uint32_t> states, uint32_t *bitmask,
                   size_t bitmask_row_words);

// states[i] takes tokens[i] (< 0: no token); accepted[i] (optional) is false
// only where a token was rejected. Every state is checked before any changes.
Status advance_states(const Trie &trie, std::span<uint32_t> states, const int32_t *tokens,
                      FailurePolicy policy, bool *accepted);

// The state-array form of a matcher's state, for engines that move from
// matchers to state arrays. Fails for a state the form cannot express.
Result<uint32_t> matcher_state_id(const Matcher &m);

}  // namespace treemask
