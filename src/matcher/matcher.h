// A matcher follows one sequence through a trie. See treemask.h, section 5,
// for the contract; this class implements it, the C shim only converts.
//
// A matcher without decoding modes takes the plain paths of matcher.cc. The
// modes' rules (labels, leaves-only, think, length budget, label filters)
// live in src/rules; their matcher paths in matcher_modes.cc, speculative.cc
// and debug_string.cc. The batch (src/batch) drives every kind of matcher
// only through fill, next_tokens, accept, rollback and clone.
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
#include "rules/modes.h"
#include "rules/rules.h"
#include "trie/trie.h"

namespace treemask {

enum class FailurePolicy : int32_t { kReject = 0, kFailClosed = 1, kStickyError = 2 };

enum class Phase : uint8_t {
  kActive,      // at `node`
  kClosed,      // FAIL_CLOSED after a rejection: only stop tokens allowed
  kTerminated,  // ended; `node` is where it ended, or kStateFailed if it ended from kClosed
  kFailed,      // STICKY_ERROR after a rejection: everything fails until reset
  kThinking,    // think mode; `step` = tokens of the end sequence matched so far
  kSeparator,   // multi-label; `step` = separator tokens accepted so far (>= 1)
};

struct MatcherOptions {
  FailurePolicy failure_policy = FailurePolicy::kReject;
  bool terminate_without_stop_token = false;
  size_t max_rollback_tokens = 0;  // 0 = unlimited
  int32_t pad_token = -1;
};

// Everything that rollback restores. Kept small and trivially copyable: one
// is pushed per accepted token. Mode state that does not fit (the labels a
// multi-label matcher has used) is re-derived from `labels` on rollback.
struct MatcherState {
  uint32_t node = 0;
  Phase phase = Phase::kActive;
  uint32_t step = 0;
  uint32_t labels = 0;        // labels produced so far (multi-label)
  uint64_t think_tokens = 0;  // tokens accepted since thinking began
  uint64_t accepted = 0;      // state-changing accepts since the start (length budget)
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

  // Copy of this matcher sharing the history (and any mode state)
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

  bool is_terminated() const { return state_.phase == Phase::kTerminated; }
  bool is_thinking() const { return state_.phase == Phase::kThinking; }
  bool can_terminate() const;
  size_t next_tokens(int32_t *out, size_t cap) const;
  size_t forced_tokens(int32_t *out, size_t cap) const;
  size_t label_ids(int64_t *out, size_t cap) const;
  size_t rollback_depth() const;

  // The stop tokens this matcher uses: the override, or the trie's.
  std::span<const int32_t> stop_tokens() const {
    return modes_ && !modes_->stops.empty() ? std::span<const int32_t>(modes_->stops)
                                            : trie_->stop_tokens();
  }
  bool is_stop_token(int32_t token) const;

  // ---- Decoding modes (matcher_modes.cc, speculative.cc, debug_string.cc) ----

  // The labels produced so far, in order (multi-label: each completed label;
  // otherwise the labels of the node the sequence ended at).
  size_t produced_labels(int64_t *out, size_t cap) const;
  // Exclusions for this matcher; allowed only before the first accept.
  Status set_label_filter(const ExclusionSet *shared, std::span<const int64_t> banned,
                          const std::vector<int64_t> *allowed);
  // remaining >= 0: the engine will generate at most that many more tokens;
  // -1: no budget.
  Status set_remaining_tokens(int64_t remaining);
  // -1 when there is no budget.
  int64_t remaining_tokens() const;
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
  const MatcherState &state() const { return state_; }
  const MatcherOptions &options() const { return opts_; }
  const ModeConfig *modes() const { return modes_.get(); }
  // The allowed set as two disjoint ascending lists (the node's children and
  // the stop tokens, either may be empty), without copying. Only for a
  // matcher with plain steps outside the failed state; false otherwise
  // (then use next_tokens). The lists stay valid until the next mutation.
  bool allowed_lists(std::span<const int32_t> &first, std::span<const int32_t> &second) const;
  // True when the state-array form (a bare node id) reproduces this matcher
  // exactly: no mode changes its steps and the trie's stop tokens apply.
  bool has_plain_steps() const { return plain() && !(modes_ && !modes_->stops.empty()); }

  // The plain rule with this matcher's stop tokens (fixed at creation).
  const PlainRules &rules() const { return rules_; }
  // The state of the plain rule: the node while active; closed, terminated
  // and failed matchers allow only the stop tokens, as a reserved state does.
  uint32_t plain_state() const {
    return state_.phase == Phase::kActive ? state_.node : kStateTerminated;
  }

