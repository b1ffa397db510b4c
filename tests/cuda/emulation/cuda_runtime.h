// Device-side part of the CPU emulation (see cuda_runtime_api.h): the CUDA
// keywords and built-ins the kernels use, and the kernel launch.
//
// A block's threads are fibers on one OS thread, run in turn; each runs
// until it reaches __syncthreads(), a warp-synchronous call (__shfl_*_sync,
// __ballot_sync, __syncwarp, ...) or returns. A barrier completes when every
// live thread of the block has reached it; a warp-synchronous call when
// every lane of the warp has, and each lane then reads what the others
// passed. __shared__ variables become function statics, which is right
// because blocks run one after another. What would be undefined on a GPU
// aborts: live threads of a block at different barriers, lanes of a warp at
// different warp-synchronous calls or one of them exited, a mask other than
// the whole warp.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// The running thread's coordinates (one OS thread runs every fiber).
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace cuda_emulation {
// Runs `kernel` for every thread of grid x block, now, or records it when
// `stream` is capturing a graph. Returns the launch error, as
// cudaLaunchKernel does.
cudaError_t launch(dim3 grid, dim3 block, cudaStream_t stream, std::function<void()> kernel);
void syncthreads();
// Deposits `value` for this thread's lane and waits until every lane of
// its warp has deposited one at the same warp-synchronous call; returns
// the 32 values by lane (valid until this lane's next call). `mask` must
// name every lane of the warp (the kernels use full-warp masks only).
const uint64_t *warp_exchange(unsigned mask, uint64_t value);
unsigned lane_id();
unsigned lanes_in_warp();

template <class T>
uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "a value of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
}  // namespace cuda_emulation

#define __syncthreads() ::cuda_emulation::syncthreads()

// ---- warp-synchronous built-ins ---------------------------------------------
// width (the sub-warp size of the real built-ins) is always 32 here.

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  (void)width;
  const uint64_t *all = ::cuda_emulation::warp_exchange(mask, ::cuda_emulation::to_bits(v));
  return ::cuda_emulation::from_bits<T>(all[static_cast<unsigned>(src_lane) & 31u]);
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  (void)width;
  const uint64_t *all = ::cuda_emulation::warp_exchange(mask, ::cuda_emulation::to_bits(v));
  const unsigned src = ::cuda_emulation::lane_id() ^ static_cast<unsigned>(lane_mask);
  return src < ::cuda_emulation::lanes_in_warp() ? ::cuda_emulation::from_bits<T>(all[src]) : v;
}

template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)width;
  const uint64_t *all = ::cuda_emulation::warp_exchange(mask, ::cuda_emulation::to_bits(v));
  const unsigned src = ::cuda_emulation::lane_id() + delta;
  return src < ::cuda_emulation::lanes_in_warp() ? ::cuda_emulation::from_bits<T>(all[src]) : v;
}

template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)width;
  const uint64_t *all = ::cuda_emulation::warp_exchange(mask, ::cuda_emulation::to_bits(v));
  const unsigned lane = ::cuda_emulation::lane_id();
  return lane >= delta ? ::cuda_emulation::from_bits<T>(all[lane - delta]) : v;
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const uint64_t *all = ::cuda_emulation::warp_exchange(mask, predicate ? 1 : 0);
  unsigned bits = 0;
  for (unsigned i = 0; i < ::cuda_emulation::lanes_in_warp(); ++i) bits |= (all[i] ? 1u : 0u) << i;
  return bits;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) {
  const unsigned lanes = ::cuda_emulation::lanes_in_warp();
  const unsigned all = lanes >= 32 ? ~0u : (1u << lanes) - 1u;
  return __ballot_sync(mask, predicate) == all;
}
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) { ::cuda_emulation::warp_exchange(mask, 0); }

// ---- integer intrinsics -------------------------------------------------------

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }

template <class T>
inline T __ldg(const T *p) {
  return *p;
}
template <class T>
inline T __ldcg(const T *p) {
  return *p;
}

// Blocks run one after another on one thread: every write is visible.
inline void __threadfence() {}

// Fibers never run at the same time, so a plain read-modify-write is atomic.
inline unsigned atomicOr(unsigned *address, unsigned value) {
  const unsigned old = *address;
  *address = old | value;
  return old;
}

inline unsigned atomicAdd(unsigned *address, unsigned value) {
  const unsigned old = *address;
  *address = old + value;
  return old;
}

inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old + value;
  return old;
}

inline unsigned atomicInc(unsigned *address, unsigned limit) {
  const unsigned old = *address;
  *address = old >= limit ? 0 : old + 1;
  return old;
}

inline unsigned atomicExch(unsigned *address, unsigned value) {
  const unsigned old = *address;
  *address = value;
  return old;
}

inline unsigned atomicMin(unsigned *address, unsigned value) {
  const unsigned old = *address;
  *address = std::min(old, value);
  return old;
}

template <class T>
inline T min(T a, T b) {
  return std::min(a, b);
}
template <class T>
inline T max(T a, T b) {
  return std::max(a, b);
}
