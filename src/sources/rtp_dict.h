// The part of the RTP-LLM loaders that does not depend on the syntax: key
// parsing, id checks, and assembling the trie. A parser calls begin_key, then
// add_id for each id of the key's list, then end_key; finally build().
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sources/diagnostics.h"
#include "sources/rtp.h"
#include "trie/trie.h"

namespace treemask {

struct RtpConfig {
  int32_t start_token_id = 0;
  int32_t end_token_id = 0;
  std::string sep;
  bool compat = false;  // RtpOptions::compat
};

// Resolves start/end/sep from what the file said (nullopt: absent) and the
// options; errors name the missing or conflicting field.
Result<RtpConfig> resolve_rtp_config(const RtpOptions &opts, std::optional<int64_t> file_start,
                                     std::optional<int64_t> file_end,
                                     std::optional<std::string_view> file_sep);

class RtpDictCollector {
 public:
  // Validates the config against opts.build (vocab_size, stop tokens).
  static Result<RtpDictCollector> create(const RtpConfig &config, const TrieBuildOptions &build,
                                         Diagnostics &diag);

  // `where` prefixes every message about this entry ("line 3, " or "").
  // Returns a non-OK status to stop; *accepted says whether ids may follow
  // (a bad key is skipped when the diagnostics keep going).
  Status begin_key(std::string_view key, std::string_view where, bool *accepted);
  // id as parsed (any int64); checks range and stop tokens.
  Status add_id(int64_t id);
  // A list element that is not an integer (text as written).
  Status add_non_integer(std::string_view text);
  // A list element that is an integer outside int32 (text as written).
  Status add_outside_int32(std::string_view text);
  void end_key();

  // What messages about the current entry start with: `where` + key "...".
  std::string context() const;

  Result<Ref<Trie>> build();

 private:
  RtpDictCollector(const RtpConfig &config, const TrieBuildOptions &build, Diagnostics &diag)
      : config_(config), build_(build), diag_(&diag) {}

  std::string key_text(uint32_t entry) const;
  std::span<const int32_t> key_of(uint32_t entry) const {
    return {key_tokens_.data() + key_offsets_[entry],
            key_offsets_[entry + 1] - key_offsets_[entry]};
  }
  std::span<const int32_t> ids_of(uint32_t entry) const {
    return {ids_.data() + id_offsets_[entry], id_offsets_[entry + 1] - id_offsets_[entry]};
  }

  RtpConfig config_;
  TrieBuildOptions build_;
  Diagnostics *diag_;
  std::string start_text_;

  // Entries in input order: the generated ids of each key (start stripped),
  // its sorted distinct ids without end_token_id, and whether it is terminal.
  std::vector<int32_t> key_tokens_;
  std::vector<uint64_t> key_offsets_{0};
  std::vector<int32_t> ids_;
  std::vector<uint64_t> id_offsets_{0};
  std::vector<uint8_t> terminal_;

  // The entry being read.
  bool in_entry_ = false;
  bool saw_end_ = false;
  std::string where_;
  std::string key_;
};

}  // namespace treemask
