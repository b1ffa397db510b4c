// The rules of the decoding modes (modes.h): what a state allows and where a
// token leads when labels, separators, exclusions, think mode or a length
// budget are in effect. The plain rule (plain_rules.h) is the special case
// without them; a matcher uses that one where it suffices (it is cheaper)
// and this one everywhere else, and either answers the same questions:
//
//   allowed(state, remaining) -> AllowedSet     (rules.h: what may come next)
//   advance(state, allowed, token) -> accepted? (the state moves on, or not)
//
// In the label phase the AllowedSet is the plain rule's Allowed of the node
// with a child filter and the separator / think-begin tokens; the other
// phases allow one token, or every token but one. fill, next_tokens, forced
// chains and can_terminate are the queries of rules.h over it, so they
// always agree with accept. A ModeState is a value: a look-ahead (forced
// chains, drafts) copies it and steps the copy; the labels it has produced
// are shared copy-on-write.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "rules/label_view.h"
#include "rules/modes.h"
#include "rules/plain_rules.h"
#include "rules/rules.h"
#include "trie/trie.h"

namespace treemask {

enum class Phase : uint8_t {
  kActive,      // at `node`
  kClosed,      // FAIL_CLOSED after a rejection: only stop tokens allowed
  kTerminated,  // ended; `node` is where it ended, or kStateFailed if it ended from kClosed
  kFailed,      // STICKY_ERROR after a rejection: everything fails until reset
  kThinking,    // think mode; `step` = tokens of the end sequence matched so far
  kSeparator,   // multi-label; `step` = separator tokens accepted so far (>= 1)
};

// Everything that rollback restores. Kept small and trivially copyable: one
// is pushed per accepted token. The labels a multi-label state has used
// (ModeState::used) are re-derived from `labels` on rollback.
struct MatcherState {
  uint32_t node = 0;
  Phase phase = Phase::kActive;
  uint32_t step = 0;
  uint32_t labels = 0;        // labels produced so far (multi-label)
  uint64_t think_tokens = 0;  // tokens accepted since thinking began
  uint64_t accepted = 0;      // state-changing accepts since the start (length budget)
};

// The labels a multi-label state has produced: which terminal nodes, in
// order, and the ends they block.
struct UsedLabels {
  Delta delta;
  std::vector<uint32_t> produced;
};

// The whole state of one sequence under the rules, copied as a value.
struct ModeState {
  MatcherState at;
  // Null until a label is produced; shared by copies of the state until one
  // of them produces or un-produces a label (copy-on-write).
  std::shared_ptr<UsedLabels> used;
  int64_t budget_end = -1;  // at.accepted at which the budget runs out; -1 none

  // Tokens the budget still allows; none without a budget.
  std::optional<int64_t> remaining() const {
    if (budget_end < 0) return std::nullopt;
    return budget_end - static_cast<int64_t>(at.accepted);
  }
};

class ModeRules {
 public:
  // modes may be null (no mode), filter null (no exclusions); stops are the
  // matcher's stop tokens (the override or the trie's), ascending.
  ModeRules(Ref<const Trie> trie, std::shared_ptr<const ModeConfig> modes,
            std::shared_ptr<const LabelFilter> filter, bool terminate_without_stop_token);

  // The same rules with another label filter.
  ModeRules with_filter(std::shared_ptr<const LabelFilter> filter) const {
    ModeRules r = *this;
    r.filter_ = std::move(filter);
    return r;
  }

  const Trie &trie() const { return *trie_; }
  const ModeConfig *modes() const { return modes_.get(); }
  const LabelFilter *filter() const { return filter_.get(); }
  std::span<const int32_t> stops() const {
    return modes_ && !modes_->stops.empty() ? std::span<const int32_t>(modes_->stops)
                                            : trie_->stop_tokens();
  }
  bool is_stop(int32_t token) const {
    const auto s = stops();
    return std::binary_search(s.begin(), s.end(), token);
  }
  // True when the plain rule gives every answer (no mode changes a step, no
  // filter, no budget): the matcher then takes the plain rule's fast paths.
  bool plain_suffices(const ModeState &s) const {
    return !(modes_ && modes_->changes_steps()) && !filter_ && s.budget_end < 0;
  }

  // The state of a new (or reset) sequence.
  ModeState initial() const;

  // What state s (in the active, thinking or separator phase) allows, with
  // `remaining` tokens of budget (none: no budget).
  AllowedSet allowed(const ModeState &s, std::optional<int64_t> remaining) const;

  // Accepts token at s, where a = allowed(s, s.remaining()): true with s
  // moved on (at.accepted counted), or false with s unchanged.
  Result<bool> advance(ModeState &s, const AllowedSet &a, int32_t token) const;

  // Why token is not allowed (appended to the matcher's message).
  std::string describe_rejection(const ModeState &s, const AllowedSet &a, int32_t token) const;

  // Un-produces the labels s has not produced (after a rollback).
  Status sync_used_labels(ModeState &s) const;
  // The labels produced so far (multi-label: every completed label;
  // otherwise those of the node the sequence ended at).
  size_t produced_labels(const ModeState &s, int64_t *out, size_t cap) const;

 private:
  const NodeStats *stats_if_needed(bool with_budget) const;
  LabelView view(const NodeStats &stats) const { return LabelView(*trie_, stats, filter_.get()); }
  // What the label phase allows at s.at.node.
  AllowedSet label_allowed(const ModeState &s, std::optional<int64_t> remaining) const;
  bool think_forcing(const ModeState &s, std::optional<int64_t> remaining) const;
  Status produce_label(ModeState &s, uint32_t terminal) const;
  // After an accept in the label phase: ends the sequence when only stop
  // tokens could follow and the matcher terminates without one.
  Status end_if_only_stops(ModeState &s) const;

  Ref<const Trie> trie_;
  std::shared_ptr<const ModeConfig> modes_;
  std::shared_ptr<const LabelFilter> filter_;
  bool terminate_without_stop_token_ = false;
};

}  // namespace treemask
