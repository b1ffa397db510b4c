// The storage type of a logit, one enum for the CPU and the CUDA kernels:
// the values of the C header's treemask_dtype (TREEMASK_F32 / F16 / BF16).
// The C entry points take it as an int32_t, so an unknown value is an error
// they report (kernels/checks.h), not an enum holding a value it cannot.
// Also the conversions of a stored logit to float, written once for both.
// nvcc includes this header (no standard-library types).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/hd.h"

namespace treemask::kernels {

enum DType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

inline constexpr bool dtype_known(int32_t d) { return d >= kF32 && d <= kBF16; }
inline constexpr size_t dtype_bytes(int32_t d) { return d == kF32 ? 4 : 2; }

TREEMASK_HD float f32_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

TREEMASK_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t{h} << 16); }

// IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN).
TREEMASK_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);  // signed zero
  // Subnormal: normalize.
  uint32_t e = 113;
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return f32_from_bits(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

}  // namespace treemask::kernels
