// The constrained beam step on the device (treemask_cuda_beam_step) and the
// per-row top-k among allowed tokens (treemask_cuda_trie_topk_states): the
// CUDA twins of treemask.h section 8, with the same rules.
//
// One kernel per beam step, on the caller's stream, no allocation and no host
// synchronisation (graph-capturable). One block per slot:
// 1. the log-softmax normalizer of the slot's row (one read, 16-byte loads,
//    per vector one max and one rescale, exp2 of a fused multiply-add per
//    element; a warp-shuffle reduction), then the exact top-B of the slot's
//    own candidates into the workspace. A request's top-B lies within the
//    union of its beams' top-B (a candidate beyond its beam's B best has B
//    better ones).
// 2. The block that finishes a request's last slot (a per-request arrival
//    counter in the workspace: every block fences its writes and counts
//    itself in; the one that completes the count sees every other slot's
//    list) selects the exact top-B over those B x B keys, sorts them and
//    writes the outputs and the advanced states, then zeroes the counter for
//    the next step. So a step is one launch and the request's merge starts
//    the moment its slots are done, with no second kernel and no grid-wide
//    wait (the first design's two kernels were latency-bound at small
//    batches: 13-25 us each on an H100 for 2 x 70 slots).
//
// A candidate is a 64-bit key, larger = better: the score's bits made
// order-preserving in the upper 32 bits, then (B-1 - beam) and (V-1 - token)
// packed below, so the pinned tie rule (score desc, beam asc, token asc) is
// the key order and keys are unique. The exact top-k of unique keys is a
// radix select: the keys' minimum and maximum give the bits they all share,
// then 11-bit digits from the first bit where they differ, each pass a
// shared-memory histogram and a warp-shuffle suffix scan, stopping as soon as
// the digit's bin holds exactly the keys still needed; then one compaction.
// Keys are computed once into shared memory; past a small subset, the
// subset's own top-k sets a floor and one pass keeps only the keys above it
// (block_select). Scores -inf and NaN get key 0 and are never selected.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstring>

#include "kernels/cuda/masking.cuh"
#include "kernels/cuda/rules.cuh"  // PlainRules, kStateTerminated

