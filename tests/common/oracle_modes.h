// A brute-force model of the decoding modes (treemask.h, section 5,
// "Decoding modes"), written from the header's rules alone: every question
// ("is this path still available?", "how far is the nearest end?") is
// answered by scanning the whole set of sequences of oracle::Trie. Slow and
// obvious on purpose; tests compare the library with it step by step.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "common/oracle.h"
#include "treemask/treemask.h"

namespace oracle_modes {

using oracle::Seq;

constexpr int64_t kFar = std::numeric_limits<int64_t>::max() / 4;

struct Options {
  int32_t failure_policy = TREEMASK_FAILURE_REJECT;
  bool terminate_without_stop_token = false;
  size_t max_rollback_tokens = 0;
  int32_t pad_token = -1;
  Seq separator;
  size_t max_labels = 0;
  bool leaves_only = false;
  Seq think_end;
  int32_t think_begin = -1;
  bool start_in_thinking = false;
  int64_t max_thinking = -1;
  int64_t max_new_tokens = -1;
  std::vector<int32_t> override_stops;  // empty: the trie's
  // The label filter: an exclusion set, the matcher's own bans, a subset.
  std::set<int64_t> shared_banned, banned;
  std::optional<std::set<int64_t>> allowed;
};

enum class Phase { kLabel, kThinking, kSeparator, kClosed, kTerminated, kFailed };

class Matcher {
 public:
  Matcher(const oracle::Trie &t, Options o) : trie_(&t), o_(std::move(o)) {
    stops_ = o_.override_stops.empty() ? trie_->stops : o_.override_stops;
    std::sort(stops_.begin(), stops_.end());
    stops_.erase(std::unique(stops_.begin(), stops_.end()), stops_.end());
    reset();
  }

  const Options &options() const { return o_; }
  Options &filter_options() { return o_; }
  const std::vector<int32_t> &stops() const { return stops_; }
  Phase phase() const { return s_.phase; }
  const Seq &prefix() const { return s_.prefix; }
  uint64_t accepted() const { return s_.accepted; }

  void reset() {
    s_ = State{};
    if (think() && o_.start_in_thinking) s_.phase = Phase::kThinking;
    history_.clear();
    budget_end_ = o_.max_new_tokens;
  }

  // ---- Questions about the trie under the current filter and used labels.

  std::set<int64_t> keys(const Seq &s) const {
    auto it = trie_->labels.find(s);
    return it == trie_->labels.end() ? std::set<int64_t>{} : it->second;
  }

  bool is_end(const Seq &s) const {
    if (!trie_->terminal(s)) return false;
    return !o_.leaves_only || trie_->children(s).empty();
  }

  std::set<int64_t> used_keys() const {
    std::set<int64_t> out;
    for (const Seq &p : s_.produced) {
      const auto k = keys(p);
      out.insert(k.begin(), k.end());
    }
    return out;
  }

  bool available(const Seq &s, const std::set<int64_t> &used) const {
    if (!is_end(s)) return false;
    for (int64_t k : keys(s)) {
      if (o_.shared_banned.count(k) || o_.banned.count(k) || used.count(k)) return false;
      if (o_.allowed && !o_.allowed->count(k)) return false;
    }
    return true;
  }

  // Fewest tokens from prefix p to an available end (kFar: none).
  int64_t dist(const Seq &p, const std::set<int64_t> &used) const {
    int64_t best = kFar;
    for (const Seq &s : trie_->seqs) {
      if (s.size() < p.size() || !std::equal(p.begin(), p.end(), s.begin())) continue;
      if (available(s, used)) best = std::min<int64_t>(best, int64_t(s.size() - p.size()));
    }
    return best;
  }

  bool think() const { return !o_.think_end.empty(); }
  bool multi() const { return !o_.separator.empty(); }
  bool is_stop(int32_t t) const { return std::binary_search(stops_.begin(), stops_.end(), t); }

  std::optional<int64_t> remaining(std::optional<int64_t> per_fill = std::nullopt) const {
    if (per_fill) return per_fill;
    if (budget_end_ < 0) return std::nullopt;
    return budget_end_ - int64_t(s_.accepted);
  }

  int64_t remaining_tokens() const {
    return budget_end_ < 0 ? -1 : std::max<int64_t>(0, budget_end_ - int64_t(s_.accepted));
  }

  void set_remaining(int64_t r) { budget_end_ = r < 0 ? -1 : int64_t(s_.accepted) + r; }

  // Matched length of the end sequence at the end of the thinking text.
  size_t end_matched() const {
    const Seq &text = s_.think_text;
    for (size_t k = std::min(o_.think_end.size() - 1, text.size()); k > 0; --k) {
      if (std::equal(o_.think_end.begin(), o_.think_end.begin() + long(k), text.end() - long(k))) {
        return k;
      }
    }
    return 0;
  }

