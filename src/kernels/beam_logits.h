// The logits rows of a beam step or a top-k, one struct for the CPU step
// (batch/beam_step.cc), the C shim and the CUDA kernels, checked by one
// function (check_beam_logits, kernels/checks.h) for both. nvcc includes
// this header (no standard-library types).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "kernels/dtype.h"

namespace treemask::kernels {

// Row i (slot i) starts at data + i * row_stride elements; the normalizer
// runs over columns [0, n_columns). As the caller gives them, n_columns 0
// means the vocabulary size and row_stride 0 means n_columns;
// check_beam_logits resolves both.
struct BeamLogits {
  const void *data = nullptr;
  DType dtype = kF32;
  size_t n_columns = 0;
  size_t row_stride = 0;
  bool log_probs = false;  // the rows hold log-probabilities: no normalizer

  TREEMASK_HD const void *row(size_t i) const {
    return static_cast<const char *>(data) + i * row_stride * dtype_bytes(dtype);
  }
};

}  // namespace treemask::kernels
