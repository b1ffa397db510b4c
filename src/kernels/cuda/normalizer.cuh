// The log-softmax normalizer of a logits row on the device, by a warp or a
// block (beam_step.cu has the design): one read of the row, 16-byte loads,
// kLseBatch elements in flight per thread, exp2 of a fused multiply-add per
// element summed pairwise; NaN for a row holding NaN or +inf. The logit
// conversions are the host's (kernels/dtype.h).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/beam_common.cuh"
#include "kernels/dtype.h"

namespace treemask::cuda::device {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
// Elements of the normalizer's batch: its loads are issued together.
constexpr int kLseBatch = 32;

// Folds t[0 .. 2W) pairwise into t[0] (every level a constant trip count,
// so the array stays in registers).
template <int W, int N, class Op>
__device__ __forceinline__ void fold(float (&t)[N], const Op &op) {
  if constexpr (W > 0) {
    TREEMASK_UNROLL
    for (int i = 0; i < W; ++i) t[i] = op(t[i], t[i + W]);
    fold<W / 2>(t, op);
  }
}

template <int N>
__device__ __forceinline__ float pairwise_max(const float (&x)[N]) {
  float t[N];
  TREEMASK_UNROLL
  for (int i = 0; i < N; ++i) t[i] = x[i];
  fold<N / 2>(t, [](float a, float b) { return fmaxf(a, b); });  // fmaxf ignores NaN
  return t[0];
}

// log(sum exp(x)) accumulated online: m the largest element seen, s the sum
// of exp(x - m). A batch of elements costs one max, at most one rescale
// and one exp2 of a fused multiply-add per element, summed pairwise (a
// serial sum would make each batch wait on N dependent adds). NaN and +inf
// make s NaN, except a NaN among elements that are all -inf so far, which
// nan_seen records.
struct OnlineLse {
  float m = -INFINITY, s = 0.0f;
  bool nan_seen = false;

  template <int N>  // a power of two
  __device__ __forceinline__ void add(const float (&x)[N]) {
    const float lm = pairwise_max(x);
    if (lm > m) {
      s *= exp2f((m - lm) * kLog2e);  // m = -inf: s is 0, exp2(-inf) = 0
      m = lm;
    }
    if (m > -INFINITY) {
      const float mb = m * kLog2e;
      float e[N];
      TREEMASK_UNROLL
      for (int i = 0; i < N; ++i) e[i] = exp2f(fmaf(x[i], kLog2e, -mb));
      fold<N / 2>(e, [](float a, float b) { return a + b; });
      s += e[0];
    } else {
      TREEMASK_UNROLL
      for (int i = 0; i < N; ++i) nan_seen |= x[i] != x[i];
    }
  }

