// Device-side part of the CPU emulation (see cuda_runtime_api.h): the CUDA
// keywords and built-ins the kernels use, and the kernel launch.
//
// A block's threads are fibers on one OS thread, run in turn; each runs
// until it reaches __syncthreads() or returns, so a barrier is a pass over
// the block. __shared__ variables become function statics, which is right
// because blocks run one after another. A block whose live threads reach
// different numbers of barriers aborts: on a GPU that would be undefined.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

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
}  // namespace cuda_emulation

#define __syncthreads() ::cuda_emulation::syncthreads()

template <class T>
inline T __ldg(const T *p) {
  return *p;
}

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

template <class T>
inline T min(T a, T b) {
  return std::min(a, b);
}
template <class T>
inline T max(T a, T b) {
  return std::max(a, b);
}
