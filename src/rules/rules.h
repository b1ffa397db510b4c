// The rule interface on the host: what a state allows, as one value
// (AllowedSet) that every rule produces, and the queries written once over
// it: the row (write_row), the ascending list (list), the one forced token
// (sole_token) and whether the sequence may end (can_end). The plain rule
// gives its Allowed (plain_rules.h) as it is; the mode rules (mode_rules.h)
// give the same Allowed refined by a child filter and a few extra tokens, as
// llguidance's one trie walk runs over one small trait. So fill,
// next_tokens, forced_tokens and can_terminate agree with each other and with
// accept whatever rule answers, and a new kind of rule adds a producer of
// AllowedSet, not new queries. A node of a trie of another kind (a string
// set: trie/trie_kind.h) is one more producer: its row and list come from
// the kind (a string set's walk of its vocabulary).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "rules/label_view.h"
#include "rules/plain_rules.h"
#include "trie/trie.h"
#include "trie/trie_kind.h"

namespace treemask {

// The plain rule over trie's arrays (the view itself, not a copy of its
// fields) with the given stop tokens (the trie's own, or a matcher's
// override).
inline PlainRules plain_rules(const Trie &trie, std::span<const int32_t> stops) {
  PlainRules r{trie.arrays()};
  r.t.stop_tokens = stops.data();
  r.t.n_stop_tokens = static_cast<uint32_t>(stops.size());
  return r;
}

inline std::span<const int32_t> children_of(const Allowed &a) { return {a.children, a.n_children}; }

// Drops the children of a state whose labels can no longer end (the
// no-dead-end rule of multi-label mode, exclusions) or cannot end within the
// length budget: a child is kept iff its subtree holds an available end
// within child_dist_limit tokens.
struct ChildFilter {
  LabelView view;
  int64_t child_dist_limit = std::numeric_limits<int64_t>::max();
  // Children are dropped only for having no available end (no budget binds,
  // no allow-subset): the dropped ones can be listed without a scan.
  bool dead_only = false;

  bool keeps(NodeInfo child) const {
    return child.ends > 0 && int64_t{child.dist} <= child_dist_limit;
  }
  bool keeps(const Allowed &a, uint32_t index) const {
    return keeps(view.info(a.first_child + index));
  }
  // Calls f(index) for each kept child in order while f returns true.
  template <class F>
  void for_each_kept(const Allowed &a, F &&f) const {
    view.for_each_child(children(a),
                        [&](uint32_t i, NodeInfo info) { return !keeps(info) || f(i); });
  }
  // Calls f(index) for each dropped child, in no order and possibly twice;
  // only when dead_only.
  template <class F>
  void for_each_dropped(const Allowed &a, F &&f) const {
    view.for_each_dead_child(children(a), f);
  }
  // The dropped children's indices, ascending and distinct; only when
  // dead_only.
  std::vector<uint32_t> dropped(const Allowed &a) const;

  static Children children(const Allowed &a) { return {a.children, a.n_children, a.first_child}; }
};

// What a state allows: the children of base (those `filter` keeps), the stop
// tokens when base.stops, and the extra tokens; or, in free thinking, every
// token of the vocabulary but `excluded`. The parts are disjoint (no child
// or extra is a stop token; the mode options are checked for that when a
// matcher is made), so counts add up.
struct AllowedSet {
  Allowed base;
  // Engaged only when it drops children.
  std::optional<ChildFilter> filter;
  // Tokens allowed besides (-1: none), never a child or a stop token: the
  // first separator token and the think-begin token in the label phase, the
  // one token of a forced phase (an end sequence or separator token).
  int32_t extra[2] = {-1, -1};
  // extra[0] is the separator: at a multi-label leaf it is forced although
  // a stop token could end the sequence instead (treemask_matcher_forced_tokens).
  bool separator_first = false;
  // Free thinking: every token < vocab_size but `excluded` (-1: none).
  bool all_but = false;
  int32_t excluded = -1;
  // A node of a trie of another kind (trie/trie_kind.h): the tokens its
  // kind allows at kind_node (a string set: those whose bytes spell a path
  // from it), plus the stop tokens when base.stops (a sequence may end
  // there). No other field is set.
  const TrieKind *kind = nullptr;
  uint32_t kind_node = 0;

