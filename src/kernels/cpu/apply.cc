// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/apply.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <unistd.h>

#include "core/bits.h"

namespace treemask::kernels {

namespace {

template <class T>
void mask_row_ref(T *row, T neg_inf, const uint32_t *mask, size_t valid, size_t width) {
  for (size_t c = 0; c < width; ++c) {
    if (c >= valid || !((mask[c >> 5] >> (c & 31)) & 1u)) row[c] = neg_inf;
  }
}

MaskRowFn select_mask_row() {
#ifdef TREEMASK_KERNELS_X86
  if (__builtin_cpu_supports("avx2")) return mask_row_avx2;
#endif
  return mask_row_scalar;
}

// The checks both apply forms share.
Status check_rows(const LogitsRows &a) {
  if (a.dtype < 0 || a.dtype > 2) {
    return error(Code::kInvalidArgument, "unknown dtype ", a.dtype,
                 " (expected 0 = TREEMASK_F32, 1 = TREEMASK_F16, 2 = TREEMASK_BF16)");
  }
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
  const size_t max_elems = std::numeric_limits<size_t>::max() / dtype_bytes(DType(a.dtype));
  if (a.n_rows > 1 && a.row_stride > 0 &&
      (a.width > max_elems || (a.n_rows - 1) > (max_elems - a.width) / a.row_stride)) {
    return error(Code::kOutOfRange, "n_rows ", a.n_rows, " x logits_row_stride ", a.row_stride,
                 " overflows the address space");
  }
  for (size_t i = 0; i < a.n_indices; ++i) {
    if (a.indices[i] < 0 || static_cast<size_t>(a.indices[i]) >= a.n_rows) {
      return error(Code::kOutOfRange, "indices[", i, "] = ", a.indices[i],
                   " is out of range [0, n_rows=", a.n_rows, ")");
    }
  }
  return Status::Ok();
}

// Whether the call writes enough to stream its stores past the caches.
bool streams(const LogitsRows &a) {
  return a.touched_rows() * a.width * dtype_bytes(DType(a.dtype)) >= stream_threshold_bytes();
}

// Calls body(row) for every row the call touches, in order.
template <class Body>
void for_each_row(const LogitsRows &a, Body &&body) {
  if (a.indices) {
    for (size_t i = 0; i < a.n_indices; ++i) body(static_cast<size_t>(a.indices[i]));
  } else {
    for (size_t r = 0; r < a.n_rows; ++r) body(r);
  }
}

// Keeps the k candidates of every touched row: saves them, fills the row
// with -inf, restores them.
template <class T>
void mask_candidate_rows(const CandidateApply &a, size_t max_k, MaskRowFn row_fn) {
  const auto dtype = static_cast<DType>(a.dtype);
  const bool stream = streams(a);
  std::vector<T> saved(max_k);
  for_each_row(a, [&](size_t r) {
    T *row = static_cast<T *>(a.logits) + r * a.row_stride;
    const int32_t *tokens = a.tokens + a.row_offsets[r];
    const size_t k = a.row_offsets[r + 1] - a.row_offsets[r];
    for (size_t j = 0; j < k; ++j) {
      const auto t = static_cast<size_t>(tokens[j]);
      if (t < a.width) saved[j] = row[t];
    }
    row_fn(row, dtype, nullptr, 0, a.width, stream);
    for (size_t j = 0; j < k; ++j) {
      const auto t = static_cast<size_t>(tokens[j]);
      if (t < a.width) row[t] = saved[j];
    }
  });
}

}  // namespace

void mask_row_scalar(void *logits, DType dtype, const uint32_t *mask, size_t valid, size_t width,
                     bool /*stream*/) {
  switch (dtype) {
    case DType::kF32:
      mask_row_ref(static_cast<uint32_t *>(logits), kNegInfF32, mask, valid, width);
      return;
    case DType::kF16:
      mask_row_ref(static_cast<uint16_t *>(logits), kNegInfF16, mask, valid, width);
      return;
    case DType::kBF16:
      mask_row_ref(static_cast<uint16_t *>(logits), kNegInfBF16, mask, valid, width);
      return;
  }
}

MaskRowFn mask_row_best() {
  static const MaskRowFn best = select_mask_row();
  return best;
}

const char *mask_row_best_name() { return mask_row_best() == mask_row_scalar ? "scalar" : "avx2"; }

size_t stream_threshold_bytes() {
  // Half the last-level cache, within [8, 32] MiB: virtual machines often
  // report the host's whole L3, so the value is capped.
  static const size_t threshold = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const size_t half = l3 > 0 ? static_cast<size_t>(l3) / 2 : size_t{16} << 20;
    return std::clamp(half, size_t{8} << 20, size_t{32} << 20);
  }();
  return threshold;
}

