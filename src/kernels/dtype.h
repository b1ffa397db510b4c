// The storage type of a logit, one enum for the CPU and the CUDA kernels:
// the values of the C header's treemask_dtype (TREEMASK_F32 / F16 / BF16).
// The C entry points take it as an int32_t, so an unknown value is an error
// they report (kernels/checks.h), not an enum holding a value it cannot.
//
// With it, every definition the host and the device share about a stored
// logit, written once: bit casts, the fp16 and bf16 conversions, reading one
// logit as a float, and the -inf bit patterns that masking stores. nvcc
// includes this header (no standard-library types; every function callable
// on host and device).
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
TREEMASK_HD constexpr size_t dtype_bytes(int32_t d) { return d == kF32 ? 4 : 2; }

// -inf as each dtype stores it. Masking writes these bits and never reads a
// logit as a float, so NaNs and signed zeros pass through untouched.
inline constexpr uint32_t kNegInfF32 = 0xFF800000u;
inline constexpr uint16_t kNegInfF16 = 0xFC00u;
inline constexpr uint16_t kNegInfBF16 = 0xFF80u;

TREEMASK_HD float f32_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

TREEMASK_HD uint32_t bits_from_f32(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

TREEMASK_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t{h} << 16); }

// IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN);
// one instruction on a GPU, the same values everywhere.
TREEMASK_HD float f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
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
#endif
}

// A 16-bit stored logit of dtype kDtype (kF16 or kBF16) as a float.
template <int32_t kDtype>
TREEMASK_HD float half_to_f32(uint16_t h) {
  if constexpr (kDtype == kF16) {
    return f16_to_f32(h);
  } else {
    return bf16_to_f32(h);
  }
}

// Column c of a logits row, as a float: with the dtype known at compile time
// (the kernels' inner loops) and at run time (a checked dtype; NaN for any
// other value).
template <int32_t kDtype>
TREEMASK_HD float load_logit(const void *row, size_t c) {
  if constexpr (kDtype == kF32) {
    return static_cast<const float *>(row)[c];
  } else {
    return half_to_f32<kDtype>(static_cast<const uint16_t *>(row)[c]);
  }
}

TREEMASK_HD float load_logit(const void *row, int32_t dtype, size_t c) {
  switch (dtype) {
    case kF32: return load_logit<kF32>(row, c);
    case kF16: return load_logit<kF16>(row, c);
    case kBF16: return load_logit<kBF16>(row, c);
    default: return f32_from_bits(0x7FC00000u);  // NaN
  }
}

}  // namespace treemask::kernels