  bool forcing(std::optional<int64_t> r) const {
    if (o_.max_thinking >= 0 && int64_t(s_.think_tokens) >= o_.max_thinking) return true;
    if (!r) return false;
    const int64_t label = dist({}, used_keys());
    return label >= kFar || *r < 1 + int64_t(o_.think_end.size()) + label;
  }

  struct LabelChoices {
    std::vector<int32_t> children;
    bool stop = false, separator = false, begin = false;
  };

  LabelChoices label_choices(std::optional<int64_t> r) const {
    LabelChoices c;
    const auto used = used_keys();
    const Seq &p = s_.prefix;
    const int64_t self = dist(p, used);
    c.stop = self == 0;
    const int64_t effective = r ? std::max(*r, self >= kFar ? *r : self) : kFar;
    for (int32_t t : trie_->children(p)) {
      Seq q = p;
      q.push_back(t);
      const int64_t d = dist(q, used);
      if (d < kFar && 1 + d <= effective) c.children.push_back(t);
    }
    if (multi() && c.stop && (o_.max_labels == 0 || s_.produced.size() + 1 < o_.max_labels)) {
      auto after = used;
      const auto k = keys(p);
      after.insert(k.begin(), k.end());
      const int64_t next = dist({}, after);
      c.separator = next < kFar && (!r || int64_t(o_.separator.size()) + next <= effective);
    }
    if (think() && o_.think_begin >= 0 && !o_.start_in_thinking && p.empty() && s_.accepted == 0) {
      c.begin = !r || 1 + int64_t(o_.think_end.size()) + dist({}, used) <= *r;
    }
    return c;
  }

