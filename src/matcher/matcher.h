// A matcher follows one sequence through a trie. See treemask.h, section 5,
// for the contract; this class implements it, the C shim only converts.
//
// The matcher keeps the lifecycle (create, clone, reset), the rollback
// history, the failure policy and the counters. What is allowed and where a
// token leads come from the rules (src/rules): the trie's rule (TrieRules:
// the plain rule, or the rule of the trie's kind, chosen at create) where it
// suffices (no mode changes a step: its fast paths), the mode rules
// otherwise. Both are chosen once per configuration (create, label filter,
// budget), not per call. Look-ahead (forced chains, drafts) steps copies of
// the state, a value (ModeState), never copies of the matcher.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/refcount.h"
#include "core/status.h"
#include "matcher/history.h"
#include "rules/exclusion_set.h"
#include "rules/label_view.h"
#include "rules/mode_rules.h"
#include "rules/modes.h"
#include "rules/rules.h"
#include "rules/trie_rules.h"
#include "trie/trie.h"

namespace treemask {

// The failure policies, by the plain rule's pinned values (plain_rules.h).
enum class FailurePolicy : int32_t {
  kReject = kPolicyReject,
  kFailClosed = kPolicyFailClosed,
  kStickyError = kPolicyStickyError,
};

struct MatcherOptions {
  FailurePolicy failure_policy = FailurePolicy::kReject;
  bool terminate_without_stop_token = false;
  size_t max_rollback_tokens = 0;  // 0 = unlimited
  int32_t pad_token = -1;
};

// What a matcher did, for metrics (treemask_matcher_counters). Counts only
// grow; a new matcher and every clone start at zero.
struct MatcherCounters {
  uint64_t fills = 0;
  uint64_t accepted_tokens = 0;  // state-changing accepts
  uint64_t rejected_tokens = 0;  // rejections under a failure policy (not draft misses)
  uint64_t fail_closed = 0;      // rejections that closed or failed the matcher
  uint64_t rolled_back_tokens = 0;
  uint64_t resets = 0;
};

struct FillOptions {
  // Overrides the matcher's own length budget for this fill (tokens the
  // engine will still generate, this one included).
  std::optional<int64_t> remaining_tokens;
};

class Matcher {
 public:
  static Result<std::unique_ptr<Matcher>> create(Ref<const Trie> trie, const MatcherOptions &opts,
                                                 const ModeOptions &modes = {});

  // Copy of this matcher sharing the history (and the produced labels)
  // copy-on-write.
  Result<std::unique_ptr<Matcher>> clone() const;

