// The beam step's candidate keys (beam_step.cu has the design): a 64-bit
// key per candidate, larger = better, the score's bits made order-preserving
// above (B-1 - beam) and (V-1 - token), so the pinned tie rule is the key
// order and keys are unique; and the warp kernel's slot-local keys.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/dtype.h"

namespace treemask::cuda::device {
namespace {

// Order-preserving map of a float (not NaN) to uint32: a < b iff map(a) <
// map(b). -inf maps to 0x007FFFFF, so every selectable key is non-zero.
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t b = kernels::bits_from_f32(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float unordered(uint32_t o) {
  return kernels::f32_from_bits((o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o);
}

// Packs a candidate; 0 when its score is -inf or NaN (never selected).
__device__ __forceinline__ uint64_t make_key(float score, uint32_t beam, int32_t token,
                                             const launch::KeyLayout &k) {
  if (!(score > -INFINITY)) return 0;
  // -0 + 0 = +0: the two zeros rank as one score, as they compare on the CPU.
  return (uint64_t{ordered(score + 0.0f)} << 32) | (uint64_t{k.beam_max - beam} << k.token_bits) |
         (k.token_max - static_cast<uint32_t>(token));
}

__device__ __forceinline__ float key_score(uint64_t key) {
  return unordered(static_cast<uint32_t>(key >> 32));
}
__device__ __forceinline__ uint32_t key_beam(uint64_t key, const launch::KeyLayout &k) {
  const uint32_t low = static_cast<uint32_t>(key);
  return k.beam_max - static_cast<uint32_t>(uint64_t{low} >> k.token_bits);
}
__device__ __forceinline__ int32_t key_token(uint64_t key, const launch::KeyLayout &k) {
  const uint32_t mask = k.token_bits >= 32 ? ~0u : ((1u << k.token_bits) - 1u);
  return static_cast<int32_t>(k.token_max - (static_cast<uint32_t>(key) & mask));
}

// The warp kernel's slot-local key of candidate i: the score's bits, then
// (token_max - token), then i. Within a slot the beam is fixed, so these
// rank as the slot's global keys do, and a winner brings its index (hence
// its next state) along. token_bits + idx_bits <= 32 (beam_step checks).
__device__ __forceinline__ uint64_t make_local_key(float score, int32_t token, uint32_t i,
                                                   const launch::KeyLayout &k) {
  if (!(score > -INFINITY)) return 0;
  return (uint64_t{ordered(score + 0.0f)} << 32) |
         (uint64_t{k.token_max - static_cast<uint32_t>(token)} << k.idx_bits) | i;
}
__device__ __forceinline__ uint32_t local_index(uint64_t key, const launch::KeyLayout &k) {
  return static_cast<uint32_t>(key) & (k.idx_bits >= 32 ? ~0u : (1u << k.idx_bits) - 1u);
}
__device__ __forceinline__ uint64_t global_key(uint64_t local, uint32_t beam,
                                               const launch::KeyLayout &k) {
  const uint32_t token_field = static_cast<uint32_t>(local) >> k.idx_bits;
  return (local & 0xFFFFFFFF00000000ull) | (uint64_t{k.beam_max - beam} << k.token_bits) |
         token_field;
}
}  // namespace
}  // namespace treemask::cuda::device
