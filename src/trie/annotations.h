// What a trie carries besides its arrays: metadata strings (a tokenizer
// fingerprint, label names, where it came from) that travel with it into a
// .tmtrie file, and the number of problems its loader tolerated (unknown
// fields, unreachable keys) so callers can see that something was ignored.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace treemask {

class TrieAnnotations {
 public:
  // Both strings are NUL-terminated (data()[size()] == '\0'), so the C API
  // can hand them out as C strings.
  struct Entry {
    std::string_view key;
    std::string_view value;
  };

  // Owns copies of the strings. Entries are sorted by key; a duplicate or
  // empty key, or a NUL byte inside a string, is an error naming the key.
  static Result<std::shared_ptr<const TrieAnnotations>> make(
      std::vector<std::pair<std::string, std::string>> metadata, uint64_t n_warnings);

  // Views into memory the trie's storage owns (a mapped file), sorted by key.
  static std::shared_ptr<const TrieAnnotations> borrow(std::vector<Entry> entries);

  std::span<const Entry> metadata() const { return entries_; }
  // Binary search; nullptr when absent.
  const Entry *find(std::string_view key) const;
  uint64_t n_warnings() const { return n_warnings_; }

 private:
  std::vector<Entry> entries_;
  std::unique_ptr<char[]> owned_;  // a unique_ptr, not a string: views survive moves
  uint64_t n_warnings_ = 0;
};

}  // namespace treemask