  Status fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply) const {
    return fill(row, bitmask_row_words, need_apply, FillOptions{});
  }
  Status fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
              const FillOptions &fo) const;
  // On rejection *accepted = false and, if why != nullptr, *why says why.
  Status accept(int32_t token, bool *accepted, std::string *why) {
    return accept(token, accepted, why, true);
  }
  Status rollback(size_t n_tokens);
  void reset();

  bool is_terminated() const { return phase() == Phase::kTerminated; }
  bool is_thinking() const { return phase() == Phase::kThinking; }
  bool can_terminate() const { return can_terminate(state_); }
  size_t next_tokens(int32_t *out, size_t cap) const { return list_allowed(state_, out, cap); }
  size_t forced_tokens(int32_t *out, size_t cap) const;
  // The bytes every continuation begins with (a trie with bytes: a string
  // set); 0 outside the active phase or for token paths.
  size_t forced_bytes(uint8_t *out, size_t cap) const;
  size_t label_ids(int64_t *out, size_t cap) const;
  size_t rollback_depth() const;

  // The stop tokens this matcher uses: the override, or the trie's.
  std::span<const int32_t> stop_tokens() const { return modes_.stops(); }
  bool is_stop_token(int32_t token) const { return modes_.is_stop(token); }

  // ---- Decoding modes ----

  // The labels produced so far, in order (multi-label: each completed label;
  // otherwise the labels of the node the sequence ended at).
  size_t produced_labels(int64_t *out, size_t cap) const {
    return modes_.produced_labels(state_, out, cap);
  }
  // Exclusions for this matcher; allowed only before the first accept.
  Status set_label_filter(const ExclusionSet *shared, std::span<const int64_t> banned,
                          const std::vector<int64_t> *allowed);
  // remaining >= 0: the engine will generate at most that many more tokens;
  // -1: no budget.
  Status set_remaining_tokens(int64_t remaining);
  // -1 when there is no budget.
  int64_t remaining_tokens() const {
    const auto r = state_.remaining();
    return r ? std::max<int64_t>(0, *r) : -1;
  }
  // Accepts tokens in order until one is rejected (no failure policy) or
  // the sequence terminates; *n_accepted counts the state-changing accepts.
  Status accept_tokens(std::span<const int32_t> tokens, size_t *n_accepted, std::string *why);
  // Rows for a draft: row 0 for the current state, row i + 1 for the state
  // after draft node i (its parent's state plus tokens[i]; parents == null
  // means a chain). Rows of nodes that cannot be reached are all zero.
  Status fill_draft(std::span<const int32_t> tokens, const int32_t *parents, uint32_t *rows,
                    size_t bitmask_row_words, size_t *n_valid) const;
  // Accepts the forced chain; writes it to out[0 .. min(cap, n)).
  Status accept_forced(int32_t *out, size_t cap, size_t *n_accepted);
  std::string debug_string() const;

  MatcherCounters counters() const {
    MatcherCounters c = counters_;
    c.fills = fills_.get();
    return c;
  }
  // A row written for this matcher without fill() (the batch's incremental
  // path). The one count a const call makes: an atomic, so a const method
  // changes no plain member.
  void count_fill() const { fills_.add(1); }

  const Trie &trie() const { return *trie_; }
  const Ref<const Trie> &trie_ref() const { return trie_; }
  const MatcherState &state() const { return state_.at; }
  const MatcherOptions &options() const { return opts_; }
  const ModeConfig *modes() const { return modes_.modes(); }
  // The allowed set as two disjoint ascending lists (the node's children and
  // the stop tokens, either may be empty), without copying. Only for a
  // matcher on the trie's rule outside the failed state, at a state whose
  // set is not computed (a string set's node); false otherwise (then use
  // next_tokens). The lists stay valid until the next mutation.
  bool allowed_lists(std::span<const int32_t> &first, std::span<const int32_t> &second) const;
  // True when the state-array form (a bare node id) reproduces this matcher
  // exactly: the trie's rule with the trie's stop tokens.
  bool has_plain_steps() const { return plain_ && !(modes() && !modes()->stops.empty()); }

  // The trie's rule with this matcher's stop tokens (fixed at creation).
  const TrieRules &rules() const { return rules_; }
  // The state of the trie's rule: the node while active; closed, terminated
  // and failed matchers allow only the stop tokens, as a reserved state does.
  uint32_t plain_state() const { return plain_state(state_); }

  // The error a call returns in the STICKY_ERROR failed state.
  Status failed_state_error() const;

 private:
  Matcher(Ref<const Trie> trie, const MatcherOptions &opts, ModeRules modes)
      : trie_(std::move(trie)),
        opts_(opts),
        modes_(std::move(modes)),
        history_(opts.max_rollback_tokens) {}

  Phase phase() const { return state_.at.phase; }
  static uint32_t plain_state(const ModeState &s) {
    return s.at.phase == Phase::kActive ? s.at.node : kStateTerminated;
  }
  // The phases the rules answer for; the lifecycle phases (closed,
  // terminated, failed) allow the stop tokens, as the plain rule's reserved
  // state does (plain_state).
  static bool in_rule_phase(const ModeState &s) {
    return s.at.phase == Phase::kActive || s.at.phase == Phase::kThinking ||
           s.at.phase == Phase::kSeparator;
  }
  // Chooses the rule (plain_: the trie's rule alone) for the current
  // configuration.
  void choose_rules() { plain_ = modes_.plain_suffices(state_); }

  // What s allows (the current state or a look-ahead copy), from the rule
  // this matcher uses: the one place that chooses between the trie's rule
  // and the mode rules. remaining: the budget of this fill (none: the
  // state's own). The queries (fill, next_tokens, forced_tokens,
  // can_terminate) are the functions of rules.h over its answer. A kind of
  // trie without modes (a string set) always has plain_ and no budget
  // (make_mode_config, fill and set_remaining_tokens refuse them).
  AllowedSet allowed(const ModeState &s, std::optional<int64_t> remaining) const {
    if ((plain_ && !remaining) || !in_rule_phase(s)) return rules_.allowed(plain_state(s));
    return modes_.allowed(s, remaining ? remaining : s.remaining());
  }
  size_t list_allowed(const ModeState &s, int32_t *out, size_t cap) const;
  bool can_terminate(const ModeState &s) const;
  std::optional<int32_t> sole_forced_token(const ModeState &s) const;
  // Steps s by token (lifecycle phases, then the rule). No history, policy
  // or counters: accept() adds those.
  enum class Step : uint8_t {
    kRejected,   // s unchanged
    kAccepted,   // s moved on (counted in at.accepted)
    kUnchanged,  // accepted without a change (a stop or pad token after the end)
  };
  Result<Step> step(ModeState &s, int32_t token) const;
  // The trie's rule's step of an active state (no mode): true when
  // accepted.
  bool step_active(MatcherState &at, int32_t token) const;
  // The token paths' forced chain: the sole allowed token, stepped through
  // the modes, while there is one.
  size_t forced_chain(int32_t *out, size_t cap) const;

  Status accept(int32_t token, bool *accepted, std::string *why, bool apply_policy);
  std::string describe_rejection(int32_t token) const;
  void reject(int32_t token, bool *accepted, std::string *why, bool apply_policy);

  Ref<const Trie> trie_;
  MatcherOptions opts_;
  ModeRules modes_;
  TrieRules rules_;    // the trie's rule, of its kind, with this matcher's stop tokens
  bool plain_ = true;  // the trie's rule gives every answer (choose_rules)
  ModeState state_;
  History<MatcherState> history_;
  int32_t failed_token_ = -1;  // the token whose rejection entered kClosed / kFailed
  MatcherCounters counters_;   // all but fills, which const calls count
  // A relaxed atomic count that copies as a value (a matcher is copied by
  // clone).
  struct FillCount {
    mutable std::atomic<uint64_t> n{0};
    FillCount() = default;
    FillCount(const FillCount &o) : n(o.get()) {}
    FillCount &operator=(const FillCount &o) {
      n.store(o.get(), std::memory_order_relaxed);
      return *this;
    }
    uint64_t get() const { return n.load(std::memory_order_relaxed); }
    // A load and a store, not a locked read-modify-write: a matcher is used
    // by one thread at a time (so no increment is lost), and the atomic type
    // keeps concurrent const calls free of data races all the same.
    void add(uint64_t k) const { n.store(get() + k, std::memory_order_relaxed); }
  };
  FillCount fills_;
};

}  // namespace treemask
