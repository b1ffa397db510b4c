// What the loader fuzzers do with a trie they managed to load: walk it
// through the public API and check that the library's independent views of
// each node agree (a matcher's fill, its next_tokens list, the state-array
// fill and advance), that allowed tokens are accepted and others rejected,
// and that the decoding modes, which derive per-node data from the whole
// trie, work on it too.
//
// Every trie that loads has passed the structural validation, so every view
// must agree (sound = true); sound = false remains for arrays the caller
// made itself without validation: calls may then fail, but only with
// TREEMASK_ERR_CORRUPT_FILE, never crash, hang or read out of bounds (the
// sanitizers watch the last two).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

#include "common/test_util.h"
#include "fuzz/fuzz_input.h"

namespace fuzz {

struct ExerciseLimits {
  size_t max_nodes = 512;           // nodes visited
  size_t max_children = 32;         // children followed per node
  int32_t max_row_vocab = 1 << 20;  // larger vocabularies skip the bitmask rows
};

// OK, or (for a trie that may be corrupt) the one error corruption may give.
inline void check_status(treemask_status s, bool sound) {
  if (sound) {
    if (s != TREEMASK_OK) std::fprintf(stderr, "%s\n", treemask_last_error());
    FUZZ_CHECK(s == TREEMASK_OK);
  } else {
    FUZZ_CHECK(s == TREEMASK_OK || s == TREEMASK_ERR_CORRUPT_FILE);
  }
}

// A short walk with decoding modes that look at the whole trie (per-node
// ends and distances): on a sound trie every step allows something until
// the sequence ends.
inline void exercise_modes(treemask_trie *trie, bool sound, bool fill_rows) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  o.leaves_only = true;
  o.max_new_tokens = 6;
  treemask_matcher *raw = nullptr;
  const treemask_status s = treemask_matcher_create(trie, &o.matcher, &raw);
  if (treemask_trie_is_string_set(trie)) {
    // The modes are defined over token paths: a string set refuses them.
    FUZZ_CHECK(s == TREEMASK_ERR_UNSUPPORTED && raw == nullptr);
    return;
  }
  if (s != TREEMASK_OK) {
    // A trie whose every terminal has children has no leaf to end at.
    FUZZ_CHECK(s == TREEMASK_ERR_CORRUPT_FILE || s == TREEMASK_ERR_INVALID_ARGUMENT ||
               (!sound && s == TREEMASK_ERR_OUT_OF_RANGE));
    return;
  }
  testutil::MatcherHandle m(raw);
  std::vector<int32_t> row(fill_rows ? treemask_bitmask_words(treemask_trie_vocab_size(trie)) : 0);
  for (int step = 0; step < 12 && !treemask_matcher_is_terminated(m.p); ++step) {
    if (fill_rows) {
      check_status(
          treemask_matcher_fill_next_token_bitmask(m.p, row.data(), row.size(), nullptr, nullptr),
          sound);
    }
    const auto allowed = testutil::next_tokens(m.p);
    if (sound) FUZZ_CHECK(!allowed.empty());
    if (allowed.empty()) return;
    bool accepted = false;
    check_status(treemask_matcher_accept_token(m.p, allowed[step % allowed.size()], &accepted),
                 sound);
    if (sound) FUZZ_CHECK(accepted);
    if (!accepted) return;
  }
}

