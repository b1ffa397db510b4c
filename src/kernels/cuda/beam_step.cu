// The constrained beam step on the device (treemask_cuda_beam_step) and the
// per-row top-k among allowed tokens (treemask_cuda_trie_topk_states): the
// CUDA twins of treemask.h section 8, with the same rules.
//
// Two kernels per beam step, both on the caller's stream, no allocation and
// no host synchronisation (graph-capturable):
// 1. slot_select_kernel, one block per slot: the log-softmax normalizer of
//    the slot's row (one read, online max / sum per thread, then a block
//    reduction), then the exact top-B of the slot's own candidates into the
//    workspace. A request's top-B lies within the union of its beams'
//    top-B (a candidate beyond its beam's B best has B better ones).
// 2. request_select_kernel, one block per request: the exact top-B over
//    those B x B keys, sorted, then the outputs and the state advance (every
//    old state a block needs is read before any is written; requests touch
//    disjoint slots).
//
// A candidate is a 64-bit key, larger = better: the score's bits made
// order-preserving in the upper 32 bits, then (B-1 - beam) and (V-1 -
// token) packed below, so the pinned tie rule (score desc, beam asc, token
// asc) is the key order and keys are unique. The exact top-k of unique keys
// is a radix select (8-bit digits from the top, stopping as soon as the
// digit's bin holds exactly the keys still needed), then one compaction.
// Scores -inf and NaN get key 0 and are never selected.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstring>

#include "kernels/cuda/masking.cuh"
#include "kernels/cuda/rules.cuh"  // PlainRules, kStateTerminated

