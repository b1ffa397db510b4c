// The CUDA bridge: what the C shim (capi/capi_cuda.cc) calls. No CUDA type
// appears here, and no struct of its own where the kernels have one
// (launch.h). Two implementations exist: bridge.cc (CUDA built) and
// bridge_unsupported.cc (CUDA not built: every call is kUnsupported).
//
// The shim validates host-side arguments (NULLs, sizes, dtype, policy)
// before calling; the bridge checks what needs the CUDA runtime (a usable
// device, pointer kinds, the device a trie lives on) and enqueues kernels.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/launch.h"
#include "trie/trie.h"

namespace treemask::cuda {

// Whether the CUDA code is compiled into this library.
bool built();

// built(), a driver and a device, and the current device can run the
// kernels. Never fails and never prints.
bool available();

// How the bridge learns that a pointer is memory the current device can
// address: by asking the runtime (cudaPointerGetAttributes, one query per
// pointer and call), or by the caller's word
// (TREEMASK_CUDA_CALLER_CHECKED_POINTERS: a binding whose tensors carry
// their device, such as torch's).
enum class Pointers { kQuery, kCallerChecked };

// The argument structs are the kernels' own (launch.h): a logits buffer
// (launch::Logits, vector_ok set here), a selection of its rows
// (launch::Rows), token rows (launch::TokenRows), a beam step's logits
// (kernels::BeamLogits).

// The bitmask holds a row for every row of `rows` (an index outside it is
// skipped on the device).
Status apply_bitmask(const launch::Logits &logits, const launch::Rows &rows, const int32_t *bitmask,
                     size_t bitmask_row_words, Pointers pointers, void *stream);

Status apply_candidates(const launch::Logits &logits, const launch::Rows &rows,
                        const int32_t *row_offsets, const int32_t *candidates, size_t n_candidates,
                        void *stream);

// A trie's arrays in device memory; defined in bridge.cc.
struct DeviceTrie;

Result<DeviceTrie *> upload_trie(const Trie &trie, void *stream);
void free_trie(DeviceTrie *trie);
int32_t trie_vocab_size(const DeviceTrie &trie);

// One state-array step (see treemask_cuda_trie_advance_fill_bitmask).
struct StepArg {
  const DeviceTrie *trie = nullptr;
  uint32_t *states = nullptr;
  const int32_t *tokens = nullptr;  // nullptr: fill only
  size_t n_rows = 0;
  int32_t failure_policy = 0;
  uint8_t *accepted = nullptr;
};

Status advance_fill_bitmask(const StepArg &step, int32_t *bitmask, size_t bitmask_row_words,
                            void *stream);

// logits.n_rows must equal step.n_rows and logits.width >= the trie's
// vocab_size; logits.vocab_size is taken from the trie.
Status advance_mask_logits(const StepArg &step, const launch::Logits &logits, void *stream);

// step.tokens is not null.
Status advance_states(const StepArg &step, void *stream);

// treemask_cuda_trie_follow_rows; prev may be null.
Status follow_rows(const DeviceTrie &trie, const launch::TokenRows *prev,
                   const launch::TokenRows &rows, int32_t failure_policy, void *stream);

// treemask_cuda_trie_follow_rows_mask_logits (logits.source: the scores, or
// nullptr in place; the caller checked the geometry, the overlaps and
// finished_token).
Status follow_rows_mask_logits(const DeviceTrie &trie, const launch::TokenRows *prev,
                               const launch::TokenRows &rows, int32_t failure_policy,
                               int32_t finished_token, const launch::Logits &logits,
                               Pointers pointers, void *stream);

// ---- the beam step and top-k on the device ----------------------------------

// Bytes of the workspace of a beam step of n_requests x beam_width slots;
// an error when it overflows or beam_width is outside [1, kMaxBeamWidth].
// Its per-request arrival counters (its first n_requests x 4 bytes) must be
// zero before the first step of a shape; every step leaves them zero.
Result<size_t> beam_workspace_bytes(size_t n_requests, size_t beam_width);

// logits checked by check_beam_logits (resolved against the trie).
struct BeamArg {
  const DeviceTrie *trie = nullptr;
  size_t n_requests = 0;
  size_t beam_width = 0;
  kernels::BeamLogits logits;
  launch::BeamState state;
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
  uint32_t *n_bad_rows = nullptr;
  Pointers pointers = Pointers::kQuery;
};

Status beam_step(const BeamArg &step, void *stream);

struct TopkArg {
  const DeviceTrie *trie = nullptr;
  const uint32_t *states = nullptr;
  size_t n_rows = 0;
  kernels::BeamLogits logits;
  size_t k = 0;
  int32_t *out_tokens = nullptr;
  float *out_scores = nullptr;
  size_t *out_counts = nullptr;
  uint32_t *n_bad_rows = nullptr;
};

Status trie_topk(const TopkArg &topk, void *stream);

}  // namespace treemask::cuda
