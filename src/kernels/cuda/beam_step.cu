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
//    contiguous array, read with independent loads; those below the
//    smallest key of the first slot's list, when that list is full, are
//    dropped in the same pass), sorted, then the outputs and the advanced
//    states; the counter is zeroed for the next step.
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
// and selected there; past it a floor under the k-th key, and one pass keeps
// the keys above it (group_select). A warp (a slot of 2,047 candidates at
// depth 1 of a 2,048-code catalogue) with B <= 64 generates its candidates
// once: each lane keeps its 8 largest keys in registers, and the top-B of
// those 256 is the slot's unless a lane may have held more winners than it
// kept (then the k-th of them is the floor of a second pass); a wider warp
// selection takes the floor from its lanes' largest keys, one pass in
// registers, then the pass above it; a block from the top-k of its first
// `capacity` keys, a radix select in shared memory. Scores -inf and NaN get
// key 0 and are never selected.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "kernels/cuda/beam_kernels.cuh"
#include "kernels/cuda/masking.cuh"  // launch_kernel

namespace treemask::cuda {
namespace device {
namespace {

unsigned grid_for_blocks(int64_t blocks) {
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t{1} << 20));
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
  device::BeamStep p{trie,         logits,       layout,        slots,           beam_width,
                     state.states, state.scores, state.parents, state.tokens,    ws.keys,
                     ws.next,      ws.arrived,   n_bad_rows,    shape.beam_floor};
  // A candidate's index: below vocab_size + n_stop_tokens.
  const uint32_t idx_bits = bits_for(static_cast<uint64_t>(trie.vocab_size) +
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