Status apply_token_bitmask(const BitmaskApply &a, MaskRowFn row_fn) {
  TM_TRY(check_rows(a));
  if (!a.indices && a.bitmask_rows < a.n_rows) {
    return error(Code::kBufferTooSmall, "the bitmask has ", a.bitmask_rows,
                 " rows but the logits have ", a.n_rows,
                 " (without indices every logits row is masked with its bitmask row)");
  }
  for (size_t i = 0; i < a.n_indices; ++i) {
    if (static_cast<size_t>(a.indices[i]) >= a.bitmask_rows) {
      return error(Code::kOutOfRange, "indices[", i, "] = ", a.indices[i],
                   " is out of range [0, n_bitmask_rows=", a.bitmask_rows,
                   "): an index names a row of both the logits and the bitmask");
    }
  }
  const size_t valid = std::min(a.width, static_cast<size_t>(a.vocab_size));
  const size_t needed = words_for_vocab(static_cast<int32_t>(valid));
  if (a.bitmask_row_words < needed) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", a.bitmask_row_words, " < ", needed,
                 ", the words covering min(vocab_size=", a.vocab_size, ", logits_width=", a.width,
                 ") columns");
  }
  if (a.touched_rows() > 0 && needed > 0 && !a.bitmask) {
    return error(Code::kInvalidArgument, "bitmask is NULL");
  }
  if (a.width == 0) return Status::Ok();
  const auto dtype = static_cast<DType>(a.dtype);
  const size_t row_bytes = a.row_stride * dtype_bytes(dtype);
  const bool stream = streams(a);
  auto *base = static_cast<char *>(a.logits);
  for_each_row(a, [&](size_t r) {
    row_fn(base + r * row_bytes, dtype, a.bitmask + r * a.bitmask_row_words, valid, a.width,
           stream);
  });
  return Status::Ok();
}

Status apply_token_candidates(const CandidateApply &a, MaskRowFn row_fn) {
  TM_TRY(check_rows(a));
  if (!a.row_offsets) return error(Code::kInvalidArgument, "row_offsets is NULL");
  for (size_t r = 0; r < a.n_rows; ++r) {
    if (a.row_offsets[r + 1] < a.row_offsets[r]) {
      return error(Code::kInvalidArgument, "row_offsets must be non-decreasing: row_offsets[",
                   r + 1, "] = ", a.row_offsets[r + 1], " < row_offsets[", r,
                   "] = ", a.row_offsets[r]);
    }
  }
  const size_t first = a.row_offsets[0], last = a.row_offsets[a.n_rows];
  if (last > first && !a.tokens) {
    return error(Code::kInvalidArgument, "tokens is NULL but the rows hold ", last - first,
                 " candidates");
  }
  size_t max_k = 0;
  for (size_t r = 0; r < a.n_rows; ++r) {
    max_k = std::max(max_k, a.row_offsets[r + 1] - a.row_offsets[r]);
    for (size_t j = a.row_offsets[r]; j < a.row_offsets[r + 1]; ++j) {
      if (a.tokens[j] < 0 || a.tokens[j] >= a.vocab_size) {
        return error(Code::kOutOfRange, "row ", r, ", candidate ", j - a.row_offsets[r], ": token ",
                     a.tokens[j], " is out of range [0, vocab_size=", a.vocab_size, ")");
      }
    }
  }
  if (a.width == 0) return Status::Ok();
  // Columns >= vocab_size are masked like the bitmask form: a candidate is a
  // token < vocab_size, so restoring candidates never unmasks them.
  if (a.dtype == static_cast<int32_t>(DType::kF32)) {
    mask_candidate_rows<uint32_t>(a, max_k, row_fn);
  } else {
    mask_candidate_rows<uint16_t>(a, max_k, row_fn);
  }
  return Status::Ok();
}

}  // namespace treemask::kernels
