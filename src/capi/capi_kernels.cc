// The extern "C" entry points of treemask.h section 7 (CPU bitmask kernels):
// conversion and a catch-all per call; the checks (kernels/checks.h) are
// the CUDA twins' too.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "capi/shim.h"
#include "kernels/cpu/apply.h"

using treemask::Status;
using treemask::capi::guard;

namespace {

treemask::kernels::LogitsRows logits_rows(void *logits, int32_t dtype, size_t n_rows,
                                          size_t row_stride, size_t width, int32_t vocab_size,
                                          const int32_t *indices, size_t n_indices) {
  return {logits, dtype, n_rows, row_stride, width, vocab_size, indices, n_indices};
}

}  // namespace

extern "C" {

treemask_status treemask_cpu_apply_token_bitmask(void *logits, int32_t dtype, size_t n_rows,
                                                 size_t logits_row_stride, size_t logits_width,
                                                 const int32_t *bitmask, size_t bitmask_row_words,
                                                 size_t n_bitmask_rows, int32_t vocab_size,
                                                 const int32_t *indices, size_t n_indices) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    const treemask::kernels::BitmaskApply a{
        logits_rows(logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size, indices,
                    n_indices),
        reinterpret_cast<const uint32_t *>(bitmask), bitmask_row_words, n_bitmask_rows};
    return treemask::kernels::apply_token_bitmask(a);
  });
}

treemask_status treemask_cpu_apply_token_bitmask_out(
    const void *logits, void *out, int32_t dtype, size_t n_rows, size_t logits_row_stride,
    size_t out_row_stride, size_t logits_width, const int32_t *bitmask, size_t bitmask_row_words,
    size_t n_bitmask_rows, int32_t vocab_size, const int32_t *indices, size_t n_indices) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    if (n_rows > 0 && logits_width > 0 && !out) {
      return treemask::error(treemask::Code::kInvalidArgument, "out is NULL");
    }
    const treemask::kernels::BitmaskApply a{
        logits_rows(out, dtype, n_rows, out_row_stride, logits_width, vocab_size, indices,
                    n_indices),
        reinterpret_cast<const uint32_t *>(bitmask), bitmask_row_words, n_bitmask_rows};
    return treemask::kernels::apply_token_bitmask_out(a, logits, logits_row_stride);
  });
}

treemask_status treemask_cpu_apply_token_candidates(void *logits, int32_t dtype, size_t n_rows,
                                                    size_t logits_row_stride, size_t logits_width,
                                                    const int32_t *row_offsets,
                                                    const int32_t *candidate_tokens,
                                                    size_t n_candidates, int32_t vocab_size,
                                                    const int32_t *indices, size_t n_indices) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    TM_TRY(treemask::capi::check_count("n_rows", n_rows, sizeof(int32_t), 1));
    const treemask::kernels::CandidateApply a{
        logits_rows(logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size, indices,
                    n_indices),
        row_offsets, candidate_tokens, n_candidates};
    return treemask::kernels::apply_token_candidates(a);
  });
}

const char *treemask_cpu_kernel_isa(void) { return treemask::kernels::mask_row_best_name(); }

}  // extern "C"
