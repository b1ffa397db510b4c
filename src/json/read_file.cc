// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "json/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace treemask {

Result<FileBytes> read_file(const std::string &path, size_t padding) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(Code::kIo, "cannot open \"", path, "\": ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return error(Code::kIo, "cannot stat \"", path, "\": ", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return error(Code::kIo, "\"", path, "\" is not a regular file");
  FileBytes out;
  out.capacity = static_cast<size_t>(st.st_size) + padding;
  out.data.reset(new (std::nothrow) char[out.capacity]);
  if (!out.data) {
    return error(Code::kOutOfMemory, "cannot allocate ", out.capacity, " bytes for \"", path, "\"");
  }
  while (out.size < static_cast<size_t>(st.st_size)) {
    const ssize_t r =
        read(fd, out.data.get() + out.size, static_cast<size_t>(st.st_size) - out.size);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return error(Code::kIo, "cannot read \"", path, "\": ", std::strerror(errno));
    if (r == 0) break;  // the file shrank while we read it
    out.size += static_cast<size_t>(r);
  }
  std::memset(out.data.get() + out.size, 0, out.capacity - out.size);
  return out;
}

}  // namespace treemask
