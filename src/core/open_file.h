// Opening an input file for reading without blocking on what is not a
// regular file.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "core/status.h"

namespace treemask {

// Opens path read-only and returns its descriptor (the caller closes it).
// A FIFO, socket, device or directory is a kIo error naming the path: the
// file is opened with O_NONBLOCK (a FIFO without a writer would otherwise
// block open() forever) and checked with fstat before the flag is cleared.
// *size receives the file's size.
Result<int> open_regular_file(const std::string &path, size_t *size);

// Whether path may be replaced by a new regular file: it is not empty, does
// not end in '/', and names nothing yet or a regular file (replacing a
// device node or a FIFO with a regular file would be data loss; a
// directory cannot be replaced). kInvalidArgument / kIo naming the path.
Status check_output_path(const std::string &path);

}  // namespace treemask