// Walks the trie breadth first from the root. sound: the trie was built by
// a loader (or its arrays were validated), so every call must succeed and
// all views must agree exactly.
inline void exercise_trie(treemask_trie *trie, bool sound, const ExerciseLimits &limits = {}) {
  const int32_t vocab = treemask_trie_vocab_size(trie);
  FUZZ_CHECK(vocab > 0);
  const bool strings = treemask_trie_is_string_set(trie);
  const bool fill_rows = vocab <= limits.max_row_vocab;
  const size_t words = fill_rows ? treemask_bitmask_words(vocab) : 0;
  std::vector<int32_t> stops(treemask_trie_stop_tokens(trie, nullptr, 0));
  treemask_trie_stop_tokens(trie, stops.data(), stops.size());
  FUZZ_CHECK(!stops.empty());

  treemask_matcher *root = nullptr;
  FUZZ_CHECK(treemask_matcher_create(trie, nullptr, &root) == TREEMASK_OK);
  struct Visit {
    testutil::MatcherHandle m;
    uint32_t state;
  };
  std::deque<Visit> queue;
  queue.push_back({testutil::MatcherHandle(root), TREEMASK_STATE_ROOT});
  std::vector<int32_t> matcher_row(words + 1), state_row(words + 1), batch_row(words);
  // One batch row, filled incrementally from node to node: the batch lists
  // the allowed tokens itself and must not trust what a corrupt node lists.
  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 1;
  treemask_batch *batch_raw = nullptr;
  FUZZ_CHECK(treemask_batch_create(&bo, &batch_raw) == TREEMASK_OK);
  const std::unique_ptr<treemask_batch, void (*)(treemask_batch *)> batch(batch_raw,
                                                                          treemask_batch_free);
  if (fill_rows) {
    FUZZ_CHECK(treemask_batch_bind_bitmask(batch.get(), batch_row.data(), words) == TREEMASK_OK);
  }
  size_t visited = 0;
  while (!queue.empty() && visited++ < limits.max_nodes) {
    Visit v = std::move(queue.front());
    queue.pop_front();
    uint32_t state = 0;
    FUZZ_CHECK(treemask_matcher_get_state(v.m.p, &state) == TREEMASK_OK);
    FUZZ_CHECK(state == v.state);

    const auto allowed = testutil::next_tokens(v.m.p);
    if (fill_rows) {
      std::fill(matcher_row.begin(), matcher_row.end(), -1);
      std::fill(state_row.begin(), state_row.end(), -1);
      bool need_apply = false;
      const treemask_status fill_status = treemask_matcher_fill_next_token_bitmask(
          v.m.p, matcher_row.data(), matcher_row.size(), nullptr, &need_apply);
      check_status(fill_status, sound);
      const treemask_status state_status =
          treemask_trie_fill_states(trie, &v.state, 1, state_row.data(), state_row.size());
      check_status(state_status, sound);
      FUZZ_CHECK(treemask_batch_set_matcher(batch.get(), 0, v.m.p) == TREEMASK_OK);
      const treemask_status batch_status =
          treemask_batch_fill_bound(batch.get(), nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr);
      check_status(batch_status, sound);
      if (fill_status == TREEMASK_OK && state_status == TREEMASK_OK) {
        FUZZ_CHECK(matcher_row == state_row);
        FUZZ_CHECK(matcher_row[words] == 0);  // a wider buffer's tail is cleared
        FUZZ_CHECK(need_apply == (allowed.size() != static_cast<size_t>(vocab)));
        if (sound) FUZZ_CHECK(testutil::decode_row(matcher_row.data(), words) == allowed);
        if (batch_status == TREEMASK_OK) {
          FUZZ_CHECK(std::equal(batch_row.begin(), batch_row.end(), matcher_row.begin()));
        }
      }
    }
    if (sound) {
      FUZZ_CHECK(std::is_sorted(allowed.begin(), allowed.end()));
      FUZZ_CHECK(std::adjacent_find(allowed.begin(), allowed.end()) == allowed.end());
      for (const int32_t t : allowed) FUZZ_CHECK(t >= 0 && t < vocab);
    }
    int64_t labels[8];
    treemask_matcher_label_ids(v.m.p, labels, 8);
    const bool terminal = treemask_matcher_can_terminate(v.m.p);
    if (sound) {
      // can_terminate agrees with the list: a stop token is allowed exactly then.
      const bool stop_allowed = std::any_of(allowed.begin(), allowed.end(), [&](int32_t t) {
        return std::binary_search(stops.begin(), stops.end(), t);
      });
      FUZZ_CHECK(stop_allowed == terminal);
    }
    // forced_tokens: the chain of states that allow exactly one token; its
    // first token is the sole allowed one, and accept_forced_tokens accepts
    // the whole chain, each step agreeing with the state-array form. A
    // string set's chain tokenizes its forced bytes instead: its first token
    // is one of the allowed, and there is none where a string may end.
    int32_t forced[8];
    const size_t n_forced = treemask_matcher_forced_tokens(v.m.p, forced, 8);
    if (sound) {
      for (size_t k = 0; k < std::min<size_t>(n_forced, 8); ++k) {
        FUZZ_CHECK(forced[k] >= 0 && forced[k] < vocab);
      }
      if (strings) {
        if (n_forced > 0) {
          FUZZ_CHECK(!terminal && std::binary_search(allowed.begin(), allowed.end(), forced[0]));
        }
      } else {
        if (n_forced > 0) FUZZ_CHECK(allowed.size() == 1 && allowed[0] == forced[0] && !terminal);
        if (allowed.size() == 1 && !terminal) FUZZ_CHECK(n_forced > 0);
      }
      treemask_matcher *jump_raw = nullptr;
      FUZZ_CHECK(treemask_matcher_clone(v.m.p, &jump_raw) == TREEMASK_OK);
      testutil::MatcherHandle jump(jump_raw);
      int32_t chain[8];
      size_t n_accepted = 0;
      FUZZ_CHECK(treemask_matcher_accept_forced_tokens(jump.p, chain, 8, &n_accepted) ==
                 TREEMASK_OK);
      FUZZ_CHECK(n_accepted == n_forced);
      uint32_t s = v.state;
      for (size_t k = 0; k < std::min<size_t>(n_forced, 8); ++k) {
        FUZZ_CHECK(chain[k] == forced[k]);
        bool ok = false;
        FUZZ_CHECK(treemask_trie_advance_states(trie, &s, &chain[k], 1, TREEMASK_FAILURE_REJECT,
                                                &ok) == TREEMASK_OK);
        FUZZ_CHECK(ok);
      }
      if (n_forced <= 8) {
        uint32_t after = 0;
        FUZZ_CHECK(treemask_matcher_get_state(jump.p, &after) == TREEMASK_OK && after == s);
      }
    }

    // A token outside the allowed set is rejected by both forms, state kept.
    // (On a corrupt trie the list may be unsorted, so the "outsider" may be
    // a child after all: then both forms must still agree.)
    int32_t outsider = 0;
    while (outsider < vocab && std::binary_search(allowed.begin(), allowed.end(), outsider)) {
      ++outsider;
    }
    if (outsider < vocab) {
      treemask_matcher *probe = nullptr;
      FUZZ_CHECK(treemask_matcher_clone(v.m.p, &probe) == TREEMASK_OK);
      testutil::MatcherHandle p(probe);
      bool accepted = true, state_accepted = true;
      const treemask_status ms = treemask_matcher_accept_token(p.p, outsider, &accepted);
      check_status(ms, sound);
      uint32_t s = v.state;
      const treemask_status ss = treemask_trie_advance_states(
          trie, &s, &outsider, 1, TREEMASK_FAILURE_REJECT, &state_accepted);
      check_status(ss, sound);
      if (sound) FUZZ_CHECK(!accepted && !state_accepted && s == v.state);
      if (ms == TREEMASK_OK && ss == TREEMASK_OK) {
        FUZZ_CHECK(accepted == state_accepted);
        uint32_t after = 0;
        FUZZ_CHECK(treemask_matcher_get_state(p.p, &after) == TREEMASK_OK && after == s);
      }
    }

    size_t followed = 0;
    for (const int32_t t : allowed) {
      if (followed++ >= limits.max_children) break;
      treemask_matcher *child = nullptr;
      FUZZ_CHECK(treemask_matcher_clone(v.m.p, &child) == TREEMASK_OK);
      testutil::MatcherHandle c(child);
      bool accepted = false;
      check_status(treemask_matcher_accept_token(c.p, t, &accepted), sound);
      uint32_t s = v.state;
      bool state_accepted = false;
      check_status(
          treemask_trie_advance_states(trie, &s, &t, 1, TREEMASK_FAILURE_REJECT, &state_accepted),
          sound);
      if (sound) FUZZ_CHECK(accepted && state_accepted);
      if (!accepted || !state_accepted) continue;
      const bool terminated = treemask_matcher_is_terminated(c.p);
      FUZZ_CHECK(terminated == (s == TREEMASK_STATE_TERMINATED));
      if (sound && std::binary_search(stops.begin(), stops.end(), t)) {
        FUZZ_CHECK(terminal && terminated);
      }
      if (terminated) continue;
      FUZZ_CHECK(s != TREEMASK_STATE_FAILED);
      queue.push_back({std::move(c), s});
    }
  }
  exercise_modes(trie, sound, fill_rows);
}

}  // namespace fuzz
