// Apply kernels: mask device logits from an xgrammar bitmask (dense) or from
// candidate lists in CSR form (sparse).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/masking.cuh"

namespace treemask::cuda {
namespace device {
namespace {

constexpr int kApplyBlock = 128;

// One thread per chunk of kVec columns (one 16-byte vector when aligned), a
// 2-D grid of (column blocks, rows): a single row of 151,936 logits already
// spans 150 (bf16) to 300 (fp32) blocks, so batch 1 fills the GPU too. Threads of
// a chunk share their bitmask word through the cache.
template <class T, int kVec>
__global__ void __launch_bounds__(kApplyBlock)
    apply_bitmask_kernel(typename T::Elem *logits, launch::Logits geom, launch::Rows rows,
                         const uint32_t *__restrict__ bitmask, size_t row_words) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  const auto width = static_cast<int64_t>(geom.width);
  if (c >= width) return;
  const auto vocab = static_cast<int64_t>(geom.vocab_size);
  const int n = static_cast<int>(min(static_cast<int64_t>(kVec), width - c));
  for (int64_t i = blockIdx.y; i < static_cast<int64_t>(rows.n_active); i += gridDim.y) {
    const int64_t row = selected_row(rows, i);
    if (row < 0) continue;
    uint32_t keep = 0;  // columns >= vocab_size are always masked
    if (c < vocab) {
      const uint32_t word = __ldg(bitmask + row * static_cast<int64_t>(row_words) + (c >> 5));
      keep = (word >> (c & 31)) & low_bits<kVec>();
      if (vocab - c < kVec) keep &= (1u << (vocab - c)) - 1u;
    }
    typename T::Elem *p = logits + row * static_cast<int64_t>(geom.row_stride) + c;
    mask_chunk<T, kVec>(p, p, keep, n);
  }
}

// Candidate lists in CSR form; offsets are clamped so that a corrupt row can
// only lose candidates, never read out of bounds.
struct CsrLists {
  const int32_t *offsets;
  const int32_t *tokens;
  int64_t n_tokens;

  __device__ int64_t clamp(int64_t offset) const {
    return offset < 0 ? 0 : (offset > n_tokens ? n_tokens : offset);
  }

  __device__ void mark(int64_t row, int64_t lo, int64_t hi, uint32_t *keep) const {
    const int64_t begin = clamp(offsets[row]);
    const int64_t end = clamp(offsets[row + 1]);
    for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
      const int64_t t = tokens[k];
      if (t >= lo && t < hi) mark_token(keep, lo, t);
    }
  }
};

}  // namespace
}  // namespace device

namespace launch {

int apply_bitmask(const Logits &logits, const Rows &rows, const uint32_t *bitmask,
                  size_t bitmask_row_words, void *stream) {
  if (rows.n_active == 0 || logits.width == 0) return 0;
  return device::dispatch_dtype(logits, [&](auto traits, auto vec) {
    using T = decltype(traits);
    constexpr int kVec = decltype(vec)::value;
    const int64_t chunks = device::ceil_div(static_cast<int64_t>(logits.width), kVec);
    const dim3 grid(static_cast<unsigned>(device::ceil_div(chunks, device::kApplyBlock)),
                    static_cast<unsigned>(std::min<size_t>(rows.n_active, 65535)));
    return device::launch_kernel(
        device::apply_bitmask_kernel<T, kVec>, grid, dim3(device::kApplyBlock), stream,
        static_cast<typename T::Elem *>(logits.data), logits, rows, bitmask, bitmask_row_words);
  });
}

int apply_candidates(const Logits &logits, const Rows &rows, const int32_t *row_offsets,
                     const int32_t *candidates, size_t n_candidates, const DeviceShape &shape,
                     void *stream) {
  const device::CsrLists lists{row_offsets, candidates, static_cast<int64_t>(n_candidates)};
  return device::launch_mask_from_lists(logits, rows, lists, shape, stream);
}

int probe_kernel_image() {
  cudaFuncAttributes attributes;
  const cudaError_t e =
      cudaFuncGetAttributes(&attributes, device::apply_bitmask_kernel<device::F32, 4>);
  if (e != cudaSuccess) cudaGetLastError();  // not sticky; leave no trace for the next call
  return static_cast<int>(e);
}

}  // namespace launch
}  // namespace treemask::cuda
