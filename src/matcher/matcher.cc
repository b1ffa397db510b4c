// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "matcher/matcher.h"
#include "rules/policy.h"

#include <algorithm>
#include <cstring>

#include "rules/mode_index.h"

namespace treemask {

Result<std::unique_ptr<Matcher>> Matcher::create(Ref<const Trie> trie, const MatcherOptions &opts,
                                                 const ModeOptions &modes) {
  if (!trie) return error(Code::kInvalidArgument, "trie is NULL");
  const auto policy = static_cast<int32_t>(opts.failure_policy);
  TM_TRY(check_failure_policy(policy));
  if (opts.pad_token < -1 || opts.pad_token >= trie->vocab_size()) {
    return error(Code::kOutOfRange, "pad_token ", opts.pad_token,
                 " is out of range [-1, vocab_size=", trie->vocab_size(), ")");
  }
  TM_ASSIGN_OR_RETURN(std::shared_ptr<const ModeConfig> config, make_mode_config(*trie, modes));
  std::unique_ptr<Matcher> m(new Matcher(std::move(trie), opts));
  m->modes_ = std::move(config);
  m->rules_ = plain_rules(*m->trie_, m->stop_tokens());
  m->reset();
  m->counters_ = {};  // creation is not a reset
  m->fills_ = {};
  return m;
}

Result<std::unique_ptr<Matcher>> Matcher::clone() const {
  if (state_.phase == Phase::kFailed) return failed_state_error();
  std::unique_ptr<Matcher> copy(new Matcher(*this));
  copy->counters_ = {};  // each event is counted by one matcher only
  copy->fills_ = {};
  return copy;
}

Status Matcher::failed_state_error() const {
  return error(Code::kInvalidState, "the matcher failed after rejecting token ", failed_token_,
               " (STICKY_ERROR policy); only reset is allowed");
}

Status Matcher::fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                     const FillOptions &fo) const {
  const Trie &t = *trie_;
  const size_t words = t.row_words();
  if (bitmask_row_words < words) {
    return error(Code::kBufferTooSmall, "bitmask_row_words is ", bitmask_row_words, ", vocab_size ",
                 t.vocab_size(), " needs ", words);
  }
  count_fill();
  if (!plain() || fo.remaining_tokens) return fill_modes(row, bitmask_row_words, need_apply, fo);
  const uint64_t allowed = write_allowed_row(t, rules(), plain_state(), row, bitmask_row_words);
  if (need_apply) *need_apply = allowed != static_cast<uint64_t>(t.vocab_size());
  if (state_.phase == Phase::kFailed) return failed_state_error();
  return Status::Ok();
}

void Matcher::finish_fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                          uint64_t allowed) const {
  const size_t words = trie_->row_words();
  if (bitmask_row_words > words)
    std::memset(row + words, 0, (bitmask_row_words - words) * sizeof(uint32_t));
  // Stop tokens are never children, so `allowed` counts distinct tokens.
  if (need_apply) *need_apply = allowed != static_cast<uint64_t>(trie_->vocab_size());
}

Status Matcher::accept(int32_t token, bool *accepted, std::string *why, bool apply_policy) {
  const Trie &t = *trie_;
  switch (state_.phase) {
    case Phase::kFailed: *accepted = false; return failed_state_error();
    case Phase::kTerminated:
      *accepted = is_stop_token(token) || (opts_.pad_token >= 0 && token == opts_.pad_token);
      if (!*accepted && why) *why = describe_rejection(token);
      if (!*accepted && apply_policy) ++counters_.rejected_tokens;
      return Status::Ok();
    case Phase::kClosed:
      if (is_stop_token(token)) {
        push_state();
        state_.node = kStateFailed;
        state_.phase = Phase::kTerminated;
        *accepted = true;
      } else {
        reject(token, accepted, why, apply_policy);
      }
      return Status::Ok();
    default: break;
  }
  if (!plain()) return accept_modes(token, accepted, why, apply_policy);
  const uint32_t next = rules().step_node(state_.node, token);
  if (next == kStateFailed) {
    reject(token, accepted, why, apply_policy);
    return Status::Ok();
  }
  push_state();
  if (next == kStateTerminated ||
      (opts_.terminate_without_stop_token && t.children(next).count == 0)) {
    state_.phase = Phase::kTerminated;
  }
  if (next != kStateTerminated) state_.node = next;
  *accepted = true;
  return Status::Ok();
}

void Matcher::reject(int32_t token, bool *accepted, std::string *why, bool apply_policy) {
  *accepted = false;
  if (why) *why = describe_rejection(token);
  if (!apply_policy) return;  // a draft miss, not a failure
  ++counters_.rejected_tokens;
  if (opts_.failure_policy == FailurePolicy::kReject) return;
  if (state_.phase != Phase::kClosed) {
    failed_token_ = token;  // the first rejection is the cause
    ++counters_.fail_closed;
  }
  state_.phase =
      opts_.failure_policy == FailurePolicy::kFailClosed ? Phase::kClosed : Phase::kFailed;
}

