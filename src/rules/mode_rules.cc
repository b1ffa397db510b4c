// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/mode_rules.h"

#include <cstring>

#include "core/bits.h"
#include "rules/mode_index.h"

namespace treemask {

namespace {

void set_only(uint32_t *row, size_t words, int32_t token) {
  std::memset(row, 0, words * sizeof(uint32_t));
  set_bit(row, token);
}

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

std::vector<uint32_t> LabelStep::dead_children() const {
  std::vector<uint32_t> dead;
  view->for_each_dead_child(children, [&](uint32_t k) { dead.push_back(k); });
  std::sort(dead.begin(), dead.end());
  dead.erase(std::unique(dead.begin(), dead.end()), dead.end());
  return dead;
}

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

LabelStep ModeRules::label_step(const ModeState &s, std::optional<int64_t> remaining) const {
  LabelStep out;
  const uint32_t node = s.at.node;
  out.node = node;
  const Trie &t = *trie_;
  out.children = t.children(node);
  const NodeStats *stats = stats_if_needed(remaining.has_value());
  int64_t effective = std::numeric_limits<int64_t>::max();
  uint32_t root_dist = 0;
  if (!stats) {
    out.stop = t.is_terminal(node);
  } else {
    out.view = view(*stats).with(s.used ? &s.used->delta : nullptr);
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
      (m->max_labels == 0 || s.at.labels + 1 < m->max_labels)) {
    // Would another label still be possible (and fit the budget) once this
    // one is used? Ask a scratch layer instead of changing the state.
    Delta scratch;
    block_keys_of(*out.view, scratch, node, remaining.has_value());
    const NodeInfo after = out.view->with(&scratch).info(0);
    out.separator = after.ends > 0 &&
                    (!remaining || int64_t{after.dist} + int64_t(m->separator.size()) <= effective);
  }
  if (m && m->think() && m->think_begin >= 0 && !m->start_in_thinking && node == 0 &&
      s.at.accepted == 0) {
    out.think_begin = !remaining || 1 + int64_t{m->think_end.size()} + root_dist <= *remaining;
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

ModeAllowed ModeRules::allowed(const ModeState &s, std::optional<int64_t> remaining) const {
  ModeAllowed a;
  switch (s.at.phase) {
    case Phase::kThinking:
      if (think_forcing(s, remaining)) {
        a.kind = ModeAllowed::Kind::kOnly;
        a.token = modes_->think_end.sequence()[s.at.step];
      } else {
        a.kind = ModeAllowed::Kind::kAllBut;
        a.token = modes_->think_begin;
      }
      return a;
    case Phase::kSeparator:
      a.kind = ModeAllowed::Kind::kOnly;
      a.token = modes_->separator[s.at.step];
      return a;
    default: return ModeAllowed{ModeAllowed::Kind::kLabel, -1, label_step(s, remaining)};
  }
}

Result<bool> ModeRules::advance(ModeState &s, const ModeAllowed &a, int32_t token) const {
  const ModeConfig *m = modes_.get();
  switch (s.at.phase) {
    case Phase::kThinking: {
      const auto &end = m->think_end.sequence();
      uint32_t matched;
      if (a.kind == ModeAllowed::Kind::kOnly) {
        if (token != a.token) return false;
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
      if (token != a.token) return false;
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
  const LabelStep &l = a.label;
  const uint32_t node = s.at.node;
  if (token < 0 || token >= trie_->vocab_size()) return false;
  const int64_t index = Trie::find_child(l.children, token);
  if (index >= 0 && l.child_allowed(static_cast<uint32_t>(index))) {
    begin_accept(s);
    s.at.node = l.children.first_child + static_cast<uint32_t>(index);
    TM_TRY(end_if_only_stops(s));
    return true;
  }
  if (l.stop && is_stop(token)) {
    begin_accept(s);
    TM_TRY(produce_label(s, node));
    s.at.phase = Phase::kTerminated;
    return true;
  }
  if (l.separator && token == m->separator[0]) {
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
  if (l.think_begin && token == m->think_begin) {
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
  const LabelStep l = label_step(s, s.remaining());
  if (!l.stop || l.separator || l.think_begin) return Status::Ok();
  bool any_child = false;
  l.for_each_allowed_child([&](uint32_t) { return !(any_child = true); });
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

uint64_t ModeRules::write_row(const ModeAllowed &a, uint32_t *row) const {
  const Trie &t = *trie_;
  const size_t words = t.row_words();
  switch (a.kind) {
    case ModeAllowed::Kind::kOnly: set_only(row, words, a.token); return 1;
    case ModeAllowed::Kind::kAllBut: {
      std::memset(row, 0xFF, words * sizeof(uint32_t));
      if (t.vocab_size() % 32) row[words - 1] &= (uint32_t{1} << (t.vocab_size() % 32)) - 1;
      if (a.token < 0) return static_cast<uint64_t>(t.vocab_size());
      row[a.token >> 5] &= ~(uint32_t{1} << (a.token & 31));
      return static_cast<uint64_t>(t.vocab_size()) - 1;
    }
    case ModeAllowed::Kind::kLabel: break;
  }
  const LabelStep &l = a.label;
  uint64_t allowed = 0;
  if (l.all_children || l.dead_children_only) {
    // The (possibly cached) dense row, then clear the few dead children.
    t.write_children_row(l.node, row);
    allowed = l.children.count;
    if (l.dead_children_only) {
      l.view->for_each_dead_child(l.children, [&](uint32_t k) {
        const int32_t token = l.children.tokens[k];
        if (!test_bit(row, token)) return;  // listed twice
        row[token >> 5] &= ~(uint32_t{1} << (token & 31));
        --allowed;
      });
    }
  } else {
    std::memset(row, 0, words * sizeof(uint32_t));
    l.for_each_allowed_child([&](uint32_t i) {
      set_bit(row, l.children.tokens[i]);
      ++allowed;
      return true;
    });
  }
  if (l.stop) {
    for (int32_t stop : stops()) set_bit(row, stop);
    allowed += stops().size();
  }
  for (int32_t extra :
       {l.separator ? modes_->separator[0] : -1, l.think_begin ? modes_->think_begin : -1}) {
    if (extra < 0) continue;
    set_bit(row, extra);
    ++allowed;
  }
  return allowed;
}

size_t ModeRules::list(const ModeAllowed &a, int32_t *out, size_t cap) const {
  size_t n = 0;
  auto emit = [&](int32_t token) {
    if (n < cap) out[n] = token;
    ++n;
  };
  switch (a.kind) {
    case ModeAllowed::Kind::kOnly: emit(a.token); return n;
    case ModeAllowed::Kind::kAllBut: {
      const int32_t vocab = trie_->vocab_size();
      for (int32_t token = 0; token < vocab && n < cap; ++token) {
        if (token != a.token) emit(token);
      }
      return static_cast<size_t>(vocab) - (a.token >= 0 ? 1 : 0);
    }
    case ModeAllowed::Kind::kLabel: break;
  }
  const LabelStep &l = a.label;
  // Stops, the separator and the think-begin token are never children here
  // (checked when the matcher was created), so a merge gives distinct tokens.
  std::vector<int32_t> extra;
  if (l.stop) extra.assign(stops().begin(), stops().end());
  if (l.separator) extra.push_back(modes_->separator[0]);
  if (l.think_begin) extra.push_back(modes_->think_begin);
  std::sort(extra.begin(), extra.end());
  size_t j = 0;
  auto emit_child = [&](uint32_t i) {
    const int32_t child = l.children.tokens[i];
    while (j < extra.size() && extra[j] < child) emit(extra[j++]);
    emit(child);
    return true;
  };
  if (l.dead_children_only) {
    // Skip the dead children instead of checking every child.
    const std::vector<uint32_t> dead = l.dead_children();
    size_t next_dead = 0;
    for (uint32_t i = 0; i < l.children.count; ++i) {
      if (next_dead < dead.size() && dead[next_dead] == i) {
        ++next_dead;
        continue;
      }
      emit_child(i);
    }
  } else {
    l.for_each_allowed_child(emit_child);
  }
  while (j < extra.size()) emit(extra[j++]);
  return n;
}

std::optional<int32_t> ModeRules::sole_token(const ModeAllowed &a) const {
  switch (a.kind) {
    case ModeAllowed::Kind::kOnly: return a.token;
    case ModeAllowed::Kind::kAllBut: return std::nullopt;
    case ModeAllowed::Kind::kLabel: break;
  }
  const LabelStep &l = a.label;
  int options = 0;
  int32_t token = -1;
  if (l.separator) ++options, token = modes_->separator[0];
  if (l.think_begin) ++options, token = modes_->think_begin;
  l.for_each_allowed_child([&](uint32_t i) {
    ++options;
    token = l.children.tokens[i];
    return options <= 1;
  });
  if (options != 1) return std::nullopt;
  if (!l.stop || l.separator) return token;
  return std::nullopt;
}

std::string ModeRules::describe_rejection(const ModeState &s, const ModeAllowed &a,
                                          int32_t token) const {
  const ModeConfig *m = modes_.get();
  switch (s.at.phase) {
    case Phase::kThinking:
      if (a.kind == ModeAllowed::Kind::kOnly) {
        return cat("thinking must end now (", s.at.think_tokens,
                   " thinking tokens accepted); only think_end_tokens[", s.at.step, "] = ", a.token,
                   " is allowed");
      }
      if (token == m->think_begin)
        return cat("think_begin_token ", token, " is not allowed while thinking");
      return "only stop tokens and tokens inside the vocabulary are allowed while thinking";
    case Phase::kSeparator:
      return cat("inside the label separator only label_separator[", s.at.step, "] = ", a.token,
                 " is allowed");
    default: break;
  }
  const int64_t index = Trie::find_child(a.label.children, token);
  if (index >= 0) {
    return "; it is a child whose every label is used or excluded, or that cannot end within "
           "the length budget";
  }
  if (m && m->multi_label() && token == m->separator[0] && a.label.stop) {
    return "; the separator is not allowed here (max_labels reached, no label left, or the "
           "length budget is too small for another label)";
  }
  return "";
}

}  // namespace treemask
