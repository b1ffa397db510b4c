// What the beam step's device code shares (beam_step.cu has the design):
// the block shape, the groups of threads that work together (a warp or the
// whole block) and the loop-unrolling hint.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.h"

// Loops with a constant trip count, unrolled so that their loads are in
// flight together (the emulation's host compiler needs no hint).
#if defined(__CUDACC__)
#define TREEMASK_UNROLL _Pragma("unroll")
#else
#define TREEMASK_UNROLL
#endif

namespace treemask::cuda::device {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr uint32_t kMaxK = launch::kMaxBeamWidth;

__device__ __forceinline__ unsigned warp_of() { return threadIdx.x / 32; }
__device__ __forceinline__ unsigned lane_of() { return threadIdx.x % 32; }
__device__ __forceinline__ unsigned lanes_below() { return (1u << lane_of()) - 1u; }

// ---- groups: the threads that select together -------------------------------

// A warp (one slot of the warp kernel): warp-level synchronisation only.
struct WarpGroup {
  static constexpr uint32_t kSize = 32;
  __device__ static uint32_t rank() { return lane_of(); }
  __device__ static void sync() { __syncwarp(); }
};

// The whole block.
struct BlockGroup {
  static constexpr uint32_t kSize = kBlock;
  __device__ static uint32_t rank() { return threadIdx.x; }
  __device__ static void sync() { __syncthreads(); }
};

}  // namespace
}  // namespace treemask::cuda::device