namespace treemask::cuda {
namespace device {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr uint32_t kMaxK = launch::kMaxBeamWidth;
// Candidates a block selects from shared memory (16 KB of keys).
constexpr uint32_t kSharedKeys = 2048;
// Radix digits: 10 bits, or 8 (one bin per thread) for a selection among at
// most kSmallSelection keys, where a pass's fixed cost (clearing, scanning
// and deciding over the bins) would otherwise outweigh the keys' own.
constexpr int kDigitBits = 10;
constexpr int kSmallDigitBits = 8;
constexpr uint32_t kSmallSelection = 512;
constexpr uint32_t kBins = 1u << kDigitBits;
static_assert(kBins % kBlock == 0 && (1u << kSmallDigitBits) % kBlock == 0,
              "each thread scans whole bins");
// The smallest subset whose top-k floors a larger selection (block_select).
constexpr uint32_t kMinSubset = 256;
static_assert(2 * kMaxK <= kSharedKeys && kMinSubset <= kSharedKeys, "a subset fits");
// Sorting the winners by rank (every key counts the keys above it) costs
// kept^2 / kBlock compares: below this it beats a bitonic network.
constexpr uint32_t kRankSortMax = 256;
constexpr float kLog2e = 1.4426950408889634f;

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

// The same conversion in one instruction on the GPU (exact there too).
__device__ __forceinline__ float half_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  return f16_to_f32(h);
#endif
}

__device__ __forceinline__ float load_logit(const void *row, int32_t dtype, size_t c) {
  if (dtype == launch::kF32) return static_cast<const float *>(row)[c];
  const uint16_t h = static_cast<const uint16_t *>(row)[c];
  if (dtype == launch::kF16) return half_to_float(h);
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

// A block's shared memory: one selection's keys, its winners and its
// histogram, and the slots of the block-wide reductions.
struct Shared {
  uint64_t keys[kSharedKeys];  // candidates computed once; then the sorted winners
  uint64_t best[kMaxK];        // the request's winners (unsorted)
  uint32_t hist[kBins];        // digit histogram; then the winners' new states
  uint64_t red_min[kWarps], red_max[kWarps];
  uint32_t red_count[kWarps];
  float red_m[kWarps], red_s[kWarps];
  int red_bad[kWarps];
  uint64_t prefix, mask;
  uint32_t needed, appended;
  int done, last;
};

__device__ __forceinline__ unsigned warp_of() { return threadIdx.x / 32; }
__device__ __forceinline__ unsigned lane_of() { return threadIdx.x % 32; }

// ---- the normalizer -----------------------------------------------------------

// log(sum exp(x)) accumulated online: m the largest element seen, s the sum
// of exp(x - m). A vector of elements costs one max, at most one rescale
// and one exp2 of a fused multiply-add per element (the per-element branch
// and expf of the first design made bf16 rows compute-bound: 1.69x one read
// of the logits on an H100). NaN and +inf make s NaN, except a NaN among
// elements that are all -inf so far, which nan_seen records.
struct OnlineLse {
  float m = -INFINITY, s = 0.0f;
  bool nan_seen = false;

  template <int N>
  __device__ __forceinline__ void add(const float (&x)[N]) {
    float lm = x[0];
    for (int i = 1; i < N; ++i) lm = fmaxf(lm, x[i]);  // fmaxf ignores NaN
    if (lm > m) {
      s *= exp2f((m - lm) * kLog2e);  // m = -inf: s is 0, exp2(-inf) = 0
      m = lm;
    }
    if (m > -INFINITY) {
      const float mb = m * kLog2e;
      for (int i = 0; i < N; ++i) s += exp2f(fmaf(x[i], kLog2e, -mb));
    } else {
      for (int i = 0; i < N; ++i) nan_seen |= x[i] != x[i];
    }
  }

  __device__ __forceinline__ void merge(float m2, float s2, bool nan2) {
    const float mm = fmaxf(m, m2);
    nan_seen |= nan2;
    if (mm > -INFINITY) s = s * exp2f((m - mm) * kLog2e) + s2 * exp2f((m2 - mm) * kLog2e);
    m = mm;
  }
};

template <int kDtype>
__device__ __forceinline__ float element(const void *row, size_t c) {
  if constexpr (kDtype == launch::kF32) {
    return static_cast<const float *>(row)[c];
  } else if constexpr (kDtype == launch::kF16) {
    return half_to_float(static_cast<const uint16_t *>(row)[c]);
  } else {
    return float_from_bits(uint32_t{static_cast<const uint16_t *>(row)[c]} << 16);
  }
}

// The 16-bit lanes of a 32-bit word as floats.
template <int kDtype>
__device__ __forceinline__ void halves(uint32_t pair, float &lo, float &hi) {
  if constexpr (kDtype == launch::kF16) {
    lo = half_to_float(static_cast<uint16_t>(pair & 0xFFFFu));
    hi = half_to_float(static_cast<uint16_t>(pair >> 16));
  } else {
    lo = float_from_bits(pair << 16);
    hi = float_from_bits(pair & 0xFFFF0000u);
  }
}

// This thread's share of a row of n elements: 16-byte loads over the aligned
// part, single elements before and after it.
template <int kDtype>
__device__ void accumulate_row(const void *row, size_t n, OnlineLse &acc) {
  constexpr size_t eb = kDtype == launch::kF32 ? 4 : 2;
  constexpr int per_vec = static_cast<int>(16 / eb);
  const auto addr = reinterpret_cast<uintptr_t>(row);
  size_t head = ((16 - addr % 16) % 16) / eb;
  if ((addr % eb) != 0 || head > n) head = n;
  const size_t n_vec = (n - head) / per_vec;
  for (size_t c = threadIdx.x; c < head; c += blockDim.x) {
    const float x[1] = {element<kDtype>(row, c)};
    acc.add(x);
  }
  const auto *vec = reinterpret_cast<const uint4 *>(static_cast<const char *>(row) + head * eb);
  for (size_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
    const uint4 q = vec[v];
    float x[per_vec];
    if constexpr (kDtype == launch::kF32) {
      x[0] = float_from_bits(q.x);
      x[1] = float_from_bits(q.y);
      x[2] = float_from_bits(q.z);
      x[3] = float_from_bits(q.w);
    } else {
      halves<kDtype>(q.x, x[0], x[1]);
      halves<kDtype>(q.y, x[2], x[3]);
      halves<kDtype>(q.z, x[4], x[5]);
      halves<kDtype>(q.w, x[6], x[7]);
    }
    acc.add(x);
  }
  for (size_t c = head + n_vec * per_vec + threadIdx.x; c < n; c += blockDim.x) {
    const float x[1] = {element<kDtype>(row, c)};
    acc.add(x);
  }
}

// log(sum exp(row[c])) over c < n with every thread of the block; NaN when
// the row holds NaN or +inf, -inf when every element is -inf.
__device__ float block_logsumexp(const void *row, int32_t dtype, size_t n, Shared &sh) {
  OnlineLse acc;
  if (dtype == launch::kF32) {
    accumulate_row<launch::kF32>(row, n, acc);
  } else if (dtype == launch::kF16) {
    accumulate_row<launch::kF16>(row, n, acc);
  } else {
    accumulate_row<launch::kBF16>(row, n, acc);
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(kFullWarp, acc.m, offset);
    const float s2 = __shfl_xor_sync(kFullWarp, acc.s, offset);
    const int nan2 = __shfl_xor_sync(kFullWarp, acc.nan_seen ? 1 : 0, offset);
    acc.merge(m2, s2, nan2 != 0);
  }
  if (lane_of() == 0) {
    sh.red_m[warp_of()] = acc.m;
    sh.red_s[warp_of()] = acc.s;
    sh.red_bad[warp_of()] = acc.nan_seen ? 1 : 0;
  }
  __syncthreads();
  OnlineLse total;
  total.m = sh.red_m[0];
  total.s = sh.red_s[0];
  total.nan_seen = sh.red_bad[0] != 0;
  for (int w = 1; w < kWarps; ++w) total.merge(sh.red_m[w], sh.red_s[w], sh.red_bad[w] != 0);
  __syncthreads();  // the slots are reused by the next reduction
  if (total.nan_seen || !(total.s == total.s) || total.m == INFINITY) return NAN;
  return total.m > -INFINITY ? total.m + logf(total.s) : -INFINITY;
}

// ---- exact top-k of unique keys ------------------------------------------------

// Keys held in shared memory.
struct SharedKeys {
  const uint64_t *keys;
  __device__ uint64_t operator()(uint32_t i) const { return keys[i]; }
};

// The smallest and largest non-zero key of a set and how many there are.
struct KeyStats {
  uint64_t lo = ~uint64_t{0}, hi = 0;
  uint32_t count = 0;

  __device__ __forceinline__ void add(uint64_t key) {
    if (key == 0) return;
    lo = key < lo ? key : lo;
    hi = key > hi ? key : hi;
    ++count;
  }
  __device__ __forceinline__ void merge(uint64_t lo2, uint64_t hi2, uint32_t count2) {
    lo = lo2 < lo ? lo2 : lo;
    hi = hi2 > hi ? hi2 : hi;
    count += count2;
  }
};

// The block's total of every thread's stats, in every thread.
__device__ KeyStats block_stats(KeyStats st, Shared &sh) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint64_t lo2 = __shfl_xor_sync(kFullWarp, st.lo, offset);
    const uint64_t hi2 = __shfl_xor_sync(kFullWarp, st.hi, offset);
    const uint32_t count2 = __shfl_xor_sync(kFullWarp, st.count, offset);
    st.merge(lo2, hi2, count2);
  }
  if (lane_of() == 0) {
    sh.red_min[warp_of()] = st.lo;
    sh.red_max[warp_of()] = st.hi;
    sh.red_count[warp_of()] = st.count;
  }
  __syncthreads();
  KeyStats total;
  for (int w = 0; w < kWarps; ++w) total.merge(sh.red_min[w], sh.red_max[w], sh.red_count[w]);
  __syncthreads();
  return total;
}

