// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "core/open_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace treemask {

Result<int> open_regular_file(const std::string &path, size_t *size) {
  struct stat st;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int saved = errno;
    // A socket cannot be opened at all (ENXIO): name what it is instead.
    if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
      return error(Code::kIo, "cannot open \"", path, "\": ", std::strerror(saved));
    }
  } else if (fstat(fd, &st) != 0) {
    const int saved = errno;
    close(fd);
    return error(Code::kIo, "cannot stat \"", path, "\": ", std::strerror(saved));
  }
  if (!S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    const char *kind = S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a regular file";
    return error(Code::kIo, "\"", path, "\" is ", kind, ", not a regular file");
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int saved = errno;
    close(fd);
    return error(Code::kIo, "cannot read \"", path, "\": ", std::strerror(saved));
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}

Status check_output_path(const std::string &path) {
  if (path.empty()) return error(Code::kInvalidArgument, "the output path is empty");
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && path.back() != '/') return Status::Ok();
    if (errno == ENOENT) return error(Code::kIo, "output \"", path, "\" names a directory");
    return error(Code::kIo, "cannot use \"", path, "\" as the output: ", std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return error(Code::kIo, "output \"", path, "\" is a directory");
  if (!S_ISREG(st.st_mode)) {
    return error(Code::kIo, "output \"", path,
                 "\" exists and is not a regular file (a device, FIFO or socket); "
                 "refusing to replace it");
  }
  return Status::Ok();
}

}  // namespace treemask
