// The AVX2 (+FMA, F16C) log-sum-exp of the beam step. Only the functions
// between the pragmas get the ISA (see apply_avx2.cc for why).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/beam.h"

#ifdef TREEMASK_BEAM_X86

#include <immintrin.h>

#include <cmath>
#include <limits>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/cpu/beam_simd.h"

namespace treemask::kernels {

namespace {

struct Avx2 {
  static constexpr size_t kWidth = 8;
  using V = __m256;
  using M = __m256;
  static V load(const void *row, DType dtype, size_t i) {
    switch (dtype) {
      case DType::kF32: return _mm256_loadu_ps(static_cast<const float *>(row) + i);
      case DType::kF16:
        return _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(row) + i)));
      case DType::kBF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128(
                reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(row) + i))),
            16));
    }
    return _mm256_setzero_ps();
  }
  static V splat(float x) { return _mm256_set1_ps(x); }
  // _mm256_max_ps returns its second operand when either is NaN.
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V exp2i(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static float hmax(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static M no_nan() { return _mm256_setzero_ps(); }
  static M flag_nan(M m, V v) { return _mm256_or_ps(m, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)); }
  static bool any_nan(M m) { return _mm256_movemask_ps(m) != 0; }
};

}  // namespace

float logsumexp_avx2(const void *row, DType dtype, size_t n) {
  return simd::logsumexp<Avx2>(row, dtype, n);
}

}  // namespace treemask::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // TREEMASK_BEAM_X86
