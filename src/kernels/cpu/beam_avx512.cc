// The AVX-512F log-sum-exp of the beam step. Only the functions between the
// pragmas get the ISA (see apply_avx2.cc for why).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/beam.h"

#ifdef TREEMASK_BEAM_X86

#include <immintrin.h>

#include <cmath>
#include <limits>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
// g++ 12's AVX-512 reduction intrinsics start from _mm512_undefined_ps():
// a false "(may be) used uninitialized" in the header itself (GCC bug
// 105593; the -O2 of the sanitizer builds gives the definite form).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/cpu/beam_simd.h"

namespace treemask::kernels {

namespace {

struct Avx512 {
  static constexpr size_t kWidth = 16;
  using V = __m512;
  using M = __mmask16;
  static V load(const void *row, DType dtype, size_t i) {
    switch (dtype) {
      case DType::kF32: return _mm512_loadu_ps(static_cast<const float *>(row) + i);
      case DType::kF16:
        return _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(static_cast<const uint16_t *>(row) + i)));
      case DType::kBF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                reinterpret_cast<const __m256i *>(static_cast<const uint16_t *>(row) + i))),
            16));
    }
    return _mm512_setzero_ps();
  }
  static V splat(float x) { return _mm512_set1_ps(x); }
  // _mm512_max_ps returns its second operand when either is NaN.
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V round(V x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V exp2i(V n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static M no_nan() { return 0; }
  static M flag_nan(M m, V v) { return m | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q); }
  static bool any_nan(M m) { return m != 0; }
};

}  // namespace

float logsumexp_avx512(const void *row, DType dtype, size_t n) {
  return simd::logsumexp<Avx512>(row, dtype, n);
}

}  // namespace treemask::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#endif  // TREEMASK_BEAM_X86
