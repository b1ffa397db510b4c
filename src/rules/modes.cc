// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/modes.h"

#include <algorithm>
#include <string>

#include "rules/mode_index.h"
#include "rules/trie_rules.h"

namespace treemask {

namespace {

std::string path_text(const Trie &trie, uint32_t node) {
  std::string out = "[";
  const std::vector<int32_t> path = path_to(trie, node);
  for (size_t i = 0; i < path.size(); ++i) out += cat(i ? " " : "", path[i]);
  return out + "]";
}

// A node reached through an edge labelled token, for messages; 0 if none.
uint32_t node_after_token(const Trie &trie, int32_t token, bool from_terminal_only) {
  for (uint64_t n = 1; n < trie.n_nodes(); ++n) {
    const auto child = static_cast<uint32_t>(n);
    if (trie.token_into(child) != token) continue;
    if (!from_terminal_only || trie.is_terminal(parent_of(trie, child))) return child;
  }
  return 0;
}

Status check_tokens(const char *name, std::span<const int32_t> tokens, int32_t vocab,
                    std::span<const int32_t> stops) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab) {
      return error(Code::kOutOfRange, name, "[", i, "] = ", t,
                   " is out of range [0, vocab_size=", vocab, ")");
    }
    if (std::binary_search(stops.begin(), stops.end(), t)) {
      return error(Code::kInvalidArgument, name, "[", i, "] = ", t,
                   " is a stop token; a stop token may only end a sequence");
    }
  }
  return Status::Ok();
}

bool any_mode(const ModeOptions &o) {
  return !o.label_separator.empty() || o.max_labels != 0 || o.leaves_only ||
         !o.think_end_tokens.empty() || o.think_begin_token != -1 || o.start_in_thinking ||
         o.max_thinking_tokens != -1 || o.max_new_tokens != -1 || !o.override_stop_tokens.empty() ||
         o.think_force_end_after_prefix;
}

Status resolve_stops(const Trie &trie, const ModeOptions &o, ModeConfig &cfg) {
  if (o.override_stop_tokens.empty()) return Status::Ok();
  const int32_t vocab = trie.vocab_size();
  const bool has_token_paths = !trie.kind();
  const TokenIndex *tokens = has_token_paths ? &token_index(trie) : nullptr;
  for (size_t i = 0; i < o.override_stop_tokens.size(); ++i) {
    const int32_t t = o.override_stop_tokens[i];
    if (t < 0 || t >= vocab) {
      return error(Code::kOutOfRange, "override_stop_tokens[", i, "] = ", t,
                   " is out of range [0, vocab_size=", vocab, ")");
    }
    // A string set's stop token is only ever a stop token, whatever its
    // bytes: only token paths can hold one inside.
    if (has_token_paths && TokenIndex::test(tokens->on_edge, t)) {
      return error(Code::kInvalidArgument, "override_stop_tokens[", i, "] = ", t,
                   " occurs inside a path (it ends the path ",
                   path_text(trie, node_after_token(trie, t, false)),
                   "); a stop token may only end a sequence");
    }
  }
  cfg.stops = o.override_stop_tokens;
  std::sort(cfg.stops.begin(), cfg.stops.end());
  cfg.stops.erase(std::unique(cfg.stops.begin(), cfg.stops.end()), cfg.stops.end());
  return Status::Ok();
}

Status resolve_multi_label(const Trie &trie, const ModeOptions &o, std::span<const int32_t> stops,
                           ModeConfig &cfg) {
  TM_TRY(check_tokens("label_separator", o.label_separator, trie.vocab_size(), stops));
  if (o.label_separator.empty()) {
    if (o.max_labels != 0) {
      return error(Code::kInvalidArgument, "max_labels = ", o.max_labels,
                   " needs a label_separator (multi-label mode)");
    }
    return Status::Ok();
  }
  const TokenIndex &tokens = token_index(trie);
  const int32_t first = o.label_separator[0];
  if (TokenIndex::test(tokens.after_terminal, first)) {
    const uint32_t child = node_after_token(trie, first, true);
    return error(Code::kInvalidArgument, "label_separator[0] = ", first,
                 " is also a child token of a terminal node (the label ",
                 path_text(trie, parent_of(trie, child)),
                 " continues with it), so after that label it would be ambiguous");
  }
  cfg.separator = o.label_separator;
  cfg.max_labels = o.max_labels;
  return Status::Ok();
}

