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

// ---- states of growing token rows (follow_rows) -----------------------------

constexpr int kFollowBlock = 256;
constexpr int kFollowWarps = kFollowBlock / 32;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// One id's share of a row's key: the key of a row is the sum (mod 2^64) of
// these over its ids, so a row's key is its parent's plus its last id's.
__device__ __forceinline__ uint64_t id_hash(uint64_t position, int64_t id) {
  uint64_t x = static_cast<uint64_t>(id) + 0x9E3779B97F4A7C15ull * (position + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// An id as a state-array token: ids no int32 can hold (and negative ones,
// which would mean "no token") become INT32_MAX, which no trie allows.
__device__ __forceinline__ int32_t token_of(int64_t id) {
  return id >= 0 && id < INT32_MAX ? static_cast<int32_t>(id) : INT32_MAX;
}

__device__ __forceinline__ uint64_t warp_sum(uint64_t v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarp, v, offset);
  return v;
}

// The state of row `row` of `rows`, by one warp (every lane calls it and
// gets it): the key of the row's first n - 1 ids, a scan of prev's keys for
// it, an id-by-id comparison of each row that matches, and then one trie
// step from the equal row's state, or a walk from the root. With `write`,
// the row's state, key and (rows.copy_to) ids are stored.
__device__ uint32_t follow_row(const launch::TrieView &t, const launch::TokenRows &prev,
                               bool use_prev, const launch::TokenRows &rows, int64_t row,
                               int32_t policy, bool write) {
  const unsigned lane = threadIdx.x % 32;
  const uint64_t n = rows.n_tokens;
  const int64_t *ids = rows.tokens + row * static_cast<int64_t>(rows.row_stride);
  int64_t *copy =
      write && rows.copy_to ? rows.copy_to + row * static_cast<int64_t>(rows.copy_stride) : nullptr;
  uint64_t parent_key = 0;
  for (uint64_t k = lane; k < n; k += 32) {
    const int64_t id = ids[k];
    if (k + 1 < n) parent_key += id_hash(k, id);
    if (copy) copy[k] = id;
  }
  parent_key = warp_sum(parent_key);
  bool found = false;
  uint32_t state = kStateFailed;
  if (use_prev) {
    for (size_t base = 0; base < prev.n_rows && !found; base += 32) {
      const size_t j = base + lane;
      unsigned match = __ballot_sync(kFullWarp, j < prev.n_rows && prev.keys[j] == parent_key);
      while (match != 0 && !found) {
        const size_t candidate = base + static_cast<size_t>(__ffs(static_cast<int>(match)) - 1);
        match &= match - 1;
        const int64_t *other = prev.tokens + candidate * prev.row_stride;
        bool same = true;
        for (uint64_t k = lane; k + 1 < n; k += 32) same = same && ids[k] == other[k];
        if (__all_sync(kFullWarp, same)) {
          found = true;
          state = prev.states[candidate];
        }
      }
    }
  }
  if (lane == 0) {
    const PlainRules rules = rules_of(t);
    if (found) {
      state = rules.advance(state, token_of(ids[n - 1]), policy).state;
    } else {
      state = 0;  // the root
      for (uint64_t k = 0; k < n; ++k) state = rules.advance(state, token_of(ids[k]), policy).state;
    }
    if (write) {
      rows.states[row] = state;
      rows.keys[row] = n > 0 ? parent_key + id_hash(n - 1, ids[n - 1]) : 0;
    }
  }
  return __shfl_sync(kFullWarp, state, 0);
}

// One warp per row.
__global__ void __launch_bounds__(kFollowBlock)
    follow_rows_kernel(launch::TrieView t, launch::TokenRows prev, bool use_prev,
                       launch::TokenRows rows, int32_t policy) {
  const int64_t n_warps = static_cast<int64_t>(gridDim.x) * kFollowWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kFollowWarps + threadIdx.x / 32;
       row < static_cast<int64_t>(rows.n_rows); row += n_warps) {  // uniform in a warp
    follow_row(t, prev, use_prev, rows, row, policy, true);
  }
}

// The rows of follow_rows as lists for mask_from_lists_kernel (the fused
// processor step): each block's first warp follows its row (every column
// tile of a row repeats the few loads; the first tile stores the result),
// then the block marks that state's allowed set, and finished_token (< 0:
// none) in a TERMINATED row.
struct FollowLists {
  launch::TrieView trie;
  launch::TokenRows prev;
  bool use_prev;
  launch::TokenRows rows;
  int32_t policy;
  int32_t finished_token;

  __device__ void mark(int64_t row, int64_t lo, int64_t hi, uint32_t *keep) const {
    __shared__ uint32_t state;
    if (threadIdx.x < 32) {
      const uint32_t s = follow_row(trie, prev, use_prev, rows, row, policy, blockIdx.x == 0);
      if (threadIdx.x == 0) state = s;
    }
    __syncthreads();  // mask_from_lists_kernel's barriers order the next row's write
    mark_allowed(trie, state, lo, hi, keep);
    if (threadIdx.x == 0 && state == kStateTerminated && finished_token >= lo &&
        finished_token < hi) {
      mark_token(keep, lo, finished_token);
    }
  }
};

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

int follow_rows(const TrieView &trie, const TokenRows *prev, const TokenRows &rows,
                int32_t failure_policy, void *stream) {
  if (rows.n_rows == 0) return 0;
  const auto n_rows = static_cast<int64_t>(rows.n_rows);
  const TokenRows none{};
  return device::launch_kernel(device::follow_rows_kernel,
                               dim3(device::grid_for(n_rows, device::kFollowWarps)),
                               dim3(device::kFollowBlock), stream, trie, prev ? *prev : none,
                               prev != nullptr, rows, failure_policy);
}

int follow_rows_mask_logits(const TrieView &trie, const TokenRows *prev, const TokenRows &rows,
                            int32_t failure_policy, int32_t finished_token, const Logits &logits,
                            const DeviceShape &shape, void *stream) {
  if (rows.n_rows == 0) return 0;
  const Rows selected{nullptr, rows.n_rows, rows.n_rows};
  return device::launch_mask_from_lists(
      logits, selected,
      device::FollowLists{trie, prev ? *prev : TokenRows{}, prev != nullptr, rows, failure_policy,
                          finished_token},
      shape, stream);
}

int mask_logits_from_states(const TrieView &trie, const uint32_t *states, size_t n_rows,
                            const Logits &logits, const DeviceShape &shape, void *stream) {
  const Rows rows{nullptr, n_rows, n_rows};
  return device::launch_mask_from_lists(logits, rows, device::TrieLists{trie, states}, shape,
                                        stream);
}

}  // namespace launch
}  // namespace treemask::cuda
