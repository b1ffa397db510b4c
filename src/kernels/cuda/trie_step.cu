// The device trie step: advance device state arrays by sampled tokens and
// write the next bitmask rows (or -inf into logits), with the state-array
// rules of treemask_cuda.h. Nothing here allocates or synchronises, so a step
// can be captured in a CUDA graph.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/masking.cuh"
#include "kernels/cuda/rules.cuh"

namespace treemask::cuda {
namespace device {
namespace {

constexpr int kFillBlock = 256;
constexpr int kAdvanceBlock = 256;

// The first index in [begin, end) whose token is >= key (tokens ascend).
__device__ __forceinline__ uint32_t lower_bound(const int32_t *tokens, uint32_t begin, uint32_t end,
                                                int64_t key) {
  while (begin < end) {
    const uint32_t mid = begin + (end - begin) / 2;
    if (tokens[mid] < key) {
      begin = mid + 1;
    } else {
      end = mid;
    }
  }
  return begin;
}

__device__ __forceinline__ Advanced advance_state(const launch::TrieView &t, uint32_t s,
                                                  int32_t token, int32_t policy) {
  return rules_of(t).advance(s, token, policy);
}

// Marks, with every thread of the block, the tokens in [lo, hi) that state s
// allows: the children of a node plus the stop tokens at a terminal node;
// only the stop tokens in any other state.
__device__ void mark_allowed(const launch::TrieView &t, uint32_t s, int64_t lo, int64_t hi,
                             uint32_t *keep) {
  const PlainRules rules = rules_of(t);
  const Allowed a = rules.allowed(s);
  const uint32_t first = lo > 0 ? lower_bound(a.children, 0, a.n_children, lo) : 0;
  for (uint32_t k = first + threadIdx.x; k < a.n_children; k += blockDim.x) {
    const int32_t token = a.children[k];
    if (token >= hi) break;  // ascending: later children of this thread are beyond too
    mark_token(keep, lo, token);
  }
  if (!a.stops) return;
  for (uint32_t k = threadIdx.x; k < t.n_stop_tokens; k += blockDim.x) {
    const int32_t token = t.stop_tokens[k];
    if (token >= lo && token < hi) mark_token(keep, lo, token);
  }
}

// One block per row: thread 0 advances the state while the others clear the
// row, then the block ORs in the allowed bits (O(fanout) atomics on a row
// that stays in L2).
__global__ void __launch_bounds__(kFillBlock)
    advance_fill_bitmask_kernel(launch::TrieView t, uint32_t *states, const int32_t *tokens,
                                int64_t n_rows, int32_t policy, uint8_t *accepted,
                                uint32_t *bitmask, size_t row_words) {
  __shared__ uint32_t state;
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    if (threadIdx.x == 0) {
      uint32_t s = states[row];
      if (tokens) {
        const Advanced a = advance_state(t, s, tokens[row], policy);
        s = a.state;
        states[row] = s;
        if (accepted) accepted[row] = a.accepted ? 1 : 0;
      }
      state = s;
    }
    uint32_t *out = bitmask + row * static_cast<int64_t>(row_words);
    for (size_t w = threadIdx.x; w < row_words; w += blockDim.x) out[w] = 0;
    __syncthreads();  // publishes `state` and orders the clear before the ORs
    mark_allowed(t, state, 0, t.vocab_size, out);
    __syncthreads();  // `state` is rewritten for the next row
  }
}

__global__ void __launch_bounds__(kAdvanceBlock)
    advance_kernel(launch::TrieView t, uint32_t *states, const int32_t *tokens, int64_t n_rows,
                   int32_t policy, uint8_t *accepted) {
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < n_rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Advanced a = advance_state(t, states[row], tokens[row], policy);
    states[row] = a.state;
    if (accepted) accepted[row] = a.accepted ? 1 : 0;
  }
}

// The allowed set of each row's state, as lists for mask_from_lists_kernel.
struct TrieLists {
  launch::TrieView trie;
  const uint32_t *states;

  __device__ void mark(int64_t row, int64_t lo, int64_t hi, uint32_t *keep) const {
    mark_allowed(trie, states[row], lo, hi, keep);
  }
};

unsigned grid_for(int64_t items, int64_t per_block) {
  return static_cast<unsigned>(std::min<int64_t>(ceil_div(items, per_block), int64_t{1} << 20));
}

}  // namespace
}  // namespace device

namespace launch {

int advance_fill_bitmask(const TrieView &trie, uint32_t *states, const int32_t *tokens,
                         size_t n_rows, int32_t failure_policy, uint8_t *accepted,
                         uint32_t *bitmask, size_t bitmask_row_words, void *stream) {
  if (n_rows == 0) return 0;
  const auto rows = static_cast<int64_t>(n_rows);
  return device::launch_kernel(device::advance_fill_bitmask_kernel, dim3(device::grid_for(rows, 1)),
                               dim3(device::kFillBlock), stream, trie, states, tokens, rows,
                               failure_policy, accepted, bitmask, bitmask_row_words);
}

int advance(const TrieView &trie, uint32_t *states, const int32_t *tokens, size_t n_rows,
            int32_t failure_policy, uint8_t *accepted, void *stream) {
  if (n_rows == 0) return 0;
  const auto rows = static_cast<int64_t>(n_rows);
  return device::launch_kernel(
      device::advance_kernel, dim3(device::grid_for(rows, device::kAdvanceBlock)),
      dim3(device::kAdvanceBlock), stream, trie, states, tokens, rows, failure_policy, accepted);
}

int mask_logits_from_states(const TrieView &trie, const uint32_t *states, size_t n_rows,
                            const Logits &logits, const DeviceShape &shape, void *stream) {
  const Rows rows{nullptr, n_rows, n_rows};
  return device::launch_mask_from_lists(logits, rows, device::TrieLists{trie, states}, shape,
                                        stream);
}

}  // namespace launch
}  // namespace treemask::cuda
