// simdjson helpers shared by the JSON loaders (included only by the JSON
// sources of src/sources: rtp_json.cc, jsonl.cc, parser_memory.cc).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <simdjson.h>

#include <string_view>

#include "core/status.h"

namespace treemask::json {

namespace od = simdjson::ondemand;

// Where the parser is in [base, base + size): a byte offset for messages.
inline uint64_t offset_of(od::document &doc, const char *base, size_t size) {
  const auto loc = doc.current_location();
  if (loc.error()) return size;
  const char *p = loc.value_unsafe();
  return p >= base && p <= base + size ? static_cast<uint64_t>(p - base) : size;
}

// A syntax error: the input is not valid JSON here.
inline bool is_syntax_error(simdjson::error_code e) {
  return e != simdjson::INCORRECT_TYPE && e != simdjson::NUMBER_OUT_OF_RANGE &&
         e != simdjson::NUMBER_ERROR;
}

// simdjson reports errors found while indexing the whole input (before any
// value is read) without a position; this finds one for the two common ones.
inline uint64_t indexing_error_offset(simdjson::error_code e, const char *buf, size_t len) {
  const auto *p = reinterpret_cast<const unsigned char *>(buf);
  if (e == simdjson::UNCLOSED_STRING) {
    bool in_string = false, escaped = false;
    size_t string_start = 0;
    for (size_t i = 0; i < len; ++i) {
      if (escaped) {
        escaped = false;
      } else if (in_string && p[i] == '\\') {
        escaped = true;
      } else if (p[i] == '"') {
        in_string = !in_string;
        string_start = i;
      }
    }
    return in_string ? string_start : len;
  }
  if (e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || e == simdjson::TAPE_ERROR) {
    // Content after the closing bracket of the top-level value, or none.
    int depth = 0;
    bool in_string = false, escaped = false, started = false;
    for (size_t i = 0; i < len; ++i) {
      const unsigned char c = p[i];
      if (in_string) {
        escaped = !escaped && c == '\\';
        if (c == '"' && !escaped) in_string = false;
        continue;
      }
      if (started && depth == 0 && c != ' ' && c != '\t' && c != '\n' && c != '\r') return i;
      if (c == '"') in_string = true;
      if (c == '{' || c == '[') ++depth, started = true;
      if (c == '}' || c == ']') --depth;
    }
    return len;
  }
  if (e == simdjson::UTF8_ERROR) {
    for (size_t i = 0; i < len;) {
      const unsigned char c = p[i];
      const size_t n = c < 0x80         ? 1
                       : (c >> 5) == 6  ? 2
                       : (c >> 4) == 14 ? 3
                       : (c >> 3) == 30 ? 4
                                        : 0;
      if (n == 0 || i + n > len) return i;
      for (size_t k = 1; k < n; ++k) {
        if ((p[i + k] & 0xC0) != 0x80) return i;
      }
      i += n;
    }
  }
  return 0;
}

// Also the one non-syntax failure simdjson reports the same way: it could
// not allocate its index (MEMALLOC), which is out of memory, not bad input.
// Sizes parser's buffers for a document of len bytes (nothing to do when
// they are large enough). Call it before every iterate(): simdjson 3.0.1's
// ondemand::parser::allocate() ignores a failed allocation of its string
// buffer and reports success, and the first string it then unescapes is
// written through a null pointer. This checks that buffer and reports out
// of memory instead (parser_memory.cc).
Status reserve_parser(od::parser &parser, size_t len);

inline Status syntax_error(simdjson::error_code e, uint64_t offset, std::string_view where = {}) {
  if (e == simdjson::MEMALLOC) {
    return error(Code::kOutOfMemory, "out of memory while indexing JSON", where);
  }
  return error(Code::kParse, "malformed JSON", where, " at byte ", offset, ": ",
               simdjson::error_message(e));
}

}  // namespace treemask::json
