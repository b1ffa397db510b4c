// The CPU masking kernels: the AVX2 variant against the scalar reference, both
// against a model written here from the header's rules, on awkward sizes,
// every dtype, padded and narrow logits, strides and row indices; the sparse
// (candidate) form against the bitmask form; and every bad argument.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "kernels/cpu/apply.h"

namespace treemask::kernels {
namespace {

constexpr int32_t kVocabs[] = {1, 31, 32, 33, 4097, 151936};
constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

uint32_t neg_inf_bits(DType d) {
  switch (d) {
    case DType::kF32: return kNegInfF32;
    case DType::kF16: return kNegInfF16;
    case DType::kBF16: return kNegInfBF16;
  }
  return 0;
}

// Like a torch tensor's storage: 64-byte aligned, so the streaming-store
// path (which needs 32-byte aligned rows) is reachable.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T *p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const Aligned64 &) const { return true; }
};

// Logits as raw elements of 4 or 2 bytes; get() widens one to uint32 so one
// model serves every dtype.
struct Logits {
  DType dtype;
  size_t n_rows, stride, width;
  std::vector<uint8_t, Aligned64<uint8_t>> bytes;

  Logits(DType d, size_t rows, size_t stride_, size_t width_, std::mt19937_64 &rng)
      : dtype(d),
        n_rows(rows),
        stride(stride_),
        width(width_),
        bytes(rows * stride_ * dtype_bytes(d)) {
    for (auto &b : bytes) b = static_cast<uint8_t>(rng());
  }
  // This buffer as the logits side of an apply call.
  LogitsRows rows(int32_t vocab, const std::vector<int32_t> *indices) {
    return {bytes.data(),
            static_cast<int32_t>(dtype),
            n_rows,
            stride,
            width,
            vocab,
            indices ? indices->data() : nullptr,
            indices ? indices->size() : 0};
  }
  uint32_t get(size_t r, size_t c) const {
    if (dtype == DType::kF32) {
      uint32_t v;
      std::memcpy(&v, bytes.data() + (r * stride + c) * 4, 4);
      return v;
    }
    uint16_t v;
    std::memcpy(&v, bytes.data() + (r * stride + c) * 2, 2);
    return v;
  }
};

// A mask row mixing the word kinds the kernel treats differently: all zero
// (store only), all ones (skip), one bit, all but one, random, half bytes.
std::vector<uint32_t> random_mask(std::mt19937_64 &rng, size_t rows, size_t words) {
  std::vector<uint32_t> m(rows * words);
  const int bias = static_cast<int>(rng() % 4);  // some masks are mostly one kind
  for (auto &w : m) {
    const int kind = bias == 0 ? static_cast<int>(rng() % 6) : (rng() % 4 ? bias : rng() % 6);
    switch (kind) {
      case 0: w = static_cast<uint32_t>(rng()); break;
      case 1: w = 0; break;
      case 2: w = 0xFFFFFFFFu; break;
      case 3: w = uint32_t{1} << (rng() % 32); break;
      case 4: w = ~(uint32_t{1} << (rng() % 32)); break;
      default: w = 0xFF00FF00u >> (rng() % 9); break;
    }
  }
  return m;
}

// What the header says the result must be, computed element by element.
Logits expected(const Logits &in, const std::vector<uint32_t> &mask, size_t mask_words,
                int32_t vocab, const std::vector<int32_t> &indices, bool use_indices) {
  Logits out = in;
  std::vector<bool> touched(in.n_rows, !use_indices);
  for (int32_t i : indices) touched[i] = true;
  const size_t elem = dtype_bytes(in.dtype);
  const uint32_t ninf = neg_inf_bits(in.dtype);
  for (size_t r = 0; r < in.n_rows; ++r) {
    if (!touched[r]) continue;
    for (size_t c = 0; c < in.width; ++c) {
      const bool allowed =
          c < static_cast<size_t>(vocab) && ((mask[r * mask_words + c / 32] >> (c % 32)) & 1u);
      if (!allowed) std::memcpy(out.bytes.data() + (r * in.stride + c) * elem, &ninf, elem);
    }
  }
  return out;
}

std::string where(const Logits &a, const Logits &b) {
  for (size_t r = 0; r < a.n_rows; ++r) {
    for (size_t c = 0; c < a.stride; ++c) {
      if (a.get(r, c) != b.get(r, c)) {
        return "first difference at row " + std::to_string(r) + ", column " + std::to_string(c) +
               ": " + std::to_string(a.get(r, c)) + " vs " + std::to_string(b.get(r, c));
      }
    }
  }
  return "equal";
}

struct Variant {
  const char *name;
  MaskRowFn fn;
};

std::vector<Variant> variants() {
  std::vector<Variant> v{{"scalar", mask_row_scalar}};
#ifdef TREEMASK_KERNELS_X86
  if (__builtin_cpu_supports("avx2")) v.push_back({"avx2", mask_row_avx2});
#endif
  return v;
}

TEST(ApplyBitmask, EveryVariantMatchesTheModelOnAwkwardShapes) {
  std::mt19937_64 rng(7);
  const auto all = variants();
  for (int32_t vocab : kVocabs) {
    // Logits exactly V wide, padded wider (columns >= V masked), narrower.
    std::vector<size_t> widths{size_t(vocab), size_t(vocab) + 1 + rng() % 70};
    if (vocab > 1) widths.push_back(size_t(vocab) - 1 - rng() % std::min<int32_t>(vocab - 1, 40));
    for (size_t width : widths) {
      for (DType dtype : kDTypes) {
        for (size_t extra_stride : {size_t{0}, size_t{5}}) {
          const size_t rows = vocab > 5000 ? 2 : 4;
          const size_t stride = width + extra_stride;
          // Extra words past the vocab carry garbage the kernel must ignore.
          const size_t words = treemask_bitmask_words(vocab) + rng() % 2;
          const auto mask = random_mask(rng, rows, words);
          const Logits in(dtype, rows, stride, width, rng);
          std::vector<int32_t> indices;
          const bool use_indices = rng() % 2 == 0;
          if (use_indices) indices = {int32_t(rows - 1), 0, int32_t(rows - 1)};  // repeats too
          const Logits want = expected(in, mask, words, vocab, indices, use_indices);
          for (const Variant &v : all) {
            SCOPED_TRACE(std::string(v.name) + " vocab " + std::to_string(vocab) + " width " +
                         std::to_string(width) + " stride " + std::to_string(stride) + " dtype " +
                         std::to_string(int(dtype)));
            Logits got = in;
            const BitmaskApply a{got.rows(vocab, use_indices ? &indices : nullptr), mask.data(),
                                 words, rows};
            ASSERT_TRUE(apply_token_bitmask(a, v.fn).ok());
            ASSERT_TRUE(got.bytes == want.bytes) << where(got, want);
          }
        }
      }
    }
  }
}

TEST(ApplyBitmask, VariantsAgreeOnManyRandomRows) {
  const auto all = variants();
  if (all.size() < 2) GTEST_SKIP() << "this CPU has no AVX2: only the scalar kernel exists";
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < testutil::scaled(300); ++iter) {
    const int32_t vocab = iter % 10 == 0 ? 151936 : 1 + static_cast<int32_t>(rng() % 700);
    const size_t width = vocab + rng() % 40 - std::min<size_t>(vocab - 1, rng() % 40);
    const DType dtype = kDTypes[rng() % 3];
    const size_t words = treemask_bitmask_words(vocab);
    const auto mask = random_mask(rng, 1, words);
    const Logits in(dtype, 1, width, width, rng);
    Logits a = in, b = in;
    // Every other row streams (its stores bypass the caches); the result
    // must not change.
    const bool stream = iter % 2 == 1;
    const size_t valid = std::min<size_t>(vocab, width);
    mask_row_scalar(a.bytes.data(), dtype, mask.data(), valid, width, stream);
    mask_row_avx2(b.bytes.data(), dtype, mask.data(), valid, width, stream);
    ASSERT_TRUE(a.bytes == b.bytes)
        << "vocab " << vocab << " width " << width << " stream " << stream << ": " << where(a, b);
  }
}

