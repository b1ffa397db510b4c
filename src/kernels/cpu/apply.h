// CPU logits masking: pure functions over raw rows, a scalar reference beside
// every SIMD variant, and the argument checks of the public entry points.
//
// A row is masked by writing the dtype's -inf bit pattern (kernels/dtype.h);
// values are never read as floats, so NaNs and signed zeros pass through
// untouched.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/checks.h"
#include "kernels/dtype.h"

namespace treemask::kernels {

// Masks one logits row: columns [0, width) are written, column c keeps its
// value iff c < valid and bit c of mask is set. mask holds at least
// ceil(valid / 32) words and is not read when valid == 0 (so valid = 0 fills
// the whole row with -inf). valid <= width. stream: the call writes more than
// the caches hold, so fully-masked stretches may bypass them (non-temporal
// stores; a hint a variant may ignore).
using MaskRowFn = void (*)(void *logits, DType dtype, const uint32_t *mask, size_t valid,
                           size_t width, bool stream);

// The obvious per-column loop: the reference every SIMD variant must equal.
void mask_row_scalar(void *logits, DType dtype, const uint32_t *mask, size_t valid, size_t width,
                     bool stream);

#if defined(__x86_64__) || defined(__i386__)
#define TREEMASK_KERNELS_X86 1
// All-ones words are skipped, all-zero words stored without a load, mixed
// words blended. Call only when the CPU has AVX2.
void mask_row_avx2(void *logits, DType dtype, const uint32_t *mask, size_t valid, size_t width,
                   bool stream);
#endif

// The fastest variant this CPU supports, chosen on first use and then fixed.
MaskRowFn mask_row_best();
// Its name ("avx2" or "scalar"), for benchmarks and logs.
const char *mask_row_best_name();

// Calls writing at least this many bytes of logits stream them (about half
// the last-level cache: a buffer that fits stays cached for the sampler that
// reads it next; a bigger one would only evict everything else).
size_t stream_threshold_bytes();

// Validates every argument before touching memory (the message names the
// offending argument, index or row), then masks the rows with `row_fn`.
Status apply_token_bitmask(const BitmaskApply &args, MaskRowFn row_fn = mask_row_best());

// One call of treemask_cpu_apply_token_bitmask_out: the masked rows go to
// args.logits (the output, args.row_stride apart); src holds the input rows,
// src_row_stride apart. Every row is written (copied, then masked if the
// call touches it) while it is in cache.
Status apply_token_bitmask_out(const BitmaskApply &args, const void *src, size_t src_row_stride,
                               MaskRowFn row_fn = mask_row_best());

// One call of treemask_cpu_apply_token_candidates: candidate lists in CSR
// form replace the bitmask.
Status apply_token_candidates(const CandidateApply &args, MaskRowFn row_fn = mask_row_best());

}  // namespace treemask::kernels
