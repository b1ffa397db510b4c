// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "matcher/matcher.h"

#include <algorithm>
#include <cstring>

#include "rules/mode_index.h"
#include "rules/policy.h"

namespace treemask {

namespace {

// A chain longer than this is a bug (chains consume labels or depth);
// forced_tokens stops rather than loop.
constexpr size_t kMaxForcedChain = size_t{1} << 26;

}  // namespace

Result<std::unique_ptr<Matcher>> Matcher::create(Ref<const Trie> trie, const MatcherOptions &opts,
                                                 const ModeOptions &modes) {
  if (!trie) return error(Code::kInvalidArgument, "trie is NULL");
  TM_TRY(check_failure_policy(static_cast<int32_t>(opts.failure_policy)));
  if (opts.pad_token < -1 || opts.pad_token >= trie->vocab_size()) {
    return error(Code::kOutOfRange, "pad_token ", opts.pad_token,
                 " is out of range [-1, vocab_size=", trie->vocab_size(), ")");
  }
  TM_ASSIGN_OR_RETURN(std::shared_ptr<const ModeConfig> config, make_mode_config(*trie, modes));
  ModeRules rules(trie, std::move(config), nullptr, opts.terminate_without_stop_token);
  std::unique_ptr<Matcher> m(new Matcher(std::move(trie), opts, std::move(rules)));
  m->rules_ = TrieRules(*m->trie_, m->stop_tokens());
  m->reset();
  m->counters_ = {};  // creation is not a reset
  m->fills_ = {};
  return m;
}

Result<std::unique_ptr<Matcher>> Matcher::clone() const {
  if (phase() == Phase::kFailed) return failed_state_error();
  std::unique_ptr<Matcher> copy(new Matcher(*this));
  copy->counters_ = {};  // each event is counted by one matcher only
  copy->fills_ = {};
  return copy;
}

Status Matcher::failed_state_error() const {
  return error(Code::kInvalidState, "the matcher failed after rejecting token ", failed_token_,
               " (STICKY_ERROR policy); only reset is allowed");
}

// ---- What a state allows (the current one, or a look-ahead copy) ----

size_t Matcher::list_allowed(const ModeState &s, int32_t *out, size_t cap) const {
  if (s.at.phase == Phase::kFailed) return 0;  // fill writes the stop tokens
  return list(allowed(s, std::nullopt), stop_tokens(), trie_->vocab_size(), out, cap);
}

bool Matcher::can_terminate(const ModeState &s) const {
  if (s.at.phase == Phase::kTerminated || s.at.phase == Phase::kFailed) return false;
  return can_end(allowed(s, std::nullopt));  // closed: the stop tokens, as a reserved state
}

std::optional<int32_t> Matcher::sole_forced_token(const ModeState &s) const {
  if (!in_rule_phase(s)) return std::nullopt;
  return sole_token(allowed(s, std::nullopt));
}

bool Matcher::step_active(MatcherState &at, int32_t token) const {
  const uint32_t next = rules_.step_node(at.node, token);
  if (next == kStateFailed) return false;
  ++at.accepted;
  if (next == kStateTerminated || (opts_.terminate_without_stop_token && rules_.is_leaf(next))) {
    at.phase = Phase::kTerminated;
  }
  if (next != kStateTerminated) at.node = next;
  return true;
}

Result<Matcher::Step> Matcher::step(ModeState &s, int32_t token) const {
  switch (s.at.phase) {
    case Phase::kFailed: return Step::kRejected;
    case Phase::kTerminated:
      // Stop and pad tokens keep a finished sequence finished.
      return is_stop_token(token) || (opts_.pad_token >= 0 && token == opts_.pad_token)
                 ? Step::kUnchanged
                 : Step::kRejected;
    case Phase::kClosed:
      if (!is_stop_token(token)) return Step::kRejected;
      ++s.at.accepted;
      s.at.node = kStateFailed;
      s.at.phase = Phase::kTerminated;
      return Step::kAccepted;
    default: break;
  }
  if (plain_) return step_active(s.at, token) ? Step::kAccepted : Step::kRejected;
  TM_ASSIGN_OR_RETURN(const bool accepted, modes_.advance(s, allowed(s, std::nullopt), token));
  return accepted ? Step::kAccepted : Step::kRejected;
}

// ---- Lifecycle, history, policy, counters ----

Status Matcher::fill(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                     const FillOptions &fo) const {
  const Trie &t = *trie_;
  const size_t words = t.row_words();
  if (bitmask_row_words < words) {
    return error(Code::kBufferTooSmall, "bitmask_row_words is ", bitmask_row_words, ", vocab_size ",
                 t.vocab_size(), " needs ", words);
  }
  if (fo.remaining_tokens) {
    TM_TRY(check_supported(t, TrieFeature::kDecodingModes, "a length budget (remaining_tokens)"));
  }
  count_fill();
  // Two calls rather than one with an optional built here: an optional
  // assembled field by field and then copied whole stalls on store
  // forwarding, measurably (7 ns a fill).
  const uint64_t n_allowed =
      fo.remaining_tokens
          ? write_row(t, allowed(state_, std::max<int64_t>(0, *fo.remaining_tokens)), stop_tokens(),
                      row)
          : write_row(t, allowed(state_, std::nullopt), stop_tokens(), row);
  if (bitmask_row_words > words) {
    std::memset(row + words, 0, (bitmask_row_words - words) * sizeof(uint32_t));
  }
  // Stop tokens are never children, so `n_allowed` counts distinct tokens.
  if (need_apply) *need_apply = n_allowed != static_cast<uint64_t>(t.vocab_size());
  if (phase() == Phase::kFailed) return failed_state_error();
  return Status::Ok();
}

Status Matcher::accept(int32_t token, bool *accepted, std::string *why, bool apply_policy) {
  *accepted = false;
  if (phase() == Phase::kFailed) return failed_state_error();
  const MatcherState before = state_.at;
  if (plain_ && before.phase == Phase::kActive) {
    // The trie's rule's fast path: the state is a node, stepped in place.
    if (!step_active(state_.at, token)) {
      reject(token, accepted, why, apply_policy);
      return Status::Ok();
    }
    history_.push(before);
    ++counters_.accepted_tokens;
    *accepted = true;
    return Status::Ok();
  }
  // Stepped in place: a rejection leaves the state as it was.
  const Result<Step> r = step(state_, token);
  TM_TRY(r.status());
  switch (r.value()) {
    case Step::kRejected:
      if (before.phase == Phase::kTerminated) {
        // After the end a rejection is counted, never a failure.
        if (why) *why = describe_rejection(token);
        if (apply_policy) ++counters_.rejected_tokens;
        break;
      }
      reject(token, accepted, why, apply_policy);
      break;
    case Step::kUnchanged: *accepted = true; break;
    case Step::kAccepted:
      history_.push(before);
      ++counters_.accepted_tokens;
      *accepted = true;
      break;
  }
  return Status::Ok();
}

void Matcher::reject(int32_t token, bool *accepted, std::string *why, bool apply_policy) {
  *accepted = false;
  if (why) *why = describe_rejection(token);
  if (!apply_policy) return;  // a draft miss, not a failure
  ++counters_.rejected_tokens;
  if (opts_.failure_policy == FailurePolicy::kReject) return;
  if (phase() != Phase::kClosed) {
    failed_token_ = token;  // the first rejection is the cause
    ++counters_.fail_closed;
  }
  state_.at.phase =
      opts_.failure_policy == FailurePolicy::kFailClosed ? Phase::kClosed : Phase::kFailed;
}

std::string Matcher::describe_rejection(int32_t token) const {
  const Trie &t = *trie_;
  std::string msg = cat("token ", token, " rejected: ");
  if (token < 0 || token >= t.vocab_size()) {
    msg += cat("out of range [0, vocab_size=", t.vocab_size(), "); ");
  }
  switch (phase()) {
    case Phase::kTerminated:
      msg += "the sequence has terminated; only stop tokens";
      if (opts_.pad_token >= 0) msg += cat(" and pad token ", opts_.pad_token);
      return msg + " are accepted";
    case Phase::kClosed:
      return msg + cat("the matcher is closed after rejecting token ", failed_token_,
                       " (FAIL_CLOSED); only stop tokens are accepted");
    case Phase::kFailed: return msg + "the matcher is in the failed state";
    case Phase::kThinking:
    case Phase::kSeparator:
      return msg + modes_.describe_rejection(state_, allowed(state_, std::nullopt), token);
    case Phase::kActive: break;
  }
  int32_t first[9];
  const size_t n = next_tokens(first, 9);
  msg += cat("not allowed at trie node ", state_.at.node, "; ", n, " allowed");
  if (n > 0) {
    msg += " (";
    for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) msg += cat(i ? ", " : "", first[i]);
    msg += n > 8 ? ", ...)" : ")";
  }
  if (!plain_) msg += modes_.describe_rejection(state_, allowed(state_, std::nullopt), token);
  return msg;
}