Status resolve_think(const Trie &trie, const ModeOptions &o, std::span<const int32_t> stops,
                     ModeConfig &cfg) {
  const int32_t vocab = trie.vocab_size();
  if (o.max_thinking_tokens < -1) {
    return error(Code::kInvalidArgument, "max_thinking_tokens = ", o.max_thinking_tokens,
                 " (expected -1 = unlimited, or >= 0)");
  }
  if (o.think_end_tokens.empty()) {
    if (o.think_begin_token != -1 || o.start_in_thinking || o.max_thinking_tokens != -1 ||
        o.think_force_end_after_prefix) {
      return error(Code::kInvalidArgument,
                   "think_begin_token, start_in_thinking, max_thinking_tokens and "
                   "think_force_end_after_prefix need think_end_tokens (think mode)");
    }
    return Status::Ok();
  }
  TM_TRY(check_tokens("think_end_tokens", o.think_end_tokens, vocab, stops));
  const int32_t begin = o.think_begin_token;
  if (begin != -1) {
    TM_TRY(check_tokens("think_begin_token", {&begin, 1}, vocab, stops));
    const auto &end = o.think_end_tokens;
    const auto it = std::find(end.begin(), end.end(), begin);
    if (it != end.end()) {
      return error(Code::kInvalidArgument, "think_begin_token = ", begin,
                   " occurs in think_end_tokens at position ", it - end.begin(),
                   "; it is not allowed while thinking, so thinking could never end");
    }
    if (!cfg.separator.empty() && cfg.separator[0] == begin) {
      return error(Code::kInvalidArgument, "think_begin_token = ", begin,
                   " is also label_separator[0]");
    }
    if (!o.start_in_thinking && Trie::find_child(trie.children(0), begin) >= 0) {
      return error(Code::kInvalidArgument, "think_begin_token = ", begin,
                   " is also a child token of the root, so the first token would be ambiguous");
    }
  } else if (!o.start_in_thinking) {
    return error(Code::kInvalidArgument,
                 "think_end_tokens is set but thinking can never start: set start_in_thinking, "
                 "or a think_begin_token the sequence may open with");
  }
  cfg.think_end = EndSequenceMatcher(o.think_end_tokens);
  cfg.think_begin = begin;
  cfg.start_in_thinking = o.start_in_thinking;
  cfg.max_thinking_tokens = o.max_thinking_tokens;
  cfg.think_force_end_after_prefix = o.think_force_end_after_prefix;
  return Status::Ok();
}

// The first mode of o that changes what a step allows (every mode but the
// stop-token override), for a kind of trie without them; null if none.
const char *step_changing_mode(const ModeOptions &o) {
  return !o.label_separator.empty() || o.max_labels != 0 ? "multi-label mode"
         : o.leaves_only                                 ? "leaves_only"
         : !o.think_end_tokens.empty() || o.think_begin_token != -1 || o.start_in_thinking ||
                 o.max_thinking_tokens != -1 || o.think_force_end_after_prefix
             ? "think mode"
         : o.max_new_tokens != -1 ? "a length budget (max_new_tokens)"
                                  : nullptr;
}

}  // namespace

Result<std::shared_ptr<const ModeConfig>> make_mode_config(const Trie &trie, const ModeOptions &o) {
  if (!any_mode(o)) return std::shared_ptr<const ModeConfig>();
  if (const char *mode = step_changing_mode(o)) {
    TM_TRY(check_supported(trie, TrieFeature::kDecodingModes, mode));
  }
  if (o.max_new_tokens < -1) {
    return error(Code::kInvalidArgument, "max_new_tokens = ", o.max_new_tokens,
                 " (expected -1 = no budget, or >= 0)");
  }
  auto cfg = std::make_shared<ModeConfig>();
  TM_TRY(resolve_stops(trie, o, *cfg));
  const std::span<const int32_t> stops =
      cfg->stops.empty() ? trie.stop_tokens() : std::span<const int32_t>(cfg->stops);
  TM_TRY(resolve_multi_label(trie, o, stops, *cfg));
  TM_TRY(resolve_think(trie, o, stops, *cfg));
  cfg->leaves_only = o.leaves_only;
  cfg->max_new_tokens = o.max_new_tokens;
  return std::shared_ptr<const ModeConfig>(std::move(cfg));
}

}  // namespace treemask
