// The argument checks of the kernel entry points, once for the CPU and the
// CUDA twins: both call these before touching memory, so a bad argument
// gets the same status and the same message from either.
//
// The one difference is where an array lives. Host arrays (every array of a
// CPU call) are checked element by element: each index in range, offsets
// non-decreasing and within the candidates, each candidate < vocab_size.
// A CUDA call's index, offset and candidate arrays are device memory, which
// the host cannot read without synchronising; its kernels skip an
// out-of-range index or candidate instead (Where::kDevice below).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/beam_logits.h"
#include "kernels/dtype.h"

namespace treemask::kernels {

// TREEMASK_F32 / F16 / BF16.
Status check_dtype(int32_t dtype);
// n_rows rows of `row` elements (of elem_bytes), `stride` apart, must be
// addressable with signed 64-bit byte offsets.
Status check_extent(const char *name, size_t n_rows, size_t stride, size_t row, size_t elem_bytes);
// A device pointer to logits of dtype must be aligned to its element size: a
// GPU faults on a misaligned load (cudaErrorMisalignedAddress, which ruins
// the context). The host kernels read unaligned data and take any pointer.
Status check_element_aligned(const char *name, const void *data, int32_t dtype);

// Where a call's index, offset and candidate arrays live.
enum class Where { kHost, kDevice };

// The logits side of an apply call; field meanings are the C header's.
struct LogitsRows {
  void *logits = nullptr;
  int32_t dtype = 0;
  size_t n_rows = 0;
  size_t row_stride = 0;  // elements
  size_t width = 0;       // elements
  int32_t vocab_size = 0;
  const int32_t *indices = nullptr;  // nullptr: rows 0 .. n_rows - 1
  size_t n_indices = 0;

  size_t touched_rows() const { return indices ? n_indices : n_rows; }
  // Columns a bitmask or candidate list decides: min(width, vocab_size);
  // columns from there to width are always masked.
  size_t valid_columns() const {
    return width < static_cast<size_t>(vocab_size) ? width : static_cast<size_t>(vocab_size);
  }
};

// One apply of a bitmask (treemask_cpu_ / treemask_cuda_apply_token_bitmask).
struct BitmaskApply : LogitsRows {
  const uint32_t *bitmask = nullptr;
  size_t bitmask_row_words = 0;
  // Rows the bitmask holds: >= n_rows without indices; with indices every
  // index must be a row of both arrays (xgrammar's semantics).
  size_t bitmask_rows = 0;
};

// One apply of candidate lists in CSR form (treemask_cpu_ / treemask_cuda_
// apply_token_candidates): row r keeps tokens[row_offsets[r] .. row_offsets[r + 1]).
struct CandidateApply : LogitsRows {
  const int32_t *row_offsets = nullptr;  // n_rows + 1
  const int32_t *tokens = nullptr;       // n_candidates
  size_t n_candidates = 0;
};

// dtype, vocab_size, stride, NULL logits where rows are touched, extent,
// indices (their values too, where on the host).
Status check_logits_rows(const LogitsRows &a, Where where);
// check_logits_rows, then the bitmask: rows for every touched row, words
// for every valid column, extent, NULL.
Status check_bitmask_apply(const BitmaskApply &a, Where where);
// check_logits_rows, then the lists: NULLs, counts, and on the host the
// offsets (non-decreasing, <= n_candidates) and every candidate (< vocab_size).
Status check_candidate_apply(const CandidateApply &a, Where where);

// The logits of a beam step or a top-k over a trie of vocab_size, n_rows of
// them read: n_columns and row_stride resolved (0: vocab_size, n_columns),
// then the dtype, n_columns >= vocab_size, row_stride >= n_columns, data
// when rows are read, the rows' extent (check_extent: the one overflow
// limit of every kernel call), and on a device the elements' alignment.
// The CPU step and the CUDA step call it alike.
Result<BeamLogits> check_beam_logits(const BeamLogits &logits, int32_t vocab_size, size_t n_rows,
                                     Where where);

}  // namespace treemask::kernels
