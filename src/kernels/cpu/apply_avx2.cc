// The AVX2 masking kernel. Only this file is compiled for AVX2, and only the
// functions between the pragmas are: inline functions of the standard headers
// above them keep the baseline ISA, so the linker can never pick an AVX2 copy
// for code that runs on a CPU without it.
//
// Per 32-column mask word: all ones is skipped, all zeros is stored without a
// load (and runs of 8 such words are found with one 256-bit test), anything
// else is loaded, blended and stored. Masked stores (vmaskmov) are avoided on
// purpose: on AMD Zen they are microcoded and slower than load + blend + store.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/apply.h"

#ifdef TREEMASK_KERNELS_X86

#include <immintrin.h>

// clang ignores GCC's target pragma; its own attribute pragma does the same.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

namespace treemask::kernels {

namespace {

// Element-type specifics: T is the element's bit pattern (uint32_t for fp32,
// uint16_t for fp16 / bf16). A mask word covers kVectors 256-bit vectors;
// part(bits, v) is the slice of the word that vector v covers, keep(part) its
// all-ones lanes where the column is allowed. (A 256-entry lane table instead
// of broadcast + test measured no faster for fp32 and slower for 16 bits.)
template <class T>
struct Lanes;

template <>
struct Lanes<uint32_t> {
  static constexpr int kVectors = 4;
  static constexpr uint32_t kPartOnes = 0xFFu;
  static uint32_t part(uint32_t bits, int v) { return (bits >> (8 * v)) & 0xFFu; }
  static __m256i keep(uint32_t part) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(part)), bit),
                              bit);
  }
};

template <>
struct Lanes<uint16_t> {
  static constexpr int kVectors = 2;
  static constexpr uint32_t kPartOnes = 0xFFFFu;
  static uint32_t part(uint32_t bits, int v) { return (bits >> (16 * v)) & 0xFFFFu; }
  static __m256i keep(uint32_t part) {
    const __m256i bit = _mm256_setr_epi16(1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6,
                                          1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12,
                                          1 << 13, 1 << 14, static_cast<int16_t>(1u << 15));
    return _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(part)), bit),
                              bit);
  }
};

template <bool kStream>
void store(__m256i *out, __m256i v) {
  if constexpr (kStream) {
    _mm256_stream_si256(out, v);
  } else {
    _mm256_storeu_si256(out, v);
  }
}

// Masks the columns of one mask word; out points at its first vector.
template <class T, bool kStream>
void mask_word(__m256i *out, uint32_t bits, __m256i neg_inf) {
  using L = Lanes<T>;
  if (bits == 0xFFFFFFFFu) return;
  for (int v = 0; v < L::kVectors; ++v) {
    const uint32_t part = L::part(bits, v);
    if (part == L::kPartOnes) continue;
    if (part == 0) {
      store<kStream>(out + v, neg_inf);
      continue;
    }
    const __m256i logits = _mm256_loadu_si256(out + v);
    _mm256_storeu_si256(out + v, _mm256_blendv_epi8(neg_inf, logits, L::keep(part)));
  }
}

// Masks the full words [0, n_words) of a row; out is the row as vectors.
template <class T, bool kStream>
void mask_words(__m256i *out, const uint32_t *mask, size_t n_words, __m256i neg_inf) {
  constexpr int kVectors = Lanes<T>::kVectors;
  size_t w = 0;
  while (w + 8 <= n_words) {
    const __m256i eight = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(mask + w));
    if (_mm256_testz_si256(eight, eight)) {  // a trie row is almost all of these
      for (int v = 0; v < 8 * kVectors; ++v) store<kStream>(out + w * kVectors + v, neg_inf);
    } else if (!_mm256_testc_si256(eight, _mm256_set1_epi32(-1))) {
      for (size_t i = w; i < w + 8; ++i)
        mask_word<T, kStream>(out + i * kVectors, mask[i], neg_inf);
    }
    w += 8;
  }
  for (; w < n_words; ++w) mask_word<T, kStream>(out + w * kVectors, mask[w], neg_inf);
}

// Fills [begin, end) of a row with the -inf pattern `bits` (neg_inf holds it
// in every lane): the padded columns, or the whole row of the sparse form.
template <class T, bool kStream>
void fill_neg_inf(T *row, size_t begin, size_t end, T bits, __m256i neg_inf) {
  constexpr size_t kLanes = 32 / sizeof(T);
  size_t c = begin;
  if constexpr (kStream) {
    for (; c < end && reinterpret_cast<uintptr_t>(row + c) % 32 != 0; ++c) row[c] = bits;
  }
  for (; c + 4 * kLanes <= end; c += 4 * kLanes) {
    auto *out = reinterpret_cast<__m256i *>(row + c);
    store<kStream>(out + 0, neg_inf);
    store<kStream>(out + 1, neg_inf);
    store<kStream>(out + 2, neg_inf);
    store<kStream>(out + 3, neg_inf);
  }
  for (; c + kLanes <= end; c += kLanes)
    store<kStream>(reinterpret_cast<__m256i *>(row + c), neg_inf);
  for (; c < end; ++c) row[c] = bits;
}

template <class T, bool kStream>
void mask_row(T *row, T neg_inf_bits, const uint32_t *mask, size_t valid, size_t width) {
  const __m256i neg_inf = sizeof(T) == 4 ? _mm256_set1_epi32(static_cast<int32_t>(neg_inf_bits))
                                         : _mm256_set1_epi16(static_cast<int16_t>(neg_inf_bits));
  const size_t full_words = valid / 32;
  mask_words<T, kStream>(reinterpret_cast<__m256i *>(row), mask, full_words, neg_inf);
  for (size_t c = full_words * 32; c < valid; ++c) {
    if (!((mask[c >> 5] >> (c & 31)) & 1u)) row[c] = neg_inf_bits;
  }
  fill_neg_inf<T, kStream>(row, valid, width, neg_inf_bits, neg_inf);
  if constexpr (kStream) _mm_sfence();  // streamed stores are visible before the call returns
}

template <class T>
void mask_row(T *row, T neg_inf_bits, const uint32_t *mask, size_t valid, size_t width,
              bool stream) {
  // Streaming stores need 32-byte aligned words; other rows take normal ones.
  if (stream && reinterpret_cast<uintptr_t>(row) % 32 == 0) {
    mask_row<T, true>(row, neg_inf_bits, mask, valid, width);
  } else {
    mask_row<T, false>(row, neg_inf_bits, mask, valid, width);
  }
}

}  // namespace

void mask_row_avx2(void *logits, DType dtype, const uint32_t *mask, size_t valid, size_t width,
                   bool stream) {
  switch (dtype) {
    case DType::kF32:
      mask_row(static_cast<uint32_t *>(logits), kNegInfF32, mask, valid, width, stream);
      return;
    case DType::kF16:
      mask_row(static_cast<uint16_t *>(logits), kNegInfF16, mask, valid, width, stream);
      return;
    case DType::kBF16:
      mask_row(static_cast<uint16_t *>(logits), kNegInfBF16, mask, valid, width, stream);
      return;
  }
}

}  // namespace treemask::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // TREEMASK_KERNELS_X86
