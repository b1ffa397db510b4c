// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "batch/state_array.h"

#include <cstring>

#include "core/bits.h"
#include "rules/policy.h"
#include "rules/rules.h"
#include "rules/trie_rules.h"

namespace treemask {

namespace {

bool is_reserved(uint32_t state) { return state == kStateTerminated || state == kStateFailed; }

}  // namespace

Status check_states(const Trie &trie, std::span<const uint32_t> states) {
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i] >= trie.n_nodes() && !is_reserved(states[i])) {
      return error(Code::kOutOfRange, "states[", i, "] = ", states[i],
                   " is neither a node id (< n_nodes = ", trie.n_nodes(),
                   ") nor TREEMASK_STATE_TERMINATED / TREEMASK_STATE_FAILED");
    }
  }
  return Status::Ok();
}

Status fill_states(const Trie &trie, std::span<const uint32_t> states, uint32_t *bitmask,
                   size_t bitmask_row_words) {
  const size_t words = trie.row_words();
  if (bitmask_row_words < words) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", bitmask_row_words, " < ", words,
                 ", the words vocab_size ", trie.vocab_size(), " needs");
  }
  if (!states.empty() && !bitmask) return error(Code::kInvalidArgument, "bitmask is NULL");
  TM_TRY(check_states(trie, states));
  const TrieRules rules(trie, trie.stop_tokens());
  const size_t extra_words = bitmask_row_words - words;
  for (size_t i = 0; i < states.size(); ++i) {
    uint32_t *row = bitmask + i * bitmask_row_words;
    write_row(trie, rules.allowed(states[i]), trie.stop_tokens(), row);
    if (extra_words > 0) std::memset(row + words, 0, extra_words * sizeof(uint32_t));
  }
  return Status::Ok();
}

Status advance_states(const Trie &trie, std::span<uint32_t> states, const int32_t *tokens,
                      FailurePolicy policy, bool *accepted) {
  const auto p = static_cast<int32_t>(policy);
  TM_TRY(check_failure_policy(p));
  if (!states.empty() && !tokens) return error(Code::kInvalidArgument, "tokens is NULL");
  TM_TRY(check_states(trie, states));
  TrieRules(trie, trie.stop_tokens()).visit([&](const auto &rules) {
    for (size_t i = 0; i < states.size(); ++i) {
      const Advanced r = rules.advance(states[i], tokens[i], p);
      states[i] = r.state;
      if (accepted) accepted[i] = r.accepted;
    }
  });
  return Status::Ok();
}

Result<uint32_t> matcher_state_id(const Matcher &m) {
  if (!m.has_plain_steps()) {
    // A bare node id would drop the mode (labels used, exclusions, budget,
    // think progress, overridden stop tokens) and silently unconstrain rows.
    return error(Code::kInvalidState,
                 "the matcher uses a decoding mode (multi-label, think budget, length budget, "
                 "label filter or override_stop_tokens); its state has no state-array form");
  }
  const MatcherState &s = m.state();
  switch (s.phase) {
    case Phase::kActive: return s.node;
    case Phase::kTerminated: return kStateTerminated;
    // FAILED behaves like both: stop tokens only, and under FAIL_CLOSED a
    // stop token terminates, under STICKY_ERROR nothing is accepted.
    case Phase::kClosed:
    case Phase::kFailed: return kStateFailed;
    case Phase::kThinking:
    case Phase::kSeparator: break;  // only reachable in modes, refused above
  }
  return error(Code::kInvalidState, "the matcher's state has no state-array form");
}

}  // namespace treemask
