// The CUDA bridge of a library built without CUDA: every entry point exists
// and reports kUnsupported, so callers and bindings need no build-time
// switch.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/bridge.h"

namespace treemask::cuda {

struct DeviceTrie {};

namespace {

Status not_built() {
  return error(Code::kUnsupported,
               "this libtreemask was built without CUDA (meson option cuda; nvcc not found?)");
}

}  // namespace

bool built() { return false; }

bool available() { return false; }

Status apply_bitmask(const launch::Logits &, const launch::Rows &, const int32_t *, size_t,
                     Pointers, void *) {
  return not_built();
}

Status apply_candidates(const launch::Logits &, const launch::Rows &, const int32_t *,
                        const int32_t *, size_t, void *) {
  return not_built();
}

Result<DeviceTrie *> upload_trie(const Trie &, void *) { return not_built(); }

void free_trie(DeviceTrie *trie) { delete trie; }

int32_t trie_vocab_size(const DeviceTrie &) { return 0; }

Status advance_fill_bitmask(const StepArg &, int32_t *, size_t, void *) { return not_built(); }

Status advance_mask_logits(const StepArg &, const launch::Logits &, void *) { return not_built(); }

Status advance_states(const StepArg &, void *) { return not_built(); }

Status follow_rows(const DeviceTrie &, const launch::TokenRows *, const launch::TokenRows &,
                   int32_t, void *) {
  return not_built();
}

Status follow_rows_mask_logits(const DeviceTrie &, const launch::TokenRows *,
                               const launch::TokenRows &, int32_t, int32_t, const launch::Logits &,
                               Pointers, void *) {
  return not_built();
}

Result<size_t> beam_workspace_bytes(size_t, size_t) { return not_built(); }

Status beam_step(const BeamArg &, void *) { return not_built(); }

Status trie_topk(const TopkArg &, void *) { return not_built(); }

}  // namespace treemask::cuda
