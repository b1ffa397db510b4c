// The SIMD log-sum-exp, written once over a vector-traits type S and
// instantiated by beam_avx2.cc and beam_avx512.cc inside their target
// pragmas (include this file only there, after the pragma: everything here is
// a template over S, so each ISA gets its own copy).
//
// S provides: kWidth (floats per vector), type V, load(row, dtype, index),
// splat(float), max(a, b) (NaN-propagating in b), add, sub, mul, fma(a, b, c)
// = a * b + c, round(x) (to nearest), exp2i(n) (2^n for integral n in
// [-126, 0]), hmax(v), hsum(v), and a NaN flag: type M, no_nan(),
// flag_nan(m, v) (m with v's NaN lanes added), any_nan(m).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/cpu/beam.h"

namespace treemask::kernels::simd {

// exp(x) for x <= 0 (x - max of the row): Cody-Waite range reduction and the
// degree-6 polynomial of Cephes' expf (about 1 ulp); x below -87 gives
// exp(-87) ~ 1.6e-38, which no sum of a finite row can notice. NaN stays NaN.
template <class S>
typename S::V exp_nonpositive(typename S::V x) {
  x = S::max(S::splat(-87.0f), x);
  const auto n = S::round(S::mul(x, S::splat(1.44269504088896341f)));
  auto r = S::fma(n, S::splat(-0.693359375f), x);
  r = S::fma(n, S::splat(2.12194440e-4f), r);
  auto p = S::splat(1.9875691500e-4f);
  p = S::fma(p, r, S::splat(1.3981999507e-3f));
  p = S::fma(p, r, S::splat(8.3334519073e-3f));
  p = S::fma(p, r, S::splat(4.1665795894e-2f));
  p = S::fma(p, r, S::splat(1.6666665459e-1f));
  p = S::fma(p, r, S::splat(5.0000001201e-1f));
  p = S::fma(p, S::mul(r, r), S::add(r, S::splat(1.0f)));
  return S::mul(p, S::exp2i(n));
}

// Elements per block: a block is read from memory once for its maximum and
// then from L1 for the sum (4 KiB of fp32).
inline constexpr size_t kBlock = 1024;

template <class S>
float logsumexp(const void *row, DType dtype, size_t n) {
  constexpr size_t W = S::kWidth;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float m = kNegInf;  // running maximum
  double total = 0;   // sum of exp(x - m) so far
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t b1 = b0 + kBlock < n ? b0 + kBlock : n;
    const size_t vend = b0 + (b1 - b0) / W * W;
    // Block maximum.
    auto vm = S::splat(kNegInf);
    auto nan = S::no_nan();
    for (size_t i = b0; i < vend; i += W) {
      const auto x = S::load(row, dtype, i);
      vm = S::max(vm, x);
      nan = S::flag_nan(nan, x);
    }
    float bm = S::hmax(vm);
    for (size_t i = vend; i < b1; ++i) {
      const float x = load_logit(row, dtype, i);
      if (std::isnan(x)) return std::numeric_limits<float>::quiet_NaN();
      bm = std::fmax(bm, x);
    }
    if (S::any_nan(nan)) return std::numeric_limits<float>::quiet_NaN();
    if (bm == kNegInf) continue;  // every element is -inf: adds nothing
    if (bm > m) {
      if (m != kNegInf) total *= std::exp(double{m} - double{bm});
      m = bm;
    }
    // Block sum of exp(x - m), four accumulators.
    const auto vmax = S::splat(m);
    auto s0 = S::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
    size_t i = b0;
    for (; i + 4 * W <= vend; i += 4 * W) {
      s0 = S::add(s0, exp_nonpositive<S>(S::sub(S::load(row, dtype, i), vmax)));
      s1 = S::add(s1, exp_nonpositive<S>(S::sub(S::load(row, dtype, i + W), vmax)));
      s2 = S::add(s2, exp_nonpositive<S>(S::sub(S::load(row, dtype, i + 2 * W), vmax)));
      s3 = S::add(s3, exp_nonpositive<S>(S::sub(S::load(row, dtype, i + 3 * W), vmax)));
    }
    for (; i < vend; i += W) {
      s0 = S::add(s0, exp_nonpositive<S>(S::sub(S::load(row, dtype, i), vmax)));
    }
    double bs = S::hsum(S::add(S::add(s0, s1), S::add(s2, s3)));
    for (; i < b1; ++i) bs += std::exp(double{load_logit(row, dtype, i)} - double{m});
    total += bs;
    // A +inf element makes the sum NaN (x - m with m = +inf is NaN).
    if (std::isnan(total)) return std::numeric_limits<float>::quiet_NaN();
  }
  if (m == kNegInf) return kNegInf;
  if (m == std::numeric_limits<float>::infinity()) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(double{m} + std::log(total));
}

}  // namespace treemask::kernels::simd
