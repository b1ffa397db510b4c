// RTP-LLM tree-decode dictionaries ("prefix_dict"), read exactly as RTP-LLM
// masks with them:
//   - a key is start_token_id followed by the generated ids, joined by sep;
//     the root is the key "<start_token_id>" alone;
//   - the allowed next tokens at a key are its list; a key that is missing or
//     has an empty list allows only end_token_id (RTP-LLM's fallback), so it
//     becomes a terminal leaf;
//   - end_token_id inside a list makes the node terminal (it may also have
//     children); duplicate ids in a list merge.
// Keys are parsed into token ids as they are read (no map of key strings),
// then the trie is assembled level by level straight into its BFS layout.
// Bad keys and ids are errors that name the key; unknown top-level fields and
// keys the root cannot reach are warnings.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "sources/diagnostics.h"
#include "trie/trie.h"

namespace treemask {

inline constexpr int32_t kRtpDefaultStartToken = 225;
inline constexpr int32_t kRtpDefaultEndToken = 2;
inline constexpr std::string_view kRtpDefaultSep = "_";

struct RtpOptions {
  // vocab_size and cache budget; no stop tokens means {end_token_id}.
  TrieBuildOptions build;
  // The JSON form takes start/end/sep from the file. These apply when the
  // file lacks a field; with values_must_match a file value that differs is
  // an error (command-line flags), otherwise the file wins (defaults). The
  // TSV form has no header, so start and end are required here.
  std::optional<int32_t> start_token_id;
  std::optional<int32_t> end_token_id;
  std::optional<std::string> sep;  // "_" when neither file nor options say
  bool values_must_match = false;
  // RTP-LLM compatibility: load what RTP-LLM's own loader loads. Negative
  // and non-int32 list ids are skipped, keys that do not start with
  // start_token_id + sep are ignored, and sep "-" is allowed; each is a
  // counted warning naming the key.
  bool compat = false;
  ProgressFn progress;
};

// JSON: {"start_token_id": S, "end_token_id": E, "sep": "_", "prefix_dict": {...}}.
// Malformed JSON is a kParse error with the byte offset. Without simdjson
// (built with -Djson=disabled) these return kUnsupported.
Result<Ref<Trie>> load_rtp_json(const RtpOptions &opts, std::string_view json, Diagnostics &diag);
Result<Ref<Trie>> load_rtp_json_file(const RtpOptions &opts, const std::string &path,
                                     Diagnostics &diag);

// RTP-LLM's text form: one "key<TAB>id\x02id\x02..." per line (LF or CRLF,
// blank lines skipped). Errors name the line and the key.
Result<Ref<Trie>> load_rtp_tsv(const RtpOptions &opts, std::string_view data, Diagnostics &diag);

// Token paths, one JSON value per line: [t0, t1, ...] or
// {"tokens": [...], "label": L}. Without a label, path i (counting paths, not
// lines; blank lines are skipped) carries label i. opts must name stop tokens.
Result<Ref<Trie>> load_jsonl_paths(const TrieBuildOptions &opts, std::string_view data,
                                   Diagnostics &diag, const ProgressFn &progress = {});

}  // namespace treemask