Status Matcher::rollback(size_t n_tokens) {
  if (phase() == Phase::kFailed) return failed_state_error();
  if (phase() == Phase::kClosed) {
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
  state_.at = history_.from_top(n_tokens);
  history_.pop(n_tokens);
  counters_.rolled_back_tokens += n_tokens;
  return modes_.sync_used_labels(state_);
}

void Matcher::reset() {
  state_ = modes_.initial();
  history_.clear();
  failed_token_ = -1;
  choose_rules();
  ++counters_.resets;
}

size_t Matcher::rollback_depth() const {
  if (phase() == Phase::kClosed || phase() == Phase::kFailed) return 0;
  const size_t n = history_.size();
  return opts_.max_rollback_tokens == 0 ? n : std::min(n, opts_.max_rollback_tokens);
}

bool Matcher::allowed_lists(std::span<const int32_t> &first,
                            std::span<const int32_t> &second) const {
  if (!plain_ || phase() == Phase::kFailed) return false;
  return rules_.allowed_lists(plain_state(), first, second);
}

size_t Matcher::forced_tokens(int32_t *out, size_t cap) const {
  if (!in_rule_phase(state_)) return 0;
  // A string set's are the tokens of the bytes every continuation shares,
  // in the tokenization that is unambiguous (strings/byte_mask.cc).
  return rules_.forced_tokens(state_.at.node, out, cap, [&] { return forced_chain(out, cap); });
}

size_t Matcher::forced_bytes(uint8_t *out, size_t cap) const {
  if (phase() != Phase::kActive) return 0;
  return rules_.forced_bytes(state_.at.node, out, cap);
}

size_t Matcher::forced_chain(int32_t *out, size_t cap) const {
  ModeState scout = state_;  // a look-ahead copy of the value
  size_t n = 0;
  while (n < kMaxForcedChain) {
    const std::optional<int32_t> token = sole_forced_token(scout);
    if (!token) break;
    if (n < cap) out[n] = *token;
    ++n;
    const Result<Step> r = step(scout, *token);
    if (!r.ok() || r.value() != Step::kAccepted || scout.at.phase == Phase::kTerminated) break;
  }
  return n;
}

size_t Matcher::label_ids(int64_t *out, size_t cap) const {
  const MatcherState &s = state_.at;
  const bool has_node =
      s.phase == Phase::kActive || (s.phase == Phase::kTerminated && s.node != kStateFailed);
  if (!has_node) return 0;
  const LabelIds labels = trie_->labels(s.node);
  std::copy_n(labels.begin(), std::min(cap, labels.size()), out);
  return labels.size();
}

Status Matcher::set_label_filter(const ExclusionSet *shared, std::span<const int64_t> banned,
                                 const std::vector<int64_t> *allowed) {
  if (shared || !banned.empty() || allowed) {
    TM_TRY(check_supported(*trie_, TrieFeature::kDecodingModes, "a label filter"));
  }
  if (state_.at.accepted != 0 || phase() != modes_.initial().at.phase) {
    return error(Code::kInvalidState,
                 "the label filter can only be set before the first accepted token (after "
                 "create or reset); this matcher has accepted ",
                 state_.at.accepted);
  }
  const bool leaves_only = modes() && modes()->leaves_only;
  TM_ASSIGN_OR_RETURN(std::shared_ptr<const LabelFilter> filter,
                      make_label_filter(*trie_, leaves_only, shared, banned, allowed));
  if (filter) {
    const LabelView view(*trie_, node_stats(*trie_, leaves_only), filter.get());
    if (view.info(0).ends == 0) {
      return error(Code::kInvalidArgument,
                   "the label filter leaves no label available: every end is banned",
                   allowed ? " or outside the allowed subset" : "");
    }
  }
  modes_ = modes_.with_filter(std::move(filter));
  choose_rules();
  return Status::Ok();
}

Status Matcher::set_remaining_tokens(int64_t remaining) {
  if (remaining < -1) {
    return error(Code::kInvalidArgument, "remaining_tokens = ", remaining,
                 " (expected -1 = no budget, or >= 0)");
  }
  if (remaining >= 0) {
    TM_TRY(
        check_supported(*trie_, TrieFeature::kDecodingModes, "a length budget (remaining_tokens)"));
  }
  state_.budget_end = remaining < 0 ? -1 : static_cast<int64_t>(state_.at.accepted) + remaining;
  choose_rules();
  return Status::Ok();
}

}  // namespace treemask
