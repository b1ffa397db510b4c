// The matcher's mode paths: what fill, accept, next_tokens and forced_tokens
// do when a decoding mode (modes.h), a label filter or a length budget is in
// effect. Every query derives the allowed set from one place per phase
// (label_step, think_forcing), so fill, next_tokens, accept and the forced
// chain always agree.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstring>
#include <limits>

#include "matcher/matcher.h"
#include "rules/mode_index.h"

namespace treemask {

namespace {

// A chain longer than this is a bug (chains consume labels or depth);
// forced_tokens stops rather than loop.
constexpr size_t kMaxForcedChain = size_t{1} << 26;

void set_only(uint32_t *row, size_t words, int32_t token) {
  std::memset(row, 0, words * sizeof(uint32_t));
  set_bit(row, token);
}

}  // namespace

MatcherState Matcher::initial_state() const {
  MatcherState s;
  if (modes_ && modes_->think() && modes_->start_in_thinking) s.phase = Phase::kThinking;
  return s;
}

void Matcher::update_plain() {
  mode_steps_ = (modes_ && modes_->changes_steps()) || filter_ || budget_end_ >= 0;
}

std::optional<int64_t> Matcher::budget(const FillOptions &fo) const {
  if (fo.remaining_tokens) return std::max<int64_t>(0, *fo.remaining_tokens);
  if (budget_end_ < 0) return std::nullopt;
  return budget_end_ - static_cast<int64_t>(state_.accepted);
}

int64_t Matcher::remaining_tokens() const {
  if (budget_end_ < 0) return -1;
  return std::max<int64_t>(0, budget_end_ - static_cast<int64_t>(state_.accepted));
}

const NodeStats *Matcher::stats_if_needed(bool with_budget) const {
  const bool leaves_only = modes_ && modes_->leaves_only;
  if (!with_budget && !filter_ && !(modes_ && modes_->needs_label_view())) return nullptr;
  return &node_stats(*trie_, leaves_only);
}

LabelView Matcher::filter_view(const NodeStats &stats) const {
  return LabelView(*trie_, stats, filter_.get());
}

Matcher::LabelStep Matcher::label_step(std::optional<int64_t> remaining) const {
  LabelStep out;
  const uint32_t node = state_.node;
  const Trie &t = *trie_;
  out.children = t.children(node);
  const NodeStats *stats = stats_if_needed(remaining.has_value());
  int64_t effective = std::numeric_limits<int64_t>::max();
  uint32_t root_dist = 0;
  if (!stats) {
    out.stop = t.is_terminal(node);
  } else {
    out.view = filter_view(*stats).with(used_ ? &used_->delta : nullptr);
    const NodeInfo self = out.view->info(node);
    out.stop = self.dist == 0;
    if (remaining) {
      // A budget that can no longer be met (the engine lowered it) still
      // offers the shortest way to an end, never nothing.
      effective = self.dist == kNoDistance ? *remaining : std::max<int64_t>(*remaining, self.dist);
      out.child_dist_limit = effective - 1;
    }
    // Every child is at most max_depth - 1 tokens from an end.
    const bool budget_binds = remaining && effective < int64_t{t.arrays().max_depth};
    out.all_children = !budget_binds && !out.view->touches(node);
    out.dead_children_only = !out.all_children && !budget_binds && !out.view->any_positive_filter();
    root_dist = out.view->info(0).dist;
  }
  const ModeConfig *m = modes_.get();
  if (m && m->multi_label() && out.stop &&
      (m->max_labels == 0 || state_.labels + 1 < m->max_labels)) {
    // Would another label still be possible (and fit the budget) once this
    // one is used? Ask a scratch layer instead of changing the matcher.
    Delta scratch;
    block_keys_of(*out.view, scratch, node, remaining.has_value());
    const NodeInfo after = out.view->with(&scratch).info(0);
    out.separator = after.ends > 0 &&
                    (!remaining || int64_t{after.dist} + int64_t(m->separator.size()) <= effective);
  }
  if (m && m->think() && m->think_begin >= 0 && !m->start_in_thinking && node == 0 &&
      state_.accepted == 0) {
    out.think_begin = !remaining || 1 + int64_t{m->think_end.size()} + root_dist <= *remaining;
  }
  return out;
}

bool Matcher::think_forcing(std::optional<int64_t> remaining) const {
  const ModeConfig &m = *modes_;
  if (m.max_thinking_tokens >= 0 && state_.think_tokens >= uint64_t(m.max_thinking_tokens)) {
    return true;
  }
  // RTP-LLM: a prefix of the end sequence, emitted naturally, forces the rest.
  if (m.think_force_end_after_prefix && state_.step > 0) return true;
  if (!remaining) return false;
  // One more free token must leave room for the whole end sequence (a
  // partial match may be lost) and the shortest label.
  const NodeStats *stats = stats_if_needed(true);
  const uint32_t label = filter_view(*stats).info(0).dist;
  if (label == kNoDistance) return true;
  return *remaining < 1 + int64_t{m.think_end.size()} + int64_t{label};
}

Status Matcher::fill_modes(uint32_t *row, size_t bitmask_row_words, bool *need_apply,
                           const FillOptions &fo) const {
  const Trie &t = *trie_;
  const size_t words = t.row_words();
  const auto remaining = budget(fo);
  uint64_t allowed = 0;
  switch (state_.phase) {
    case Phase::kThinking:
      if (think_forcing(remaining)) {
        set_only(row, words, modes_->think_end.sequence()[state_.step]);
        allowed = 1;
        break;
      }
      std::memset(row, 0xFF, words * sizeof(uint32_t));
      if (t.vocab_size() % 32) row[words - 1] &= (uint32_t{1} << (t.vocab_size() % 32)) - 1;
      allowed = static_cast<uint64_t>(t.vocab_size());
      if (modes_->think_begin >= 0) {
        row[modes_->think_begin >> 5] &= ~(uint32_t{1} << (modes_->think_begin & 31));
        --allowed;
      }
      break;
    case Phase::kSeparator:
      set_only(row, words, modes_->separator[state_.step]);
      allowed = 1;
      break;
    case Phase::kActive: {
      const LabelStep s = label_step(remaining);
      if (s.all_children || s.dead_children_only) {
        // The (possibly cached) dense row, then clear the few dead children.
        t.write_children_row(state_.node, row);
        allowed = s.children.count;
        if (s.dead_children_only) {
          s.view->for_each_dead_child(s.children, [&](uint32_t k) {
            const int32_t token = s.children.tokens[k];
            if (!test_bit(row, token)) return;  // defensive: never listed twice today
            row[token >> 5] &= ~(uint32_t{1} << (token & 31));
            --allowed;
          });
        }
      } else {
        std::memset(row, 0, words * sizeof(uint32_t));
        s.for_each_allowed_child([&](uint32_t i) {
          set_bit(row, s.children.tokens[i]);
          ++allowed;
          return true;
        });
      }
      if (s.stop) {
        for (int32_t stop : stop_tokens()) set_bit(row, stop);
        allowed += stop_tokens().size();
      }
      for (int32_t extra :
           {s.separator ? modes_->separator[0] : -1, s.think_begin ? modes_->think_begin : -1}) {
        if (extra < 0) continue;
        set_bit(row, extra);
        ++allowed;
      }
      break;
    }
    default:  // closed, terminated, failed: the stop tokens
      std::memset(row, 0, words * sizeof(uint32_t));
      for (int32_t stop : stop_tokens()) set_bit(row, stop);
      allowed = stop_tokens().size();
  }
  finish_fill(row, bitmask_row_words, need_apply, allowed);
  if (state_.phase == Phase::kFailed) return failed_state_error();
  return Status::Ok();
}

Status Matcher::accept_modes(int32_t token, bool *accepted, std::string *why, bool apply_policy) {
  *accepted = false;
  const ModeConfig *m = modes_.get();
  switch (state_.phase) {
    case Phase::kThinking: {
      const auto &end = m->think_end.sequence();
      uint32_t matched;
      if (think_forcing(budget({}))) {
        if (token != end[state_.step]) break;
        matched = state_.step + 1;
      } else if (is_stop_token(token)) {
        push_state();
        state_.node = kStateFailed;  // ended without reaching a node
        state_.phase = Phase::kTerminated;
        *accepted = true;
        return Status::Ok();
      } else if (token < 0 || token >= trie_->vocab_size() || token == m->think_begin) {
        break;
      } else {
        matched = m->think_end.advance(state_.step, token);
      }
      push_state();
      ++state_.think_tokens;
      state_.step = matched;
      if (matched == end.size()) {
        state_.phase = Phase::kActive;
        state_.node = 0;
        state_.step = 0;
      }
      *accepted = true;
      return after_accept();
    }
    case Phase::kSeparator:
      if (token != m->separator[state_.step]) break;
      push_state();
      if (++state_.step == m->separator.size()) {
        state_.phase = Phase::kActive;
        state_.node = 0;
        state_.step = 0;
      }
      *accepted = true;
      return after_accept();
    case Phase::kActive: return accept_in_label_phase(token, accepted, why, apply_policy);
    default: break;
  }
  reject(token, accepted, why, apply_policy);
  return Status::Ok();
}

Status Matcher::accept_in_label_phase(int32_t token, bool *accepted, std::string *why,
                                      bool apply_policy) {
  const LabelStep s = label_step(budget({}));
  const uint32_t node = state_.node;
  if (token >= 0 && token < trie_->vocab_size()) {
    const int64_t index = Trie::find_child(s.children, token);
    if (index >= 0 && s.child_allowed(static_cast<uint32_t>(index))) {
      push_state();
      state_.node = s.children.first_child + static_cast<uint32_t>(index);
      *accepted = true;
      return after_accept();
    }
    if (s.stop && is_stop_token(token)) {
      push_state();
      TM_TRY(produce_label(node));
      state_.phase = Phase::kTerminated;
      *accepted = true;
      return Status::Ok();
    }
    if (s.separator && token == modes_->separator[0]) {
      push_state();
      TM_TRY(produce_label(node));
      if (modes_->separator.size() == 1) {
        state_.node = 0;
      } else {
        state_.phase = Phase::kSeparator;
        state_.step = 1;
      }
      *accepted = true;
      return after_accept();
    }
    if (s.think_begin && token == modes_->think_begin) {
      push_state();
      state_.phase = Phase::kThinking;
      state_.step = 0;
      state_.think_tokens = 0;
      *accepted = true;
      return Status::Ok();
    }
  }
  reject(token, accepted, why, apply_policy);
  return Status::Ok();
}

Status Matcher::after_accept() {
  if (!opts_.terminate_without_stop_token || state_.phase != Phase::kActive) return Status::Ok();
  const LabelStep s = label_step(budget({}));
  if (!s.stop || s.separator || s.think_begin) return Status::Ok();
  bool any_child = false;
  s.for_each_allowed_child([&](uint32_t) { return !(any_child = true); });
  if (any_child) return Status::Ok();
  // Only stop tokens could follow: end here, in the same accept.
  TM_TRY(produce_label(state_.node));
  state_.phase = Phase::kTerminated;
  return Status::Ok();
}

Matcher::UsedLabels &Matcher::used_for_write() {
  if (!used_) {
    used_ = std::make_shared<UsedLabels>();
  } else if (used_.use_count() > 1) {
    used_ = std::make_shared<UsedLabels>(*used_);  // shared with a clone: copy on write
  }
  return *used_;
}

Status Matcher::produce_label(uint32_t terminal) {
  if (!modes_ || !modes_->multi_label()) return Status::Ok();
  const NodeStats &stats = node_stats(*trie_, modes_->leaves_only);
  UsedLabels &used = used_for_write();
  block_keys_of(filter_view(stats), used.delta, terminal, true);
  used.produced.push_back(terminal);
  ++state_.labels;
  return Status::Ok();
}

Status Matcher::sync_used_labels() {
  if (!used_ || used_->produced.size() == state_.labels) return Status::Ok();
  const NodeStats &stats = node_stats(*trie_, modes_->leaves_only);
  UsedLabels &used = used_for_write();
  while (used.produced.size() > state_.labels) {
    unblock_keys_of(filter_view(stats), used.delta, used.produced.back());
    used.produced.pop_back();
  }
  if (used.produced.empty()) used_.reset();
  return Status::Ok();
}

size_t Matcher::next_tokens_modes(int32_t *out, size_t cap) const {
  const int32_t vocab = trie_->vocab_size();
  size_t n = 0;
  auto emit = [&](int32_t token) {
    if (n < cap) out[n] = token;
    ++n;
  };
  const auto remaining = budget({});
  switch (state_.phase) {
    case Phase::kFailed: return 0;
    case Phase::kThinking: {
      if (think_forcing(remaining)) {
        emit(modes_->think_end.sequence()[state_.step]);
        return n;
      }
      const int32_t begin = modes_->think_begin;
      const size_t total = static_cast<size_t>(vocab) - (begin >= 0 ? 1 : 0);
      for (int32_t token = 0; token < vocab && n < cap; ++token) {
        if (token != begin) emit(token);
      }
      return total;
    }
    case Phase::kSeparator: emit(modes_->separator[state_.step]); return n;
    case Phase::kActive: break;
    default:
      for (int32_t stop : stop_tokens()) emit(stop);
      return n;
  }
  const LabelStep s = label_step(remaining);
  // Stops, the separator and the think-begin token are never children here
  // (checked when the matcher was created), so a merge gives distinct tokens.
  std::vector<int32_t> extra;
  if (s.stop) extra.assign(stop_tokens().begin(), stop_tokens().end());
  if (s.separator) extra.push_back(modes_->separator[0]);
  if (s.think_begin) extra.push_back(modes_->think_begin);
  std::sort(extra.begin(), extra.end());
  size_t j = 0;
  auto emit_child = [&](uint32_t i) {
    const int32_t child = s.children.tokens[i];
    while (j < extra.size() && extra[j] < child) emit(extra[j++]);
    emit(child);
    return true;
  };
  if (s.dead_children_only) {
    // Skip the dead children instead of checking every child.
    const std::vector<uint32_t> dead = s.dead_children();
    size_t next_dead = 0;
    for (uint32_t i = 0; i < s.children.count; ++i) {
      if (next_dead < dead.size() && dead[next_dead] == i) {
        ++next_dead;
        continue;
      }
      emit_child(i);
    }
  } else {
    s.for_each_allowed_child(emit_child);
  }
  while (j < extra.size()) emit(extra[j++]);
  return n;
}

std::optional<int32_t> Matcher::sole_forced_token() const {
  const auto remaining = budget({});
  switch (state_.phase) {
    case Phase::kThinking:
      if (!think_forcing(remaining)) return std::nullopt;
      return modes_->think_end.sequence()[state_.step];
    case Phase::kSeparator: return modes_->separator[state_.step];
    case Phase::kActive: break;
    default: return std::nullopt;
  }
  const LabelStep s = label_step(remaining);
  int options = 0;
  int32_t token = -1;
  if (s.separator) ++options, token = modes_->separator[0];
  if (s.think_begin) ++options, token = modes_->think_begin;
  s.for_each_allowed_child([&](uint32_t i) {
    ++options;
    token = s.children.tokens[i];
    return options <= 1;
  });
  if (options != 1) return std::nullopt;
  if (!s.stop) return token;
  // At a leaf of a multi-label matcher the separator is forced although a
  // stop token could end the sequence (see treemask_matcher_forced_tokens).
  if (s.separator) return token;
  return std::nullopt;
}

size_t Matcher::forced_tokens_modes(int32_t *out, size_t cap) const {
  if (state_.phase == Phase::kFailed || state_.phase == Phase::kClosed ||
      state_.phase == Phase::kTerminated) {
    return 0;
  }
  Matcher scout = fork();
  size_t n = 0;
  while (n < kMaxForcedChain) {
    const std::optional<int32_t> token = scout.sole_forced_token();
    if (!token) break;
    if (n < cap) out[n] = *token;
    ++n;
    bool accepted = false;
    if (!scout.accept(*token, &accepted, nullptr, false).ok() || !accepted ||
        scout.is_terminated()) {
      break;
    }
  }
  return n;
}

bool Matcher::can_terminate_modes() const {
  switch (state_.phase) {
    case Phase::kThinking: return !think_forcing(budget({}));
    case Phase::kActive: {
      return label_step(budget({})).stop;
    }
    default: return false;
  }
}

Matcher Matcher::fork() const {
  // A copy of the whole value (every member, the mode state included), then
  // without history: nothing is copied field by field, so a new member
  // cannot be lost in a look-ahead.
  Matcher m(*this);
  m.history_.clear();
  return m;
}

size_t Matcher::produced_labels(int64_t *out, size_t cap) const {
  size_t n = 0;
  auto emit = [&](int64_t key) {
    if (n < cap) out[n] = key;
    ++n;
  };
  if (modes_ && modes_->multi_label()) {
    if (used_) {
      for (uint32_t terminal : used_->produced) for_each_key(*trie_, terminal, emit);
    }
  } else if (state_.phase == Phase::kTerminated && state_.node != kStateFailed) {
    for_each_key(*trie_, state_.node, emit);
  }
  return n;
}

Status Matcher::set_label_filter(const ExclusionSet *shared, std::span<const int64_t> banned,
                                 const std::vector<int64_t> *allowed) {
  if (state_.accepted != 0 || state_.phase != initial_state().phase) {
    return error(Code::kInvalidState,
                 "the label filter can only be set before the first accepted token (after "
                 "create or reset); this matcher has accepted ",
                 state_.accepted);
  }
  const bool leaves_only = modes_ && modes_->leaves_only;
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
  filter_ = std::move(filter);
  update_plain();
  return Status::Ok();
}

Status Matcher::set_remaining_tokens(int64_t remaining) {
  if (remaining < -1) {
    return error(Code::kInvalidArgument, "remaining_tokens = ", remaining,
                 " (expected -1 = no budget, or >= 0)");
  }
  budget_end_ = remaining < 0 ? -1 : static_cast<int64_t>(state_.accepted) + remaining;
  update_plain();
  return Status::Ok();
}

std::string Matcher::describe_mode_rejection(int32_t token) const {
  const ModeConfig *m = modes_.get();
  switch (state_.phase) {
    case Phase::kThinking:
      if (think_forcing(budget({}))) {
        return cat("thinking must end now (", state_.think_tokens,
                   " thinking tokens accepted); only think_end_tokens[", state_.step,
                   "] = ", m->think_end.sequence()[state_.step], " is allowed");
      }
      if (token == m->think_begin)
        return cat("think_begin_token ", token, " is not allowed while thinking");
      return "only stop tokens and tokens inside the vocabulary are allowed while thinking";
    case Phase::kSeparator:
      return cat("inside the label separator only label_separator[", state_.step,
                 "] = ", m->separator[state_.step], " is allowed");
    default: break;
  }
  const LabelStep s = label_step(budget({}));
  const int64_t index = Trie::find_child(s.children, token);
  if (index >= 0) {
    return "; it is a child whose every label is used or excluded, or that cannot end within "
           "the length budget";
  }
  if (m && m->multi_label() && token == m->separator[0] && s.stop) {
    return "; the separator is not allowed here (max_labels reached, no label left, or the "
           "length budget is too small for another label)";
  }
  return "";
}

}  // namespace treemask
