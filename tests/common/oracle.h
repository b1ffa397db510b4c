// A brute-force model of a trie and a matcher, written from the rules in
// treemask.h and nothing else: the allowed sequences are a std::set of
// vectors, a matcher is a prefix plus a phase. Tests compare the library with
// it step by step. Deliberately slow and obvious.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "treemask/treemask.h"

namespace oracle {

using Seq = std::vector<int32_t>;

struct Trie {
  std::set<Seq> seqs;
  std::map<Seq, std::set<int64_t>> labels;
  std::vector<int32_t> stops;  // ascending, distinct
  int32_t vocab = 0;

  bool terminal(const Seq &prefix) const { return seqs.count(prefix) > 0; }

  // Tokens t such that prefix + [t] is a prefix of some sequence.
  std::vector<int32_t> children(const Seq &prefix) const {
    std::set<int32_t> out;
    for (auto it = seqs.lower_bound(prefix); it != seqs.end(); ++it) {
      if (it->size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), it->begin()))
        break;
      if (it->size() > prefix.size()) out.insert((*it)[prefix.size()]);
    }
    return {out.begin(), out.end()};
  }

  bool is_stop(int32_t t) const { return std::binary_search(stops.begin(), stops.end(), t); }
};

enum class Phase { kActive, kClosed, kTerminated, kFailed };

struct Options {
  int32_t failure_policy = TREEMASK_FAILURE_REJECT;
  bool terminate_without_stop_token = false;
  size_t max_rollback_tokens = 0;
  int32_t pad_token = -1;
};

struct Matcher {
  struct Snapshot {
    Seq prefix;
    Phase phase;
    bool ended_from_closed;
  };
  const Trie *trie;
  Options opts;
  Seq prefix;
  Phase phase = Phase::kActive;
  bool ended_from_closed = false;
  std::vector<Snapshot> history;

  Matcher(const Trie &t, Options o) : trie(&t), opts(o) {}

  Snapshot snapshot() const { return {prefix, phase, ended_from_closed}; }

