// Think mode: an unconstrained stretch that ends when a token sequence (e.g.
// "</think>\n") appears. The end sequence is found with a KMP automaton over
// token ids, so a sequence split across steps, or a partial match that fails
// and restarts inside itself, is followed exactly, one O(1) amortised step per
// token.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace treemask {

class EndSequenceMatcher {
 public:
  EndSequenceMatcher() = default;
  explicit EndSequenceMatcher(std::vector<int32_t> sequence) : seq_(std::move(sequence)) {
    // fallback_[i]: the longest proper prefix of seq_[0..i] that is also its suffix.
    fallback_.assign(seq_.size(), 0);
    uint32_t k = 0;
    for (size_t i = 1; i < seq_.size(); ++i) {
      while (k > 0 && seq_[i] != seq_[k]) k = fallback_[k - 1];
      if (seq_[i] == seq_[k]) ++k;
      fallback_[i] = k;
    }
  }

  const std::vector<int32_t> &sequence() const { return seq_; }
  uint32_t size() const { return static_cast<uint32_t>(seq_.size()); }
  bool empty() const { return seq_.empty(); }

  // The longest prefix of the sequence that ends the text, after the text
  // that matched `matched` (< size()) tokens is extended by `token`. size()
  // means the whole sequence has just appeared.
  uint32_t advance(uint32_t matched, int32_t token) const {
    while (matched > 0 && seq_[matched] != token) matched = fallback_[matched - 1];
    return seq_[matched] == token ? matched + 1 : 0;
  }

 private:
  std::vector<int32_t> seq_;
  std::vector<uint32_t> fallback_;
};

}  // namespace treemask