TEST(ApplyBitmask, PublicEntryPointUsesTheSelectedKernel) {
  const std::string isa = treemask_cpu_kernel_isa();
  EXPECT_EQ(isa, mask_row_best_name());
#ifdef TREEMASK_KERNELS_X86
  EXPECT_EQ(isa, __builtin_cpu_supports("avx2") ? "avx2" : "scalar");
#endif
  std::mt19937_64 rng(3);
  const int32_t vocab = 151936;
  const size_t words = treemask_bitmask_words(vocab);
  for (DType dtype : kDTypes) {
    const auto mask = random_mask(rng, 3, words);
    const Logits in(dtype, 3, vocab + 64, vocab + 60, rng);
    Logits got = in;
    ASSERT_EQ(treemask_cpu_apply_token_bitmask(
                  got.bytes.data(), static_cast<treemask_dtype>(dtype), 3, vocab + 64, vocab + 60,
                  reinterpret_cast<const int32_t *>(mask.data()), words, 3, vocab, nullptr, 0),
              TREEMASK_OK)
        << treemask_last_error();
    const Logits want = expected(in, mask, words, vocab, {}, false);
    ASSERT_TRUE(got.bytes == want.bytes) << where(got, want);
  }
}

TEST(ApplyBitmask, NegInfPatternsAreTheIeeeOnes) {
  float f = 0;
  const uint32_t bits = kNegInfF32;
  std::memcpy(&f, &bits, 4);
  EXPECT_TRUE(f < 0 && f * 0.5f == f && f != 0);  // -inf and nothing else
  std::vector<float> logits{1.5f, 2.5f, 3.5f};
  const int32_t mask = 0b010;
  ASSERT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 1, 3, 3, &mask, 1, 1, 3,
                                             nullptr, 0),
            TREEMASK_OK);
  EXPECT_EQ(logits[0], -INFINITY);
  EXPECT_EQ(logits[1], 2.5f);
  EXPECT_EQ(logits[2], -INFINITY);
  // bf16 is the top half of an f32, f16 has a 5-bit exponent.
  EXPECT_EQ(uint32_t{kNegInfBF16} << 16, kNegInfF32);
  EXPECT_EQ(kNegInfF16, 0xFC00u);
}

