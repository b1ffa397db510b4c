// XXH64 (xxHash, 64-bit, seed 0): the payload checksum of .tmtrie files. A
// published algorithm, so other tools can verify a file; ~10 GB/s here, so a
// verified load stays bound by memory bandwidth. Streaming form for the
// writer, which hashes sections as it writes them.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

namespace treemask {

class Xxh64 {
 public:
  void update(const void *data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4] = {0x9E3779B185EBCA87ull + 0xC2B2AE3D27D4EB4Full, 0xC2B2AE3D27D4EB4Full, 0,
                        0 - 0x9E3779B185EBCA87ull};
  unsigned char pending_[32] = {};
  size_t n_pending_ = 0;
  uint64_t total_ = 0;
};

uint64_t xxh64(const void *data, size_t size);

}  // namespace treemask
