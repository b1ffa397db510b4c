// The beam-step kernels: every log-sum-exp variant the CPU has against the
// double-precision reference on awkward sizes, every dtype, wide and narrow
// value ranges and the special values; the exact top-k against a full sort
// with the pinned tie rule.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/beam.h"

namespace treemask::kernels {
namespace {

constexpr size_t kSizes[] = {0, 1, 7, 8, 15, 16, 31, 32, 33, 1023, 1024, 1025, 4097, 151936};
constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Variant {
  const char *name;
  LogSumExpFn fn;
};

std::vector<Variant> variants() {
  std::vector<Variant> v{{"scalar", logsumexp_scalar}};
#ifdef TREEMASK_BEAM_X86
  if (cpu_has_avx2_fma_f16c()) v.push_back({"avx2", logsumexp_avx2});
  if (__builtin_cpu_supports("avx512f")) v.push_back({"avx512", logsumexp_avx512});
#endif
  return v;
}

uint16_t f32_to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);  // truncation: the test only needs some bf16 value
}

// fp32 -> fp16 for finite values in fp16's normal range, and the infinities.
uint16_t f32_to_f16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (std::isinf(f)) return sign | 0x7C00u;
  if (std::isnan(f)) return 0x7E00u;
  const int e = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
  if (e <= 0) return sign;
  return static_cast<uint16_t>(sign | (e << 10) | ((b >> 13) & 0x3FFu));
}

// A row of n values of the dtype, stored as bytes.
struct Row {
  DType dtype;
  std::vector<uint8_t> bytes;
  Row(DType d, const std::vector<float> &v) : dtype(d), bytes(v.size() * dtype_bytes(d)) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (d == DType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = d == DType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
  }
  const void *data() const { return bytes.data(); }
};

TEST(BeamKernels, Conversions) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xFF80), -kInf);
  // Every fp16 value round-trips through the hardware conversion the SIMD
  // loads use (checked via the variants on single-element rows below).
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (!std::isfinite(f)) continue;
    const uint16_t hv = static_cast<uint16_t>(h);
    for (const auto &v : variants()) {
      // logsumexp of a one-element row is the element itself.
      EXPECT_EQ(v.fn(&hv, DType::kF16, 1), f) << v.name << " h=" << h;
    }
  }
}

TEST(BeamKernels, LogSumExpMatchesReference) {
  std::mt19937_64 rng(42);
  for (size_t n : kSizes) {
    for (DType d : kDTypes) {
      for (float scale : {0.5f, 4.0f, 30.0f}) {
        std::normal_distribution<float> dist(0.0f, scale);
        std::vector<float> v(n);
        for (auto &x : v) x = dist(rng) + 3.0f;
        // A few -inf entries (already masked columns) when there is room.
        if (n > 40) v[3] = v[n / 2] = -kInf;
        const Row row(d, v);
        const double ref = logsumexp_scalar(row.data(), d, n);
        for (const auto &var : variants()) {
          const float got = var.fn(row.data(), d, n);
          if (n == 0) {
            EXPECT_EQ(got, -kInf) << var.name;
            continue;
          }
          // 2e-6 relative on the sum = 2e-6 absolute on its log, plus the
          // float rounding of the result.
          const double tol = 2e-6 + 2e-7 * std::fabs(ref);
          EXPECT_NEAR(got, ref, tol)
              << var.name << " n=" << n << " dtype=" << int(d) << " scale=" << scale;
        }
      }
    }
  }
}

TEST(BeamKernels, LogSumExpSpecialValues) {
  for (size_t n : {1, 9, 33, 1025, 3000}) {
    for (DType d : kDTypes) {
      for (size_t pos : {size_t{0}, n / 2, n - 1}) {
        std::vector<float> all_neg_inf(n, -kInf);
        std::vector<float> with_nan(n, 1.0f), with_pos_inf(n, 1.0f), nan_in_neg_inf(n, -kInf);
        with_nan[pos] = NAN;
        with_pos_inf[pos] = kInf;
        nan_in_neg_inf[pos] = NAN;
        std::vector<float> one_finite(n, -kInf);
        one_finite[pos] = 2.5f;
        for (const auto &var : variants()) {
          SCOPED_TRACE(std::string(var.name) + " n=" + std::to_string(n) +
                       " pos=" + std::to_string(pos) + " dtype=" + std::to_string(int(d)));
          EXPECT_EQ(var.fn(Row(d, all_neg_inf).data(), d, n), -kInf);
          EXPECT_TRUE(std::isnan(var.fn(Row(d, with_nan).data(), d, n)));
          EXPECT_TRUE(std::isnan(var.fn(Row(d, with_pos_inf).data(), d, n)));
          EXPECT_TRUE(std::isnan(var.fn(Row(d, nan_in_neg_inf).data(), d, n)));
          EXPECT_FLOAT_EQ(var.fn(Row(d, one_finite).data(), d, n), 2.5f);
        }
      }
    }
  }
}

TEST(BeamKernels, LogSumExpExtremeRange) {
  // Values far below the maximum add (almost) nothing; a later, larger block
  // maximum rescales what was summed before it.
  for (const auto &var : variants()) {
    std::vector<float> v(5000, -1000.0f);
    v[4999] = 80.0f;  // maximum in the last block
    v[10] = 79.0f;    // earlier block, rescaled later
    const Row row(DType::kF32, v);
    EXPECT_NEAR(var.fn(row.data(), DType::kF32, v.size()),
                logsumexp_scalar(row.data(), DType::kF32, v.size()), 1e-5)
        << var.name;
  }
}

TEST(BeamKernels, BestIsAVariant) {
  const std::string name = logsumexp_best_name();
  EXPECT_TRUE(name == "scalar" || name == "avx2" || name == "avx512") << name;
}

std::vector<BeamCandidate> sorted_top(std::vector<BeamCandidate> all, size_t k) {
  std::sort(all.begin(), all.end(), ranks_before);
  all.resize(std::min(k, all.size()));
  return all;
}

TEST(BeamKernels, TopKEqualsFullSortWithTies) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 400; ++round) {
    const size_t n = rng() % 300;
    const size_t k = rng() % 70;
    std::vector<BeamCandidate> all(n);
    for (auto &c : all) {
      // Few distinct scores so that ties on score (and on beam) are common.
      c.score = static_cast<float>(rng() % 5) - 2.0f;
      c.beam = static_cast<int32_t>(rng() % 4);
      c.token = static_cast<int32_t>(rng() % 50);
    }
    std::vector<BeamCandidate> storage(k);
    TopK top(storage.data(), k);
    for (const auto &c : all) {
      if (top.may_take(c.score)) top.offer(c);
    }
    const size_t got = top.finish();
    const auto want = sorted_top(all, k);
    ASSERT_EQ(got, want.size());
    for (size_t i = 0; i < got; ++i) {
      EXPECT_EQ(storage[i].score, want[i].score) << "round " << round << " i " << i;
      EXPECT_EQ(storage[i].beam, want[i].beam) << "round " << round << " i " << i;
      EXPECT_EQ(storage[i].token, want[i].token) << "round " << round << " i " << i;
    }
  }
}

}  // namespace
}  // namespace treemask::kernels
