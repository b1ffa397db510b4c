// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/trie_rules.h"

#include "rules/mode_index.h"

namespace treemask {

Status check_supported(const Trie &trie, TrieFeature feature, std::string_view what) {
  const TrieKind *kind = trie.kind();
  if (!kind) return Status::Ok();  // a token-path trie supports everything
  const char *why = kind->unsupported(feature);
  if (!why) return Status::Ok();
  return error(Code::kUnsupported, what, " is not supported with a ", kind->name(), ": ", why);
}

TrieRules::TrieRules(const Trie &trie, std::span<const int32_t> stops)
    : plain_(plain_rules(trie, stops)), kind_(trie.kind()) {}

std::string TrieRules::describe(const Trie &trie, uint32_t node) const {
  if (kind_) return kind_->describe(node);
  std::string out = "path=[";
  const std::vector<int32_t> path = path_to(trie, node);
  for (size_t i = 0; i < path.size(); ++i) out += cat(i ? " " : "", path[i]);
  return out + "]";
}

}  // namespace treemask