  // The error a call returns in the STICKY_ERROR failed state.
  Status failed_state_error() const;

 private:
  // The labels a multi-label matcher has produced: which terminal nodes, in
  // order, and the ends they block. Shared between clones until one of them
  // changes it.
  struct UsedLabels {
    Delta delta;
    std::vector<uint32_t> produced;
  };

  // What the label phase allows at the current node.
  struct LabelStep {
    Children children;
    bool all_children = true;  // no child is filtered out
    // Children are filtered out only for having no available end (no budget
    // binds, no allow-subset): the dead ones can be listed without a scan.
    bool dead_children_only = false;
    std::optional<LabelView> view;
    int64_t child_dist_limit = INT64_MAX;  // a child needs dist <= this
    bool stop = false;
    bool separator = false;
    bool think_begin = false;

    bool allows(NodeInfo child) const {
      return child.ends > 0 && int64_t{child.dist} <= child_dist_limit;
    }
    bool child_allowed(uint32_t index) const {
      return all_children || allows(view->info(children.first_child + index));
    }
    // Indices of the children that are not allowed, ascending; only when
    // dead_children_only.
    std::vector<uint32_t> dead_children() const {
      std::vector<uint32_t> dead;
      view->for_each_dead_child(children, [&](uint32_t k) { dead.push_back(k); });
      std::sort(dead.begin(), dead.end());
      dead.erase(std::unique(dead.begin(), dead.end()), dead.end());
      return dead;
    }
    // Calls f(index) for each allowed child in order while f returns true.
    template <class F>
    void for_each_allowed_child(F &&f) const {
      if (all_children) {
        for (uint32_t i = 0; i < children.count; ++i) {
          if (!f(i)) return;
        }
        return;
      }
      view->for_each_child(children,
                           [&](uint32_t i, NodeInfo info) { return !allows(info) || f(i); });
    }
  };

  Matcher(Ref<const Trie> trie, const MatcherOptions &opts)
      : trie_(std::move(trie)), opts_(opts), history_(opts.max_rollback_tokens) {}

  // Plain paths (matcher.cc).
  Status accept(int32_t token, bool *accepted, std::string *why, bool apply_policy);
  std::string describe_rejection(int32_t token) const;
  void reject(int32_t token, bool *accepted, std::string *why, bool apply_policy);
  void finish_fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                   uint64_t allowed) const;
  // Pushes the current state for rollback and counts the accept.
  void push_state();

  // Mode paths (matcher_modes.cc).
  bool plain() const { return !mode_steps_; }
  void update_plain();
  MatcherState initial_state() const;
  std::optional<int64_t> budget(const FillOptions &fo) const;
  const NodeStats *stats_if_needed(bool with_budget) const;
  LabelStep label_step(std::optional<int64_t> remaining) const;
  bool think_forcing(std::optional<int64_t> remaining) const;
  Status fill_modes(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                    const FillOptions &fo) const;
  Status accept_modes(int32_t token, bool *accepted, std::string *why, bool apply_policy);
  Status accept_in_label_phase(int32_t token, bool *accepted, std::string *why, bool apply_policy);
  Status after_accept();
  Status produce_label(uint32_t terminal);
  // After rollback: un-produce the labels the restored state had not produced.
  Status sync_used_labels();
  UsedLabels &used_for_write();
  LabelView filter_view(const NodeStats &stats) const;
  size_t next_tokens_modes(int32_t *out, size_t cap) const;
  std::optional<int32_t> sole_forced_token() const;
  size_t forced_tokens_modes(int32_t *out, size_t cap) const;
  bool can_terminate_modes() const;
  std::string describe_mode_rejection(int32_t token) const;
  // A copy without history, for look-ahead (forced chains, drafts).
  Matcher fork() const;

  Ref<const Trie> trie_;
  MatcherOptions opts_;
  PlainRules rules_{};
  std::shared_ptr<const ModeConfig> modes_;
  std::shared_ptr<const LabelFilter> filter_;
  std::shared_ptr<UsedLabels> used_;  // null until a label is produced
  int64_t budget_end_ = -1;           // state_.accepted at which the budget runs out; -1 none
  bool mode_steps_ = false;           // fill/accept take the mode paths
  MatcherState state_;
  History<MatcherState> history_;
  int32_t failed_token_ = -1;  // the token whose rejection entered kClosed / kFailed
  MatcherCounters counters_;   // all but fills, which const calls count
  // A relaxed atomic count that copies as a value (a matcher is copied by
  // clone and look-ahead).
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
