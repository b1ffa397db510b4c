// Device code shared by the apply kernels and the trie step: writing -inf
// into logits chunks, and the tiled kernel that masks logits from per-row
// lists of allowed tokens (candidate CSR rows or trie children).
//
// Logits are handled as raw bit patterns (uint32_t for fp32, uint16_t for
// fp16 / bf16): masking only ever stores -inf (the host's patterns,
// kernels/dtype.h) or keeps a value, so no floating-point type or header is
// needed.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/launch.h"

namespace treemask::cuda::device {

// A dtype's storage element and -inf bits.
struct F32 {
  using Elem = uint32_t;
  static constexpr uint32_t kNegInf = kernels::kNegInfF32;
};
struct F16 {
  using Elem = uint16_t;
  static constexpr uint16_t kNegInf = kernels::kNegInfF16;
};
struct BF16 {
  using Elem = uint16_t;
  static constexpr uint16_t kNegInf = kernels::kNegInfBF16;
};

// Calls body(Traits{}, std::integral_constant<int, VEC>{}) for the dtype of
// `logits`, with VEC = logits per 16-byte vector when rows allow vector
// accesses and 1 otherwise. Returns cudaErrorInvalidValue for an unknown
// dtype (the host validated it; this keeps the switch total).
template <class Body>
int dispatch_dtype(const launch::Logits &logits, Body &&body) {
  auto with_vec = [&](auto traits) {
    using Elem = typename decltype(traits)::Elem;
    constexpr int kVec = 16 / sizeof(Elem);
    if (logits.vector_ok) return body(traits, std::integral_constant<int, kVec>{});
    return body(traits, std::integral_constant<int, 1>{});
  };
  switch (logits.dtype) {
    case launch::kF32: return with_vec(F32{});
    case launch::kF16: return with_vec(F16{});
    case launch::kBF16: return with_vec(BF16{});
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

template <int kVec>
__device__ __forceinline__ constexpr uint32_t low_bits() {
  return kVec >= 32 ? ~0u : (1u << kVec) - 1u;
}

// keep: bit i says column i of the chunk keeps its value. Returns the 32-bit
// lane j of a 16-byte vector with the masked columns set to -inf.
template <class T>
__device__ __forceinline__ uint32_t mask_lane(uint32_t lane, uint32_t keep, int j) {
  if constexpr (sizeof(typename T::Elem) == 4) {
    const uint32_t kept = ((keep >> j) & 1u) ? ~0u : 0u;
    return (lane & kept) | (T::kNegInf & ~kept);
  } else {
    const uint32_t bits = keep >> (2 * j);
    const uint32_t kept = ((bits & 1u) ? 0x0000FFFFu : 0u) | ((bits & 2u) ? 0xFFFF0000u : 0u);
    const uint32_t neg_pair = uint32_t{T::kNegInf} | (uint32_t{T::kNegInf} << 16);
    return (lane & kept) | (neg_pair & ~kept);
  }
}

// Masks the n <= kVec columns at p (n < kVec only at the end of a row),
// their values read from src (== p: in place): a chunk that keeps
// everything is skipped in place (copied otherwise), one that keeps
// nothing is stored without being loaded, a mixed one is loaded, selected
// and stored.
template <class T, int kVec>
__device__ __forceinline__ void mask_chunk(typename T::Elem *p, const typename T::Elem *src,
                                           uint32_t keep, int n) {
  using Elem = typename T::Elem;
  if constexpr (kVec > 1) {
    if (n == kVec) {
      if (keep == low_bits<kVec>()) {
        if (src != p) *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(src);
        return;
      }
      uint4 v = make_uint4(0, 0, 0, 0);
      if (keep != 0) v = *reinterpret_cast<const uint4 *>(src);
      v.x = mask_lane<T>(v.x, keep, 0);
      v.y = mask_lane<T>(v.y, keep, 1);
      v.z = mask_lane<T>(v.z, keep, 2);
      v.w = mask_lane<T>(v.w, keep, 3);
      *reinterpret_cast<uint4 *>(p) = v;
      return;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!((keep >> i) & 1u)) {
      p[i] = static_cast<Elem>(T::kNegInf);
    } else if (src != p) {
      p[i] = src[i];
    }
  }
}

// The logits row a block works on for selection entry i, or -1 to skip it.
__device__ __forceinline__ int64_t selected_row(const launch::Rows &rows, int64_t i) {
  if (!rows.indices) return i;
  const int64_t row = rows.indices[i];
  return row >= 0 && static_cast<uint64_t>(row) < rows.n_rows ? row : -1;
}

// Columns per tile of the list kernel: a multiple of 256 so that tiles
// start on a bitmask word and a 16-byte vector, at most kMaxTileColumns so
// that the tile's keep-bits fit in static shared memory.
inline constexpr int64_t kTileGranule = 256;
inline constexpr int64_t kMaxTileColumns = 65536;
inline constexpr int kListBlock = 256;

// Masks logits from per-row lists of allowed tokens. Grid: x = column tiles
// of tile_columns, y strides over the selected rows. Each block clears a
// keep-bit tile in shared memory, lets `lists` mark the allowed tokens of
// its row that fall in the tile, then masks the tile chunk by chunk, so
// masked columns are stored without loads and nothing reads a bitmask.
// With geom.source the kept values are read from there (a masked copy:
// masked columns are still never loaded).
//
// Lists::mark(row, lo, hi, keep) must atomicOr bit (t - lo) of keep for
// every allowed token t in [lo, hi), using all threads of the block.
template <class T, int kVec, class Lists>
__global__ void __launch_bounds__(kListBlock)
    mask_from_lists_kernel(typename T::Elem *logits, launch::Logits geom, launch::Rows rows,
                           Lists lists, int64_t tile_columns) {
  __shared__ uint32_t keep[kMaxTileColumns / 32];
  const int64_t width = static_cast<int64_t>(geom.width);
  const int64_t tile_begin = static_cast<int64_t>(blockIdx.x) * tile_columns;
  const int64_t tile_end = min(tile_begin + tile_columns, width);
  const int64_t mark_end = min(tile_end, static_cast<int64_t>(geom.vocab_size));
  const int tile_words = static_cast<int>((tile_end - tile_begin + 31) / 32);
  for (int64_t i = blockIdx.y; i < static_cast<int64_t>(rows.n_active); i += gridDim.y) {
    const int64_t row = selected_row(rows, i);
    if (row < 0) continue;  // uniform across the block
    for (int w = threadIdx.x; w < tile_words; w += blockDim.x) keep[w] = 0;
    __syncthreads();
    if (tile_begin < mark_end) lists.mark(row, tile_begin, mark_end, keep);
    __syncthreads();
    typename T::Elem *base = logits + row * static_cast<int64_t>(geom.row_stride);
    const typename T::Elem *from = geom.source
                                       ? static_cast<const typename T::Elem *>(geom.source) +
                                             row * static_cast<int64_t>(geom.source_stride)
                                       : base;
    for (int64_t c = tile_begin + static_cast<int64_t>(threadIdx.x) * kVec; c < tile_end;
         c += static_cast<int64_t>(blockDim.x) * kVec) {
      const int64_t offset = c - tile_begin;
      const uint32_t bits = (keep[offset >> 5] >> (offset & 31)) & low_bits<kVec>();
      mask_chunk<T, kVec>(base + c, from + c, bits,
                          static_cast<int>(min(static_cast<int64_t>(kVec), tile_end - c)));
    }
    __syncthreads();  // the next row reuses keep
  }
}

// Sets bit (token - lo) of keep; the caller checked lo <= token < hi.
__device__ __forceinline__ void mark_token(uint32_t *keep, int64_t lo, int64_t token) {
  const int64_t offset = token - lo;
  atomicOr(&keep[offset >> 5], 1u << (offset & 31));
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Every kernel launch goes through here; returns the launch's cudaError_t.
// cudaLaunchKernel reports its own error, so a launch never consumes (or is
// blamed for) an error another part of the process left in the runtime.
// Under TREEMASK_CUDA_EMULATION the host compiler builds the kernels and a
// CPU emulation of the CUDA runtime runs them (tests/cuda/emulation), so CI
// executes every kernel without a GPU.
template <class... Params, class... Args>
int launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, void *stream, Args... args) {
  static_assert(sizeof...(Params) > 0 && sizeof...(Params) == sizeof...(Args),
                "one argument per kernel parameter");
#ifdef TREEMASK_CUDA_EMULATION
  return static_cast<int>(cuda_emulation::launch(grid, block, static_cast<cudaStream_t>(stream),
                                                 [=] { kernel(static_cast<Params>(args)...); }));
#else
  std::tuple<Params...> values(static_cast<Params>(args)...);
  const cudaError_t e = std::apply(
      [&](auto &...value) {
        void *pointers[] = {static_cast<void *>(&value)...};
        return cudaLaunchKernel(reinterpret_cast<const void *>(kernel), grid, block, pointers, 0,
                                static_cast<cudaStream_t>(stream));
      },
      values);
  if (e != cudaSuccess) cudaGetLastError();  // ours: leave the runtime clean
  return static_cast<int>(e);
#endif
}

// Launches mask_from_lists_kernel with tiles sized so that even one row
// spreads over about shape.target_blocks blocks.
template <class Lists>
int launch_mask_from_lists(const launch::Logits &logits, const launch::Rows &rows,
                           const Lists &lists, const launch::DeviceShape &shape, void *stream) {
  if (rows.n_active == 0 || logits.width == 0) return 0;
  const auto width = static_cast<int64_t>(logits.width);
  const auto n_active = static_cast<int64_t>(rows.n_active);
  int64_t tiles = ceil_div(shape.target_blocks, n_active);
  tiles = std::max<int64_t>(1, std::min(tiles, ceil_div(width, 4 * kTileGranule)));
  int64_t tile_columns = ceil_div(ceil_div(width, tiles), kTileGranule) * kTileGranule;
  tile_columns = std::min(tile_columns, kMaxTileColumns);
  tiles = ceil_div(width, tile_columns);
  const dim3 grid(static_cast<unsigned>(tiles),
                  static_cast<unsigned>(std::min<int64_t>(n_active, 65535)));
  return dispatch_dtype(logits, [&](auto traits, auto vec) {
    using T = decltype(traits);
    return launch_kernel(mask_from_lists_kernel<T, decltype(vec)::value, Lists>, grid,
                         dim3(kListBlock), stream, static_cast<typename T::Elem *>(logits.data),
                         logits, rows, lists, tile_columns);
  });
}

}  // namespace treemask::cuda::device
