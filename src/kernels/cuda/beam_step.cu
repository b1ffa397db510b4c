// The constrained beam step on the device (treemask_cuda_beam_step) and the
// per-row top-k among allowed tokens (treemask_cuda_trie_topk_states): the
// CUDA twins of treemask.h section 8, with the same rules.
//
// One kernel per beam step, on the caller's stream, no allocation and no host
// synchronisation (graph-capturable). Two phases, one launch:
// 1. Per slot: the log-softmax normalizer of the slot's row (one read,
//    16-byte loads, 32 elements per batch of loads in flight, exp2 of a fused
//    multiply-add per element summed pairwise), then the exact top-B of the
//    slot's own candidates, written to the slot's list in the workspace: B
//    keys (the best ones, then zeros) and the state each leads to. A
//    request's top-B lies within the union of its beams' top-B (a candidate
//    beyond its beam's B best has B better ones).
// 2. Per request, by the block that completes its last slot (a per-request
//    arrival counter in the workspace: every thread fences its writes, the
//    block counts its slots in; the one that completes the count sees every
//    other slot's list): the exact top-B over the request's B x B keys (one
//    contiguous array, read with independent loads), sorted, then the
//    outputs and the advanced states; the counter is zeroed for the next
//    step.
// Rows of at most launch::kWarpMaxColumns columns with B <= kWarpMaxBeamWidth
// (STATIC's 2,048-code vocabularies, a wide batch of short rows) run one
// warp per slot, eight slots per block: phase 1 then synchronises only
// within the warp (the first design's block per slot spent most of a step
// in block-wide barriers and in chains of dependent loads: 12-27 us per step
// on an H200 for 2 x 70 slots over 2,048 tokens), and each winner's next
// state comes from its candidate index, so the merge needs no trie search.
// Larger rows run one block per slot (the normalizer needs the block's
// loads in flight).
//
// A candidate is a 64-bit key, larger = better: the score's bits made
// order-preserving in the upper 32 bits, then (B-1 - beam) and (V-1 - token)
// packed below, so the pinned tie rule (score desc, beam asc, token asc) is
// the key order and keys are unique. The exact top-k of unique keys is a
// radix select: the keys' minimum and maximum give the bits they all share,
// then 8- or 10-bit digits from the first bit where they differ, each pass a
// shared-memory histogram and a warp-shuffle suffix scan, stopping as soon as
// the digit's bin holds exactly the keys still needed; then one compaction.
// Up to a group's capacity the keys are computed once into shared memory
// and selected there; past it, the top-k of the first `capacity` keys sets a
// floor and one pass keeps the keys above it (group_select). Scores -inf and
// NaN get key 0 and are never selected.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstring>

#include "kernels/cuda/masking.cuh"
#include "kernels/cuda/rules.cuh"  // PlainRules, kStateTerminated

// Loops with a constant trip count, unrolled so that their loads are in
// flight together (the emulation's host compiler needs no hint).
#if defined(__CUDACC__)
#define TREEMASK_UNROLL _Pragma("unroll")
#else
#define TREEMASK_UNROLL
#endif

