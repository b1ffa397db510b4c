// Helpers shared by the decoding-mode tests: C API options from the model's
// options, and vector-returning wrappers of the size-query functions.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/oracle_modes.h"
#include "common/test_util.h"

namespace modes_util {

using testutil::MatcherHandle;
using testutil::TrieHandle;

// The options struct for a model's options. The arrays point into o.
inline treemask_mode_options c_options(const oracle_modes::Options &o) {
  treemask_mode_options c;
  treemask_mode_options_init(&c);
  c.matcher.failure_policy = o.failure_policy;
  c.matcher.terminate_without_stop_token = o.terminate_without_stop_token;
  c.matcher.max_rollback_tokens = o.max_rollback_tokens;
  c.matcher.pad_token = o.pad_token;
  c.label_separator = o.separator.data();
  c.n_label_separator = o.separator.size();
  c.max_labels = o.max_labels;
  c.leaves_only = o.leaves_only;
  c.think_end_tokens = o.think_end.data();
  c.n_think_end_tokens = o.think_end.size();
  c.think_begin_token = o.think_begin;
  c.start_in_thinking = o.start_in_thinking;
  c.max_thinking_tokens = o.max_thinking;
  c.max_new_tokens = o.max_new_tokens;
  c.override_stop_tokens = o.override_stops.data();
  c.n_override_stop_tokens = o.override_stops.size();
  return c;
}

struct ExclusionHandle {
  treemask_exclusion_set *p = nullptr;
  ExclusionHandle() = default;
  explicit ExclusionHandle(treemask_exclusion_set *s) : p(s) {}
  ExclusionHandle(const ExclusionHandle &) = delete;
  ExclusionHandle &operator=(const ExclusionHandle &) = delete;
  ~ExclusionHandle() { treemask_exclusion_set_free(p); }
};

inline std::string last_error() { return treemask_last_error(); }

inline MatcherHandle make_matcher(treemask_trie *t, const treemask_mode_options &o) {
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(t, &o.matcher, &m), TREEMASK_OK) << last_error();
  return MatcherHandle(m);
}

inline bool accept(treemask_matcher *m, int32_t t) {
  bool ok = false;
  EXPECT_EQ(treemask_matcher_accept_token(m, t, &ok), TREEMASK_OK) << last_error();
  return ok;
}

inline void accept_all(treemask_matcher *m, const std::vector<int32_t> &tokens) {
  for (int32_t t : tokens) ASSERT_TRUE(accept(m, t)) << "token " << t << ": " << last_error();
}

inline std::vector<int32_t> fill(treemask_matcher *m, int32_t vocab, bool *need_apply = nullptr) {
  std::vector<int32_t> row(treemask_bitmask_words(vocab), -1);
  EXPECT_EQ(
      treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr, need_apply),
      TREEMASK_OK)
      << last_error();
  return testutil::decode_row(row.data(), row.size());
}

// The whole list from a (out, cap) -> count function: size query, then fill.
template <class T>
std::vector<T> listed(const treemask_matcher *m,
                      size_t (*list)(const treemask_matcher *, T *, size_t)) {
  std::vector<T> out(list(m, nullptr, 0));
  list(m, out.data(), out.size());
  return out;
}

inline std::vector<int64_t> produced_labels(const treemask_matcher *m) {
  return listed(m, treemask_matcher_produced_labels);
}

inline std::vector<int32_t> stop_tokens(const treemask_matcher *m) {
  return listed(m, treemask_matcher_stop_tokens);
}

// Builds the trie of a random trie description.
inline treemask_status make_random_trie(const oracle::RandomTrie &rt, TrieHandle &out) {
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = rt.vocab;
  opts.stop_tokens = rt.stops.data();
  opts.n_stop_tokens = rt.stops.size();
  return treemask_trie_from_paths(&opts, rt.tokens.data(), rt.offsets.data(), rt.offsets.size() - 1,
                                  rt.labels.empty() ? nullptr : rt.labels.data(), &out.p);
}

inline std::string debug_string(const treemask_matcher *m) {
  std::string out(treemask_matcher_debug_string(m, nullptr, 0), '\0');
  treemask_matcher_debug_string(m, out.data(), out.size() + 1);
  return out;
}

}  // namespace modes_util
