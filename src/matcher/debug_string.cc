// A one-line description of a matcher for logs and bug reports (xgrammar's
// GrammarMatcher._debug_print_internal_state has the same purpose).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <string>
#include <vector>

#include "matcher/matcher.h"

namespace treemask {

namespace {

const char *phase_name(Phase phase) {
  switch (phase) {
    case Phase::kActive: return "label";
    case Phase::kClosed: return "closed";
    case Phase::kTerminated: return "terminated";
    case Phase::kFailed: return "failed";
    case Phase::kThinking: return "thinking";
    case Phase::kSeparator: return "separator";
  }
  return "unknown";
}

template <class T>
std::string list(const std::vector<T> &items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += cat(i ? " " : "", items[i]);
  return out + "]";
}

}  // namespace

std::string Matcher::debug_string() const {
  const MatcherState &s = state_.at;
  std::string out = cat("phase=", phase_name(s.phase));
  if (s.node != kStateFailed && s.phase != Phase::kThinking) {
    out += cat(" node=", s.node, " ", rules_.describe(*trie_, s.node));
  }
  if (s.phase == Phase::kThinking) {
    out += cat(" think_tokens=", s.think_tokens, " end_matched=", s.step, "/",
               modes()->think_end.size());
  }
  if (s.phase == Phase::kSeparator) {
    out += cat(" separator_matched=", s.step, "/", modes()->separator.size());
  }
  if (s.phase == Phase::kClosed || s.phase == Phase::kFailed) {
    out += cat(" rejected_token=", failed_token_);
  }
  out += cat(" allowed=", next_tokens(nullptr, 0), " can_terminate=", can_terminate(),
             " accepted=", s.accepted);
  std::vector<int64_t> labels(produced_labels(nullptr, 0));
  produced_labels(labels.data(), labels.size());
  if (!labels.empty() || (modes() && modes()->multi_label())) out += " labels=" + list(labels);
  if (state_.budget_end >= 0) out += cat(" remaining_tokens=", remaining_tokens());
  if (modes_.filter()) out += " label_filter=yes";
  out += cat(" rollback_depth=", rollback_depth());
  return out;
}

}  // namespace treemask
