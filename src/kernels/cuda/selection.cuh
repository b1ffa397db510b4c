// Exact top-k of unique 64-bit keys by a group of threads (a warp or a
// block; beam_step.cu has the design): a radix select from the keys' first
// differing bit, digit by digit through a shared-memory histogram, then one
// compaction; a subset's top-k floors a large selection.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/beam_common.cuh"

namespace treemask::cuda::device {
namespace {

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
// Keys generated per thread before any of them is used (their loads overlap).
constexpr int kKeyBatch = 4;

// A selection's shared scalars, and the slots of a block's reductions.
struct SelectState {
  uint64_t prefix, mask;
  uint32_t needed, appended;
  int done;
  uint64_t red_min[kWarps], red_max[kWarps];
  uint32_t red_count[kWarps];
};

// Where a group selects: `capacity` keys and a histogram of shared memory,
// and (nullable) where a merge keeps each kept key's source index. floor:
// how a warp selects among more keys than that (launch::BeamFloor; a
// block always floors by a subset's top-k).
struct SelectSpace {
  uint64_t *keys;
  uint32_t capacity;
  uint32_t *hist;
  SelectState *st;
  uint32_t *idx;
  launch::BeamFloor floor = launch::BeamFloor::kLaneTop;
};

// A warp's floor from lane maxima serves k up to this (four keys a lane).
constexpr uint32_t kLaneFloorMaxK = 4 * 32;
// A warp's one-pass selection from its lanes' largest keys (lane_top_select)
// serves k up to this, each lane keeping kLaneTopKeys. It is exact whenever
// no lane holds more than kLaneTopKeys of the k winners (always for k <=
// kLaneTopKeys; on random scores over 2,047 candidates, simulated: every
// one of 100,000 slots at k = 32, all but one in 270 at k = 64); when it
// is not, it costs one more pass.
constexpr uint32_t kLaneTopMaxK = 64;
constexpr int kLaneTopKeys = 8;
// lane_top_select's answer when it is not exact.
constexpr uint32_t kNotExact = ~0u;

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

// Keys a thread generates before any of them is used: Gen::kBatch where a
// generator declares it (one whose keys are plain loads, so that more of
// them can be in flight), else kKeyBatch.
template <class Gen, class = void>
struct KeyBatchOf {
  static constexpr int value = kKeyBatch;
};
template <class Gen>
struct KeyBatchOf<Gen, std::void_t<decltype(Gen::kBatch)>> {
  static constexpr int value = Gen::kBatch;
};

// A generator whose keys a thread makes kB at a time.
template <int kB, class F>
struct WithBatch {
  static constexpr int kBatch = kB;
  F f;
  __device__ __forceinline__ uint64_t operator()(uint32_t i) const { return f(i); }
};

// Calls f(key, i) for i = rank, rank + size, ... over [0, n) rounded up to
// whole batches (key 0 past n), every thread of the group equally often;
// each batch's keys (KeyBatchOf<Gen>) are generated before f sees any, so
// their loads overlap.
template <class G, class Gen, class F>
__device__ __forceinline__ void for_each_key(const Gen &gen, uint32_t n, F &&f) {
  constexpr int kBatch = KeyBatchOf<Gen>::value;
  for (uint32_t base = 0; base < n; base += kBatch * G::kSize) {
    uint64_t key[kBatch];
    TREEMASK_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const uint32_t i = base + u * G::kSize + G::rank();
      key[u] = i < n ? gen(i) : 0;
    }
    TREEMASK_UNROLL
    for (int u = 0; u < kBatch; ++u) f(key[u], base + u * G::kSize + G::rank());
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

// Each lane's kM largest keys of gen(0 .. n) (its share of them), in
// descending order in registers, zeros where it has fewer.
template <int kM, class Gen>
__device__ __forceinline__ void lane_top(const Gen &gen, uint32_t n, uint64_t (&top)[kM]) {
  TREEMASK_UNROLL
  for (int j = 0; j < kM; ++j) top[j] = 0;
  for_each_key<WarpGroup>(gen, n, [&](uint64_t key, uint32_t) {
    if (key > top[kM - 1]) {  // insert, keeping top descending
      top[kM - 1] = key;
      TREEMASK_UNROLL
      for (int j = kM - 1; j > 0; --j) {
        if (top[j] > top[j - 1]) {
          const uint64_t t = top[j];
          top[j] = top[j - 1];
          top[j - 1] = t;
        }
      }
    }
  });
}

// A floor under a warp's k-th largest key of gen(0 .. n), from one pass in
// registers: each lane keeps its kM largest keys, and the smallest of the
// lanes' kM-th largest has 32 * kM >= k keys at or above it (each lane's
// kM). No shared memory, no atomics: on 2,047 random candidates and k =
// 32 about 120 keys pass it. Lanes left with fewer than kM keys make it 1
// (every key passes; still exact).
template <int kM, class Gen>
__device__ uint64_t lane_floor(const Gen &gen, uint32_t n) {
  uint64_t top[kM];
  lane_top<kM>(gen, n, top);
  uint64_t floor = top[kM - 1];
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint64_t other = __shfl_xor_sync(kFullWarp, floor, offset);
    floor = other < floor ? other : floor;
  }
  return floor > 0 ? floor : 1;
}

// A warp's top-k (k <= kLaneTopMaxK) of gen(0 .. n) in one pass over the
// keys: each lane keeps its kM largest in registers, the warp puts the
// lanes' lists (U, at most 32 * kM keys) in shared memory and finds t, the
// least value with exactly k keys of U at or above it (radix_threshold; 1
// when U has at most k). So t floors the whole top-k too; and U holds
// every key at or above t unless some lane kept kM keys whose smallest is
// above t (it may have left out others above t). When no lane did, the
// keys at or above t are U's k: they go to out(pos, key, j) (j: the key's
// place in U, so the keys must carry what they came from: sp.idx unused)
// and the count is returned. Otherwise kNotExact, with t in `floor` for
// the pass over all keys.
template <int kM, class Gen, class Out>
__device__ uint32_t lane_top_select(const Gen &gen, uint32_t n, uint32_t k, const Out &out,
                                    const SelectSpace &sp, uint64_t &floor) {
  uint64_t top[kM];
  lane_top<kM>(gen, n, top);
  uint32_t running = 0;
  KeyStats st;
  TREEMASK_UNROLL
  for (int j = 0; j < kM; ++j) {
    const bool take = top[j] != 0;
    const unsigned ballot = __ballot_sync(kFullWarp, take);
    if (take) {
      sp.keys[running + static_cast<uint32_t>(__popc(ballot & lanes_below()))] = top[j];
      st.add(top[j]);
    }
    running += static_cast<uint32_t>(__popc(ballot));
  }
  __syncwarp();
  st = group_stats<WarpGroup>(st, *sp.st);
  const uint64_t t =
      st.count > k ? radix_threshold<WarpGroup>(SharedKeys{sp.keys}, st.count, k, st, sp) : 1;
  if (!__all_sync(kFullWarp, top[kM - 1] <= t)) {
    floor = t;
    return kNotExact;
  }
  const KeyStats taken = compact<WarpGroup>(SharedKeys{sp.keys}, st.count, t, out, k, sp);
  return taken.count < k ? taken.count : k;
}

template <class Gen>
__device__ uint64_t lane_floor_for(const Gen &gen, uint32_t n, uint32_t k) {
  switch ((k + 31) / 32) {
    case 1: return lane_floor<1>(gen, n);
    case 2: return lane_floor<2>(gen, n);
    case 3: return lane_floor<3>(gen, n);
    default: return lane_floor<4>(gen, n);
  }
}

// Keeps the non-zero keys of gen(0 .. n) that are >= floor in sp.keys (and
// their indices in gen in sp.idx, when given), up to sp.capacity of them;
// returns their stats (count: all of them, which may exceed the capacity).
template <class G, class Gen>
__device__ KeyStats compact_to_shared(const Gen &gen, uint32_t n, uint64_t floor,
                                      const SelectSpace &sp) {
  auto keep = [&](uint32_t pos, uint64_t key, uint32_t i) {
    sp.keys[pos] = key;
    if (sp.idx) sp.idx[pos] = i;
  };
  return compact<G>(gen, n, floor, keep, sp.capacity, sp);
}

// select_known over the keys compact_to_shared kept (st: its stats, count
// <= sp.capacity), handing out each key's index in the original gen.
template <class G, class Out>
__device__ uint32_t select_shared(const KeyStats &st, uint32_t k, const Out &out,
                                  const SelectSpace &sp) {
  auto from_kept = [&](uint32_t pos, uint64_t key, uint32_t j) {
    out(pos, key, sp.idx ? sp.idx[j] : j);
  };
  return select_known<G>(SharedKeys{sp.keys}, st.count, k, st, from_kept, sp);
}

// The min(k, non-zero keys) largest non-zero keys of gen(0 .. n), handed to
// out(pos, key, i) with pos in [0, count) and i the key's index in gen;
// returns count in every thread. Keys must be unique, k in [1,
// sp.capacity]. Every thread of the group must call it; out must not write
// sp.keys or sp.hist.
//
// Up to sp.capacity keys are computed once into shared memory and selected
// there. Past that, a warp with k <= kLaneTopMaxK whose keys carry their
// origin selects from its lanes' largest keys in one pass
// (lane_top_select), which in the rare case it cannot vouch for gives the
// floor for the pass below. Otherwise a floor under the k-th key: for a
// warp (k <= kLaneFloorMaxK) the lanes' maxima (lane_floor: one pass in
// registers); for a block, the top-k of the first sp.capacity keys (every
// key of the whole top-k is at least the subset's k-th; a radix select in
// shared memory). One pass over all keys keeps those at or above the floor in
// shared memory (about k * n / capacity of them on random scores; sp.idx,
// when given, remembers where each came from) and the selection runs over
// those; only when they overflow shared memory does it run over all keys,
// regenerating them each pass.
template <class G, class Gen, class Out>
__device__ uint32_t group_select(const Gen &gen, uint32_t n, uint32_t k, const Out &out,
                                 const SelectSpace &sp) {
  if (n <= sp.capacity) {
    const KeyStats st = materialize<G>(gen, n, sp);
    return select_known<G>(SharedKeys{sp.keys}, n, k, st, out, sp);
  }
  uint64_t floor = 1;
  KeyStats st;
  bool floored = false;
  if constexpr (G::kSize == 32) {
    if (sp.floor == launch::BeamFloor::kLaneTop && k <= kLaneTopMaxK && !sp.idx &&
        32 * kLaneTopKeys <= sp.capacity) {
      const uint32_t count = lane_top_select<kLaneTopKeys>(gen, n, k, out, sp, floor);
      if (count != kNotExact) return count;
      floored = true;
      __syncwarp();  // U is read; the pass below overwrites it
    } else if (sp.floor != launch::BeamFloor::kSubset && k <= kLaneFloorMaxK) {
      floor = lane_floor_for(gen, n, k);
      floored = true;
    }
  }
  if (!floored) {
    st = materialize<G>(gen, sp.capacity, sp);
    if (st.count > k) floor = radix_threshold<G>(SharedKeys{sp.keys}, sp.capacity, k, st, sp);
    G::sync();  // the subset's keys are read; they are overwritten next
  }
  auto kept = [&](uint32_t i) -> uint64_t {
    const uint64_t key = gen(i);
    return key >= floor ? key : 0;
  };
  st = compact_to_shared<G>(kept, n, floor, sp);
  if (st.count <= sp.capacity) return select_shared<G>(st, k, out, sp);
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
}  // namespace
}  // namespace treemask::cuda::device