template <class Gen>
__device__ KeyStats key_stats(const Gen &gen, uint32_t n, Shared &sh) {
  KeyStats st;
  for (uint32_t i = threadIdx.x; i < n; i += kBlock) st.add(gen(i));
  return block_stats(st, sh);
}

// gen(0 .. n) into sh.keys (n <= kSharedKeys), and their stats.
template <class Gen>
__device__ KeyStats materialize(const Gen &gen, uint32_t n, Shared &sh) {
  KeyStats st;
  for (uint32_t i = threadIdx.x; i < n; i += kBlock) {
    const uint64_t key = gen(i);
    sh.keys[i] = key;
    st.add(key);
  }
  return block_stats(st, sh);  // its barrier also publishes the keys
}

// Bits [0, bit] set.
__device__ __forceinline__ uint64_t bits_through(int bit) {
  return bit >= 63 ? ~uint64_t{0} : (uint64_t{2} << bit) - 1;
}

// One radix pass over the keys whose bits under `sh.mask` equal `sh.prefix`:
// the histogram of their digit of `bits` bits at bit lo, then the bin
// holding the needed-th largest. Updates sh.prefix / mask / needed and sets
// sh.done when that bin holds exactly the keys still needed.
template <class Gen>
__device__ void radix_pass(const Gen &gen, uint32_t n, int lo, int bits, Shared &sh) {
  const unsigned tid = threadIdx.x;
  const uint32_t bins = 1u << bits, per_thread = bins / kBlock;
  for (uint32_t b = tid; b < bins; b += kBlock) sh.hist[b] = 0;
  __syncthreads();
  const uint64_t prefix = sh.prefix, mask = sh.mask;
  const uint32_t needed = sh.needed;
  const uint64_t digit_mask = bins - 1;
  for (uint32_t i = tid; i < n; i += kBlock) {
    const uint64_t key = gen(i);
    if (key != 0 && (key & mask) == prefix) {
      atomicAdd(&sh.hist[static_cast<uint32_t>((key >> lo) & digit_mask)], 1u);
    }
  }
  __syncthreads();
  // Thread t owns bins [t * per_thread, (t + 1) * per_thread);
  // larger bins hold larger keys. `above`: the keys in bins past this
  // thread's, by a suffix scan over the lanes, then over the warps.
  uint32_t own = 0;
  for (uint32_t j = 0; j < per_thread; ++j) own += sh.hist[tid * per_thread + j];
  uint32_t suffix = own;  // this lane's bins and those of the lanes above it
  for (int offset = 1; offset < 32; offset <<= 1) {
    const uint32_t v = __shfl_down_sync(kFullWarp, suffix, offset);
    if (lane_of() + offset < 32) suffix += v;
  }
  if (lane_of() == 0) sh.red_count[warp_of()] = suffix;  // the warp's total
  __syncthreads();
  uint32_t above = suffix - own;
  for (unsigned w = warp_of() + 1; w < kWarps; ++w) above += sh.red_count[w];
  for (int j = static_cast<int>(per_thread) - 1; j >= 0; --j) {
    const uint32_t bin = tid * per_thread + static_cast<uint32_t>(j);
    const uint32_t in_bin = sh.hist[bin];
    if (above < needed && above + in_bin >= needed) {  // exactly one thread
      sh.prefix = prefix | (uint64_t{bin} << lo);
      sh.mask = mask | (digit_mask << lo);
      sh.needed = needed - above;
      sh.done = in_bin == needed - above;
    }
    above += in_bin;
  }
  __syncthreads();
}