namespace treemask::cuda {
namespace device {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
constexpr uint32_t kMaxK = launch::kMaxBeamWidth;
// Keys a block selects from shared memory (16 KB).
constexpr uint32_t kSharedKeys = 2048;
// Radix digits of a block: 10 bits, or 8 (one bin per thread) for a
// selection among at most kSmallSelection keys, where a pass's fixed cost
// (clearing, scanning and deciding over the bins) would otherwise outweigh
// the keys' own. A warp always uses 8 (eight bins per lane).
constexpr int kDigitBits = 10;
constexpr int kSmallDigitBits = 8;
constexpr uint32_t kSmallSelection = 512;
constexpr uint32_t kBins = 1u << kDigitBits;
constexpr uint32_t kWarpBins = 1u << kSmallDigitBits;
static_assert(kBins % kBlock == 0 && kWarpBins % kBlock == 0 && kWarpBins % 32 == 0,
              "each thread scans whole bins");
static_assert(kMaxK <= kSharedKeys, "a selection's winners fit");
// Sorting the winners by rank (every key counts the keys above it) costs
// kept^2 / kBlock compares: below this it beats a bitonic network.
constexpr uint32_t kRankSortMax = 256;
constexpr float kLog2e = 1.4426950408889634f;
// Elements of the normalizer's batch: its loads are issued together.
constexpr int kLseBatch = 32;
// Keys generated per thread before any of them is used (their loads overlap).
constexpr int kKeyBatch = 4;

// The warp kernel: each warp selects in its own 512 keys (4 KB); a request's
// merge uses the block's shared memory once its warps are done.
constexpr uint32_t kWarpKeys = 512;
constexpr uint32_t kWarpMaxK = launch::kWarpMaxBeamWidth;
static_assert(kWarpMaxK <= kWarpKeys, "a warp's winners fit");

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

// A selection's shared scalars, and the slots of a block's reductions.
struct SelectState {
  uint64_t prefix, mask;
  uint32_t needed, appended;
  int done;
  uint64_t red_min[kWarps], red_max[kWarps];
  uint32_t red_count[kWarps];
};

// Where a group selects: `capacity` keys and a histogram of shared memory,
// and (nullable) where a merge keeps each kept key's source index.
struct SelectSpace {
  uint64_t *keys;
  uint32_t capacity;
  uint32_t *hist;
  SelectState *st;
  uint32_t *idx;
};

// ---- the normalizer -----------------------------------------------------------

// Folds t[0 .. 2W) pairwise into t[0] (every level a constant trip count,
// so the array stays in registers).
template <int W, int N, class Op>
__device__ __forceinline__ void fold(float (&t)[N], const Op &op) {
  if constexpr (W > 0) {
    TREEMASK_UNROLL
    for (int i = 0; i < W; ++i) t[i] = op(t[i], t[i + W]);
    fold<W / 2>(t, op);
  }
}

template <int N>
__device__ __forceinline__ float pairwise_max(const float (&x)[N]) {
  float t[N];
  TREEMASK_UNROLL
  for (int i = 0; i < N; ++i) t[i] = x[i];
  fold<N / 2>(t, [](float a, float b) { return fmaxf(a, b); });  // fmaxf ignores NaN
  return t[0];
}

// log(sum exp(x)) accumulated online: m the largest element seen, s the sum
// of exp(x - m). A batch of elements costs one max, at most one rescale
// and one exp2 of a fused multiply-add per element, summed pairwise (a
// serial sum would make each batch wait on N dependent adds). NaN and +inf
// make s NaN, except a NaN among elements that are all -inf so far, which
// nan_seen records.
struct OnlineLse {
  float m = -INFINITY, s = 0.0f;
  bool nan_seen = false;

  template <int N>  // a power of two
  __device__ __forceinline__ void add(const float (&x)[N]) {
    const float lm = pairwise_max(x);
    if (lm > m) {
      s *= exp2f((m - lm) * kLog2e);  // m = -inf: s is 0, exp2(-inf) = 0
      m = lm;
    }
    if (m > -INFINITY) {
      const float mb = m * kLog2e;
      float e[N];
      TREEMASK_UNROLL
      for (int i = 0; i < N; ++i) e[i] = exp2f(fmaf(x[i], kLog2e, -mb));
      fold<N / 2>(e, [](float a, float b) { return a + b; });
      s += e[0];
    } else {
      TREEMASK_UNROLL
      for (int i = 0; i < N; ++i) nan_seen |= x[i] != x[i];
    }
  }