namespace treemask::cuda {
namespace device {
namespace {

constexpr int kSelectBlock = 256;  // the radix scan assumes exactly 256 threads
constexpr uint32_t kMaxK = launch::kMaxBeamWidth;

__device__ __forceinline__ float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

__device__ __forceinline__ uint32_t bits_from_float(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

using kernels::f16_to_f32;  // the CPU's own (kernels/dtype.h)

__device__ __forceinline__ float load_logit(const void *row, int32_t dtype, size_t c) {
  if (dtype == launch::kF32) return static_cast<const float *>(row)[c];
  const uint16_t h = static_cast<const uint16_t *>(row)[c];
  if (dtype == launch::kF16) return f16_to_f32(h);
  return float_from_bits(uint32_t{h} << 16);
}

__device__ __forceinline__ const void *row_of(const launch::BeamLogits &l, size_t i) {
  const size_t bytes = l.dtype == launch::kF32 ? 4 : 2;
  return static_cast<const char *>(l.data) + i * l.row_stride * bytes;
}

// Order-preserving map of a float (not NaN) to uint32: a < b iff map(a) <
// map(b). -inf maps to 0x007FFFFF, so every selectable key is non-zero.
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t b = bits_from_float(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float unordered(uint32_t o) {
  return float_from_bits((o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o);
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

struct SelectShared {
  uint32_t hist[256];
  uint32_t scan[256];
  uint64_t prefix;
  uint64_t mask;
  uint32_t needed;
  uint32_t count;
  int done;
};

// The min(k, number of non-zero keys) largest non-zero keys of gen(0 ..
// n) into out[0 .. count), unordered; returns count in every thread. Keys
// must be unique. Every thread of the block must call it.
template <class Gen>
__device__ uint32_t block_select(const Gen &gen, uint32_t n, uint32_t k, uint64_t *out,
                                 SelectShared &sh) {
  const unsigned tid = threadIdx.x;
  if (tid == 0) {
    sh.prefix = 0;
    sh.mask = 0;
    sh.needed = k;
    sh.count = 0;
    sh.done = 0;
  }
  uint64_t threshold = 1;  // every non-zero key
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (unsigned b = tid; b < 256; b += blockDim.x) sh.hist[b] = 0;
    __syncthreads();
    const uint64_t prefix = sh.prefix, mask = sh.mask;
    const uint32_t needed = sh.needed;
    // Runs of equal digits are counted in a register: in the first passes
    // most keys share their digit (the exponent of similar scores), and one
    // shared atomic per run instead of per key avoids serialising on a bin.
    uint32_t run_bin = 0, run = 0;
    for (uint32_t i = tid; i < n; i += blockDim.x) {
      const uint64_t key = gen(i);
      if (key != 0 && (key & mask) == prefix) {
        const auto bin = static_cast<uint32_t>((key >> shift) & 255u);
        if (run != 0 && bin != run_bin) {
          atomicAdd(&sh.hist[run_bin], run);
          run = 0;
        }
        run_bin = bin;
        ++run;
      }
    }
    if (run != 0) atomicAdd(&sh.hist[run_bin], run);
    __syncthreads();
    // Suffix sums: scan[b] = keys in bins >= b.
    sh.scan[tid] = sh.hist[tid];
    __syncthreads();
    for (unsigned off = 1; off < 256; off <<= 1) {
      const uint32_t v = tid + off < 256 ? sh.scan[tid + off] : 0;
      __syncthreads();
      sh.scan[tid] += v;
      __syncthreads();
    }
    if (shift == 56 && sh.scan[0] <= k) {
      // At most k keys at all: take every one.
      __syncthreads();
      break;
    }
    const uint32_t incl = sh.scan[tid];
    const uint32_t excl = incl - sh.hist[tid];
    if (excl < needed && incl >= needed) {
      sh.prefix = prefix | (uint64_t{tid} << shift);
      sh.mask = mask | (uint64_t{255} << shift);
      sh.needed = needed - excl;
      sh.done = sh.hist[tid] == needed - excl;
    }
    __syncthreads();
    if (sh.done) {
      threshold = sh.prefix;  // keys >= prefix are exactly the k wanted
      break;
    }
  }
  for (uint32_t i = tid; i < n; i += blockDim.x) {
    const uint64_t key = gen(i);
    if (key != 0 && key >= threshold) {
      const uint32_t at = atomicAdd(&sh.count, 1u);
      if (at < k) out[at] = key;
    }
  }
  __syncthreads();
  const uint32_t count = sh.count < k ? sh.count : k;
  __syncthreads();  // sh is reused by the caller's next selection
  return count;
}

// Sorts keys[0 .. count) descending (bitonic, in shared memory of at least
// the next power of two >= count entries, <= kMaxK).
__device__ void block_sort_desc(uint64_t *keys, uint32_t count) {
  uint32_t p = 1;
  while (p < count) p <<= 1;
  for (uint32_t i = count + threadIdx.x; i < p; i += blockDim.x) keys[i] = 0;
  __syncthreads();
  for (uint32_t size = 2; size <= p; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint32_t i = threadIdx.x; i < p; i += blockDim.x) {
        const uint32_t j = i ^ stride;
        if (j > i) {
          const uint64_t a = keys[i], b = keys[j];
          const bool desc = (i & size) == 0;
          if (desc ? a < b : a > b) {
            keys[i] = b;
            keys[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

struct LseShared {
  float m[kSelectBlock];
  float s[kSelectBlock];
  int bad[kSelectBlock];
};

// log(sum exp(row[c])) over c < n with every thread of the block; NaN when
// the row holds NaN or +inf, -inf when every element is -inf. Online max /
// sum per thread, then a tree reduction.
struct OnlineLse {
  float m = -INFINITY, s = 0.0f;
  int bad = 0;
  __device__ __forceinline__ void add(float x) {
    if (!(x < INFINITY)) {  // NaN or +inf
      bad = 1;
    } else if (x > m) {
      s = s * expf(m - x) + 1.0f;
      m = x;
    } else if (x > -INFINITY) {
      s += expf(x - m);
    }
  }
};

// The 16-bit lanes of a 16-byte vector as floats.
__device__ __forceinline__ void add_halves(OnlineLse &acc, uint32_t pair, int32_t dtype) {
  const auto lo = static_cast<uint16_t>(pair & 0xFFFFu), hi = static_cast<uint16_t>(pair >> 16);
  if (dtype == launch::kF16) {
    acc.add(f16_to_f32(lo));
    acc.add(f16_to_f32(hi));
  } else {
    acc.add(float_from_bits(uint32_t{lo} << 16));
    acc.add(float_from_bits(uint32_t{hi} << 16));
  }
}

__device__ float block_logsumexp(const void *row, int32_t dtype, size_t n, LseShared &sh) {
  OnlineLse acc;
  // 16-byte loads over the aligned part of the row (one load instruction
  // per 4 or 8 logits), single elements before and after it.
  const size_t eb = dtype == launch::kF32 ? 4 : 2;
  const auto addr = reinterpret_cast<uintptr_t>(row);
  size_t head = ((16 - addr % 16) % 16) / eb;
  if ((addr % eb) != 0 || head > n) head = n;
  const size_t per_vec = 16 / eb;
  const size_t n_vec = (n - head) / per_vec;
  for (size_t c = threadIdx.x; c < head; c += blockDim.x) acc.add(load_logit(row, dtype, c));
  const auto *vec = reinterpret_cast<const uint4 *>(static_cast<const char *>(row) + head * eb);
  for (size_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
    const uint4 q = vec[v];
    if (dtype == launch::kF32) {
      acc.add(float_from_bits(q.x));
      acc.add(float_from_bits(q.y));
      acc.add(float_from_bits(q.z));
      acc.add(float_from_bits(q.w));
    } else {
      add_halves(acc, q.x, dtype);
      add_halves(acc, q.y, dtype);
      add_halves(acc, q.z, dtype);
      add_halves(acc, q.w, dtype);
    }
  }
  for (size_t c = head + n_vec * per_vec + threadIdx.x; c < n; c += blockDim.x) {
    acc.add(load_logit(row, dtype, c));
  }
  const float m = acc.m, s = acc.s;
  const int bad = acc.bad;
  const unsigned tid = threadIdx.x;
  sh.m[tid] = m;
  sh.s[tid] = s;
  sh.bad[tid] = bad;
  __syncthreads();
  for (unsigned half = kSelectBlock / 2; half > 0; half >>= 1) {
    if (tid < half) {
      const float m1 = sh.m[tid], m2 = sh.m[tid + half];
      const float mm = m1 > m2 ? m1 : m2;
      float ss = 0.0f;
      if (mm > -INFINITY) ss = sh.s[tid] * expf(m1 - mm) + sh.s[tid + half] * expf(m2 - mm);
      sh.m[tid] = mm;
      sh.s[tid] = ss;
      sh.bad[tid] |= sh.bad[tid + half];
    }
    __syncthreads();
  }
  float z = sh.bad[0] ? NAN : (sh.m[0] > -INFINITY ? sh.m[0] + logf(sh.s[0]) : -INFINITY);
  __syncthreads();  // sh is reused by the next row
  return z;
}

// The candidates of a state, indexed: the children the plain rule allows,
// then the stop tokens when it allows them (TERMINATED, FAILED and invalid
// states: the stop tokens only).
struct Candidates {
  Allowed a;
  uint32_t n_total;

  __device__ Candidates(const launch::TrieView &t, uint32_t state)
      : a(rules_of(t).allowed(state)), n_total(a.n_children + (a.stops ? t.n_stop_tokens : 0)) {}
  __device__ int32_t token(const launch::TrieView &t, uint32_t i) const {
    return i < a.n_children ? a.children[i] : t.stop_tokens[i - a.n_children];
  }
};

// The normalizer of one row, or NaN (and the bad-row counter bumped) for a
// row holding NaN / +inf.
__device__ float row_normalizer(const launch::BeamLogits &l, size_t row, uint32_t *n_bad,
                                LseShared &sh) {
  if (l.log_probs) return 0.0f;
  const float z = block_logsumexp(row_of(l, row), l.dtype, l.n_columns, sh);
  if (z != z && threadIdx.x == 0 && n_bad) atomicAdd(n_bad, 1u);
  return z;
}

__global__ void __launch_bounds__(kSelectBlock)
    slot_select_kernel(launch::TrieView t, launch::BeamLogits l, launch::KeyLayout layout,
                       int64_t n_slots, uint32_t beam_width, const uint32_t *states,
                       const float *scores, uint64_t *ws_keys, uint32_t *ws_counts,
                       uint32_t *n_bad) {
  __shared__ SelectShared sel;
  __shared__ LseShared lse;
  for (int64_t slot = blockIdx.x; slot < n_slots; slot += gridDim.x) {
    const float s = scores[slot];
    const uint32_t state = states[slot];
    const auto beam = static_cast<uint32_t>(slot % beam_width);
    uint64_t *out = ws_keys + slot * beam_width;
    if (!(s > -INFINITY)) {  // dead, an initial duplicate, or NaN: offers nothing
      if (threadIdx.x == 0) ws_counts[slot] = 0;
      continue;
    }
    if (state == kStateTerminated) {  // carries over with its score unchanged
      if (threadIdx.x == 0) {
        out[0] = make_key(s, beam, t.stop_tokens[0], layout);
        ws_counts[slot] = out[0] != 0 ? 1 : 0;
      }
      continue;
    }
    const float z = row_normalizer(l, static_cast<size_t>(slot), n_bad, lse);
    const Candidates allowed(t, state);
    const void *row = row_of(l, static_cast<size_t>(slot));
    auto gen = [&](uint32_t i) -> uint64_t {
      const int32_t token = allowed.token(t, i);
      const float score = s + (load_logit(row, l.dtype, static_cast<size_t>(token)) - z);
      return make_key(score, beam, token, layout);
    };
    const uint32_t count = block_select(gen, allowed.n_total, beam_width, out, sel);
    if (threadIdx.x == 0) ws_counts[slot] = count;
  }
}

__global__ void __launch_bounds__(kSelectBlock)
    request_select_kernel(launch::TrieView t, launch::KeyLayout layout, int64_t n_requests,
                          uint32_t beam_width, uint32_t *states, float *scores, int32_t *parents,
                          int32_t *tokens, const uint64_t *ws_keys, const uint32_t *ws_counts) {
  __shared__ SelectShared sel;
  __shared__ uint64_t best[kMaxK];
  __shared__ uint32_t next[kMaxK];
  const uint32_t B = beam_width;
  for (int64_t r = blockIdx.x; r < n_requests; r += gridDim.x) {
    const int64_t base = r * B;
    auto gen = [&](uint32_t i) -> uint64_t {
      const uint32_t b = i / B, j = i - b * B;
      return j < ws_counts[base + b] ? ws_keys[(base + b) * B + j] : 0;
    };
    const uint32_t kept = block_select(gen, B * B, B, best, sel);
    block_sort_desc(best, kept);
    // Every new state from the old ones, before any slot is overwritten.
    for (uint32_t i = threadIdx.x; i < B; i += blockDim.x) {
      uint32_t n = kStateTerminated;
      if (i < kept) {
        const uint32_t parent = states[base + key_beam(best[i], layout)];
        // A selected token is allowed: a child, or a stop token (TERMINATED).
        if (parent < t.n_nodes) n = rules_of(t).step_node(parent, key_token(best[i], layout));
      }
      next[i] = n;
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < B; i += blockDim.x) {
      const bool live = i < kept;
      parents[base + i] = live ? static_cast<int32_t>(key_beam(best[i], layout)) : -1;
      tokens[base + i] = live ? key_token(best[i], layout) : -1;
      scores[base + i] = live ? key_score(best[i]) : -INFINITY;
      states[base + i] = next[i];
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kSelectBlock)
    topk_kernel(launch::TrieView t, launch::BeamLogits l, launch::KeyLayout layout,
                const uint32_t *states, int64_t n_rows, uint32_t k, int32_t *out_tokens,
                float *out_scores, int32_t *out_counts, uint32_t *n_bad) {
  __shared__ SelectShared sel;
  __shared__ LseShared lse;
  __shared__ uint64_t best[kMaxK];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    if (k == 0) {
      if (threadIdx.x == 0) out_counts[row] = 0;
      continue;
    }
    const float z = row_normalizer(l, static_cast<size_t>(row), n_bad, lse);
    const Candidates allowed(t, states[row]);  // TERMINATED allows its stop tokens, as fill
    const void *data = row_of(l, static_cast<size_t>(row));
    auto gen = [&](uint32_t i) -> uint64_t {
      const int32_t token = allowed.token(t, i);
      return make_key(load_logit(data, l.dtype, static_cast<size_t>(token)) - z, 0, token, layout);
    };
    const uint32_t kept = block_select(gen, allowed.n_total, k, best, sel);
    block_sort_desc(best, kept);
    for (uint32_t j = threadIdx.x; j < kept; j += blockDim.x) {
      out_tokens[row * k + j] = key_token(best[j], layout);
      out_scores[row * k + j] = key_score(best[j]);
    }
    if (threadIdx.x == 0) out_counts[row] = static_cast<int32_t>(kept);
    __syncthreads();
  }
}

unsigned grid_for_blocks(int64_t blocks) {
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t{1} << 20));
}

}  // namespace
}  // namespace device

namespace launch {

int beam_step(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              size_t n_requests, uint32_t beam_width, uint32_t *states, float *scores,
              int32_t *parents, int32_t *tokens, uint64_t *ws_keys, uint32_t *ws_counts,
              uint32_t *n_bad_rows, void *stream) {
  if (n_requests == 0) return 0;
  const auto requests = static_cast<int64_t>(n_requests);
  const int64_t slots = requests * beam_width;
  int e = device::launch_kernel(device::slot_select_kernel, dim3(device::grid_for_blocks(slots)),
                                dim3(device::kSelectBlock), stream, trie, logits, layout, slots,
                                beam_width, states, scores, ws_keys, ws_counts, n_bad_rows);
  if (e != 0) return e;
  return device::launch_kernel(device::request_select_kernel,
                               dim3(device::grid_for_blocks(requests)), dim3(device::kSelectBlock),
                               stream, trie, layout, requests, beam_width, states, scores, parents,
                               tokens, ws_keys, ws_counts);
}

int trie_topk(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              const uint32_t *states, size_t n_rows, uint32_t k, int32_t *out_tokens,
              float *out_scores, int32_t *out_counts, uint32_t *n_bad_rows, void *stream) {
  if (n_rows == 0) return 0;
  const auto rows = static_cast<int64_t>(n_rows);
  return device::launch_kernel(device::topk_kernel, dim3(device::grid_for_blocks(rows)),
                               dim3(device::kSelectBlock), stream, trie, logits, layout, states,
                               rows, k, out_tokens, out_scores, out_counts, n_bad_rows);
}

}  // namespace launch
}  // namespace treemask::cuda