// The least t such that exactly k of the (unique, non-zero) keys are >= t,
// given their stats with st.count > k: radix passes from the first bit
// where the smallest and largest key differ (the bits above are common to
// every key), until the needed-th key's bin holds exactly the keys needed.
template <class Gen>
__device__ uint64_t radix_threshold(const Gen &gen, uint32_t n, uint32_t k, const KeyStats &st,
                                    Shared &sh) {
  const int top = 63 - __clzll(static_cast<long long>(st.lo ^ st.hi));
  if (threadIdx.x == 0) {
    sh.mask = ~bits_through(top);
    sh.prefix = st.hi & sh.mask;
    sh.needed = k;
    sh.done = 0;
  }
  __syncthreads();
  // Digits [lo, lo + bits) from the top; the last one may reach above bits
  // already fixed, which the prefix then already holds.
  const int bits = n <= kSmallSelection ? kSmallDigitBits : kDigitBits;
  for (int hi = top; hi >= 0 && !sh.done; hi -= bits) {
    radix_pass(gen, n, hi - bits + 1 >= 0 ? hi - bits + 1 : 0, bits, sh);
  }
  return sh.prefix;  // keys >= prefix are exactly the k wanted
}

// Appends the non-zero keys of gen(0 .. n) that are >= floor to out, up to
// cap of them (one shared atomic per warp and pass); returns how many there
// are (which may exceed cap) and their stats, in every thread.
template <class Gen>
__device__ KeyStats compact(const Gen &gen, uint32_t n, uint64_t floor, uint64_t *out, uint32_t cap,
                            Shared &sh) {
  if (threadIdx.x == 0) sh.appended = 0;
  __syncthreads();
  KeyStats st;
  // Every lane runs the same number of passes (the warp calls need all 32).
  for (uint32_t base = 0; base < n; base += kBlock) {
    const uint32_t i = base + threadIdx.x;
    const uint64_t key = i < n ? gen(i) : 0;
    const bool take = key != 0 && key >= floor;
    const unsigned ballot = __ballot_sync(kFullWarp, take);
    uint32_t at = 0;
    if (lane_of() == 0 && ballot) {
      at = atomicAdd(&sh.appended, static_cast<uint32_t>(__popc(ballot)));
    }
    at = __shfl_sync(kFullWarp, at, 0);
    if (take) {
      st.add(key);
      const uint32_t slot = at + static_cast<uint32_t>(__popc(ballot & ((1u << lane_of()) - 1u)));
      if (slot < cap) out[slot] = key;
    }
  }
  return block_stats(st, sh);
}