// The candidate form must equal the bitmask form fed the same allowed sets.
TEST(ApplyCandidates, EqualsTheBitmaskFormOfTheSameSets) {
  std::mt19937_64 rng(5);
  const auto all = variants();
  for (int32_t vocab : kVocabs) {
    for (DType dtype : kDTypes) {
      const size_t rows = 3;
      const size_t width = vocab + (rng() % 2 ? 13 : 0) - (vocab > 9 && rng() % 2 ? 9 : 0);
      const size_t stride = width + rng() % 4;
      const size_t words = treemask_bitmask_words(vocab);
      std::vector<int32_t> offsets{0};
      std::vector<int32_t> tokens;
      std::vector<uint32_t> mask(rows * words, 0);
      for (size_t r = 0; r < rows; ++r) {
        const size_t k = r == 0 ? 0 : rng() % std::min<size_t>(70, vocab * 2);
        for (size_t j = 0; j < k; ++j) {
          const auto t = static_cast<int32_t>(rng() % vocab);  // any order, repeats allowed
          tokens.push_back(t);
          mask[r * words + t / 32] |= uint32_t{1} << (t % 32);
        }
        offsets.push_back(static_cast<int32_t>(tokens.size()));
      }
      const std::vector<int32_t> indices{2, 1};
      const bool use_indices = rng() % 2 == 0;
      const Logits in(dtype, rows, stride, width, rng);
      const Logits want = expected(in, mask, words, vocab,
                                   use_indices ? indices : std::vector<int32_t>{}, use_indices);
      for (const Variant &v : all) {
        SCOPED_TRACE(std::string(v.name) + " vocab " + std::to_string(vocab));
        Logits got = in;
        const CandidateApply a{got.rows(vocab, use_indices ? &indices : nullptr), offsets.data(),
                               tokens.data(), tokens.size()};
        ASSERT_TRUE(apply_token_candidates(a, v.fn).ok());
        ASSERT_TRUE(got.bytes == want.bytes) << where(got, want);
      }
    }
  }
}

// A call must fail with `want` and a last_error that contains `message`.
void expect_error(treemask_status got, treemask_status want, const std::string &message) {
  EXPECT_EQ(got, want) << message;
  EXPECT_NE(std::string(treemask_last_error()).find(message), std::string::npos)
      << "got: " << treemask_last_error() << "\nwanted: " << message;
}

