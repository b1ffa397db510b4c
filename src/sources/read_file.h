// Reads a whole file into memory with zeroed spare bytes after its end (the
// padding simdjson reads past the input).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace treemask {

struct FileBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  size_t capacity = 0;  // size + padding
  std::string_view view() const { return {data.get(), size}; }
};

// Errors name the path: kIo for a missing or unreadable file or a directory.
Result<FileBytes> read_file(const std::string &path, size_t padding = 64);

}  // namespace treemask
