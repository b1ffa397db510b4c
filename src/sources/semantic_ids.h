// Semantic-ID catalogues as generative-retrieval projects publish them
// (MiniOneRec, LETTER): {"<item>": ["<a_236>", "<b_231>", "<c_226>"], ...},
// one residual-quantisation code per level. Such models add the codebook
// tokens to the vocabulary; code "<L_N>" (L = 'a' + level) becomes token id
// base + level * codebook_size + N.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace treemask {

struct SemanticIdCatalogue {
  std::vector<std::string> items;  // in file order
  std::vector<int32_t> tokens;     // item i: tokens[offsets[i] .. offsets[i + 1])
  std::vector<size_t> offsets{0};
};

// Errors name the item and the code. kUnsupported without simdjson.
Result<SemanticIdCatalogue> parse_semantic_ids(std::string_view json, int32_t base,
                                               int32_t codebook_size);

}  // namespace treemask
