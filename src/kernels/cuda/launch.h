// Kernel launchers: the seam between the host code of the CUDA bridge
// (bridge.cc, compiled by the C++ compiler) and the .cu files (compiled by
// nvcc). Plain structs and `void *` streams only, so that nvcc never has to
// see the C++20 core and the core never sees a CUDA type. The structs are
// the arguments of the bridge (bridge.h) too, each defined once here. Every
// launcher enqueues on `stream` and returns the cudaError_t of the launch as
// an int (0 = success); arguments were validated by the caller.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/beam_logits.h"
#include "kernels/dtype.h"
#include "rules/plain_rules.h"

namespace treemask::cuda::launch {

// The storage type of a logit: the kernels' one enum (kernels/dtype.h).
using kernels::kBF16;
using kernels::kF16;
using kernels::kF32;

// A logits buffer on the device, as the C shim validated it (row_stride >=
// width >= 1, vocab_size in [1, width], dtype known, byte sizes fit).
struct Logits {
  void *data = nullptr;
  int32_t dtype = kF32;
  size_t n_rows = 0;       // rows the buffer holds
  size_t row_stride = 0;   // elements
  size_t width = 0;        // columns per row; <= row_stride
  int32_t vocab_size = 0;  // columns >= vocab_size are always masked; <= width
  // Where the kept values come from: nullptr masks data in place; else rows
  // of source_stride elements (not overlapping data) are copied into data
  // with the masked columns -inf (a masked copy, one pass).
  const void *source = nullptr;
  size_t source_stride = 0;
  // data, row_stride (and source, source_stride) allow 16-byte accesses
  // (the bridge sets it).
  bool vector_ok = false;
};

// Which rows a call touches: indices == nullptr means rows [0, n_active);
// otherwise indices[0 .. n_active) name rows, and an entry outside
// [0, n_rows) is skipped on the device.
struct Rows {
  const int32_t *indices = nullptr;
  size_t n_active = 0;
  size_t n_rows = 0;