  // The allowed set, as fill must write it.
  std::vector<int32_t> allowed() const {
    if (phase != Phase::kActive) return trie->stops;
    std::vector<int32_t> out = trie->children(prefix);
    if (trie->terminal(prefix)) out.insert(out.end(), trie->stops.begin(), trie->stops.end());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Returns the status accept_token must return; *accepted as it must be.
  treemask_status accept(int32_t t, bool *accepted) {
    *accepted = false;
    switch (phase) {
      case Phase::kFailed: return TREEMASK_ERR_INVALID_STATE;
      case Phase::kTerminated:
        *accepted = trie->is_stop(t) || (opts.pad_token >= 0 && t == opts.pad_token);
        return TREEMASK_OK;
      case Phase::kClosed:
        if (trie->is_stop(t)) {
          history.push_back(snapshot());
          phase = Phase::kTerminated;
          ended_from_closed = true;
          *accepted = true;
        }
        return TREEMASK_OK;
      case Phase::kActive: break;
    }
    const auto kids = trie->children(prefix);
    if (std::binary_search(kids.begin(), kids.end(), t)) {
      history.push_back(snapshot());
      prefix.push_back(t);
      if (opts.terminate_without_stop_token && trie->children(prefix).empty()) {
        phase = Phase::kTerminated;
      }
      *accepted = true;
      return TREEMASK_OK;
    }
    if (trie->terminal(prefix) && trie->is_stop(t)) {
      history.push_back(snapshot());
      phase = Phase::kTerminated;
      *accepted = true;
      return TREEMASK_OK;
    }
    if (opts.failure_policy == TREEMASK_FAILURE_FAIL_CLOSED) phase = Phase::kClosed;
    if (opts.failure_policy == TREEMASK_FAILURE_STICKY_ERROR) phase = Phase::kFailed;
    return TREEMASK_OK;
  }

  size_t rollback_depth() const {
    if (phase == Phase::kClosed || phase == Phase::kFailed) return 0;
    return opts.max_rollback_tokens == 0 ? history.size()
                                         : std::min(history.size(), opts.max_rollback_tokens);
  }

  treemask_status rollback(size_t n) {
    if (phase == Phase::kClosed || phase == Phase::kFailed) return TREEMASK_ERR_INVALID_STATE;
    if (n == 0) return TREEMASK_OK;
    if (n > rollback_depth()) return TREEMASK_ERR_OUT_OF_RANGE;
    const Snapshot s = history[history.size() - n];
    history.resize(history.size() - n);
    prefix = s.prefix;
    phase = s.phase;
    ended_from_closed = s.ended_from_closed;
    return TREEMASK_OK;
  }

  void reset() {
    prefix.clear();
    phase = Phase::kActive;
    ended_from_closed = false;
    history.clear();
  }

  bool is_terminated() const { return phase == Phase::kTerminated; }
  bool can_terminate() const {
    return phase == Phase::kClosed || (phase == Phase::kActive && trie->terminal(prefix));
  }

  std::vector<int32_t> next_tokens() const {
    return phase == Phase::kFailed ? std::vector<int32_t>{} : allowed();
  }

  std::vector<int32_t> forced_tokens() const {
    std::vector<int32_t> out;
    if (phase != Phase::kActive) return out;
    Seq p = prefix;
    for (;;) {
      if (trie->terminal(p)) break;
      const auto kids = trie->children(p);
      if (kids.size() != 1) break;
      out.push_back(kids[0]);
      p.push_back(kids[0]);
    }
    return out;
  }

  std::vector<int64_t> label_ids() const {
    const bool has_node =
        phase == Phase::kActive || (phase == Phase::kTerminated && !ended_from_closed);
    if (!has_node) return {};
    auto it = trie->labels.find(prefix);
    if (it == trie->labels.end()) return {};
    return {it->second.begin(), it->second.end()};
  }
};

// A random trie description: CSR paths plus the oracle built from them.
struct RandomTrie {
  int32_t vocab = 0;
  std::vector<int32_t> stops;  // as given (may have duplicates)
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  std::vector<int64_t> labels;  // empty: path i carries label i
  Trie model;
};

inline RandomTrie random_trie(std::mt19937_64 &rng, int32_t vocab) {
  RandomTrie r;
  r.vocab = vocab;
  auto pick = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  // Stop tokens first; the path alphabet avoids them.
  const int32_t n_stops = std::min<int32_t>(vocab, pick(1, 3));
  std::set<int32_t> stop_set;
  while (static_cast<int32_t>(stop_set.size()) < n_stops) stop_set.insert(pick(0, vocab - 1));
  r.stops.assign(stop_set.begin(), stop_set.end());
  if (pick(0, 3) == 0) r.stops.push_back(r.stops.front());  // a duplicate, merged by the library
  std::vector<int32_t> alphabet;
  const int32_t want = std::min<int32_t>(vocab - n_stops, pick(1, 8));
  std::set<int32_t> alpha_set;
  while (static_cast<int32_t>(alpha_set.size()) < want) {
    // Favour the ends of the id space (word boundaries, the last word).
    int32_t t = pick(0, 2) == 0 ? vocab - 1 - pick(0, std::min(vocab - 1, 40)) : pick(0, vocab - 1);
    if (!stop_set.count(t)) alpha_set.insert(t);
  }
  alphabet.assign(alpha_set.begin(), alpha_set.end());
  const int n_paths = pick(1, 24);
  const bool explicit_labels = pick(0, 1) == 1;
  for (int i = 0; i < n_paths; ++i) {
    const int len = alphabet.empty() ? 0 : pick(0, 6);
    std::vector<int32_t> path;
    for (int j = 0; j < len; ++j) path.push_back(alphabet[pick(0, int32_t(alphabet.size()) - 1)]);
    if (i > 0 && pick(0, 5) == 0) {  // a duplicate or a prefix of an earlier path
      const size_t src = pick(0, i - 1);
      path.assign(r.tokens.begin() + r.offsets[src], r.tokens.begin() + r.offsets[src + 1]);
      if (!path.empty() && pick(0, 1)) path.resize(pick(0, int32_t(path.size())));
    }
    r.tokens.insert(r.tokens.end(), path.begin(), path.end());
    r.offsets.push_back(r.tokens.size());
    const int64_t label = explicit_labels ? pick(-3, 9) : i;
    if (explicit_labels) r.labels.push_back(label);
    r.model.seqs.insert(path);
    r.model.labels[path].insert(label);
  }
  r.model.stops = r.stops;
  std::sort(r.model.stops.begin(), r.model.stops.end());
  r.model.stops.erase(std::unique(r.model.stops.begin(), r.model.stops.end()), r.model.stops.end());
  r.model.vocab = vocab;
  return r;
}

// Expected bitmask row (words entries) for an allowed set.
inline std::vector<int32_t> expected_row(const std::vector<int32_t> &allowed, size_t words) {
  std::vector<uint32_t> row(words, 0);
  for (int32_t t : allowed) row[size_t(t) / 32] |= uint32_t{1} << (t % 32);
  return {row.begin(), row.end()};
}

}  // namespace oracle
