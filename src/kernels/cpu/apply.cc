// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/apply.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <unistd.h>

#include "core/bits.h"
#include "core/cpu.h"

namespace treemask::kernels {

namespace {

template <class T>
void mask_row_ref(T *row, T neg_inf, const uint32_t *mask, size_t valid, size_t width) {
  for (size_t c = 0; c < width; ++c) {
    if (c >= valid || !((mask[c >> 5] >> (c & 31)) & 1u)) row[c] = neg_inf;
  }
}

// Out of place, one pass: a word with no allowed token is 32 -inf stores
// and reads nothing, an all-allowed word is a copy, a mixed one a blend.
// For trie rows (almost every word zero) it moves what the in-place form
// moves: one write of the row.
template <class T>
void mask_row_out(T *dst, const T *src, T neg_inf, const uint32_t *mask, size_t valid,
                  size_t width) {
  size_t c = 0;
  for (const size_t whole = valid / 32 * 32; c < whole; c += 32) {
    const uint32_t m = mask[c >> 5];
    if (m == 0) {
      for (size_t b = 0; b < 32; ++b) dst[c + b] = neg_inf;
    } else if (m == ~0u) {
      std::memcpy(dst + c, src + c, 32 * sizeof(T));
    } else {
      for (size_t b = 0; b < 32; ++b) dst[c + b] = (m >> b) & 1u ? src[c + b] : neg_inf;
    }
  }
  for (; c < width; ++c) {
    dst[c] = c < valid && ((mask[c >> 5] >> (c & 31)) & 1u) ? src[c] : neg_inf;
  }
}

MaskRowFn select_mask_row() {
#ifdef TREEMASK_KERNELS_X86
  if (cpu_features().avx2) return mask_row_avx2;
#endif
  return mask_row_scalar;
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
    const auto k = static_cast<size_t>(a.row_offsets[r + 1] - a.row_offsets[r]);
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

namespace {}  // namespace

Status apply_token_bitmask(const BitmaskApply &a, MaskRowFn row_fn) {
  TM_TRY(check_bitmask_apply(a, Where::kHost));
  const size_t valid = a.valid_columns();
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

Status apply_token_bitmask_out(const BitmaskApply &a, const void *src, size_t src_row_stride,
                               MaskRowFn row_fn) {
  // The output side is checked as an in-place call would be; the input side
  // as one more array of rows, which must not overlap the output.
  if (a.n_rows > 0 && a.width > 0 && !src) return error(Code::kInvalidArgument, "logits is NULL");
  if (src_row_stride < a.width) {
    return error(Code::kInvalidArgument, "logits_row_stride ", src_row_stride,
                 " is smaller than logits_width ", a.width);
  }
  LogitsRows input = a;
  input.logits = const_cast<void *>(src);
  input.row_stride = src_row_stride;
  TM_TRY(check_logits_rows(input, Where::kHost));
  BitmaskApply out = a;
  out.indices = nullptr;  // every output row is written; indices only pick what is masked
  out.n_indices = 0;
  TM_TRY(check_logits_rows(out, Where::kHost));
  if (a.n_rows == 0 || a.width == 0) return apply_token_bitmask(a, row_fn);
  const size_t bytes = dtype_bytes(DType(a.dtype));
  const auto *in_begin = static_cast<const char *>(src);
  const auto *out_begin = static_cast<const char *>(a.logits);
  const char *in_end = in_begin + ((a.n_rows - 1) * src_row_stride + a.width) * bytes;
  const char *out_end = out_begin + ((a.n_rows - 1) * a.row_stride + a.width) * bytes;
  if (in_begin < out_end && out_begin < in_end) {
    return error(Code::kInvalidArgument,
                 "logits and out overlap; use treemask_cpu_apply_token_bitmask to mask in place");
  }
  TM_TRY(check_bitmask_apply(a, Where::kHost));
  std::vector<uint8_t> touched(a.n_rows, a.indices ? 0 : 1);
  for (size_t i = 0; i < a.n_indices; ++i) touched[static_cast<size_t>(a.indices[i])] = 1;
  const size_t valid = a.valid_columns();
  auto *out_base = static_cast<char *>(a.logits);
  const auto dtype = DType(a.dtype);
  for (size_t r = 0; r < a.n_rows; ++r) {
    char *row = out_base + r * a.row_stride * bytes;
    const char *in = in_begin + r * src_row_stride * bytes;
    if (!touched[r]) {
      std::memcpy(row, in, a.width * bytes);
      continue;
    }
    const uint32_t *mask = a.bitmask + r * a.bitmask_row_words;
    switch (dtype) {
      case DType::kF32:
        mask_row_out(reinterpret_cast<uint32_t *>(row), reinterpret_cast<const uint32_t *>(in),
                     kNegInfF32, mask, valid, a.width);
        break;
      case DType::kF16:
      case DType::kBF16:
        mask_row_out(reinterpret_cast<uint16_t *>(row), reinterpret_cast<const uint16_t *>(in),
                     dtype == DType::kF16 ? kNegInfF16 : kNegInfBF16, mask, valid, a.width);
        break;
    }
  }
  (void)row_fn;  // the fused form has its own loop; the in-place variants do not apply
  return Status::Ok();
}

Status apply_token_candidates(const CandidateApply &a, MaskRowFn row_fn) {
  TM_TRY(check_candidate_apply(a, Where::kHost));
  size_t max_k = 0;
  for (size_t r = 0; r < a.n_rows; ++r) {
    max_k = std::max(max_k, static_cast<size_t>(a.row_offsets[r + 1] - a.row_offsets[r]));
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
