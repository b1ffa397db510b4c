// The rule of a trie of either kind, chosen once: what a state allows and
// where a token leads, for the matcher, the batch, the state arrays, the
// beam step and top-k, whatever the trie is made of (trie/trie_kind.h).
//
// A TrieRules is made where a matcher is created or a state-array call
// starts, from the trie and the stop tokens in force; it holds the plain rule
// (plain_rules.h: a token-path trie's nodes, and the reserved states of any
// trie) and, for a trie of another kind, the kind's node rules. This file is
// the one place above the trie layer that tells the kinds apart: every
// query below answers for both, and what a kind does not support is refused
// by check_supported, with one message for every feature and kind.
//
// The plain rule stays inline and unvirtual (one test of the kind per
// call, as before this interface existed: the fill and accept of a
// token-path matcher cost what they did); a kind's node rules are virtual
// calls, beside a walk of the vocabulary that costs microseconds.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "rules/plain_rules.h"
#include "rules/rules.h"
#include "trie/trie.h"
#include "trie/trie_kind.h"

namespace treemask {

// kUnsupported, "<what> is not supported with a <kind>: <why>", when the
// trie's kind does not support `feature` (the kind says why); Ok otherwise,
// and always for a token-path trie. `what` names what was asked for ("think
// mode", "a label filter", ...).
Status check_supported(const Trie &trie, TrieFeature feature, std::string_view what);

// The state-array rule of a kind's nodes, for advance_state (plain_rules.h):
// a node steps as its kind says; the reserved states are the plain rule's.
struct KindRules {
  const TrieKind *kind;
  uint32_t n_nodes;
  std::span<const int32_t> stops;  // ascending

  bool is_node(uint32_t s) const { return s < n_nodes; }
  bool is_stop(int32_t token) const {
    return std::binary_search(stops.begin(), stops.end(), token);
  }
  // A node, kStateTerminated (a stop token where a sequence may end) or
  // kStateFailed.
  uint32_t step_node(uint32_t node, int32_t token) const {
    const NodeStep r = kind->step(node, token, stops);
    return r.kind == NodeStep::kAdvanced     ? r.node
           : r.kind == NodeStep::kTerminated ? kStateTerminated
                                             : kStateFailed;
  }
  Advanced advance(uint32_t s, int32_t token, int32_t policy) const {
    return advance_state(*this, s, token, policy);
  }
};

class TrieRules {
 public:
  TrieRules() = default;
  // The chooser: the plain rule over trie's arrays with `stops` (the trie's
  // own, or a matcher's override; ascending, distinct), and trie's kind,
  // if it has one. trie outlives the rules.
  TrieRules(const Trie &trie, std::span<const int32_t> stops);

  std::span<const int32_t> stops() const { return {plain_.t.stop_tokens, plain_.t.n_stop_tokens}; }
  bool is_node(uint32_t s) const { return s < plain_.t.n_nodes; }

  // What state s allows: a node what its kind allows (the stop tokens where
  // a sequence may end); a reserved state (TERMINATED, FAILED) the stop
  // tokens only.
  AllowedSet allowed(uint32_t s) const {
    if (kind_) {
      if (!is_node(s)) return AllowedSet(plain_.allowed(kStateTerminated));
      return AllowedSet::of_kind(*kind_, s, test_bit64(plain_.t.terminal_bits, s));
    }
    return AllowedSet(plain_.allowed(s));
  }

  // Where token leads from node: a node, kStateTerminated (a stop token
  // where a sequence may end) or kStateFailed (not allowed).
  uint32_t step_node(uint32_t node, int32_t token) const {
    if (kind_) return kind_rules().step_node(node, token);
    return plain_.step_node(node, token);
  }

  // Whether several token sequences may reach one node (a kind's trie: a
  // string set's node is reached by every tokenization of its bytes), so
  // that a beam step merges hypotheses by the node they reach
  // (batch/beam_step.cc). A token-path node has one path from the root.
  bool merges_by_node() const { return kind_ != nullptr; }
  // What tells one trie's nodes from another's in such a merge.
  const void *node_space() const { return kind_; }
  // Whether node is one where a sequence may end (a stop token allowed).
  bool is_end(uint32_t node) const {
    return is_node(node) && test_bit64(plain_.t.terminal_bits, node);
  }

