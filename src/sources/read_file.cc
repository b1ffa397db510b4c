// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "sources/read_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/open_file.h"

namespace treemask {

Result<FileBytes> read_file(const std::string &path, size_t padding) {
  size_t file_size = 0;
  TM_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &file_size));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  FileBytes out;
  out.capacity = file_size + padding;
  out.data.reset(new (std::nothrow) char[out.capacity]);
  if (!out.data) {
    return error(Code::kOutOfMemory, "cannot allocate ", out.capacity, " bytes for \"", path, "\"");
  }
  while (out.size < file_size) {
    const ssize_t r = read(fd, out.data.get() + out.size, file_size - out.size);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return error(Code::kIo, "cannot read \"", path, "\": ", std::strerror(errno));
    if (r == 0) break;  // the file shrank while we read it
    out.size += static_cast<size_t>(r);
  }
  std::memset(out.data.get() + out.size, 0, out.capacity - out.size);
  return out;
}

}  // namespace treemask