// Every bad argument is refused with a message that names it, before any
// logit changes.
TEST(ApplyErrors, NameTheProblemAndTouchNothing) {
  std::vector<float> logits(64, 1.0f);
  const std::vector<float> before = logits;
  const int32_t mask[2] = {0, 0};
  const int32_t bad_index[1] = {2};
  auto apply = [&](void *l, int dtype, size_t rows, size_t stride, size_t width, const int32_t *m,
                   size_t words, int32_t vocab, const int32_t *idx, size_t n_idx) {
    return treemask_cpu_apply_token_bitmask(l, static_cast<treemask_dtype>(dtype), rows, stride,
                                            width, m, words, std::min<size_t>(rows, 2), vocab, idx,
                                            n_idx);
  };
  const int32_t *none = nullptr;
  expect_error(apply(logits.data(), 7, 2, 32, 32, mask, 1, 32, none, 0),
               TREEMASK_ERR_INVALID_ARGUMENT,
               "treemask_cpu_apply_token_bitmask: unknown dtype 7 (expected 0 = TREEMASK_F32, "
               "1 = TREEMASK_F16, 2 = TREEMASK_BF16)");
  expect_error(apply(logits.data(), 0, 2, 16, 32, mask, 1, 32, none, 0),
               TREEMASK_ERR_INVALID_ARGUMENT,
               "logits_row_stride 16 is smaller than logits_width 32");
  expect_error(apply(logits.data(), 0, 1, 64, 64, mask, 1, 64, none, 0),
               TREEMASK_ERR_BUFFER_TOO_SMALL, "bitmask_row_words 1 < 2");
  expect_error(apply(logits.data(), 0, 2, 32, 32, mask, 1, 32, bad_index, 1),
               TREEMASK_ERR_OUT_OF_RANGE, "indices[0] = 2 is out of range [0, n_rows=2)");
  expect_error(apply(logits.data(), 0, 2, 32, 32, mask, 1, 32, none, 1),
               TREEMASK_ERR_INVALID_ARGUMENT, "indices is NULL but n_indices is 1");
  expect_error(apply(nullptr, 0, 2, 32, 32, mask, 1, 32, none, 0), TREEMASK_ERR_INVALID_ARGUMENT,
               "logits is NULL");
  expect_error(apply(logits.data(), 0, 2, 32, 32, nullptr, 1, 32, none, 0),
               TREEMASK_ERR_INVALID_ARGUMENT, "bitmask is NULL");
  expect_error(apply(logits.data(), 0, 2, 32, 32, mask, 1, 0, none, 0),
               TREEMASK_ERR_INVALID_ARGUMENT, "vocab_size must be positive, got 0");
  expect_error(apply(logits.data(), 0, SIZE_MAX, SIZE_MAX / 2, 32, mask, 1, 32, none, 0),
               TREEMASK_ERR_OUT_OF_RANGE, "too large to address");
  EXPECT_EQ(logits, before);
  // Nothing to touch: NULL buffers are fine.
  EXPECT_EQ(apply(nullptr, 0, 0, 0, 0, nullptr, 0, 32, none, 0), TREEMASK_OK);
  EXPECT_EQ(apply(nullptr, 0, 4, 32, 32, nullptr, 1, 32, bad_index, 0), TREEMASK_OK);
}

TEST(ApplyErrors, CandidateListsAreChecked) {
  std::vector<float> logits(64, 1.0f);
  const std::vector<float> before = logits;
  const int32_t offsets[3] = {0, 2, 3};
  const int32_t decreasing[3] = {0, 2, 1};
  const int32_t tokens[3] = {1, 40, 5};
  auto apply = [&](const int32_t *off, const int32_t *tok, int32_t vocab, size_t n = 3) {
    return treemask_cpu_apply_token_candidates(logits.data(), TREEMASK_F32, 2, 32, 32, off, tok, n,
                                               vocab, nullptr, 0);
  };
  expect_error(apply(offsets, tokens, 32), TREEMASK_ERR_OUT_OF_RANGE,
               "treemask_cpu_apply_token_candidates: row 0, candidate 1: token 40 is out of "
               "range [0, vocab_size=32)");
  expect_error(apply(decreasing, tokens, 64), TREEMASK_ERR_INVALID_ARGUMENT,
               "row_offsets[2] = 1 < row_offsets[1] = 2");
  expect_error(apply(nullptr, tokens, 64), TREEMASK_ERR_INVALID_ARGUMENT, "row_offsets is NULL");
  expect_error(apply(offsets, nullptr, 64), TREEMASK_ERR_INVALID_ARGUMENT,
               "candidates is NULL but n_candidates is 3");
  expect_error(apply(offsets, tokens, 64, 2), TREEMASK_ERR_OUT_OF_RANGE,
               "row_offsets[2] = 3 is out of range [0, n_candidates=2]");
  EXPECT_EQ(logits, before);
  // Width 32 < vocab 64: token 40 names a column the logits do not have.
  EXPECT_EQ(apply(offsets, tokens, 64), TREEMASK_OK) << treemask_last_error();
  for (size_t c = 0; c < 32; ++c) EXPECT_EQ(logits[c], c == 1 ? 1.0f : -INFINITY) << c;
  for (size_t c = 32; c < 64; ++c) EXPECT_EQ(logits[c], c == 32 + 5 ? 1.0f : -INFINITY) << c;
}

}  // namespace
}  // namespace treemask::kernels