  // Symmetric in its two operands up to fma contraction (group_logsumexp
  // broadcasts lane 0's result after its butterfly).
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

// The elements of a 16-byte vector as floats.
template <int kDtype>
__device__ __forceinline__ void unpack(const uint4 &q, float *x) {
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
}

// This thread's share of a row of n elements, the group striding over it:
// 16-byte loads over the aligned part, the loads of kLseBatch elements
// issued together (with one load in flight per thread, a block's reads of
// a long bf16 row reached only ~70% of the memory bandwidth on an H200),
// single elements before and after it.
template <int kDtype, class G>
__device__ void accumulate_row(const void *row, size_t n, OnlineLse &acc) {
  constexpr size_t eb = kDtype == launch::kF32 ? 4 : 2;
  constexpr int per_vec = static_cast<int>(16 / eb);
  constexpr int kVecs = kLseBatch / per_vec;
  constexpr size_t S = G::kSize;
  const size_t r = G::rank();
  const auto addr = reinterpret_cast<uintptr_t>(row);
  size_t head = ((16 - addr % 16) % 16) / eb;
  if ((addr % eb) != 0 || head > n) head = n;
  const size_t n_vec = (n - head) / per_vec;
  for (size_t c = r; c < head; c += S) {
    const float x[1] = {element<kDtype>(row, c)};
    acc.add(x);
  }
  const auto *vec = reinterpret_cast<const uint4 *>(static_cast<const char *>(row) + head * eb);
  // A batch past the end of the row reads -inf there, which changes
  // nothing, so that a short row's loads are issued together too.
  for (size_t v = r; v < n_vec; v += kVecs * S) {
    float x[kLseBatch];
    TREEMASK_UNROLL
    for (int u = 0; u < kVecs; ++u) {
      if (v + u * S < n_vec) {
        unpack<kDtype>(vec[v + u * S], x + u * per_vec);
      } else {
        TREEMASK_UNROLL
        for (int e = 0; e < per_vec; ++e) x[u * per_vec + e] = -INFINITY;
      }
    }
    acc.add(x);
  }
  for (size_t c = head + n_vec * per_vec + r; c < n; c += S) {
    const float x[1] = {element<kDtype>(row, c)};
    acc.add(x);
  }
}

// A block's slots for the normalizer's cross-warp reduction.
struct LseSlots {
  float m[kWarps], s[kWarps];
  int bad[kWarps];
};

// log(sum exp(row[c])) over c < n with every thread of the group, in every
// thread; NaN when the row holds NaN or +inf, -inf when every element is
// -inf. slots: a block's (unused by a warp).
template <class G>
__device__ float group_logsumexp(const void *row, int32_t dtype, size_t n, LseSlots *slots) {
  OnlineLse acc;
  if (dtype == launch::kF32) {
    accumulate_row<launch::kF32, G>(row, n, acc);
  } else if (dtype == launch::kF16) {
    accumulate_row<launch::kF16, G>(row, n, acc);
  } else {
    accumulate_row<launch::kBF16, G>(row, n, acc);
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(kFullWarp, acc.m, offset);
    const float s2 = __shfl_xor_sync(kFullWarp, acc.s, offset);
    const int nan2 = __shfl_xor_sync(kFullWarp, acc.nan_seen ? 1 : 0, offset);
    acc.merge(m2, s2, nan2 != 0);
  }
  // merge() is symmetric as written, but nvcc contracts it into an fma
  // whose operand order differs between partner lanes (1 ulp apart): take
  // lane 0's, so that every lane scores with the same normalizer and equal
  // logits tie by (beam, token) alone.
  acc.m = __shfl_sync(kFullWarp, acc.m, 0);
  acc.s = __shfl_sync(kFullWarp, acc.s, 0);
  acc.nan_seen = __shfl_sync(kFullWarp, acc.nan_seen ? 1 : 0, 0) != 0;
  if constexpr (G::kSize > 32) {
    if (lane_of() == 0) {
      slots->m[warp_of()] = acc.m;
      slots->s[warp_of()] = acc.s;
      slots->bad[warp_of()] = acc.nan_seen ? 1 : 0;
    }
    __syncthreads();
    acc.m = slots->m[0];
    acc.s = slots->s[0];
    acc.nan_seen = slots->bad[0] != 0;
    for (int w = 1; w < kWarps; ++w) acc.merge(slots->m[w], slots->s[w], slots->bad[w] != 0);
    __syncthreads();  // the slots are reused by the next reduction
  }
  if (acc.nan_seen || !(acc.s == acc.s) || acc.m == INFINITY) return NAN;
  return acc.m > -INFINITY ? acc.m + logf(acc.s) : -INFINITY;
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

// The group's total of every thread's stats, in every thread.
template <class G>
__device__ KeyStats group_stats(KeyStats s, SelectState &st) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint64_t lo2 = __shfl_xor_sync(kFullWarp, s.lo, offset);
    const uint64_t hi2 = __shfl_xor_sync(kFullWarp, s.hi, offset);
    const uint32_t count2 = __shfl_xor_sync(kFullWarp, s.count, offset);
    s.merge(lo2, hi2, count2);
  }
  if constexpr (G::kSize == 32) {
    return s;
  } else {
    if (lane_of() == 0) {
      st.red_min[warp_of()] = s.lo;
      st.red_max[warp_of()] = s.hi;
      st.red_count[warp_of()] = s.count;
    }
    __syncthreads();
    KeyStats total;
    for (int w = 0; w < kWarps; ++w) total.merge(st.red_min[w], st.red_max[w], st.red_count[w]);
    __syncthreads();
    return total;
  }
}

// Calls f(key, i) for i = rank, rank + size, ... over [0, n) rounded up to
// whole batches (key 0 past n), every thread of the group equally often;
// each batch's kKeyBatch keys are generated before f sees any, so their
// loads overlap.
template <class G, class Gen, class F>
__device__ __forceinline__ void for_each_key(const Gen &gen, uint32_t n, F &&f) {
  for (uint32_t base = 0; base < n; base += kKeyBatch * G::kSize) {
    uint64_t key[kKeyBatch];
    TREEMASK_UNROLL
    for (int u = 0; u < kKeyBatch; ++u) {
      const uint32_t i = base + u * G::kSize + G::rank();
      key[u] = i < n ? gen(i) : 0;
    }
    TREEMASK_UNROLL
    for (int u = 0; u < kKeyBatch; ++u) f(key[u], base + u * G::kSize + G::rank());
  }
}

template <class G, class Gen>
__device__ KeyStats key_stats(const Gen &gen, uint32_t n, const SelectSpace &sp) {
  KeyStats st;
  for_each_key<G>(gen, n, [&](uint64_t key, uint32_t) { st.add(key); });
  return group_stats<G>(st, *sp.st);
}

// gen(0 .. n) into sp.keys (n <= sp.capacity), and their stats; the keys
// are visible to the whole group on return.
template <class G, class Gen>
__device__ KeyStats materialize(const Gen &gen, uint32_t n, const SelectSpace &sp) {
  KeyStats st;
  for_each_key<G>(gen, n, [&](uint64_t key, uint32_t i) {
    if (i < n) sp.keys[i] = key;
    st.add(key);
  });
  if constexpr (G::kSize == 32) __syncwarp();  // a block's stats end in a barrier
  return group_stats<G>(st, *sp.st);
}

// Bits [0, bit] set.
__device__ __forceinline__ uint64_t bits_through(int bit) {
  return bit >= 63 ? ~uint64_t{0} : (uint64_t{2} << bit) - 1;
}

// One radix pass over the keys whose bits under `st.mask` equal
// `st.prefix`: the histogram of their digit of `bits` bits at bit lo, then
// the bin holding the needed-th largest. Updates st.prefix / mask / needed
// and sets st.done when that bin holds exactly the keys still needed.
template <class G, class Gen>
__device__ void radix_pass(const Gen &gen, uint32_t n, int lo, int bits, const SelectSpace &sp) {
  SelectState &st = *sp.st;
  const uint32_t r = G::rank();
  const uint32_t bins = 1u << bits, per_thread = bins / G::kSize;
  for (uint32_t b = r; b < bins; b += G::kSize) sp.hist[b] = 0;
  G::sync();
  const uint64_t prefix = st.prefix, mask = st.mask;
  const uint32_t needed = st.needed;
  const uint64_t digit_mask = bins - 1;
  for_each_key<G>(gen, n, [&](uint64_t key, uint32_t) {
    if (key != 0 && (key & mask) == prefix) {
      atomicAdd(&sp.hist[static_cast<uint32_t>((key >> lo) & digit_mask)], 1u);
    }
  });
  G::sync();
  // Thread t owns bins [t * per_thread, (t + 1) * per_thread); larger bins
  // hold larger keys. `above`: the keys in bins past this thread's, by a
  // suffix scan over the lanes, then (a block) over the warps.
  uint32_t own = 0;
  for (uint32_t j = 0; j < per_thread; ++j) own += sp.hist[r * per_thread + j];
  uint32_t suffix = own;  // this lane's bins and those of the lanes above it
  for (int offset = 1; offset < 32; offset <<= 1) {
    const uint32_t v = __shfl_down_sync(kFullWarp, suffix, offset);
    if (lane_of() + offset < 32) suffix += v;
  }
  uint32_t above = suffix - own;
  if constexpr (G::kSize > 32) {
    if (lane_of() == 0) st.red_count[warp_of()] = suffix;  // the warp's total
    __syncthreads();
    for (unsigned w = warp_of() + 1; w < kWarps; ++w) above += st.red_count[w];
  }
  for (int j = static_cast<int>(per_thread) - 1; j >= 0; --j) {
    const uint32_t bin = r * per_thread + static_cast<uint32_t>(j);
    const uint32_t in_bin = sp.hist[bin];
    if (above < needed && above + in_bin >= needed) {  // exactly one thread
      st.prefix = prefix | (uint64_t{bin} << lo);
      st.mask = mask | (digit_mask << lo);
      st.needed = needed - above;
      st.done = in_bin == needed - above;
    }
    above += in_bin;
  }
  G::sync();
}

// The least t such that exactly k of the (unique, non-zero) keys are >= t,
// given their stats with stats.count > k: radix passes from the first bit
// where the smallest and largest key differ (the bits above are common to
// every key), until the needed-th key's bin holds exactly the keys needed.
template <class G, class Gen>
__device__ uint64_t radix_threshold(const Gen &gen, uint32_t n, uint32_t k, const KeyStats &stats,
                                    const SelectSpace &sp) {
  SelectState &st = *sp.st;
  const int top = 63 - __clzll(static_cast<long long>(stats.lo ^ stats.hi));
  if (G::rank() == 0) {
    st.mask = ~bits_through(top);
    st.prefix = stats.hi & st.mask;
    st.needed = k;
    st.done = 0;
  }
  G::sync();
  // Digits [lo, lo + bits) from the top; the last one may reach above bits
  // already fixed, which the prefix then already holds.
  const int bits = G::kSize == 32 || n <= kSmallSelection ? kSmallDigitBits : kDigitBits;
  for (int hi = top; hi >= 0 && !st.done; hi -= bits) {
    radix_pass<G>(gen, n, hi - bits + 1 >= 0 ? hi - bits + 1 : 0, bits, sp);
  }
  return st.prefix;  // keys >= prefix are exactly the k wanted
}

// Hands the non-zero keys of gen(0 .. n) that are >= floor to out(pos, key,
// i) (i: the key's index in gen), up to cap of them; returns how many there
// are (which may exceed cap) and their stats, in every thread. A warp keeps
// gen's order (a running count); a block appends by one shared atomic per
// warp and batch. out must not write what gen reads.
template <class G, class Gen, class Out>
__device__ KeyStats compact(const Gen &gen, uint32_t n, uint64_t floor, const Out &out,
                            uint32_t cap, const SelectSpace &sp) {
  KeyStats taken;
  if constexpr (G::kSize == 32) {
    uint32_t running = 0;
    for_each_key<G>(gen, n, [&](uint64_t key, uint32_t i) {
      const bool take = key != 0 && key >= floor;
      const unsigned ballot = __ballot_sync(kFullWarp, take);
      if (take) {
        taken.add(key);
        const uint32_t pos = running + static_cast<uint32_t>(__popc(ballot & lanes_below()));
        if (pos < cap) out(pos, key, i);
      }
      running += static_cast<uint32_t>(__popc(ballot));
    });
    __syncwarp();  // publishes what out wrote to shared memory
  } else {
    SelectState &st = *sp.st;
    if (threadIdx.x == 0) st.appended = 0;
    __syncthreads();
    for_each_key<G>(gen, n, [&](uint64_t key, uint32_t i) {
      const bool take = key != 0 && key >= floor;
      const unsigned ballot = __ballot_sync(kFullWarp, take);
      uint32_t at = 0;
      if (lane_of() == 0 && ballot) {
        at = atomicAdd(&st.appended, static_cast<uint32_t>(__popc(ballot)));
      }
      at = __shfl_sync(kFullWarp, at, 0);
      if (take) {
        taken.add(key);
        const uint32_t pos = at + static_cast<uint32_t>(__popc(ballot & lanes_below()));
        if (pos < cap) out(pos, key, i);
      }
    });
  }
  return group_stats<G>(taken, *sp.st);  // a block's ends in a barrier
}

// The min(k, non-zero keys) largest non-zero keys of gen(0 .. n), whose
// stats are `stats`, to out (unordered); returns their count in every thread.
template <class G, class Gen, class Out>
__device__ uint32_t select_known(const Gen &gen, uint32_t n, uint32_t k, const KeyStats &stats,
                                 const Out &out, const SelectSpace &sp) {
  const uint64_t floor = stats.count > k ? radix_threshold<G>(gen, n, k, stats, sp) : 1;
  const KeyStats taken = compact<G>(gen, n, floor, out, k, sp);
  return taken.count < k ? taken.count : k;
}

// The min(k, non-zero keys) largest non-zero keys of gen(0 .. n), handed to
// out(pos, key, i) with pos in [0, count) and i the key's index in gen;
// returns count in every thread. Keys must be unique, k in [1,
// sp.capacity]. Every thread of the group must call it; out must not write
// sp.keys or sp.hist.
//
// Up to sp.capacity keys are computed once into shared memory and selected
// there. Past that, the top-k of the first sp.capacity keys gives a floor
// (every key of the whole top-k is at least the subset's k-th), one pass
// over all keys keeps those at or above it in shared memory (about k * n /
// capacity of them on random scores; sp.idx, when given, remembers where
// each came from) and the selection runs over those; only when they
// overflow shared memory does it run over all keys, regenerating them each
// pass.
template <class G, class Gen, class Out>
__device__ uint32_t group_select(const Gen &gen, uint32_t n, uint32_t k, const Out &out,
                                 const SelectSpace &sp) {
  if (n <= sp.capacity) {
    const KeyStats st = materialize<G>(gen, n, sp);
    return select_known<G>(SharedKeys{sp.keys}, n, k, st, out, sp);
  }
  KeyStats st = materialize<G>(gen, sp.capacity, sp);
  const uint64_t floor =
      st.count > k ? radix_threshold<G>(SharedKeys{sp.keys}, sp.capacity, k, st, sp) : 1;
  G::sync();  // the subset's keys are read; they are overwritten next
  auto kept = [&](uint32_t i) -> uint64_t {
    const uint64_t key = gen(i);
    return key >= floor ? key : 0;
  };
  auto keep = [&](uint32_t pos, uint64_t key, uint32_t i) {
    sp.keys[pos] = key;
    if (sp.idx) sp.idx[pos] = i;
  };
  st = compact<G>(kept, n, floor, keep, sp.capacity, sp);
  if (st.count <= sp.capacity) {
    auto from_kept = [&](uint32_t pos, uint64_t key, uint32_t j) {
      out(pos, key, sp.idx ? sp.idx[j] : j);
    };
    return select_known<G>(SharedKeys{sp.keys}, st.count, k, st, from_kept, sp);
  }
  st = key_stats<G>(kept, n, sp);
  return select_known<G>(kept, n, k, st, out, sp);
}

// Sorts keys[0 .. count) descending into sorted[0 .. count) and carries
// idx along into sorted_idx (four distinct arrays in shared memory, count <=
// kMaxK; sorted and sorted_idx hold the next power of two) with the whole
// block. Keys are unique.
__device__ void block_sort_desc(const uint64_t *keys, const uint32_t *idx, uint32_t count,
                                uint64_t *sorted, uint32_t *sorted_idx) {
  if (count <= kRankSortMax) {
    for (uint32_t i = threadIdx.x; i < count; i += kBlock) {
      const uint64_t key = keys[i];
      uint32_t rank = 0;
      for (uint32_t j = 0; j < count; ++j) rank += keys[j] > key ? 1u : 0u;
      sorted[rank] = key;
      sorted_idx[rank] = idx[i];
    }
    __syncthreads();
    return;
  }
  // Bitonic over the next power of two, padded with zeros (sorted last).
  uint32_t p = 1;
  while (p < count) p <<= 1;
  for (uint32_t i = threadIdx.x; i < p; i += kBlock) {
    sorted[i] = i < count ? keys[i] : 0;
    sorted_idx[i] = i < count ? idx[i] : 0;
  }
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
            const uint32_t t = sorted_idx[i];
            sorted_idx[i] = sorted_idx[j];
            sorted_idx[j] = t;
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
  // Where candidate i leads: a child node, or TERMINATED (a stop token).
  __device__ uint32_t next_state(uint32_t i) const {
    return i < a.n_children ? a.first_child + i : kStateTerminated;
  }
};

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
  uint32_t *ws_next;     // n_slots * beam_width
  uint32_t *ws_arrived;  // n_requests, zero between steps
  uint32_t *n_bad;
};

// The normalizer of a slot's row by group G, or NaN (and the bad-row
// counter bumped once) for a row holding NaN / +inf.
template <class G>
__device__ float slot_normalizer(const BeamStep &p, int64_t slot, LseSlots *slots) {
  if (p.l.log_probs) return 0.0f;
  const float z =
      group_logsumexp<G>(row_of(p.l, static_cast<size_t>(slot)), p.l.dtype, p.l.n_columns, slots);
  if (z != z && G::rank() == 0 && p.n_bad) atomicAdd(p.n_bad, 1u);
  return z;
}

// Fills a slot's list from its winners on: zeros after the count.
template <class G>
__device__ void pad_list(uint64_t *list, uint32_t count, uint32_t B) {
  for (uint32_t j = count + G::rank(); j < B; j += G::kSize) list[j] = 0;
}

// The list of a slot whose state is TERMINATED (it carries over with its
// score unchanged) or whose score is -inf (it offers nothing).
template <class G>
__device__ void fixed_list(const BeamStep &p, int64_t slot, uint64_t *list, uint32_t *next) {
  const float s = p.scores[slot];
  uint32_t count = 0;
  if (s > -INFINITY) {
    const auto beam = static_cast<uint32_t>(slot % p.beam_width);
    const uint64_t key = make_key(s, beam, p.t.stop_tokens[0], p.layout);
    if (G::rank() == 0) {
      list[0] = key;
      next[0] = kStateTerminated;
    }
    count = key != 0 ? 1 : 0;
  }
  pad_list<G>(list, count, p.beam_width);
}

// One warp's selection memory in the warp kernel (select_slot's space).
struct WarpSpace {
  uint64_t keys[kWarpKeys];
  uint32_t hist[kWarpBins];
  SelectState st;
};

// Phase 1 of both kernels, by one group G (a warp or the block): the best
// min(B, candidates) keys of one slot and the state each leads to, its list
// in the workspace. A selection that tracks where its survivors came from
// (sp.idx: the block's) writes global keys from the start; one that does not
// (a warp's) selects slot-local keys that carry the candidate's index, and
// makes them global as it writes them.
template <class G, bool kIndexInKey>
__device__ void select_slot(const BeamStep &p, int64_t slot, LseSlots *lse, const SelectSpace &sp) {
  const uint32_t B = p.beam_width;
  uint64_t *list = p.ws_keys + slot * B;
  uint32_t *next = p.ws_next + slot * B;
  const float s = p.scores[slot];
  const uint32_t state = p.states[slot];
  if (!(s > -INFINITY) || state == kStateTerminated) {
    fixed_list<G>(p, slot, list, next);
    return;
  }
  const float z = slot_normalizer<G>(p, slot, lse);
  uint32_t count = 0;
  if (z == z) {  // uniform: a bad row offers nothing
    const Candidates allowed(p.t, state);
    const void *row = row_of(p.l, static_cast<size_t>(slot));
    const launch::BeamLogits &l = p.l;
    const launch::KeyLayout &layout = p.layout;
    const launch::TrieView &t = p.t;
    const auto beam = static_cast<uint32_t>(slot % B);
    auto gen = [&](uint32_t i) -> uint64_t {
      const int32_t token = allowed.token(t, i);
      const float score = s + (load_logit(row, l.dtype, static_cast<size_t>(token)) - z);
      if constexpr (kIndexInKey) {
        return make_local_key(score, token, i, layout);
      } else {
        return make_key(score, beam, token, layout);
      }
    };
    auto write = [&](uint32_t pos, uint64_t key, uint32_t i) {
      if constexpr (kIndexInKey) {
        list[pos] = global_key(key, beam, layout);
        next[pos] = allowed.next_state(local_index(key, layout));
      } else {
        list[pos] = key;
        next[pos] = allowed.next_state(i);
      }
    };
    count = group_select<G>(gen, allowed.n_total, B, write, sp);
  }
  pad_list<G>(list, count, B);
}

// Writes request `base / B`'s outputs from its sorted winners and their
// next states (the whole block).
__device__ void write_outputs(const BeamStep &p, int64_t base, const uint64_t *sorted,
                              uint32_t kept, const uint32_t *next) {
  for (uint32_t i = threadIdx.x; i < p.beam_width; i += kBlock) {
    const bool live = i < kept;
    p.parents[base + i] = live ? static_cast<int32_t>(key_beam(sorted[i], p.layout)) : -1;
    p.tokens[base + i] = live ? key_token(sorted[i], p.layout) : -1;
    p.scores[base + i] = live ? key_score(sorted[i]) : -INFINITY;
    p.states[base + i] = live ? next[i] : kStateTerminated;
  }
}

// A block's selection memory: the keys it selects from and where each came
// from, its winners (at most kBest) and theirs, the histogram, the scalars.
// A merge then sorts its winners into keys / idx and gathers their next
// states into hist.
template <uint32_t kBest>
struct SelectShared {
  uint64_t keys[kSharedKeys];
  uint32_t idx[kSharedKeys];
  uint64_t best[kBest];
  uint32_t best_idx[kBest];
  uint32_t hist[kBins];
  SelectState st;

