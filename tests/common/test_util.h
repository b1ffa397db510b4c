// Small helpers shared by the C++ test programs.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "treemask/treemask.h"

namespace testutil {

// For calls a benchmark or a fixture does not expect to fail: a failure ends
// the program with the library's message (every status is checked:
// TREEMASK_NODISCARD).
#define TM_MUST(call) ::testutil::must((call), #call)
inline void must(treemask_status status, const char *call) {
  if (status != TREEMASK_OK) {
    std::fprintf(stderr, "%s failed: %s\n", call, treemask_last_error());
    std::abort();
  }
}

// Iteration multiplier: TREEMASK_TEST_SCALE in the environment (e.g. 0.1 under
// sanitizers, 10 for a long soak). Defaults to 1.
inline double scale() {
  const char *s = std::getenv("TREEMASK_TEST_SCALE");
  if (!s || !*s) return 1.0;
  const double v = std::atof(s);
  return v > 0 ? v : 1.0;
}

inline int scaled(int n) {
  const double v = n * scale();
  return v < 1 ? 1 : static_cast<int>(v);
}

// Owning wrappers so tests never leak on an ASSERT failure.
struct TrieHandle {
  treemask_trie *p = nullptr;
  TrieHandle() = default;
  explicit TrieHandle(treemask_trie *t) : p(t) {}
  TrieHandle(const TrieHandle &) = delete;
  TrieHandle &operator=(const TrieHandle &) = delete;
  ~TrieHandle() { treemask_trie_free(p); }
};

struct VocabHandle {
  treemask_vocab *p = nullptr;
  VocabHandle() = default;
  VocabHandle(const VocabHandle &) = delete;
  VocabHandle &operator=(const VocabHandle &) = delete;
  ~VocabHandle() { treemask_vocab_free(p); }
};

struct MatcherHandle {
  treemask_matcher *p = nullptr;
  MatcherHandle() = default;
  explicit MatcherHandle(treemask_matcher *m) : p(m) {}
  MatcherHandle(MatcherHandle &&o) noexcept : p(o.p) { o.p = nullptr; }
  MatcherHandle &operator=(MatcherHandle &&o) noexcept {
    if (this != &o) {
      treemask_matcher_free(p);
      p = o.p;
      o.p = nullptr;
    }
    return *this;
  }
  MatcherHandle(const MatcherHandle &) = delete;
  ~MatcherHandle() { treemask_matcher_free(p); }
};

// Trie options with vocab_size and stop tokens; the options point into
// stops, which must outlive them.
inline treemask_trie_options trie_options(int32_t vocab, const std::vector<int32_t> &stops = {}) {
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = vocab;
  opts.stop_tokens = stops.data();
  opts.n_stop_tokens = stops.size();
  return opts;
}

// RTP-LLM loader options for one call: Rtp(225, 2, "_").get() points to
// options that live until the end of the full expression.
struct Rtp {
  treemask_rtp_options value;
  explicit Rtp(int32_t start = -1, int32_t end = -1, const char *sep = nullptr, bool compat = false,
               bool defaults = false) {
    treemask_rtp_options_init(&value);
    value.start_token_id = start;
    value.end_token_id = end;
    value.sep = sep;
    value.rtp_llm_compat = compat;
    value.rtp_llm_defaults = defaults;
  }
  const treemask_rtp_options *get() const { return &value; }
};

// Builds a trie from a list of paths; returns the status.
inline treemask_status make_trie(const std::vector<std::vector<int32_t>> &paths, int32_t vocab,
                                 const std::vector<int32_t> &stops, TrieHandle &out,
                                 const std::vector<int64_t> *labels = nullptr) {
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (const auto &p : paths) {
    tokens.insert(tokens.end(), p.begin(), p.end());
    offsets.push_back(tokens.size());
  }
  const treemask_trie_options opts = trie_options(vocab, stops);
  treemask_trie *t = nullptr;
  const treemask_status s = treemask_trie_from_paths(
      &opts, tokens.data(), offsets.data(), paths.size(), labels ? labels->data() : nullptr, &t);
  out.p = t;
  return s;
}

inline std::vector<int32_t> next_tokens(const treemask_matcher *m) {
  std::vector<int32_t> out(treemask_matcher_next_tokens(m, nullptr, 0));
  treemask_matcher_next_tokens(m, out.data(), out.size());
  return out;
}

inline std::vector<int32_t> forced_tokens(const treemask_matcher *m) {
  std::vector<int32_t> out(treemask_matcher_forced_tokens(m, nullptr, 0));
  treemask_matcher_forced_tokens(m, out.data(), out.size());
  return out;
}

inline std::vector<int64_t> label_ids(const treemask_matcher *m) {
  std::vector<int64_t> out(treemask_matcher_label_ids(m, nullptr, 0));
  treemask_matcher_label_ids(m, out.data(), out.size());
  return out;
}

// Allowed tokens decoded from a bitmask row.
inline std::vector<int32_t> decode_row(const int32_t *row, size_t words) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < words; ++w) {
    for (int b = 0; b < 32; ++b) {
      if ((static_cast<uint32_t>(row[w]) >> b) & 1u)
        out.push_back(static_cast<int32_t>(w * 32 + b));
    }
  }
  return out;
}

// Random token paths for property tests: depth 1..max_depth, tokens from a
// small alphabet (never the stop token) so that prefixes are shared; some
// paths also appear without their last token (terminal nodes with
// children), and one time in five the root's children are the whole
// vocabulary. vocab >= 2.
inline std::vector<std::vector<int32_t>> random_paths(std::mt19937_64 &rng, int32_t vocab,
                                                      int32_t stop, size_t max_depth, size_t n) {
  std::vector<std::vector<int32_t>> out;
  // At least two symbols, so that one besides the stop token exists.
  const int32_t alphabet = 2 + static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 1));
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> p(1 + rng() % max_depth);
    for (auto &t : p) {
      do {
        t = static_cast<int32_t>(rng() % static_cast<uint64_t>(alphabet));
      } while (t == stop);
    }
    out.push_back(p);
    if (rng() % 4 == 0 && p.size() > 1) out.emplace_back(p.begin(), p.end() - 1);
  }
  if (rng() % 5 == 0) {  // a node whose children are the whole vocabulary
    for (int32_t t = 0; t < vocab; ++t) {
      if (t != stop) out.push_back({t});
    }
  }
  return out;
}

}  // namespace testutil