  // Whether node allows nothing but stop tokens.
  bool is_leaf(uint32_t node) const {
    if (kind_) return kind_->is_leaf(node);
    return node_edges(plain_.t, node).count == 0;
  }

  // Calls f with the state-array rule of the trie's kind (PlainRules or
  // KindRules: advance_state over either) and returns what f returns: one
  // choice per call, none per state.
  template <class F>
  decltype(auto) visit(F &&f) const {
    if (kind_) return f(kind_rules());
    return f(plain_);
  }

  // The candidates of a beam step or top-k at state s: offer(token, next)
  // for every allowed token, next being the state it leads to, or
  // kNextUnknown where finding it costs a step of its own (a kind's node:
  // only the winners are stepped, by next_state). buffer is scratch memory
  // for a kind's list; it grows to the largest allowed set.
  static constexpr uint32_t kNextUnknown = kStateFailed;
  template <class Offer>
  void for_each_candidate(uint32_t s, std::vector<int32_t> &buffer, Offer &&offer) const {
    if (kind_ && is_node(s)) {
      const auto stops = this->stops();
      size_t n = kind_->list(s, stops, buffer.data(), buffer.size());
      if (n > buffer.size()) {
        buffer.resize(n);
        n = kind_->list(s, stops, buffer.data(), buffer.size());
      }
      for (size_t j = 0; j < n; ++j) {
        const int32_t t = buffer[j];
        offer(t,
              std::binary_search(stops.begin(), stops.end(), t) ? kStateTerminated : kNextUnknown);
      }
      return;
    }
    // The plain rule's candidates (plain_rules.h: PlainCandidates). A
    // reserved state of a trie of another kind offers the stop tokens only,
    // as FAILED does.
    const PlainCandidates c(plain_, kind_ ? kStateFailed : s);
    c.for_each(plain_.t, offer);
  }
  // The state a candidate offered with kNextUnknown leads to (it was
  // allowed at s, so the step cannot fail; TERMINATED if it did).
  uint32_t next_state(uint32_t s, int32_t token) const {
    const uint32_t next = step_node(s, token);
    return next == kStateFailed ? kStateTerminated : next;
  }

  // The allowed set of state s as two disjoint ascending lists (children,
  // stop tokens), without copying; false for a kind's node, whose set is
  // computed (list it instead).
  bool allowed_lists(uint32_t s, std::span<const int32_t> &first,
                     std::span<const int32_t> &second) const {
    if (kind_ && is_node(s)) return false;
    const Allowed a = plain_.allowed(kind_ ? kStateTerminated : s);
    first = children_of(a);
    second = a.stops ? stops() : std::span<const int32_t>{};
    return true;
  }

  // The forced tokens at node: the kind's own definition (a string set: the
  // tokens of its forced bytes), or chain() for a token-path trie (the
  // matcher follows the sole allowed token through its modes).
  template <class Chain>
  size_t forced_tokens(uint32_t node, int32_t *out, size_t cap, Chain &&chain) const {
    if (kind_) return kind_->forced_tokens(node, stops(), out, cap);
    return chain();
  }
  // The bytes every continuation from node begins with (a kind with bytes;
  // 0 for token paths).
  size_t forced_bytes(uint32_t node, uint8_t *out, size_t cap) const {
    return kind_ ? kind_->forced_bytes(node, out, cap) : 0;
  }
  // Node for a debug line: `path=[t0 t1 ...]` (its tokens from the root) or
  // the kind's own (a string set: `bytes="..."`).
  std::string describe(const Trie &trie, uint32_t node) const;

 private:
  KindRules kind_rules() const { return {kind_, static_cast<uint32_t>(plain_.t.n_nodes), stops()}; }

  PlainRules plain_{};
  const TrieKind *kind_ = nullptr;
};

}  // namespace treemask