// The min(k, non-zero keys) largest non-zero keys of gen(0 .. n), whose
// stats are st, into out[0 .. count) unordered; returns count in every
// thread. out must not be the keys gen reads.
template <class Gen>
__device__ uint32_t select_known(const Gen &gen, uint32_t n, uint32_t k, const KeyStats &st,
                                 uint64_t *out, Shared &sh) {
  const uint64_t floor = st.count > k ? radix_threshold(gen, n, k, st, sh) : 1;
  const KeyStats taken = compact(gen, n, floor, out, k, sh);
  return taken.count < k ? taken.count : k;
}

// The min(k, non-zero keys) largest non-zero keys of gen(0 .. n) into out[0
// .. count), unordered (out in global memory or sh.best, never sh.keys);
// returns count in every thread. Keys must be unique, k in [1, kMaxK].
// Every thread of the block must call it; it uses sh.keys and sh.hist.
//
// Up to kSubset keys are computed once into shared memory and selected
// there. Past that, the top-k of the first kSubset keys gives a floor (every
// key of the whole top-k is at least the subset's k-th), one pass over all
// keys keeps those at or above it in shared memory (about k * n / kSubset of
// them on random scores) and the selection runs over those; only when they
// overflow shared memory does it run over all keys, recomputing them each
// pass. (A slot of a 2,048-token codebook at depth 1 has 2,047 candidates:
// one pass over them instead of four.)
template <class Gen>
__device__ uint32_t block_select(const Gen &gen, uint32_t n, uint32_t k, uint64_t *out,
                                 Shared &sh) {
  const uint32_t subset = 2 * k > kMinSubset ? 2 * k : kMinSubset;  // <= kSharedKeys
  const uint32_t first = n < subset ? n : subset;
  KeyStats st = materialize(gen, first, sh);
  if (n == first) return select_known(SharedKeys{sh.keys}, n, k, st, out, sh);
  const uint64_t floor = st.count > k ? radix_threshold(SharedKeys{sh.keys}, first, k, st, sh) : 1;
  __syncthreads();  // the subset's keys are read; they are overwritten next
  auto kept = [&](uint32_t i) -> uint64_t {
    const uint64_t key = gen(i);
    return key >= floor ? key : 0;
  };
  st = compact(kept, n, floor, sh.keys, kSharedKeys, sh);
  if (st.count <= kSharedKeys) return select_known(SharedKeys{sh.keys}, st.count, k, st, out, sh);
  st = key_stats(kept, n, sh);
  return select_known(kept, n, k, st, out, sh);
}

