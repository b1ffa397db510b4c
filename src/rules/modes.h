// The decoding modes a matcher can be created with (treemask.h, section 5,
// is the contract): multi-label, leaves-only ends, think mode, a length
// budget and a stop-token override. ModeOptions is what a caller asks for;
// ModeConfig is the validated, immutable form that a matcher and all its
// clones share.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "rules/think.h"
#include "trie/trie.h"

namespace treemask {

struct ModeOptions {
  // Multi-label mode: after a complete label this sequence leads back to the
  // root for another label. Empty: one label per sequence.
  std::vector<int32_t> label_separator;
  size_t max_labels = 0;  // 0 = unlimited; needs label_separator
  // A sequence may end only at a terminal node without children.
  bool leaves_only = false;
  // Think mode: empty end sequence = off.
  std::vector<int32_t> think_end_tokens;
  int32_t think_begin_token = -1;
  bool start_in_thinking = false;
  int64_t max_thinking_tokens = -1;  // -1 = unlimited
  // A partial match of the end sequence forces its rest (RTP-LLM).
  bool think_force_end_after_prefix = false;
  // Length budget: tokens the engine will still generate from the start;
  // -1 = none.
  int64_t max_new_tokens = -1;
  // Replaces the trie's stop tokens for this matcher; empty = the trie's.
  std::vector<int32_t> override_stop_tokens;
};

struct ModeConfig {
  std::vector<int32_t> stops;  // ascending, distinct: the override, or empty
  std::vector<int32_t> separator;
  size_t max_labels = 0;
  bool leaves_only = false;
  EndSequenceMatcher think_end;
  int32_t think_begin = -1;
  bool start_in_thinking = false;
  int64_t max_thinking_tokens = -1;
  bool think_force_end_after_prefix = false;
  int64_t max_new_tokens = -1;

  bool multi_label() const { return !separator.empty(); }
  bool think() const { return !think_end.empty(); }
  // The label phase needs per-node ends and distances (mode_index.h).
  bool needs_label_view() const { return multi_label() || leaves_only; }
  // Anything but the stop-token override changes what fill and accept do.
  bool changes_steps() const { return needs_label_view() || think(); }
};

// Validates opts against the trie and the effective stop tokens. Every
// error names the option and the offending token or position. Returns
// nullptr when no mode is requested (a plain matcher).
Result<std::shared_ptr<const ModeConfig>> make_mode_config(const Trie &trie,
                                                           const ModeOptions &opts);

}  // namespace treemask