  // The allowed set, ascending, as fill must write it.
  std::vector<int32_t> allowed(std::optional<int64_t> per_fill = std::nullopt) const {
    const auto r = remaining(per_fill);
    std::vector<int32_t> out;
    switch (s_.phase) {
      case Phase::kThinking:
        if (forcing(r)) return {o_.think_end[end_matched()]};
        for (int32_t t = 0; t < trie_->vocab; ++t) {
          if (t != o_.think_begin) out.push_back(t);
        }
        return out;
      case Phase::kSeparator: return {o_.separator[s_.sep_step]};
      case Phase::kLabel: break;
      default: return stops_;
    }
    const LabelChoices c = label_choices(r);
    out = c.children;
    if (c.stop) out.insert(out.end(), stops_.begin(), stops_.end());
    if (c.separator) out.push_back(o_.separator[0]);
    if (c.begin) out.push_back(o_.think_begin);
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<int32_t> next_tokens() const {
    return s_.phase == Phase::kFailed ? std::vector<int32_t>{} : allowed();
  }

  // apply_policy = false: a draft token that is not allowed is simply not
  // accepted (treemask_matcher_accept_tokens).
  treemask_status accept(int32_t t, bool *ok, bool apply_policy = true) {
    *ok = false;
    switch (s_.phase) {
      case Phase::kFailed: return TREEMASK_ERR_INVALID_STATE;
      case Phase::kTerminated:
        *ok = is_stop(t) || (o_.pad_token >= 0 && t == o_.pad_token);
        return TREEMASK_OK;
      case Phase::kClosed:
        if (is_stop(t)) {
          push();
          s_.phase = Phase::kTerminated;
          s_.ended_at_node = false;
          *ok = true;
        }
        return TREEMASK_OK;
      default: break;
    }
    const auto a = allowed();
    if (!std::binary_search(a.begin(), a.end(), t)) {
      if (apply_policy && o_.failure_policy == TREEMASK_FAILURE_FAIL_CLOSED) {
        s_.phase = Phase::kClosed;
      }
      if (apply_policy && o_.failure_policy == TREEMASK_FAILURE_STICKY_ERROR) {
        s_.phase = Phase::kFailed;
      }
      return TREEMASK_OK;
    }
    *ok = true;
    const LabelChoices c = label_choices(remaining());  // before the accept uses budget
    push();
    switch (s_.phase) {
      case Phase::kThinking:
        if (is_stop(t)) {
          s_.phase = Phase::kTerminated;
          s_.ended_at_node = false;
          return TREEMASK_OK;
        }
        s_.think_text.push_back(t);
        ++s_.think_tokens;
        if (s_.think_text.size() >= o_.think_end.size() &&
            std::equal(o_.think_end.begin(), o_.think_end.end(),
                       s_.think_text.end() - long(o_.think_end.size()))) {
          s_.phase = Phase::kLabel;
          s_.prefix.clear();
        }
        break;
      case Phase::kSeparator:
        if (++s_.sep_step == o_.separator.size()) {
          s_.phase = Phase::kLabel;
          s_.prefix.clear();
        }
        break;
      case Phase::kLabel: {
        if (std::binary_search(c.children.begin(), c.children.end(), t)) {
          s_.prefix.push_back(t);
        } else if (c.stop && is_stop(t)) {
          produce();
          s_.phase = Phase::kTerminated;
          s_.ended_at_node = true;
          return TREEMASK_OK;
        } else if (c.separator && t == o_.separator[0]) {
          produce();
          s_.prefix.clear();
          if (o_.separator.size() > 1) {
            s_.phase = Phase::kSeparator;
            s_.sep_step = 1;
          }
        } else {  // the think begin token
          s_.phase = Phase::kThinking;
          s_.think_text.clear();
          s_.think_tokens = 0;
          return TREEMASK_OK;
        }
        break;
      }
      default: break;
    }
    // terminate_without_stop_token: end as soon as only stop tokens remain.
    if (o_.terminate_without_stop_token && s_.phase == Phase::kLabel) {
      const auto now = allowed();
      const bool only_stops =
          std::all_of(now.begin(), now.end(), [&](int32_t x) { return is_stop(x); });
      if (only_stops && !now.empty()) {
        produce();
        s_.phase = Phase::kTerminated;
        s_.ended_at_node = true;
      }
    }
    return TREEMASK_OK;
  }

  size_t rollback_depth() const {
    if (s_.phase == Phase::kClosed || s_.phase == Phase::kFailed) return 0;
    return o_.max_rollback_tokens == 0 ? history_.size()
                                       : std::min(history_.size(), o_.max_rollback_tokens);
  }

  treemask_status rollback(size_t n) {
    if (s_.phase == Phase::kClosed || s_.phase == Phase::kFailed) {
      return TREEMASK_ERR_INVALID_STATE;
    }
    if (n == 0) return TREEMASK_OK;
    if (n > rollback_depth()) return TREEMASK_ERR_OUT_OF_RANGE;
    s_ = history_[history_.size() - n];
    history_.resize(history_.size() - n);
    return TREEMASK_OK;
  }

  bool is_terminated() const { return s_.phase == Phase::kTerminated; }
  bool is_thinking() const { return s_.phase == Phase::kThinking; }

  bool can_terminate() const {
    switch (s_.phase) {
      case Phase::kClosed: return true;
      case Phase::kThinking: return !forcing(remaining());
      case Phase::kLabel: return label_choices(remaining()).stop;
      default: return false;
    }
  }

  // The chain of states that allow exactly one token and no stop token; at
  // a multi-label leaf the separator even though a stop token is allowed.
  std::vector<int32_t> forced_tokens() const {
    std::vector<int32_t> out;
    if (s_.phase == Phase::kFailed || s_.phase == Phase::kClosed ||
        s_.phase == Phase::kTerminated) {
      return out;
    }
    Matcher m = *this;
    for (int guard = 0; guard < 10000; ++guard) {
      const auto a = m.allowed();
      std::vector<int32_t> non_stop;
      bool any_stop = false;
      for (int32_t x : a) {
        if (m.is_stop(x)) {
          any_stop = true;
        } else {
          non_stop.push_back(x);
        }
      }
      if (non_stop.size() != 1) break;
      const bool separator_at_leaf =
          m.s_.phase == Phase::kLabel && m.multi() && non_stop[0] == o_.separator[0];
      if (any_stop && !separator_at_leaf) break;
      out.push_back(non_stop[0]);
      bool ok = false;
      m.accept(non_stop[0], &ok, false);
      if (!ok || m.is_terminated()) break;
    }
    return out;
  }

  std::vector<int64_t> label_ids() const {
    const bool at_node =
        s_.phase == Phase::kLabel || (s_.phase == Phase::kTerminated && s_.ended_at_node);
    if (!at_node) return {};
    const auto k = keys(s_.prefix);
    return {k.begin(), k.end()};
  }

  std::vector<int64_t> produced_labels() const {
    std::vector<int64_t> out;
    if (multi()) {
      for (const Seq &p : s_.produced) {
        const auto k = keys(p);
        out.insert(out.end(), k.begin(), k.end());
      }
    } else if (s_.phase == Phase::kTerminated && s_.ended_at_node) {
      const auto k = keys(s_.prefix);
      out.assign(k.begin(), k.end());
    }
    return out;
  }

 private:
  struct State {
    Phase phase = Phase::kLabel;
    Seq prefix;  // the current label's tokens (or where the sequence ended)
    Seq think_text;
    uint64_t think_tokens = 0;
    size_t sep_step = 0;
    std::vector<Seq> produced;  // multi-label: the labels produced, in order
    uint64_t accepted = 0;
    bool ended_at_node = false;
  };

  void push() {
    history_.push_back(s_);
    ++s_.accepted;
  }

  void produce() {
    if (multi()) s_.produced.push_back(s_.prefix);
  }

  const oracle::Trie *trie_;
  Options o_;
  std::vector<int32_t> stops_;
  State s_;
  std::vector<State> history_;
  int64_t budget_end_ = -1;
};

}  // namespace oracle_modes
