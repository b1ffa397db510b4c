// A matcher follows one sequence through a trie. See treemask.h, section 5,
// for the contract; this class implements it, the C shim only converts.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/refcount.h"
#include "core/status.h"
#include "matcher/history.h"
#include "trie/trie.h"

namespace treemask {

enum class FailurePolicy : int32_t { kReject = 0, kFailClosed = 1, kStickyError = 2 };

enum class Phase : uint8_t {
  kActive,      // at `node`
  kClosed,      // FAIL_CLOSED after a rejection: only stop tokens allowed
  kTerminated,  // ended; `node` is where it ended, or kStateFailed if it ended from kClosed
  kFailed,      // STICKY_ERROR after a rejection: everything fails until reset
};

struct MatcherOptions {
  FailurePolicy failure_policy = FailurePolicy::kReject;
  bool terminate_without_stop_token = false;
  size_t max_rollback_tokens = 0;  // 0 = unlimited
  int32_t pad_token = -1;
};

// Everything that rollback restores. Kept small and trivially copyable: one
// is pushed per accepted token.
struct MatcherState {
  uint32_t node = 0;
  Phase phase = Phase::kActive;
};

class Matcher {
 public:
  static Result<std::unique_ptr<Matcher>> create(Ref<const Trie> trie, const MatcherOptions &opts);

  // Copy of this matcher sharing the history copy-on-write.
  Result<std::unique_ptr<Matcher>> clone() const;

  Status fill(uint32_t *row, size_t n_words, bool *need_apply) const;
  // On rejection *accepted = false and, if why != nullptr, *why says why.
  Status accept(int32_t token, bool *accepted, std::string *why);
  Status rollback(size_t n_tokens);
  void reset();

  bool is_terminated() const { return state_.phase == Phase::kTerminated; }
  bool can_terminate() const;
  size_t next_tokens(int32_t *out, size_t cap) const;
  size_t forced_tokens(int32_t *out, size_t cap) const;
  size_t label_ids(int64_t *out, size_t cap) const;
  size_t rollback_depth() const;

  const Trie &trie() const { return *trie_; }
  const Ref<const Trie> &trie_ref() const { return trie_; }
  const MatcherState &state() const { return state_; }
  const MatcherOptions &options() const { return opts_; }

  // The error a call returns in the STICKY_ERROR failed state.
  Status failed_state_error() const;

 private:
  Matcher(Ref<const Trie> trie, const MatcherOptions &opts)
      : trie_(std::move(trie)), opts_(opts), history_(opts.max_rollback_tokens) {}

  std::string describe_rejection(int32_t token) const;
  Status corrupt_node_error() const;
  void reject(int32_t token, bool *accepted, std::string *why);

  Ref<const Trie> trie_;
  MatcherOptions opts_;
  MatcherState state_;
  History<MatcherState> history_;
  int32_t failed_token_ = -1;  // the token whose rejection entered kClosed / kFailed
};

}  // namespace treemask
