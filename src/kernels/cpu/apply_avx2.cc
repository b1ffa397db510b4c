// The AVX2 masking kernel. Only this file is compiled for AVX2, and only the
// functions between the pragmas are: inline functions of the standard headers
// above them keep the baseline ISA, so the linker can never pick an AVX2 copy
// for code that runs on a CPU without it.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/apply.h"

#ifdef TREEMASK_KERNELS_X86

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2")

namespace treemask::kernels {

namespace {

// Fills [begin, end) of a row with the -inf pattern `bits`; neg_inf holds it
// in every lane.
template <class T>
void fill_neg_inf(T *row, size_t begin, size_t end, T bits, __m256i neg_inf) {
  constexpr size_t kLanes = 32 / sizeof(T);
  size_t c = begin;
  for (; c + kLanes <= end; c += kLanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(row + c), neg_inf);
  }
  for (; c < end; ++c) row[c] = bits;
}

void mask_row_f32(uint32_t *row, uint32_t neg_inf_bits, const uint32_t *mask, size_t valid,
                  size_t width) {
  const __m256i neg_inf = _mm256_set1_epi32(static_cast<int32_t>(neg_inf_bits));
  // Lane i of group g tests bit 8g + i of a mask word.
  const __m256i bit_of_lane[4] = {
      _mm256_setr_epi32(1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7),
      _mm256_setr_epi32(1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15),
      _mm256_setr_epi32(1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 21, 1 << 22, 1 << 23),
      _mm256_setr_epi32(1 << 24, 1 << 25, 1 << 26, 1 << 27, 1 << 28, 1 << 29, 1 << 30,
                        static_cast<int32_t>(1u << 31)),
  };
  const size_t full_words = valid / 32;
  for (size_t w = 0; w < full_words; ++w) {
    const uint32_t bits = mask[w];
    if (bits == 0xFFFFFFFFu) continue;
    auto *out = reinterpret_cast<__m256i *>(row + w * 32);
    if (bits == 0) {
      _mm256_storeu_si256(out + 0, neg_inf);
      _mm256_storeu_si256(out + 1, neg_inf);
      _mm256_storeu_si256(out + 2, neg_inf);
      _mm256_storeu_si256(out + 3, neg_inf);
      continue;
    }
    // A masked store writes only the lanes whose bit is 0: no load needed.
    const __m256i broadcast = _mm256_set1_epi32(static_cast<int32_t>(bits));
    for (int g = 0; g < 4; ++g) {
      if (((bits >> (8 * g)) & 0xFFu) == 0xFFu) continue;
      const __m256i masked =
          _mm256_cmpeq_epi32(_mm256_and_si256(broadcast, bit_of_lane[g]), _mm256_setzero_si256());
      _mm256_maskstore_epi32(reinterpret_cast<int *>(out + g), masked, neg_inf);
    }
  }
  for (size_t c = full_words * 32; c < valid; ++c) {
    if (!((mask[c >> 5] >> (c & 31)) & 1u)) row[c] = neg_inf_bits;
  }
  fill_neg_inf(row, valid, width, neg_inf_bits, neg_inf);
}

void mask_row_16(uint16_t *row, uint16_t neg_inf_bits, const uint32_t *mask, size_t valid,
                 size_t width) {
  const __m256i neg_inf = _mm256_set1_epi16(static_cast<int16_t>(neg_inf_bits));
  const __m256i bit_of_lane = _mm256_setr_epi16(
      1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10,
      1 << 11, 1 << 12, 1 << 13, 1 << 14, static_cast<int16_t>(1u << 15));
  const size_t full_words = valid / 32;
  for (size_t w = 0; w < full_words; ++w) {
    const uint32_t bits = mask[w];
    if (bits == 0xFFFFFFFFu) continue;
    auto *out = reinterpret_cast<__m256i *>(row + w * 32);
    if (bits == 0) {
      _mm256_storeu_si256(out + 0, neg_inf);
      _mm256_storeu_si256(out + 1, neg_inf);
      continue;
    }
    // AVX2 has no 16-bit masked store: blend with the loaded logits.
    for (int half = 0; half < 2; ++half) {
      const uint32_t half_bits = (bits >> (16 * half)) & 0xFFFFu;
      if (half_bits == 0xFFFFu) continue;
      const __m256i keep = _mm256_cmpeq_epi16(
          _mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(half_bits)), bit_of_lane),
          bit_of_lane);
      const __m256i logits = _mm256_loadu_si256(out + half);
      _mm256_storeu_si256(out + half, _mm256_blendv_epi8(neg_inf, logits, keep));
    }
  }
  for (size_t c = full_words * 32; c < valid; ++c) {
    if (!((mask[c >> 5] >> (c & 31)) & 1u)) row[c] = neg_inf_bits;
  }
  fill_neg_inf(row, valid, width, neg_inf_bits, neg_inf);
}

}  // namespace

void mask_row_avx2(void *logits, DType dtype, const uint32_t *mask, size_t valid, size_t width) {
  switch (dtype) {
    case DType::kF32:
      mask_row_f32(static_cast<uint32_t *>(logits), kNegInfF32, mask, valid, width);
      return;
    case DType::kF16:
      mask_row_16(static_cast<uint16_t *>(logits), kNegInfF16, mask, valid, width);
      return;
    case DType::kBF16:
      mask_row_16(static_cast<uint16_t *>(logits), kNegInfBF16, mask, valid, width);
      return;
  }
}

}  // namespace treemask::kernels

#pragma GCC pop_options

#endif  // TREEMASK_KERNELS_X86
