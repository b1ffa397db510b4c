// The storage type of a logit, one enum for the CPU and the CUDA kernels:
// the values of the C header's treemask_dtype (TREEMASK_F32 / F16 / BF16).
// The C entry points take it as an int32_t, so an unknown value is an error
// they report (kernels/checks.h), not an enum holding a value it cannot.
// nvcc includes this header (no standard-library types).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace treemask::kernels {

enum DType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

inline constexpr bool dtype_known(int32_t d) { return d >= kF32 && d <= kBF16; }
inline constexpr size_t dtype_bytes(int32_t d) { return d == kF32 ? 4 : 2; }

}  // namespace treemask::kernels
