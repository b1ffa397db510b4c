// Masking logits with a bitmask, V = 151,936, 1 / 64 / 256 rows, fp32 and
// bf16, trie-like masks (at most 64 allowed tokens per row) and half-full
// masks. The limit is a memset of the same logits buffer; the reference is
// an xgrammar-style scalar loop (scan the mask for zero bits, one -inf store
// per masked token). The sparse column masks the same trie rows from
// candidate lists instead of a bitmask.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_util.h"

namespace {

// xgrammar-style CPU apply: for each word, every zero bit gets one store.
template <class T>
void apply_scalar_per_token(T *logits, size_t rows, const uint32_t *mask, size_t words, T neg_inf) {
  for (size_t r = 0; r < rows; ++r) {
    T *row = logits + r * bench::kVocab;
    const uint32_t *m = mask + r * words;
    for (size_t w = 0; w < words; ++w) {
      uint32_t masked = ~m[w];
      while (masked) {
        const size_t t = w * 32 + static_cast<size_t>(__builtin_ctz(masked));
        if (t < static_cast<size_t>(bench::kVocab)) row[t] = neg_inf;
        masked &= masked - 1;
      }
    }
  }
}

struct Masks {
  std::vector<uint32_t> bits;
  std::vector<int32_t> offsets{0};  // candidate lists of the same rows
  std::vector<int32_t> tokens;
};

Masks make_masks(size_t rows, bool trie_like, std::mt19937_64 &rng) {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  Masks m;
  m.bits.assign(rows * words, 0);
  for (size_t r = 0; r < rows; ++r) {
    if (trie_like) {
      const size_t k = 1 + rng() % 64;
      for (size_t j = 0; j < k; ++j) {
        const auto t = static_cast<int32_t>(rng() % bench::kVocab);
        m.bits[r * words + t / 32] |= uint32_t{1} << (t % 32);
        m.tokens.push_back(t);
      }
    } else {
      for (size_t w = 0; w < words; ++w) m.bits[r * words + w] = static_cast<uint32_t>(rng());
    }
    m.offsets.push_back(static_cast<int32_t>(m.tokens.size()));
  }
  return m;
}

void run(size_t rows, treemask_dtype dtype, bool trie_like, std::mt19937_64 &rng) {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  const size_t elem = dtype == TREEMASK_F32 ? 4 : 2;
  const size_t bytes = rows * bench::kVocab * elem;
  bench::AlignedBuffer<uint8_t> logits(bytes);
  for (size_t i = 0; i < bytes; ++i) logits.data[i] = static_cast<uint8_t>(rng() & 0x3F);
  const Masks masks = make_masks(rows, trie_like, rng);
  const auto *mask = reinterpret_cast<const int32_t *>(masks.bits.data());

  // A nonzero byte: writing zeros is faster than writing -inf on some machines
  // (this one: 46 vs 17 GB/s for 39 MB), so memset(0) would be no limit.
  const double memset_ns = bench::ns_per_call([&] {
    std::memset(logits.data, 0xFF, bytes);
    bench::keep(logits.data);
  });
  const double ours_ns = bench::ns_per_call([&] {
    TM_MUST(treemask_cpu_apply_token_bitmask(logits.data, dtype, rows, bench::kVocab, bench::kVocab,
                                             mask, words, rows, bench::kVocab, nullptr, 0));
    bench::keep(logits.data);
  });
  const double scalar_ns = bench::ns_per_call([&] {
    if (dtype == TREEMASK_F32) {
      apply_scalar_per_token(reinterpret_cast<float *>(logits.data), rows, masks.bits.data(), words,
                             -INFINITY);
    } else {
      apply_scalar_per_token(reinterpret_cast<uint16_t *>(logits.data), rows, masks.bits.data(),
                             words, uint16_t{0xFF80});
    }
    bench::keep(logits.data);
  });
  double sparse_ns = 0;
  if (trie_like) {
    sparse_ns = bench::ns_per_call([&] {
      TM_MUST(treemask_cpu_apply_token_candidates(
          logits.data, dtype, rows, bench::kVocab, bench::kVocab, masks.offsets.data(),
          masks.tokens.data(), masks.tokens.size(), bench::kVocab, nullptr, 0));
      bench::keep(logits.data);
    });
  }
  auto gbps = [&](double ns) { return bytes / ns; };
  std::printf("%5zu %-5s %-10s %9.1f | %8.1f %7.1f%% | %8.1f %6.1fx | ", rows,
              dtype == TREEMASK_F32 ? "fp32" : "bf16", trie_like ? "trie-like" : "half-full",
              gbps(memset_ns), gbps(ours_ns), 100 * memset_ns / ours_ns, gbps(scalar_ns),
              scalar_ns / ours_ns);
  if (trie_like) {
    std::printf("%8.1f %7.1f%%\n", gbps(sparse_ns), 100 * memset_ns / sparse_ns);
  } else {
    std::printf("%8s %8s\n", "-", "-");
  }
}

}  // namespace

int main() {
  std::printf(
      "apply a bitmask to logits, V = 151,936, 64-byte aligned rows; GB/s of logits written per "
      "call, best of 21 runs\n"
      "  memset = memset(0xFF) of the same logits buffer (the limit for writing a nonzero "
      "pattern)\n"
      "  ours   = treemask_cpu_apply_token_bitmask (%s kernel), %% of memset bandwidth\n"
      "  scalar = xgrammar-style loop: one -inf store per zero bit; x = how much faster ours is\n"
      "  sparse = treemask_cpu_apply_token_candidates from the same rows as candidate lists\n"
      "  target: ours >= 70%% of memset for trie-like masks\n\n",
      treemask_cpu_kernel_isa());
  std::printf("%5s %-5s %-10s %9s | %8s %8s | %8s %7s | %8s %8s\n", "rows", "dtype", "mask",
              "memset", "ours", "of mem", "scalar", "ours x", "sparse", "of mem");
  std::mt19937_64 rng(4);
  for (size_t rows : {size_t{1}, size_t{64}, size_t{256}}) {
    for (treemask_dtype dtype : {TREEMASK_F32, TREEMASK_BF16}) {
      for (bool trie_like : {true, false}) run(rows, dtype, trie_like, rng);
    }
  }
  return 0;
}
