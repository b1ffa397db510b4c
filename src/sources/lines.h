// Line iteration shared by the line-based loaders (RTP-LLM TSV, JSONL).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "sources/diagnostics.h"

namespace treemask {

// Calls visit(line, line_number) for every line of data that is not blank,
// with a trailing '\r' removed (CRLF files), and reports progress now and
// then. Stops at the first error visit returns.
template <class Visit>
Status for_each_line(std::string_view data, const ProgressFn &progress, Visit &&visit) {
  constexpr uint64_t kProgressEveryLines = 1u << 16;
  uint64_t line_no = 0;
  for (size_t pos = 0; pos < data.size();) {
    size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos) eol = data.size();
    std::string_view line = data.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (progress && line_no % kProgressEveryLines == 0) progress(pos, data.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    TM_TRY(visit(line, line_no));
  }
  return Status::Ok();
}

}  // namespace treemask