  // Rows [0, n_rows), or the n_indices rows that indices name.
  static Rows select(const int32_t *indices, size_t n_indices, size_t n_rows) {
    return indices ? Rows{indices, n_indices, n_rows} : Rows{nullptr, n_rows, n_rows};
  }
};

// A trie in device memory: the arrays the plain rule reads
// (rules/plain_rules.h; the layout is trie/trie.h's), copied from a validated
// trie, so the device runs the host's rule over the same view type.
using TrieView = PlainTrieView;

// How the beam step's warps select among more candidates than they hold
// in shared memory, and its merges among a request's B x B keys
// (TREEMASK_CUDA_BEAM_FLOOR, read per step: benchmarks that compare the
// ways in one run, bench_cuda_beam, and the tests of each):
// - kLaneTop (default): for B <= 64 a warp selects from its lanes' eight
//   largest keys in one pass, and passes again over all candidates only
//   when a lane may have held more of the winners than it kept; merges
//   floor by the first list's smallest key.
// - kLane (`lane`): every such selection takes the two passes (a floor
//   from the lanes' largest keys, then the keys above it); merges as above.
// - kSubset (`subset`): 0.3.0's selection: the warps floor by the top-k of
//   a subset, a request's merge selects over all of its keys.
enum class BeamFloor : int { kLaneTop = 0, kLane = 1, kSubset = 2 };

// How many blocks keep the device busy; the list kernels size their column
// tiles from it so that a single row still spreads over the whole GPU. And
// how the beam step selects (BeamFloor).
struct DeviceShape {
  int target_blocks = 1;
  BeamFloor beam_floor = BeamFloor::kLaneTop;
};

int apply_bitmask(const Logits &logits, const Rows &rows, const uint32_t *bitmask,
                  size_t bitmask_row_words, void *stream);

int apply_candidates(const Logits &logits, const Rows &rows, const int32_t *row_offsets,
                     const int32_t *candidates, size_t n_candidates, const DeviceShape &shape,
                     void *stream);

// Advances states[0 .. n_rows) by tokens (when non-null) and writes the
// allowed set of each new state as a bitmask row.
int advance_fill_bitmask(const TrieView &trie, uint32_t *states, const int32_t *tokens,
                         size_t n_rows, int32_t failure_policy, uint8_t *accepted,
                         uint32_t *bitmask, size_t bitmask_row_words, void *stream);

// Advances states by tokens (tokens must be non-null).
int advance(const TrieView &trie, uint32_t *states, const int32_t *tokens, size_t n_rows,
            int32_t failure_policy, uint8_t *accepted, void *stream);

// Rows of int64 ids and where their states and keys go (follow_rows), as
// the C shim validated them (row_stride resolved, extents addressable,
// arrays non-null where used).
struct TokenRows {
  const int64_t *tokens = nullptr;
  size_t n_rows = 0;
  size_t n_tokens = 0;
  size_t row_stride = 0;
  uint32_t *states = nullptr;
  uint64_t *keys = nullptr;
  // Where the ids are copied too (nullable; rows of copy_stride elements).
  int64_t *copy_to = nullptr;
  size_t copy_stride = 0;
};

// The state and key of every row of `rows`, from a matching row of `prev`
// (nullable; used when its n_tokens is one less) or from the root.
int follow_rows(const TrieView &trie, const TokenRows *prev, const TokenRows &rows,
                int32_t failure_policy, void *stream);

// follow_rows and, in the same launch, logits masked by each row's new state
// (mask_logits_from_states; logits.source: a masked copy), finished_token
// (< 0: none) kept in TERMINATED rows.
int follow_rows_mask_logits(const TrieView &trie, const TokenRows *prev, const TokenRows &rows,
                            int32_t failure_policy, int32_t finished_token, const Logits &logits,
                            const DeviceShape &shape, void *stream);

// Sets every logit outside the allowed set of states[row] to -inf.
int mask_logits_from_states(const TrieView &trie, const uint32_t *states, size_t n_rows,
                            const Logits &logits, const DeviceShape &shape, void *stream);

// ---- the beam step and top-k (beam_step.cu) ----------------------------------

// The largest beam width (and top-k k) of the device kernels: a request's
// winners are sorted in shared memory.
constexpr uint32_t kMaxBeamWidth = 1024;

// Steps with more slots than DeviceShape::target_blocks whose rows have at
// most kWarpMaxColumns columns and whose beam width is at most
// kWarpMaxBeamWidth run one warp per slot (eight slots per block: the
// normalizer and the slot's selection with warp-level synchronisation
// only); the others one block per slot.
constexpr size_t kWarpMaxColumns = 4096;
constexpr uint32_t kWarpMaxBeamWidth = 128;

// A step's logits rows on the device (kernels/beam_logits.h: the CPU step's
// struct), checked and resolved by check_beam_logits.
using kernels::BeamLogits;

// The bits that hold values up to max_value.
inline uint32_t bits_for(uint64_t max_value) {
  uint32_t bits = 0;
  while (bits < 64 && (max_value >> bits) != 0) ++bits;
  return bits;
}

// How a candidate's beam and token are packed below its score in a 64-bit
// key (beam_bits + token_bits <= 32): beam_max = 2^beam_bits - 1, token_max
// = 2^token_bits - 1. idx_bits: the bits of a candidate's index in the
// warp kernel's slot-local keys (set by beam_step; token_bits + idx_bits <=
// 32 there).
struct KeyLayout {
  uint32_t token_bits = 0;
  uint32_t beam_max = 0;
  uint32_t token_max = 0;
  uint32_t idx_bits = 0;
};

// The caller's arrays of a beam step: n_requests * beam_width entries each.
struct BeamState {
  uint32_t *states = nullptr;
  float *scores = nullptr;
  int32_t *parents = nullptr;
  int32_t *tokens = nullptr;
};

// A beam step's workspace (treemask_cuda_beam_workspace_size): per request
// an arrival counter that is zero between steps (the step that uses it
// zeroes it again); per slot a list of beam_width keys (its best
// candidates, then zeros) and the state each of them leads to.
struct BeamWorkspace {
  uint64_t *keys = nullptr;
  uint32_t *next = nullptr;
  uint32_t *arrived = nullptr;
};

// One beam step of n_requests x beam_width slots (treemask_cuda_beam_step),
// one kernel launch.
int beam_step(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              size_t n_requests, uint32_t beam_width, const BeamState &state,
              const BeamWorkspace &ws, uint32_t *n_bad_rows, const DeviceShape &shape,
              void *stream);

// Per row: the k best allowed tokens (treemask_cuda_trie_topk_states).
int trie_topk(const TrieView &trie, const BeamLogits &logits, const KeyLayout &layout,
              const uint32_t *states, size_t n_rows, uint32_t k, int32_t *out_tokens,
              float *out_scores, size_t *out_counts, uint32_t *n_bad_rows, void *stream);

// 0 when the current device can run treemask's kernels (an image for its
// architecture is embedded), the cudaError_t otherwise.
int probe_kernel_image();

}  // namespace treemask::cuda::launch
