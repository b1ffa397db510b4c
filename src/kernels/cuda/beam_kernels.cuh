// The beam step's kernels (beam_step.cu has the design and the launch): a
// slot's candidates and its list (select_slot), a request's merge
// (finish_request), the block kernel (one block per slot), the warp kernel
// (one warp per slot, eight slots per block) and the top-k kernel. A
// state's candidates are the host's (PlainCandidates, rules/plain_rules.h).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/beam_common.cuh"
#include "kernels/cuda/beam_keys.cuh"
#include "kernels/cuda/normalizer.cuh"
#include "kernels/cuda/rules.cuh"  // PlainRules, PlainCandidates, kStateTerminated
#include "kernels/cuda/selection.cuh"

namespace treemask::cuda::device {
namespace {

// The warp kernel: each warp selects in its own 512 keys (4 KB); a request's
// merge uses the block's shared memory once its warps are done.
constexpr uint32_t kWarpKeys = 512;
constexpr uint32_t kWarpMaxK = launch::kWarpMaxBeamWidth;
static_assert(kWarpMaxK <= kWarpKeys, "a warp's winners fit");

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
  launch::BeamFloor floor;  // launch::DeviceShape
};

// The normalizer of a slot's row by group G, or NaN (and the bad-row
// counter bumped once) for a row holding NaN / +inf.
template <class G>
__device__ float slot_normalizer(const BeamStep &p, int64_t slot, LseSlots *slots) {
  if (p.l.log_probs) return 0.0f;
  const float z =
      group_logsumexp<G>(p.l.row(static_cast<size_t>(slot)), p.l.dtype, p.l.n_columns, slots);
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
    const PlainCandidates allowed(rules_of(p.t), state);
    const void *row = p.l.row(static_cast<size_t>(slot));
    const launch::BeamLogits &l = p.l;
    const launch::KeyLayout &layout = p.layout;
    const launch::TrieView &t = p.t;
    const auto beam = static_cast<uint32_t>(slot % B);
    auto gen = [&](uint32_t i) -> uint64_t {
      const int32_t token = allowed.token(t, i);
      const float score = s + (kernels::load_logit(row, l.dtype, static_cast<size_t>(token)) - z);
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
    // A block's thread makes 8 candidates at once (a slot of 2,047: one
    // batch of dependent token-then-logit loads, not two); a warp's slots
    // are many, and its registers are spent (launch bounds of 4 blocks).
    const WithBatch<G::kSize == 32 ? kKeyBatch : 8, decltype(gen)> batched{gen};
    count = group_select<G>(batched, allowed.n_total, B, write, sp);
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
// other blocks (read past the incoherent L1). Each key is one independent
// load: a thread keeps kBatch of them in flight (STATIC's 4,900 keys: three
// round trips to L2 per pass instead of five; 16 would take the block
// kernel from 64 registers to 80 on sm_90, a block fewer per SM).
struct RequestKeys {
  static constexpr int kBatch = 8;
  const uint64_t *lists;
  __device__ uint64_t operator()(uint32_t i) const { return __ldcg(lists + i); }
};

// The exact top-B of a request's B x B keys (to keep(pos, key, i), i: the
// key's index in the request's lists), by the whole block. A full list
// floors the selection: its smallest key has B keys at or above it, so the
// request's B-th best key is at least that. The first slot's list is the
// one taken: after any step it is the request's best beam's (outputs are
// sorted), whose B-th candidate is the highest floor one list gives (at
// depth 1 of STATIC's 2 x 70 on random logits about 400 of the 4,900 keys
// pass it, at most ~1,000; 150-180 of 1,024 at B = 32).
// One batch of loads for the first list, one pass that keeps the keys at or
// above the floor (every non-zero key when the first list is not full) in
// shared memory, and the selection among those; past the shared keys'
// capacity (lists that are not full and more than 2,048 keys, e.g. B = 70
// slots of 60 candidates each) the group selection over all of them, as
// every merge did before (BeamFloor::kSubset: the benchmarks' comparison).
template <uint32_t kBest, class Keep>
__device__ uint32_t merge_request(const BeamStep &p, int64_t base, SelectShared<kBest> &sh,
                                  const Keep &keep) {
  const uint32_t B = p.beam_width;
  const RequestKeys keys{p.ws_keys + base * B};
  const SelectSpace sp = sh.space(true);
  if (p.floor != launch::BeamFloor::kSubset) {
    const KeyStats first = key_stats<BlockGroup>(keys, B, sp);
    const KeyStats st =
        compact_to_shared<BlockGroup>(keys, B * B, first.count == B ? first.lo : 1, sp);
    if (st.count <= sp.capacity) return select_shared<BlockGroup>(st, B, keep, sp);
  }
  return group_select<BlockGroup>(keys, B * B, B, keep, sp);
}

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
  const uint32_t kept = merge_request(p, base, sh, keep);
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
      select_slot<WarpGroup, true>(
          p, slot, nullptr, SelectSpace{ws.keys, kWarpKeys, ws.hist, &ws.st, nullptr, p.floor});
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
        z = group_logsumexp<BlockGroup>(l.row(static_cast<size_t>(row)), l.dtype, l.n_columns,
                                        &sh.lse);
        if (z != z && threadIdx.x == 0 && n_bad) atomicAdd(n_bad, 1u);
      }
      if (z == z) {
        // TERMINATED allows its stop tokens, as fill does.
        const PlainCandidates allowed(rules_of(t), states[row]);
        const void *data = l.row(static_cast<size_t>(row));
        auto gen = [&](uint32_t i) -> uint64_t {
          const int32_t token = allowed.token(t, i);
          return make_key(kernels::load_logit(data, l.dtype, static_cast<size_t>(token)) - z, 0,
                          token, layout);
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

}  // namespace
}  // namespace treemask::cuda::device