  // Symmetric in its two operands up to fma contraction (group_logsumexp
  // broadcasts lane 0's result after its butterfly).
  __device__ __forceinline__ void merge(float m2, float s2, bool nan2) {
    const float mm = fmaxf(m, m2);
    nan_seen |= nan2;
    if (mm > -INFINITY) s = s * exp2f((m - mm) * kLog2e) + s2 * exp2f((m2 - mm) * kLog2e);
    m = mm;
  }
};

// The 16-bit lanes of a 32-bit word as floats.
template <int kDtype>
__device__ __forceinline__ void halves(uint32_t pair, float &lo, float &hi) {
  lo = kernels::half_to_f32<kDtype>(static_cast<uint16_t>(pair & 0xFFFFu));
  hi = kernels::half_to_f32<kDtype>(static_cast<uint16_t>(pair >> 16));
}

// The elements of a 16-byte vector as floats.
template <int kDtype>
__device__ __forceinline__ void unpack(const uint4 &q, float *x) {
  if constexpr (kDtype == launch::kF32) {
    x[0] = kernels::f32_from_bits(q.x);
    x[1] = kernels::f32_from_bits(q.y);
    x[2] = kernels::f32_from_bits(q.z);
    x[3] = kernels::f32_from_bits(q.w);
  } else {
    halves<kDtype>(q.x, x[0], x[1]);
    halves<kDtype>(q.y, x[2], x[3]);
    halves<kDtype>(q.z, x[4], x[5]);
    halves<kDtype>(q.w, x[6], x[7]);
  }
}

// This thread's share of a row of n elements, the group striding over it:
// 16-byte loads over the aligned part, the loads of kLseBatch elements
// issued together (with one load in flight per thread, a block's reads of
// a long bf16 row reached only ~70% of the memory bandwidth on an H200),
// single elements before and after it.
template <int kDtype, class G>
__device__ void accumulate_row(const void *row, size_t n, OnlineLse &acc) {
  constexpr size_t eb = kDtype == launch::kF32 ? 4 : 2;
  constexpr int per_vec = static_cast<int>(16 / eb);
  constexpr int kVecs = kLseBatch / per_vec;
  constexpr size_t S = G::kSize;
  const size_t r = G::rank();
  const auto addr = reinterpret_cast<uintptr_t>(row);
  size_t head = ((16 - addr % 16) % 16) / eb;
  if ((addr % eb) != 0 || head > n) head = n;
  const size_t n_vec = (n - head) / per_vec;
  for (size_t c = r; c < head; c += S) {
    const float x[1] = {kernels::load_logit<kDtype>(row, c)};
    acc.add(x);
  }
  const auto *vec = reinterpret_cast<const uint4 *>(static_cast<const char *>(row) + head * eb);
  // A batch past the end of the row reads -inf there, which changes
  // nothing, so that a short row's loads are issued together too.
  for (size_t v = r; v < n_vec; v += kVecs * S) {
    float x[kLseBatch];
    TREEMASK_UNROLL
    for (int u = 0; u < kVecs; ++u) {
      if (v + u * S < n_vec) {
        unpack<kDtype>(vec[v + u * S], x + u * per_vec);
      } else {
        TREEMASK_UNROLL
        for (int e = 0; e < per_vec; ++e) x[u * per_vec + e] = -INFINITY;
      }
    }
    acc.add(x);
  }
  for (size_t c = head + n_vec * per_vec + r; c < n; c += S) {
    const float x[1] = {kernels::load_logit<kDtype>(row, c)};
    acc.add(x);
  }
}

// A block's slots for the normalizer's cross-warp reduction.
struct LseSlots {
  float m[kWarps], s[kWarps];
  int bad[kWarps];
};

// log(sum exp(row[c])) over c < n with every thread of the group, in every
// thread; NaN when the row holds NaN or +inf, -inf when every element is
// -inf. slots: a block's (unused by a warp).
template <class G>
__device__ float group_logsumexp(const void *row, int32_t dtype, size_t n, LseSlots *slots) {
  OnlineLse acc;
  if (dtype == launch::kF32) {
    accumulate_row<launch::kF32, G>(row, n, acc);
  } else if (dtype == launch::kF16) {
    accumulate_row<launch::kF16, G>(row, n, acc);
  } else {
    accumulate_row<launch::kBF16, G>(row, n, acc);
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(kFullWarp, acc.m, offset);
    const float s2 = __shfl_xor_sync(kFullWarp, acc.s, offset);
    const int nan2 = __shfl_xor_sync(kFullWarp, acc.nan_seen ? 1 : 0, offset);
    acc.merge(m2, s2, nan2 != 0);
  }
  // merge() is symmetric as written, but nvcc contracts it into an fma
  // whose operand order differs between partner lanes (1 ulp apart): take
  // lane 0's, so that every lane scores with the same normalizer and equal
  // logits tie by (beam, token) alone.
  acc.m = __shfl_sync(kFullWarp, acc.m, 0);
  acc.s = __shfl_sync(kFullWarp, acc.s, 0);
  acc.nan_seen = __shfl_sync(kFullWarp, acc.nan_seen ? 1 : 0, 0) != 0;
  if constexpr (G::kSize > 32) {
    if (lane_of() == 0) {
      slots->m[warp_of()] = acc.m;
      slots->s[warp_of()] = acc.s;
      slots->bad[warp_of()] = acc.nan_seen ? 1 : 0;
    }
    __syncthreads();
    acc.m = slots->m[0];
    acc.s = slots->s[0];
    acc.nan_seen = slots->bad[0] != 0;
    for (int w = 1; w < kWarps; ++w) acc.merge(slots->m[w], slots->s[w], slots->bad[w] != 0);
    __syncthreads();  // the slots are reused by the next reduction
  }
  if (acc.nan_seen || !(acc.s == acc.s) || acc.m == INFINITY) return NAN;
  return acc.m > -INFINITY ? acc.m + logf(acc.s) : -INFINITY;
}
}  // namespace
}  // namespace treemask::cuda::device