  // track: keep where each key above a subset's floor came from.
  __device__ SelectSpace space(bool track) {
    return SelectSpace{keys, kSharedKeys, hist, &st, track ? idx : nullptr};
  }
};
static_assert(kMaxK <= kBins, "a request's next states fit the histogram");

// The request's B x B keys: its slots' lists, one contiguous array written by
// other blocks (read past the incoherent L1).
struct RequestKeys {
  const uint64_t *lists;
  __device__ uint64_t operator()(uint32_t i) const { return __ldcg(lists + i); }
};

// A request's merge, by the block that completed its last slot (B <=
// kBest): the exact top-B over its slots' lists, sorted, then the outputs
// and the states, each winner's from its list entry (requests touch
// disjoint slots).
template <uint32_t kBest>
__device__ void finish_request(const BeamStep &p, int64_t r, SelectShared<kBest> &sh) {
  const uint32_t B = p.beam_width;
  const int64_t base = r * B;
  auto keep = [&](uint32_t pos, uint64_t key, uint32_t i) {
    sh.best[pos] = key;
    sh.best_idx[pos] = i;
  };
  const uint32_t kept =
      group_select<BlockGroup>(RequestKeys{p.ws_keys + base * B}, B * B, B, keep, sh.space(true));
  block_sort_desc(sh.best, sh.best_idx, kept, sh.keys, sh.idx);
  for (uint32_t i = threadIdx.x; i < kept; i += kBlock) {
    sh.hist[i] = __ldcg(p.ws_next + base * B + sh.idx[i]);
  }
  __syncthreads();
  write_outputs(p, base, sh.keys, kept, sh.hist);
  if (threadIdx.x == 0) p.ws_arrived[r] = 0;  // ready for the next step
  __syncthreads();
}

// ---- the block kernel: one block per slot ------------------------------------------

struct BlockShared : SelectShared<kMaxK> {
  LseSlots lse;
  int last;
};

__global__ void __launch_bounds__(kBlock) beam_step_kernel(BeamStep p) {
  __shared__ BlockShared sh;
  for (int64_t slot = blockIdx.x; slot < p.n_slots; slot += gridDim.x) {
    select_slot<BlockGroup, false>(p, slot, &sh.lse, sh.space(true));
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

// ---- the warp kernel: one warp per slot, eight slots per block -------------------

struct WarpKernelShared {
  union {
    WarpSpace warps[kWarps];        // phase 1
    SelectShared<kWarpMaxK> merge;  // phase 2, once every warp of the block is done
  } u;
  int n_merges;
  int64_t merges[kWarps];  // the requests this block completed
};

// Counts the block's slots [first, first + 8) in with their requests (one
// atomic per request, by thread 0) and notes the requests it completed.
__device__ void count_in(const BeamStep &p, int64_t first, WarpKernelShared &sh) {
  if (threadIdx.x != 0) return;
  const int64_t B = p.beam_width;
  const int64_t last = (first + kWarps < p.n_slots ? first + kWarps : p.n_slots) - 1;
  int n = 0;
  for (int64_t r = first / B; r <= last / B; ++r) {
    const int64_t lo = first > r * B ? first : r * B;
    const int64_t hi = last < r * B + B - 1 ? last : r * B + B - 1;
    const auto mine = static_cast<uint32_t>(hi - lo + 1);
    if (atomicAdd(p.ws_arrived + r, mine) + mine == p.beam_width) sh.merges[n++] = r;
  }
  sh.n_merges = n;
}

__global__ void __launch_bounds__(kBlock, 4) warp_beam_step_kernel(BeamStep p) {
  __shared__ WarpKernelShared sh;
  const int64_t n_groups = (p.n_slots + kWarps - 1) / kWarps;
  for (int64_t group = blockIdx.x; group < n_groups; group += gridDim.x) {
    const int64_t first = group * kWarps;
    const int64_t slot = first + warp_of();
    if (slot < p.n_slots) {
      WarpSpace &ws = sh.u.warps[warp_of()];
      select_slot<WarpGroup, true>(p, slot, nullptr,
                                   SelectSpace{ws.keys, kWarpKeys, ws.hist, &ws.st, nullptr});
    }
    // As in beam_step_kernel: every thread fences its own writes, then the
    // block counts its slots in.
    __threadfence();
    __syncthreads();
    count_in(p, first, sh);
    __syncthreads();
    for (int m = 0; m < sh.n_merges; ++m) {
      __threadfence();
      finish_request(p, sh.merges[m], sh.u.merge);
    }
  }
}

__global__ void __launch_bounds__(kBlock)
    topk_kernel(launch::TrieView t, launch::BeamLogits l, launch::KeyLayout layout,
                const uint32_t *states, int64_t n_rows, uint32_t k, int32_t *out_tokens,
                float *out_scores, size_t *out_counts, uint32_t *n_bad) {
  __shared__ BlockShared sh;
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    uint32_t kept = 0;
    if (k > 0) {
      float z = 0.0f;
      if (!l.log_probs) {
        z = group_logsumexp<BlockGroup>(row_of(l, static_cast<size_t>(row)), l.dtype, l.n_columns,
                                        &sh.lse);
        if (z != z && threadIdx.x == 0 && n_bad) atomicAdd(n_bad, 1u);
      }
      if (z == z) {
        // TERMINATED allows its stop tokens, as fill does.
        const Candidates allowed(t, states[row]);
        const void *data = row_of(l, static_cast<size_t>(row));
        auto gen = [&](uint32_t i) -> uint64_t {
          const int32_t token = allowed.token(t, i);
          return make_key(load_logit(data, l.dtype, static_cast<size_t>(token)) - z, 0, token,
                          layout);
        };
        auto keep = [&](uint32_t pos, uint64_t key, uint32_t i) {
          sh.best[pos] = key;
          sh.best_idx[pos] = i;
        };
        kept = group_select<BlockGroup>(gen, allowed.n_total, k, keep, sh.space(false));
        block_sort_desc(sh.best, sh.best_idx, kept, sh.keys, sh.idx);
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

uint32_t bits_for(uint64_t max_value) {
  uint32_t bits = 0;
  while (bits < 64 && (max_value >> bits) != 0) ++bits;
  return bits;
}

}  // namespace
}  // namespace device

namespace launch {

int beam_step(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              size_t n_requests, uint32_t beam_width, const BeamState &state,
              const BeamWorkspace &ws, uint32_t *n_bad_rows, const DeviceShape &shape,
              void *stream) {
  if (n_requests == 0) return 0;
  const int64_t slots = static_cast<int64_t>(n_requests) * beam_width;
  device::BeamStep p{trie,         logits,       layout,        slots,        beam_width,
                     state.states, state.scores, state.parents, state.tokens, ws.keys,
                     ws.next,      ws.arrived,   n_bad_rows};
  // A candidate's index: below vocab_size + n_stop_tokens.
  const uint32_t idx_bits = device::bits_for(static_cast<uint64_t>(trie.vocab_size) +
                                             static_cast<uint64_t>(trie.n_stop_tokens) - 1);
  // The block kernel gives a slot eight warps (its candidates' loads and
  // selection spread eight ways); the warp kernel keeps eight times as many
  // slots in flight. One warp per slot once the slots outnumber the blocks
  // that fill the device.
  if (slots > shape.target_blocks && logits.n_columns <= kWarpMaxColumns &&
      beam_width <= kWarpMaxBeamWidth && layout.token_bits + idx_bits <= 32) {
    p.layout.idx_bits = idx_bits;
    const int64_t groups = (slots + device::kWarps - 1) / device::kWarps;
    return device::launch_kernel(device::warp_beam_step_kernel,
                                 dim3(device::grid_for_blocks(groups)), dim3(device::kBlock),
                                 stream, p);
  }
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
