// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "sources/semantic_ids.h"

#include <charconv>

#include "sources/json_util.h"

namespace treemask {

namespace {

namespace od = simdjson::ondemand;

// "<c_226>" at level 2 -> 226.
Result<int32_t> parse_code(std::string_view code, size_t level, int32_t codebook_size) {
  const char letter = static_cast<char>('a' + level);
  int32_t n = -1;
  if (code.size() < 5 || code[0] != '<' || code[1] != letter || code[2] != '_' ||
      code.back() != '>' ||
      std::from_chars(code.data() + 3, code.data() + code.size() - 1, n).ptr !=
          code.data() + code.size() - 1 ||
      n < 0 || n >= codebook_size) {
    return error(Code::kParse, "code \"", code, "\" at level ", level, " is not <", letter,
                 "_N> with N in [0, ", codebook_size, ")");
  }
  return n;
}

}  // namespace

Result<SemanticIdCatalogue> parse_semantic_ids(std::string_view json, int32_t base,
                                               int32_t codebook_size) {
  const simdjson::padded_string padded(json);
  if (padded.size() != json.size()) {
    return error(Code::kOutOfMemory, "out of memory copying ", json.size(), " bytes of JSON");
  }
  od::parser parser;
  od::document doc;
  TM_TRY(json::reserve_parser(parser, padded.size()));
  if (auto e = parser.iterate(padded).get(doc)) {
    return json::syntax_error(e, json::indexing_error_offset(e, padded.data(), padded.size()));
  }
  auto syntax = [&](simdjson::error_code e) {
    return json::syntax_error(e, json::offset_of(doc, padded.data(), padded.size()));
  };
  od::object items;
  if (auto e = doc.get_object().get(items)) return syntax(e);
  SemanticIdCatalogue out;
  for (auto field : items) {
    std::string_view item;
    if (auto e = field.unescaped_key().get(item)) return syntax(e);
    od::array codes;
    if (auto e = field.value().get_array().get(codes)) return syntax(e);
    size_t level = 0;
    for (auto element : codes) {
      std::string_view code;
      if (auto e = element.get_string().get(code)) return syntax(e);
      auto n = parse_code(code, level, codebook_size);
      if (!n.ok())
        return Status(n.status().code(), cat("item \"", item, "\": ", n.status().message()));
      out.tokens.push_back(base + static_cast<int32_t>(level) * codebook_size + n.value());
      ++level;
    }
    out.items.emplace_back(item);
    out.offsets.push_back(out.tokens.size());
  }
  if (out.items.empty()) return error(Code::kParse, "the catalogue has no items");
  return out;
}

}  // namespace treemask
