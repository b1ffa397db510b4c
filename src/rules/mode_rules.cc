// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/mode_rules.h"

#include "rules/mode_index.h"

namespace treemask {

namespace {

// The first step of every accept: it counts (the length budget is counted in
// accepts).
void begin_accept(ModeState &s) { ++s.at.accepted; }

UsedLabels &used_for_write(ModeState &s) {
  if (!s.used) {
    s.used = std::make_shared<UsedLabels>();
  } else if (s.used.use_count() > 1) {
    s.used = std::make_shared<UsedLabels>(*s.used);  // shared with a copy: copy on write
  }
  return *s.used;
}

}  // namespace

ModeRules::ModeRules(Ref<const Trie> trie, std::shared_ptr<const ModeConfig> modes,
                     std::shared_ptr<const LabelFilter> filter, bool terminate_without_stop_token)
    : trie_(std::move(trie)),
      modes_(std::move(modes)),
      filter_(std::move(filter)),
      terminate_without_stop_token_(terminate_without_stop_token) {}

ModeState ModeRules::initial() const {
  ModeState s;
  if (modes_ && modes_->think() && modes_->start_in_thinking) s.at.phase = Phase::kThinking;
  s.budget_end = modes_ ? modes_->max_new_tokens : -1;
  return s;
}

const NodeStats *ModeRules::stats_if_needed(bool with_budget) const {
  const bool leaves_only = modes_ && modes_->leaves_only;
  if (!with_budget && !filter_ && !(modes_ && modes_->needs_label_view())) return nullptr;
  return &node_stats(*trie_, leaves_only);
}

AllowedSet ModeRules::label_allowed(const ModeState &s, std::optional<int64_t> remaining) const {
  const uint32_t node = s.at.node;
  const Trie &t = *trie_;
  const Children c = t.children(node);
  AllowedSet out(Allowed{c.tokens, c.count, c.first_child, false});
  const NodeStats *stats = stats_if_needed(remaining.has_value());
  int64_t effective = std::numeric_limits<int64_t>::max();
  uint32_t root_dist = 0;
  std::optional<LabelView> view;
  if (!stats) {
    out.base.stops = t.is_terminal(node);
  } else {
    view = this->view(*stats).with(s.used ? &s.used->delta : nullptr);
    const NodeInfo self = view->info(node);
    out.base.stops = self.dist == 0;
    ChildFilter filter{*view};
    if (remaining) {
      // A budget that can no longer be met (the engine lowered it) still
      // offers the shortest way to an end, never nothing.
      effective = self.dist == kNoDistance ? *remaining : std::max<int64_t>(*remaining, self.dist);
      filter.child_dist_limit = effective - 1;
    }
    // Every child is at most max_depth - 1 tokens from an end.
    const bool budget_binds = remaining && effective < int64_t{t.arrays().max_depth};
    if (budget_binds || view->touches(node)) {
      filter.dead_only = !budget_binds && !view->any_positive_filter();
      out.filter = filter;
    }
    root_dist = view->info(0).dist;
  }
  const ModeConfig *m = modes_.get();
  int n_extra = 0;
  if (m && m->multi_label() && out.base.stops &&
      (m->max_labels == 0 || s.at.labels + 1 < m->max_labels)) {
    // Would another label still be possible (and fit the budget) once this
    // one is used? Ask a scratch layer instead of changing the state.
    Delta scratch;
    block_keys_of(*view, scratch, node, remaining.has_value());
    const NodeInfo after = view->with(&scratch).info(0);
    if (after.ends > 0 &&
        (!remaining || int64_t{after.dist} + int64_t(m->separator.size()) <= effective)) {
      out.extra[n_extra++] = m->separator[0];
      out.separator_first = true;
    }
  }
  if (m && m->think() && m->think_begin >= 0 && !m->start_in_thinking && node == 0 &&
      s.at.accepted == 0 &&
      (!remaining || 1 + int64_t{m->think_end.size()} + root_dist <= *remaining)) {
    out.extra[n_extra++] = m->think_begin;
  }
  return out;
}

bool ModeRules::think_forcing(const ModeState &s, std::optional<int64_t> remaining) const {
  const ModeConfig &m = *modes_;
  if (m.max_thinking_tokens >= 0 && s.at.think_tokens >= uint64_t(m.max_thinking_tokens)) {
    return true;
  }
  // RTP-LLM: a prefix of the end sequence, emitted naturally, forces the rest.
  if (m.think_force_end_after_prefix && s.at.step > 0) return true;
  if (!remaining) return false;
  // One more free token must leave room for the whole end sequence (a
  // partial match may be lost) and the shortest label.
  const NodeStats *stats = stats_if_needed(true);
  const uint32_t label = view(*stats).info(0).dist;
  if (label == kNoDistance) return true;
  return *remaining < 1 + int64_t{m.think_end.size()} + int64_t{label};
}

AllowedSet ModeRules::allowed(const ModeState &s, std::optional<int64_t> remaining) const {
  switch (s.at.phase) {
    case Phase::kThinking:
      if (think_forcing(s, remaining)) {
        return AllowedSet::only(modes_->think_end.sequence()[s.at.step]);
      }
      return AllowedSet::everything_but(modes_->think_begin);
    case Phase::kSeparator: return AllowedSet::only(modes_->separator[s.at.step]);
    default: return label_allowed(s, remaining);
  }
}

Result<bool> ModeRules::advance(ModeState &s, const AllowedSet &a, int32_t token) const {
  const ModeConfig *m = modes_.get();
  switch (s.at.phase) {
    case Phase::kThinking: {
      const auto &end = m->think_end.sequence();
      uint32_t matched;
      if (!a.all_but) {  // the end sequence is forced
        if (token != a.extra[0]) return false;
        matched = s.at.step + 1;
      } else if (is_stop(token)) {
        begin_accept(s);
        s.at.node = kStateFailed;  // ended without reaching a node
        s.at.phase = Phase::kTerminated;
        return true;
      } else if (token < 0 || token >= trie_->vocab_size() || token == m->think_begin) {
        return false;
      } else {
        matched = m->think_end.advance(s.at.step, token);
      }
      begin_accept(s);
      ++s.at.think_tokens;
      s.at.step = matched;
      if (matched == end.size()) {
        s.at.phase = Phase::kActive;
        s.at.node = 0;
        s.at.step = 0;
      }
      TM_TRY(end_if_only_stops(s));
      return true;
    }
    case Phase::kSeparator:
      if (token != a.extra[0]) return false;
      begin_accept(s);
      if (++s.at.step == m->separator.size()) {
        s.at.phase = Phase::kActive;
        s.at.node = 0;
        s.at.step = 0;
      }
      TM_TRY(end_if_only_stops(s));
      return true;
    default: break;
  }
  const Allowed &l = a.base;
  const uint32_t node = s.at.node;
  if (token < 0 || token >= trie_->vocab_size()) return false;
  const int64_t index = find_token(l.children, l.n_children, token);
  if (index >= 0 && a.keeps_child(static_cast<uint32_t>(index))) {
    begin_accept(s);
    s.at.node = l.first_child + static_cast<uint32_t>(index);
    TM_TRY(end_if_only_stops(s));
    return true;
  }
  if (l.stops && is_stop(token)) {
    begin_accept(s);
    TM_TRY(produce_label(s, node));
    s.at.phase = Phase::kTerminated;
    return true;
  }
  if (a.separator_first && token == a.extra[0]) {
    begin_accept(s);
    TM_TRY(produce_label(s, node));
    if (m->separator.size() == 1) {
      s.at.node = 0;
    } else {
      s.at.phase = Phase::kSeparator;
      s.at.step = 1;
    }
    TM_TRY(end_if_only_stops(s));
    return true;
  }
  if (m && m->think() && token == m->think_begin && a.has_extra(token)) {
    begin_accept(s);
    s.at.phase = Phase::kThinking;
    s.at.step = 0;
    s.at.think_tokens = 0;
    return true;
  }
  return false;
}

Status ModeRules::end_if_only_stops(ModeState &s) const {
  if (!terminate_without_stop_token_ || s.at.phase != Phase::kActive) return Status::Ok();
  const AllowedSet a = label_allowed(s, s.remaining());
  if (!a.base.stops || a.extra[0] >= 0) return Status::Ok();  // a separator or think-begin
  bool any_child = a.base.n_children > 0;
  if (a.filter) {
    any_child = false;
    a.filter->for_each_kept(a.base, [&](uint32_t) { return !(any_child = true); });
  }
  if (any_child) return Status::Ok();
  // Only stop tokens could follow: end here, in the same accept.
  TM_TRY(produce_label(s, s.at.node));
  s.at.phase = Phase::kTerminated;
  return Status::Ok();
}

Status ModeRules::produce_label(ModeState &s, uint32_t terminal) const {
  if (!modes_ || !modes_->multi_label()) return Status::Ok();
  const NodeStats &stats = node_stats(*trie_, modes_->leaves_only);
  UsedLabels &used = used_for_write(s);
  block_keys_of(view(stats), used.delta, terminal, true);
  used.produced.push_back(terminal);
  ++s.at.labels;
  return Status::Ok();
}

Status ModeRules::sync_used_labels(ModeState &s) const {
  if (!s.used || s.used->produced.size() == s.at.labels) return Status::Ok();
  const NodeStats &stats = node_stats(*trie_, modes_->leaves_only);
  UsedLabels &used = used_for_write(s);
  while (used.produced.size() > s.at.labels) {
    unblock_keys_of(view(stats), used.delta, used.produced.back());
    used.produced.pop_back();
  }
  if (used.produced.empty()) s.used.reset();
  return Status::Ok();
}

size_t ModeRules::produced_labels(const ModeState &s, int64_t *out, size_t cap) const {
  size_t n = 0;
  auto emit = [&](int64_t key) {
    if (n < cap) out[n] = key;
    ++n;
  };
  if (modes_ && modes_->multi_label()) {
    if (s.used) {
      for (uint32_t terminal : s.used->produced) for_each_key(*trie_, terminal, emit);
    }
  } else if (s.at.phase == Phase::kTerminated && s.at.node != kStateFailed) {
    for_each_key(*trie_, s.at.node, emit);
  }
  return n;
}

std::string ModeRules::describe_rejection(const ModeState &s, const AllowedSet &a,
                                          int32_t token) const {
  const ModeConfig *m = modes_.get();
  switch (s.at.phase) {
    case Phase::kThinking:
      if (!a.all_but) {
        return cat("thinking must end now (", s.at.think_tokens,
                   " thinking tokens accepted); only think_end_tokens[", s.at.step,
                   "] = ", a.extra[0], " is allowed");
      }
      if (token == m->think_begin)
        return cat("think_begin_token ", token, " is not allowed while thinking");
      return "only stop tokens and tokens inside the vocabulary are allowed while thinking";
    case Phase::kSeparator:
      return cat("inside the label separator only label_separator[", s.at.step, "] = ", a.extra[0],
                 " is allowed");
    default: break;
  }
  if (find_token(a.base.children, a.base.n_children, token) >= 0) {
    return "; it is a child whose every label is used or excluded, or that cannot end within "
           "the length budget";
  }
  if (m && m->multi_label() && token == m->separator[0] && a.base.stops) {
    return "; the separator is not allowed here (max_labels reached, no label left, or the "
           "length budget is too small for another label)";
  }
  return "";
}

}  // namespace treemask
