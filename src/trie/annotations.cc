// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "trie/annotations.h"

#include <algorithm>
#include <cstring>

namespace treemask {

Result<std::shared_ptr<const TrieAnnotations>> TrieAnnotations::make(
    std::vector<std::pair<std::string, std::string>> metadata, uint64_t n_warnings) {
  std::sort(metadata.begin(), metadata.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  size_t bytes = 0;
  for (size_t i = 0; i < metadata.size(); ++i) {
    const auto &[key, value] = metadata[i];
    if (key.empty()) return error(Code::kInvalidArgument, "metadata keys must not be empty");
    if (i > 0 && metadata[i - 1].first == key) {
      return error(Code::kInvalidArgument, "duplicate metadata key \"", key, "\"");
    }
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return error(Code::kInvalidArgument, "metadata \"", key, "\" contains a NUL byte");
    }
    if (key.size() > 0xFFFFFFFFu || value.size() > 0xFFFFFFFFu) {
      return error(Code::kOutOfRange, "metadata \"", key, "\" is longer than 4 GiB");
    }
    bytes += key.size() + value.size() + 2;
  }
  auto out = std::make_shared<TrieAnnotations>();
  out->n_warnings_ = n_warnings;
  out->owned_.reset(new char[bytes + 1]);
  char *p = out->owned_.get();
  auto copy = [&p](const std::string &s) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    std::string_view view(p, s.size());
    p += s.size() + 1;
    return view;
  };
  for (const auto &[key, value] : metadata) {
    const std::string_view k = copy(key);
    out->entries_.push_back({k, copy(value)});
  }
  return std::shared_ptr<const TrieAnnotations>(std::move(out));
}

std::shared_ptr<const TrieAnnotations> TrieAnnotations::borrow(std::vector<Entry> entries) {
  auto out = std::make_shared<TrieAnnotations>();
  out->entries_ = std::move(entries);
  return out;
}

const TrieAnnotations::Entry *TrieAnnotations::find(std::string_view key) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                                   [](const Entry &e, std::string_view k) { return e.key < k; });
  return it != entries_.end() && it->key == key ? &*it : nullptr;
}

}  // namespace treemask
