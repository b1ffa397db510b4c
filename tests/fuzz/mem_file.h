// An input handed to the file-reading entry points without touching the
// disk: a memfd, named by its /proc/self/fd path.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "fuzz/fuzz_input.h"

namespace fuzz {

class MemFile {
 public:
  MemFile(const void *data, size_t size) : fd_(memfd_create("treemask-fuzz", MFD_CLOEXEC)) {
    FUZZ_CHECK(fd_ >= 0);
    const auto *p = static_cast<const char *>(data);
    while (size > 0) {
      const ssize_t n = write(fd_, p, size);
      FUZZ_CHECK(n > 0);
      p += n;
      size -= static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;

  const char *path() const { return path_.c_str(); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace fuzz