// Sorts keys[0 .. count) descending into sorted[0 .. count) (distinct
// arrays in shared memory, count <= kMaxK). Keys are unique.
__device__ void block_sort_desc(const uint64_t *keys, uint32_t count, uint64_t *sorted) {
  if (count <= kRankSortMax) {
    for (uint32_t i = threadIdx.x; i < count; i += kBlock) {
      const uint64_t key = keys[i];
      uint32_t rank = 0;
      for (uint32_t j = 0; j < count; ++j) rank += keys[j] > key ? 1u : 0u;
      sorted[rank] = key;
    }
    __syncthreads();
    return;
  }
  // Bitonic over the next power of two, padded with zeros (sorted last).
  uint32_t p = 1;
  while (p < count) p <<= 1;
  for (uint32_t i = threadIdx.x; i < p; i += kBlock) sorted[i] = i < count ? keys[i] : 0;
  __syncthreads();
  for (uint32_t size = 2; size <= p; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint32_t i = threadIdx.x; i < p; i += kBlock) {
        const uint32_t j = i ^ stride;
        if (j > i) {
          const uint64_t a = sorted[i], b = sorted[j];
          const bool desc = (i & size) == 0;
          if (desc ? a < b : a > b) {
            sorted[i] = b;
            sorted[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// ---- the candidates of a state -------------------------------------------------

// The children the plain rule allows, then the stop tokens when it allows
// them (TERMINATED, FAILED and invalid states: the stop tokens only).
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
                                Shared &sh) {
  if (l.log_probs) return 0.0f;
  const float z = block_logsumexp(row_of(l, row), l.dtype, l.n_columns, sh);
  if (z != z && threadIdx.x == 0 && n_bad) atomicAdd(n_bad, 1u);
  return z;
}

// The best min(k, candidates) keys of a state into out (unordered).
template <class Score>
__device__ uint32_t select_candidates(const launch::TrieView &t, const Candidates &allowed,
                                      const Score &key_of, uint32_t k, uint64_t *out, Shared &sh) {
  auto gen = [&](uint32_t i) -> uint64_t { return key_of(allowed.token(t, i)); };
  return block_select(gen, allowed.n_total, k, out, sh);
}

// ---- the beam step ---------------------------------------------------------------

struct BeamStep {
  launch::TrieView t;
  launch::BeamLogits l;
  launch::KeyLayout layout;
  int64_t n_slots;
  uint32_t beam_width;
  uint32_t *states;
  float *scores;
  int32_t *parents;
  int32_t *tokens;
  uint64_t *ws_keys;     // n_slots * beam_width
  uint32_t *ws_counts;   // n_slots
  uint32_t *ws_arrived;  // n_requests, zero between steps
  uint32_t *n_bad;
};

// The best min(B, candidates) keys of one slot into its workspace list.
__device__ void select_slot(const BeamStep &p, int64_t slot, Shared &sh) {
  const float s = p.scores[slot];
  const uint32_t state = p.states[slot];
  const auto beam = static_cast<uint32_t>(slot % p.beam_width);
  uint64_t *out = p.ws_keys + slot * p.beam_width;
  uint32_t count = 0;
  if (!(s > -INFINITY)) {
    // dead, an initial duplicate, or NaN: offers nothing
  } else if (state == kStateTerminated) {  // carries over with its score unchanged
    const uint64_t key = make_key(s, beam, p.t.stop_tokens[0], p.layout);
    if (threadIdx.x == 0) out[0] = key;
    count = key != 0 ? 1 : 0;
  } else {
    const float z = row_normalizer(p.l, static_cast<size_t>(slot), p.n_bad, sh);
    if (z == z) {  // uniform: a bad row offers nothing
      const Candidates allowed(p.t, state);
      const void *row = row_of(p.l, static_cast<size_t>(slot));
      const launch::BeamLogits &l = p.l;
      const launch::KeyLayout &layout = p.layout;
      auto key_of = [&](int32_t token) -> uint64_t {
        const float score = s + (load_logit(row, l.dtype, static_cast<size_t>(token)) - z);
        return make_key(score, beam, token, layout);
      };
      count = select_candidates(p.t, allowed, key_of, p.beam_width, out, sh);
    }
  }
  if (threadIdx.x == 0) p.ws_counts[slot] = count;
}

// The request's merge, by the block that completed its last slot: the exact
// top-B over its slots' lists, sorted, then the outputs and the advanced
// states (every old state the block needs is read before any is written;
// requests touch disjoint slots).
__device__ void finish_request(const BeamStep &p, int64_t r, Shared &sh) {
  const uint32_t B = p.beam_width;
  const int64_t base = r * B;
  // Lists other blocks wrote: read past the (incoherent) L1.
  auto gen = [&](uint32_t i) -> uint64_t {
    const uint32_t b = i / B, j = i - b * B;
    return j < __ldcg(p.ws_counts + base + b) ? __ldcg(p.ws_keys + (base + b) * B + j) : 0;
  };
  const uint32_t kept = block_select(gen, B * B, B, sh.best, sh);
  block_sort_desc(sh.best, kept, sh.keys);
  const uint64_t *sorted = sh.keys;
  uint32_t *next = sh.hist;
  for (uint32_t i = threadIdx.x; i < B; i += kBlock) {
    uint32_t state = kStateTerminated;
    if (i < kept) {
      const uint32_t parent = p.states[base + key_beam(sorted[i], p.layout)];
      // A selected token is allowed: a child, or a stop token (TERMINATED).
      if (parent < p.t.n_nodes) {
        state = rules_of(p.t).step_node(parent, key_token(sorted[i], p.layout));
      }
    }
    next[i] = state;
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < B; i += kBlock) {
    const bool live = i < kept;
    p.parents[base + i] = live ? static_cast<int32_t>(key_beam(sorted[i], p.layout)) : -1;
    p.tokens[base + i] = live ? key_token(sorted[i], p.layout) : -1;
    p.scores[base + i] = live ? key_score(sorted[i]) : -INFINITY;
    p.states[base + i] = next[i];
  }
  if (threadIdx.x == 0) p.ws_arrived[r] = 0;  // ready for the next step
  __syncthreads();
}

__global__ void __launch_bounds__(kBlock) beam_step_kernel(BeamStep p) {
  __shared__ Shared sh;
  for (int64_t slot = blockIdx.x; slot < p.n_slots; slot += gridDim.x) {
    select_slot(p, slot, sh);
    // Count this slot in; the block completing its request merges it. Each
    // thread fences its own writes to the list (device scope) before the
    // barrier, so they are visible to the merging block before the count.
    __threadfence();
    __syncthreads();
    const int64_t r = slot / p.beam_width;
    if (threadIdx.x == 0) sh.last = atomicAdd(p.ws_arrived + r, 1u) == p.beam_width - 1;
    __syncthreads();
    if (sh.last) {
      __threadfence();
      finish_request(p, r, sh);
    }
  }
}

__global__ void __launch_bounds__(kBlock)
    topk_kernel(launch::TrieView t, launch::BeamLogits l, launch::KeyLayout layout,
                const uint32_t *states, int64_t n_rows, uint32_t k, int32_t *out_tokens,
                float *out_scores, size_t *out_counts, uint32_t *n_bad) {
  __shared__ Shared sh;
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    uint32_t kept = 0;
    if (k > 0) {
      const float z = row_normalizer(l, static_cast<size_t>(row), n_bad, sh);
      if (z == z) {
        // TERMINATED allows its stop tokens, as fill does.
        const Candidates allowed(t, states[row]);
        const void *data = row_of(l, static_cast<size_t>(row));
        auto key_of = [&](int32_t token) -> uint64_t {
          return make_key(load_logit(data, l.dtype, static_cast<size_t>(token)) - z, 0, token,
                          layout);
        };
        kept = select_candidates(t, allowed, key_of, k, sh.best, sh);
        block_sort_desc(sh.best, kept, sh.keys);
      }
    }
    // Entries past the count read token -1, score -inf (treemask.h).
    for (uint32_t j = threadIdx.x; j < k; j += kBlock) {
      const bool live = j < kept;
      out_tokens[row * k + j] = live ? key_token(sh.keys[j], layout) : -1;
      out_scores[row * k + j] = live ? key_score(sh.keys[j]) : -INFINITY;
    }
    if (threadIdx.x == 0) out_counts[row] = kept;
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
              size_t n_requests, uint32_t beam_width, const BeamState &state,
              const BeamWorkspace &ws, uint32_t *n_bad_rows, void *stream) {
  if (n_requests == 0) return 0;
  const int64_t slots = static_cast<int64_t>(n_requests) * beam_width;
  const device::BeamStep p{trie,         logits,       layout,        slots,        beam_width,
                           state.states, state.scores, state.parents, state.tokens, ws.keys,
                           ws.counts,    ws.arrived,   n_bad_rows};
  return device::launch_kernel(device::beam_step_kernel, dim3(device::grid_for_blocks(slots)),
                               dim3(device::kBlock), stream, p);
}

int trie_topk(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              const uint32_t *states, size_t n_rows, uint32_t k, int32_t *out_tokens,
              float *out_scores, size_t *out_counts, uint32_t *n_bad_rows, void *stream) {
  if (n_rows == 0) return 0;
  const auto rows = static_cast<int64_t>(n_rows);
  return device::launch_kernel(device::topk_kernel, dim3(device::grid_for_blocks(rows)),
                               dim3(device::kBlock), stream, trie, logits, layout, states, rows, k,
                               out_tokens, out_scores, out_counts, n_bad_rows);
}

}  // namespace launch
}  // namespace treemask::cuda