  AllowedSet() = default;
  explicit AllowedSet(const Allowed &a) : base(a) {}
  static AllowedSet only(int32_t token) {
    AllowedSet s;
    s.extra[0] = token;
    return s;
  }
  static AllowedSet of_kind(const TrieKind &kind, uint32_t node, bool may_end) {
    AllowedSet s;
    s.kind = &kind;
    s.kind_node = node;
    s.base.stops = may_end;
    return s;
  }
  static AllowedSet everything_but(int32_t token) {
    AllowedSet s;
    s.all_but = true;
    s.excluded = token;
    return s;
  }
  bool has_extra(int32_t token) const {
    return token >= 0 && (extra[0] == token || extra[1] == token);
  }
  // Whether child `index` of base is allowed.
  bool keeps_child(uint32_t index) const { return !filter || filter->keeps(base, index); }
};

// The part of write_row for free thinking and filtered children (out of
// line: the plain rule never needs it).
uint64_t write_refined_row(const Trie &trie, const AllowedSet &s, std::span<const int32_t> stops,
                           uint32_t *row);

// Sets the stop tokens (when base.stops) and the extras; returns how many.
inline uint64_t set_stops_and_extras(const AllowedSet &s, std::span<const int32_t> stops,
                                     uint32_t *row) {
  uint64_t n = 0;
  if (s.base.stops) {
    for (int32_t stop : stops) row[static_cast<uint32_t>(stop) >> 5] |= uint32_t{1} << (stop & 31);
    n = stops.size();
  }
  for (int32_t extra : s.extra) {
    if (extra < 0) continue;
    row[static_cast<uint32_t>(extra) >> 5] |= uint32_t{1} << (extra & 31);
    ++n;
  }
  return n;
}

// Writes the row of s into row (all trie.row_words() words; bits past
// vocab_size 0): the children through the trie's dense-row cache (the
// filter's dropped ones cleared after), then the stop tokens and the
// extras. Returns the number of allowed tokens.
inline uint64_t write_row(const Trie &trie, const AllowedSet &s, std::span<const int32_t> stops,
                          uint32_t *row) {
  if (s.kind) return s.kind->write_row(s.kind_node, stops, row);
  if (s.all_but || s.filter) return write_refined_row(trie, s, stops, row);
  trie.write_children_row(s.base.children, s.base.n_children, s.base.first_child, row);
  return s.base.n_children + set_stops_and_extras(s, stops, row);
}

// The allowed tokens in ascending order, at most cap written to out; returns
// how many there are.
size_t list(const AllowedSet &s, std::span<const int32_t> stops, int32_t vocab_size, int32_t *out,
            size_t cap);

// The one token s allows, when the sequence cannot end here instead (except
// the separator at a multi-label leaf, which is forced all the same). Not
// for a node of another kind, which defines its forced tokens itself
// (TrieKind::forced_tokens; TrieRules::forced_tokens chooses).
inline std::optional<int32_t> sole_token(const AllowedSet &s) {
  if (s.all_but || s.kind) return std::nullopt;
  int options = 0;
  int32_t token = -1;
  for (int32_t extra : s.extra) {
    if (extra >= 0) ++options, token = extra;
  }
  const Allowed &a = s.base;
  if (!s.filter) {
    options += static_cast<int>(a.n_children < 2 ? a.n_children : 2);
    if (a.n_children > 0) token = a.children[0];
  } else {
    s.filter->for_each_kept(a, [&](uint32_t i) {
      ++options;
      token = a.children[i];
      return options <= 1;
    });
  }
  if (options != 1) return std::nullopt;
  if (!a.stops || (s.separator_first && token == s.extra[0])) return token;
  return std::nullopt;
}

// Whether a stop token may end the sequence here.
inline bool can_end(const AllowedSet &s) { return s.all_but || s.base.stops; }

}  // namespace treemask
