// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <memory>

#include "sources/json_util.h"

namespace treemask::json {

namespace {

using StringBuffer = std::unique_ptr<uint8_t[]> od::parser::*;

// Reads ondemand::parser's private string buffer pointer. An explicit
// instantiation may name private members ([temp.spec.general]); the friend
// it defines is used in this file only, which holds the one instantiation.
template <StringBuffer kMember>
struct StringBufferOf {
  friend const uint8_t *string_buffer_of(const od::parser &p) { return (p.*kMember).get(); }
};
template struct StringBufferOf<&od::parser::string_buf>;
const uint8_t *string_buffer_of(const od::parser &p);

}  // namespace

Status reserve_parser(od::parser &parser, size_t len) {
  if (parser.capacity() >= len && string_buffer_of(parser)) return Status::Ok();
  if (const auto e = parser.allocate(len)) {
    if (e == simdjson::MEMALLOC) {
      return error(Code::kOutOfMemory, "out of memory allocating the JSON parser for ", len,
                   " bytes");
    }
    return error(Code::kParse, "cannot parse ", len,
                 " bytes of JSON: ", simdjson::error_message(e));
  }
  if (!string_buffer_of(parser)) {
    return error(Code::kOutOfMemory, "out of memory allocating the JSON string buffer for ", len,
                 " bytes");
  }
  return Status::Ok();
}

}  // namespace treemask::json
