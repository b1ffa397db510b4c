// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/checks.h"

#include "core/bits.h"

namespace treemask::kernels {

Status check_dtype(int32_t dtype) {
  if (dtype_known(dtype)) return Status::Ok();
  return error(Code::kInvalidArgument, "unknown dtype ", dtype,
               " (expected 0 = TREEMASK_F32, 1 = TREEMASK_F16, 2 = TREEMASK_BF16)");
}

Status check_extent(const char *name, size_t n_rows, size_t stride, size_t row, size_t elem_bytes) {
  if (n_rows == 0) return Status::Ok();
  size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(n_rows - 1, stride, &elements) ||
      __builtin_add_overflow(elements, row, &elements) ||
      __builtin_mul_overflow(elements, elem_bytes, &bytes) || bytes > size_t{INT64_MAX}) {
    return error(Code::kOutOfRange, name, " of ", n_rows, " rows with stride ", stride,
                 " elements is too large to address");
  }
  return Status::Ok();
}

Status check_element_aligned(const char *name, const void *data, int32_t dtype) {
  const size_t bytes = dtype_bytes(dtype);
  if (reinterpret_cast<uintptr_t>(data) % bytes == 0) return Status::Ok();
  return error(Code::kInvalidArgument, name, " ", data, " is not aligned to its ", bytes,
               "-byte elements (a device load there faults)");
}

Status check_logits_rows(const LogitsRows &a, Where where) {
  TM_TRY(check_dtype(a.dtype));
  if (a.vocab_size <= 0) {
    return error(Code::kInvalidArgument, "vocab_size must be positive, got ", a.vocab_size);
  }
  if (a.row_stride < a.width) {
    return error(Code::kInvalidArgument, "logits_row_stride ", a.row_stride,
                 " is smaller than logits_width ", a.width);
  }
  if (!a.indices && a.n_indices != 0) {
    return error(Code::kInvalidArgument, "indices is NULL but n_indices is ", a.n_indices,
                 " (pass NULL and 0 to mask every row)");
  }
  if (a.touched_rows() > 0 && a.width > 0 && !a.logits) {
    return error(Code::kInvalidArgument, "logits is NULL");
  }
  TM_TRY(check_extent("logits", a.n_rows, a.row_stride, a.width, dtype_bytes(a.dtype)));
  if (where == Where::kDevice) TM_TRY(check_element_aligned("logits", a.logits, a.dtype));
  if (where == Where::kHost) {
    for (size_t i = 0; i < a.n_indices; ++i) {
      if (a.indices[i] < 0 || static_cast<size_t>(a.indices[i]) >= a.n_rows) {
        return error(Code::kOutOfRange, "indices[", i, "] = ", a.indices[i],
                     " is out of range [0, n_rows=", a.n_rows, ")");
      }
    }
  }
  return Status::Ok();
}

Status check_bitmask_apply(const BitmaskApply &a, Where where) {
  TM_TRY(check_logits_rows(a, where));
  if (!a.indices && a.bitmask_rows < a.n_rows) {
    return error(Code::kBufferTooSmall, "the bitmask has ", a.bitmask_rows,
                 " rows but the logits have ", a.n_rows,
                 " (without indices every logits row is masked with its bitmask row)");
  }
  if (where == Where::kHost) {
    for (size_t i = 0; i < a.n_indices; ++i) {
      if (static_cast<size_t>(a.indices[i]) >= a.bitmask_rows) {
        return error(Code::kOutOfRange, "indices[", i, "] = ", a.indices[i],
                     " is out of range [0, n_bitmask_rows=", a.bitmask_rows,
                     "): an index names a row of both the logits and the bitmask");
      }
    }
  }
  const size_t needed = words_for_vocab(static_cast<int32_t>(a.valid_columns()));
  if (a.bitmask_row_words < needed) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", a.bitmask_row_words, " < ", needed,
                 ", the words covering min(vocab_size=", a.vocab_size, ", logits_width=", a.width,
                 ") columns");
  }
  if (a.touched_rows() > 0 && needed > 0 && !a.bitmask) {
    return error(Code::kInvalidArgument, "bitmask is NULL");
  }
  return check_extent("bitmask", a.bitmask_rows, a.bitmask_row_words, a.bitmask_row_words, 4);
}

Status check_candidate_apply(const CandidateApply &a, Where where) {
  TM_TRY(check_logits_rows(a, where));
  if (!a.row_offsets) return error(Code::kInvalidArgument, "row_offsets is NULL");
  if (a.n_candidates > 0 && !a.tokens) {
    return error(Code::kInvalidArgument, "candidates is NULL but n_candidates is ", a.n_candidates);
  }
  if (a.n_candidates > size_t{INT32_MAX}) {
    return error(Code::kOutOfRange, "n_candidates ", a.n_candidates,
                 " does not fit the int32 row_offsets");
  }
  if (where == Where::kDevice) return Status::Ok();
  for (size_t r = 0; r <= a.n_rows; ++r) {
    const int32_t o = a.row_offsets[r];
    if (o < 0 || static_cast<size_t>(o) > a.n_candidates) {
      return error(Code::kOutOfRange, "row_offsets[", r, "] = ", o,
                   " is out of range [0, n_candidates=", a.n_candidates, "]");
    }
    if (r > 0 && o < a.row_offsets[r - 1]) {
      return error(Code::kInvalidArgument, "row_offsets must be non-decreasing: row_offsets[", r,
                   "] = ", o, " < row_offsets[", r - 1, "] = ", a.row_offsets[r - 1]);
    }
  }
  for (size_t r = 0; r < a.n_rows; ++r) {
    for (int32_t j = a.row_offsets[r]; j < a.row_offsets[r + 1]; ++j) {
      if (a.tokens[j] < 0 || a.tokens[j] >= a.vocab_size) {
        return error(Code::kOutOfRange, "row ", r, ", candidate ", j - a.row_offsets[r], ": token ",
                     a.tokens[j], " is out of range [0, vocab_size=", a.vocab_size, ")");
      }
    }
  }
  return Status::Ok();
}

Result<BeamLogits> check_beam_logits(const BeamLogits &in, int32_t vocab_size, size_t n_rows,
                                     Where where) {
  BeamLogits v = in;
  if (v.n_columns == 0) v.n_columns = static_cast<size_t>(vocab_size > 0 ? vocab_size : 0);
  if (v.row_stride == 0) v.row_stride = v.n_columns;
  TM_TRY(check_dtype(v.dtype));
  if (v.n_columns < static_cast<size_t>(vocab_size)) {
    return error(Code::kInvalidArgument, "logits n_columns ", v.n_columns,
                 " is smaller than the trie's vocab_size ", vocab_size);
  }
  if (v.row_stride < v.n_columns) {
    return error(Code::kInvalidArgument, "logits row_stride ", v.row_stride,
                 " is smaller than n_columns ", v.n_columns);
  }
  if (n_rows > 0 && !v.data) return error(Code::kInvalidArgument, "logits data is NULL");
  TM_TRY(check_extent("logits", n_rows, v.row_stride, v.n_columns, dtype_bytes(v.dtype)));
  if (where == Where::kDevice) TM_TRY(check_element_aligned("logits data", v.data, v.dtype));
  return v;
}

}  // namespace treemask::kernels