std::string Matcher::describe_rejection(int32_t token) const {
  const Trie &t = *trie_;
  std::string msg = cat("token ", token, " rejected: ");
  if (token < 0 || token >= t.vocab_size()) {
    msg += cat("out of range [0, vocab_size=", t.vocab_size(), "); ");
  }
  switch (state_.phase) {
    case Phase::kTerminated:
      msg += "the sequence has terminated; only stop tokens";
      if (opts_.pad_token >= 0) msg += cat(" and pad token ", opts_.pad_token);
      return msg + " are accepted";
    case Phase::kClosed:
      return msg + cat("the matcher is closed after rejecting token ", failed_token_,
                       " (FAIL_CLOSED); only stop tokens are accepted");
    case Phase::kFailed: return msg + "the matcher is in the failed state";
    case Phase::kThinking:
    case Phase::kSeparator: return msg + describe_mode_rejection(token);
    case Phase::kActive: break;
  }
  int32_t allowed[9];
  const size_t n = next_tokens(allowed, 9);
  msg += cat("not allowed at trie node ", state_.node, "; ", n, " allowed");
  if (n > 0) {
    msg += " (";
    for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) msg += cat(i ? ", " : "", allowed[i]);
    msg += n > 8 ? ", ...)" : ")";
  }
  if (!plain()) msg += describe_mode_rejection(token);
  return msg;
}

Status Matcher::rollback(size_t n_tokens) {
  if (state_.phase == Phase::kFailed) return failed_state_error();
  if (state_.phase == Phase::kClosed) {
    return error(Code::kInvalidState,
                 "cannot roll back a closed matcher (FAIL_CLOSED after "
                 "rejecting token ",
                 failed_token_, "); call reset");
  }
  if (n_tokens == 0) return Status::Ok();
  const size_t depth = rollback_depth();
  if (n_tokens > depth) {
    return error(Code::kOutOfRange, "cannot roll back ", n_tokens, " tokens: only ", depth,
                 " can be undone (history holds ", history_.size(),
                 ", max_rollback_tokens = ", opts_.max_rollback_tokens, ")");
  }
  state_ = history_.from_top(n_tokens);
  history_.pop(n_tokens);
  counters_.rolled_back_tokens += n_tokens;
  return sync_used_labels();
}

void Matcher::reset() {
  state_ = initial_state();
  history_.clear();
  failed_token_ = -1;
  used_.reset();
  budget_end_ = modes_ ? modes_->max_new_tokens : -1;
  update_plain();
  ++counters_.resets;
}

void Matcher::push_state() {
  history_.push(state_);
  ++state_.accepted;
  ++counters_.accepted_tokens;
}

bool Matcher::is_stop_token(int32_t token) const {
  if (!modes_ || modes_->stops.empty()) return trie_->is_stop_token(token);
  return std::binary_search(modes_->stops.begin(), modes_->stops.end(), token);
}

size_t Matcher::rollback_depth() const {
  if (state_.phase == Phase::kClosed || state_.phase == Phase::kFailed) return 0;
  const size_t n = history_.size();
  return opts_.max_rollback_tokens == 0 ? n : std::min(n, opts_.max_rollback_tokens);
}

bool Matcher::can_terminate() const {
  if (state_.phase == Phase::kClosed) return true;
  if (!plain()) return can_terminate_modes();
  return state_.phase == Phase::kActive && rules().allowed(state_.node).stops;
}

size_t Matcher::next_tokens(int32_t *out, size_t cap) const {
  if (!plain()) return next_tokens_modes(out, cap);
  if (state_.phase == Phase::kFailed) return 0;  // fill writes the stop tokens
  const PlainRules &r = rules();
  return list_allowed(r.allowed(plain_state()), r, out, cap);
}

bool Matcher::allowed_lists(std::span<const int32_t> &first,
                            std::span<const int32_t> &second) const {
  if (!plain() || state_.phase == Phase::kFailed) return false;
  const PlainRules &r = rules();
  const Allowed a = r.allowed(plain_state());
  first = children_of(a);
  second = stops_of(a, r);
  return true;
}

size_t Matcher::forced_tokens(int32_t *out, size_t cap) const {
  if (!plain()) return forced_tokens_modes(out, cap);
  if (state_.phase != Phase::kActive) return 0;
  return forced_chain(rules(), state_.node, out, cap);
}

size_t Matcher::label_ids(int64_t *out, size_t cap) const {
  const bool has_node = state_.phase == Phase::kActive ||
                        (state_.phase == Phase::kTerminated && state_.node != kStateFailed);
  if (!has_node) return 0;
  const std::span<const int64_t> labels = trie_->labels(state_.node);
  std::copy_n(labels.begin(), std::min(cap, labels.size()), out);
  return labels.size();
}

}  // namespace treemask
