// The plain step rule, written once: what a state allows and where token t
// leads, over the trie's flat arrays. Shared by the matcher (matcher.cc), the
// state arrays (state_array.cc) and the CUDA trie step (trie_step.cu, which
// nvcc compiles; hence no standard-library types here and every function
// callable on host and device).
//
// A state is a node id (< n_nodes) or one of the two pinned reserved values
// below. The arrays are validated when the trie is built or loaded
// (validate_trie_arrays), so nothing here checks them: edge and stop tokens
// are < vocab_size, children ascend, a node's first edge index is >= its id.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdint.h>

#include "trie/find_token.h"
#include "trie/layout.h"
#include "trie/node_edges.h"

namespace treemask {

// Pinned values of the C API (TREEMASK_STATE_TERMINATED / _FAILED,
// TREEMASK_FAILURE_*); the core's one copy, checked against the header in
// capi/shim.h.
inline constexpr uint32_t kStateTerminated = 0xFFFFFFFEu;
inline constexpr uint32_t kStateFailed = 0xFFFFFFFFu;
inline constexpr int32_t kPolicyReject = 0;
inline constexpr int32_t kPolicyFailClosed = 1;
inline constexpr int32_t kPolicyStickyError = 2;

// What a state allows now: the children of a node (tokens[i] leads to node
// first_child + i) and, when `stops`, every stop token. The two sets are
// disjoint (no edge carries a stop token) and each ascends.
struct Allowed {
  const int32_t *children = nullptr;
  uint32_t n_children = 0;
  uint32_t first_child = 0;
  bool stops = false;
};

// Where a step went: the new state and whether the token was accepted.
struct Advanced {
  uint32_t state;
  bool accepted;
};

// One accept of the state-array form (treemask_trie_advance_states) over
// any rule with is_node, is_stop and step_node (the plain rule below; a
// kind's, KindRules in rules/trie_rules.h): a negative token is padding and
// leaves the state; TERMINATED accepts only stop tokens; FAILED (and, on a
// device, any id that is no node) accepts a stop token, which terminates
// it, unless the policy is STICKY_ERROR; a node follows step_node, and a
// rejection fails the state unless the policy is REJECT.
template <class Rules>
TREEMASK_HD Advanced advance_state(const Rules &r, uint32_t s, int32_t token, int32_t policy) {
  if (token < 0) return {s, true};
  if (s == kStateTerminated) return {s, r.is_stop(token)};
  if (!r.is_node(s)) {
    if (policy != kPolicyStickyError && r.is_stop(token)) return {kStateTerminated, true};
    return {kStateFailed, false};
  }
  const uint32_t next = r.step_node(s, token);
  if (next != kStateFailed) return {next, true};
  return {policy == kPolicyReject ? s : kStateFailed, false};
}

// The rule over a PlainTrieView (trie/layout.h): the trie's own (TrieArrays
// derives from it), or a device copy. stop_tokens may be a matcher's override.
struct PlainRules {
  PlainTrieView t;

  TREEMASK_HD bool is_node(uint32_t s) const { return s < t.n_nodes; }
  TREEMASK_HD bool is_terminal(uint32_t node) const { return test_bit64(t.terminal_bits, node); }
  TREEMASK_HD bool is_stop(int32_t token) const {
    return find_token(t.stop_tokens, t.n_stop_tokens, token) >= 0;
  }

  // What state s allows: a node its children, plus the stop tokens if it is
  // terminal; any other state only the stop tokens.
  TREEMASK_HD Allowed allowed(uint32_t s) const {
    if (!is_node(s)) return {nullptr, 0, 0, true};
    const NodeEdges e = node_edges(t, s);
    return {e.tokens, e.count, e.first_child, is_terminal(s)};
  }

  // Where token leads from node: a child id, kStateTerminated (a stop token
  // at a terminal node), or kStateFailed (not allowed; any int32 token).
  TREEMASK_HD uint32_t step_node(uint32_t node, int32_t token) const {
    const NodeEdges e = node_edges(t, node);
    const int64_t i = find_token(e.tokens, e.count, token);
    if (i >= 0) return e.first_child + static_cast<uint32_t>(i);
    if (is_terminal(node) && is_stop(token)) return kStateTerminated;
    return kStateFailed;
  }

  // One accept of the state-array form (advance_state above).
  TREEMASK_HD Advanced advance(uint32_t s, int32_t token, int32_t policy) const {
    return advance_state(*this, s, token, policy);
  }
};

// The candidates of a state for a beam step or a top-k, in the one order the
// host (batch/beam_step.cc) and the device (kernels/cuda) read them: the
// children the plain rule allows, then the stop tokens when it allows them
// (TERMINATED, FAILED and, on a device, any id that is no node: the stop
// tokens only). Candidate i is token(i) and leads to next_state(i); the
// host walks them in order (for_each), a device indexes them.
struct PlainCandidates {
  Allowed a;
  uint32_t n_total;

  TREEMASK_HD PlainCandidates(const PlainRules &r, uint32_t state)
      : a(r.allowed(state)), n_total(a.n_children + (a.stops ? r.t.n_stop_tokens : 0)) {}
  TREEMASK_HD int32_t token(const PlainTrieView &t, uint32_t i) const {
    return i < a.n_children ? a.children[i] : t.stop_tokens[i - a.n_children];
  }
  // A child node, or TERMINATED (a stop token).
  TREEMASK_HD uint32_t next_state(uint32_t i) const {
    return i < a.n_children ? a.first_child + i : kStateTerminated;
  }
  // offer(token(i), next_state(i)) for every i in order (host code).
  template <class Offer>
  void for_each(const PlainTrieView &t, Offer &&offer) const {
    for (uint32_t j = 0; j < a.n_children; ++j) offer(a.children[j], a.first_child + j);
    if (!a.stops) return;
    for (uint32_t j = 0; j < t.n_stop_tokens; ++j) offer(t.stop_tokens[j], kStateTerminated);
  }
};

}  // namespace treemask
