// The CUDA apply kernels (dense bitmask and sparse candidate lists) against
// the scalar reference of the apply contract, on awkward sizes: V = 1, 31,
// 32, 33, 4097, 151,936; padded widths; strides wider than the width; every
// dtype; aligned (16-byte vector) and unaligned (scalar) rows; row indices
// with out-of-range entries; garbage in the bits past vocab_size. Exits 77
// without a usable GPU.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "cuda/cuda_test_util.h"

namespace {

using cudatest::DeviceArray;
using cudatest::HostLogits;

struct Geometry {
  int32_t vocab = 0;
  size_t width = 0;
  size_t stride = 0;
  size_t n_rows = 0;
  size_t row_words = 0;
  size_t shift_elements = 0;  // 1 misaligns every row: the scalar path

  std::string describe(int32_t dtype) const {
    return std::string(cudatest::dtype_name(dtype)) + " V=" + std::to_string(vocab) +
           " width=" + std::to_string(width) + " stride=" + std::to_string(stride) +
           " rows=" + std::to_string(n_rows) + " words=" + std::to_string(row_words) +
           " shift=" + std::to_string(shift_elements);
  }
};

std::vector<Geometry> geometries() {
  std::vector<Geometry> out;
  for (int32_t vocab : {1, 31, 32, 33, 4097, 151936}) {
    const size_t v = static_cast<size_t>(vocab);
    const size_t words = treemask_bitmask_words(vocab);
    const size_t rows = vocab > 10000 ? 3 : 6;
    // Widths past vocab_size (masked columns) and, for the twins' shared
    // contract, one short of it (every column decided by the bitmask).
    for (size_t width : {v, v + 3, (v + 63) / 64 * 64 + 64, v > 1 ? v - 1 : v}) {
      for (size_t stride : {width, width + 5, (width + 7) / 8 * 8 + 8}) {
        for (size_t shift : {size_t{0}, size_t{1}}) {
          // Under emulation every GPU thread is a fiber: two large cases.
          const bool large_and_slow = cudatest::kEmulated && vocab > 10000 &&
                                      !(width == v && stride == v && shift == 0) &&
                                      !(width == v + 3 && stride == width + 5 && shift == 1);
          if (large_and_slow) continue;
          out.push_back({vocab, width, stride, rows, words + (stride % 2), shift});
        }
      }
    }
  }
  return out;
}

// Rows of different character: random, trie-like (a few bits), all allowed,
// none allowed, and a mix of whole-word patterns. Bits past vocab_size and
// the extra words of a wider row hold garbage that must be ignored.
std::vector<int32_t> make_bitmask(const Geometry &g, std::mt19937_64 &rng) {
  const size_t words = treemask_bitmask_words(g.vocab);
  std::vector<int32_t> mask(g.n_rows * g.row_words);
  for (size_t r = 0; r < g.n_rows; ++r) {
    int32_t *row = &mask[r * g.row_words];
    for (size_t w = 0; w < g.row_words; ++w) {
      uint32_t v = static_cast<uint32_t>(rng());
      switch (r % 5) {
        case 1: v = 0; break;
        case 2: v = ~0u; break;
        case 3: v = 0; break;
        case 4: v = (rng() % 3 == 0) ? 0u : (rng() % 2 ? ~0u : v); break;
        default: break;
      }
      row[w] = static_cast<int32_t>(v);
    }
    if (r % 5 == 1) {
      for (int k = 0; k < 8; ++k) {
        const size_t t = rng() % static_cast<size_t>(g.vocab);
        row[t / 32] |= static_cast<int32_t>(1u << (t % 32));
      }
    }
    // Garbage beyond vocab_size: in the last word and in the extra words.
    if (g.vocab % 32 != 0) row[words - 1] |= static_cast<int32_t>(~0u << (g.vocab % 32));
    for (size_t w = words; w < g.row_words; ++w) row[w] = static_cast<int32_t>(rng());
  }
  return mask;
}

// Optional index lists: none, or some rows (with a duplicate) plus entries
// outside [0, n_rows) that must be skipped.
std::vector<std::vector<int32_t>> index_lists(size_t n_rows) {
  const auto last = static_cast<int32_t>(n_rows - 1);
  return {{},
          {last, 0, 0},
          {last, 0, 0, static_cast<int32_t>(n_rows), -1, static_cast<int32_t>(n_rows) + 40}};
}

void test_dense(std::mt19937_64 &rng, cudaStream_t stream) {
  int cases = 0;
  for (const Geometry &g : geometries()) {
    for (int32_t dtype : {cudatest::kF32, cudatest::kF16, cudatest::kBF16}) {
      const auto mask = make_bitmask(g, rng);
      DeviceArray<int32_t> d_mask(mask);
      for (const auto &indices : index_lists(g.n_rows)) {
        const bool use_indices = !indices.empty();
        HostLogits want(dtype, g.n_rows, g.stride, g.width, rng);
        HostLogits cpu = want;  // the CPU twin's input
        const size_t eb = cudatest::dtype_bytes(dtype);
        DeviceArray<uint8_t> d_logits(want.bytes, g.shift_elements * eb);
        DeviceArray<int32_t> d_indices(use_indices ? indices : std::vector<int32_t>{0});
        // The stable call, or the flags call with or without the caller's
        // word on the pointers: the same result.
        if (rng() % 2) {
          CHECK_TM(treemask_cuda_apply_token_bitmask(
              d_logits.get(), dtype, g.n_rows, g.stride, g.width, d_mask.get(), g.row_words,
              g.n_rows, g.vocab, use_indices ? d_indices.get() : nullptr, indices.size(), stream));
        } else {
          CHECK_TM(treemask_cuda_apply_token_bitmask_flags(
              d_logits.get(), dtype, g.n_rows, g.stride, g.width, d_mask.get(), g.row_words,
              g.n_rows, g.vocab, use_indices ? d_indices.get() : nullptr, indices.size(),
              cudatest::random_flags(rng), stream));
        }
        cudatest::reference_apply(want, mask, g.row_words, g.vocab,
                                  use_indices ? &indices : nullptr);
        const std::string diff = cudatest::first_difference(want, d_logits.download(stream));
        CHECK_MSG(diff.empty(),
                  "dense " + g.describe(dtype) + (use_indices ? " with indices: " : ": ") + diff);
        // The CPU twin, same arguments: the same rows, or (an index out of
        // range, which the device skips) an error naming it and no write.
        const HostLogits before = cpu;
        const treemask_status s = treemask_cpu_apply_token_bitmask(
            cpu.bytes.data(), dtype, g.n_rows, g.stride, g.width, mask.data(), g.row_words,
            g.n_rows, g.vocab, use_indices ? indices.data() : nullptr, indices.size());
        if (indices.size() > 3) {
          CHECK_MSG(s == TREEMASK_ERR_OUT_OF_RANGE &&
                        std::strstr(treemask_last_error(), "indices[3]") != nullptr &&
                        cpu.bytes == before.bytes,
                    "cpu twin with a bad index: " + std::string(treemask_last_error()));
        } else {
          CHECK_MSG(s == TREEMASK_OK && cudatest::first_difference(want, cpu.bytes).empty(),
                    "cpu twin " + g.describe(dtype) + ": " + treemask_last_error());
        }
        ++cases;
      }
    }
  }
  std::printf("dense apply: %d cases\n", cases);
}

// CSR candidate rows: random with duplicates, empty, with ids outside
// [0, vocab_size), a large row, a row whose begin exceeds its end, and a
// last offset past n_candidates (clamped).
struct Csr {
  std::vector<int32_t> offsets{0};
  std::vector<int32_t> tokens;
};

Csr make_candidates(const Geometry &g, std::mt19937_64 &rng) {
  Csr csr;
  const auto v = static_cast<int64_t>(g.vocab);
  for (size_t r = 0; r < g.n_rows; ++r) {
    switch (r % 5) {
      case 0:
        for (int k = 0, n = static_cast<int>(rng() % 40) + 1; k < n; ++k) {
          csr.tokens.push_back(static_cast<int32_t>(rng() % v));
          if (k % 7 == 0) csr.tokens.push_back(csr.tokens.back());
        }
        break;
      case 1: break;
      case 2:
        csr.tokens.insert(csr.tokens.end(), {-3, g.vocab, g.vocab + 100, 0, g.vocab - 1});
        break;
      case 3:
        for (int64_t k = 0, n = std::min<int64_t>(v, 9000); k < n; ++k) {
          csr.tokens.push_back(static_cast<int32_t>(rng() % v));
        }
        break;
      default: csr.tokens.push_back(static_cast<int32_t>(rng() % v)); break;
    }
    csr.offsets.push_back(static_cast<int32_t>(csr.tokens.size()));
  }
  if (g.n_rows >= 5) std::swap(csr.offsets[4], csr.offsets[5]);  // row 4: begin > end
  csr.offsets.back() += 50;                                      // past n_candidates: clamped
  return csr;
}

void reference_candidates(HostLogits &logits, const Csr &csr, int32_t vocab,
                          const std::vector<int32_t> *indices) {
  const auto n = static_cast<int64_t>(csr.tokens.size());
  auto clamp = [&](int64_t o) { return std::clamp<int64_t>(o, 0, n); };
  auto apply_row = [&](size_t row) {
    std::vector<bool> keep(logits.width, false);
    for (int64_t k = clamp(csr.offsets[row]); k < clamp(csr.offsets[row + 1]); ++k) {
      const int32_t t = csr.tokens[k];
      if (t >= 0 && t < vocab) keep[t] = true;
    }
    for (size_t c = 0; c < logits.width; ++c) {
      if (!keep[c]) logits.mask(row, c);
    }
  };
  if (!indices) {
    for (size_t r = 0; r < logits.n_rows; ++r) apply_row(r);
    return;
  }
  for (int32_t r : *indices) {
    if (r >= 0 && static_cast<size_t>(r) < logits.n_rows) apply_row(static_cast<size_t>(r));
  }
}

void test_sparse(std::mt19937_64 &rng, cudaStream_t stream) {
  int cases = 0;
  for (const Geometry &g : geometries()) {
    if (g.stride != g.width && g.stride % 8 != 0) continue;  // fewer cases than dense
    for (int32_t dtype : {cudatest::kF32, cudatest::kF16, cudatest::kBF16}) {
      const Csr csr = make_candidates(g, rng);
      DeviceArray<int32_t> d_offsets(csr.offsets);
      DeviceArray<int32_t> d_tokens(csr.tokens.empty() ? std::vector<int32_t>{0} : csr.tokens);
      for (const auto &indices : index_lists(g.n_rows)) {
        const bool use_indices = !indices.empty();
        HostLogits want(dtype, g.n_rows, g.stride, g.width, rng);
        DeviceArray<uint8_t> d_logits(want.bytes, g.shift_elements * cudatest::dtype_bytes(dtype));
        DeviceArray<int32_t> d_indices(use_indices ? indices : std::vector<int32_t>{0});
        CHECK_TM(treemask_cuda_apply_token_candidates(
            d_logits.get(), dtype, g.n_rows, g.stride, g.width, d_offsets.get(), d_tokens.get(),
            csr.tokens.size(), g.vocab, use_indices ? d_indices.get() : nullptr, indices.size(),
            stream));
        reference_candidates(want, csr, g.vocab, use_indices ? &indices : nullptr);
        const std::string diff = cudatest::first_difference(want, d_logits.download(stream));
        CHECK_MSG(diff.empty(),
                  "sparse " + g.describe(dtype) + (use_indices ? " with indices: " : ": ") + diff);
        ++cases;
      }
    }
  }
  std::printf("sparse apply: %d cases\n", cases);
}

// Many rows, so that the grid's row dimension strides (more than 65,535
// rows) and the list kernel uses one tile per row.
void test_many_rows(std::mt19937_64 &rng, cudaStream_t stream) {
  const Geometry g{33, 40, 40, 70000, 2, 0};
  const auto mask = make_bitmask(g, rng);
  DeviceArray<int32_t> d_mask(mask);
  HostLogits want(cudatest::kBF16, g.n_rows, g.stride, g.width, rng);
  DeviceArray<uint8_t> d_logits(want.bytes);
  CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits.get(), cudatest::kBF16, g.n_rows, g.stride,
                                             g.width, d_mask.get(), g.row_words, g.n_rows, g.vocab,
                                             nullptr, 0, stream));
  cudatest::reference_apply(want, mask, g.row_words, g.vocab, nullptr);
  std::string diff = cudatest::first_difference(want, d_logits.download(stream));
  CHECK_MSG(diff.empty(), "dense, 70000 rows: " + diff);

  const Csr csr = make_candidates(g, rng);
  DeviceArray<int32_t> d_offsets(csr.offsets), d_tokens(csr.tokens);
  HostLogits want_sparse(cudatest::kF32, g.n_rows, g.stride, g.width, rng);
  DeviceArray<uint8_t> d_sparse(want_sparse.bytes);
  CHECK_TM(treemask_cuda_apply_token_candidates(d_sparse.get(), cudatest::kF32, g.n_rows, g.stride,
                                                g.width, d_offsets.get(), d_tokens.get(),
                                                csr.tokens.size(), g.vocab, nullptr, 0, stream));
  reference_candidates(want_sparse, csr, g.vocab, nullptr);
  diff = cudatest::first_difference(want_sparse, d_sparse.download(stream));
  CHECK_MSG(diff.empty(), "sparse, 70000 rows: " + diff);
}

bool error_mentions(treemask_status got, treemask_status want, const char *needle) {
  return got == want && std::string(treemask_last_error()).find(needle) != std::string::npos;
}

// Pointer checks need a device: host memory, and calls that do nothing.
void test_pointer_errors(cudaStream_t stream) {
  std::vector<float> host_logits(64, 1.0f);
  std::vector<int32_t> host_mask(2, -1);
  DeviceArray<float> d_logits(64);
  DeviceArray<int32_t> d_mask(host_mask);
  treemask_status s = treemask_cuda_apply_token_bitmask(
      host_logits.data(), cudatest::kF32, 1, 64, 64, d_mask.get(), 2, 1, 64, nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "logits is host memory"),
            treemask_last_error());
  s = treemask_cuda_apply_token_bitmask(d_logits.get(), cudatest::kF32, 1, 64, 64, host_mask.data(),
                                        2, 1, 64, nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "bitmask is host memory"),
            treemask_last_error());
  const int32_t host_index = 0;
  s = treemask_cuda_apply_token_bitmask(d_logits.get(), cudatest::kF32, 1, 64, 64, d_mask.get(), 2,
                                        1, 64, &host_index, 1, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "indices is host memory"),
            treemask_last_error());
  const int32_t host_offsets[2] = {0, 0};
  s = treemask_cuda_apply_token_candidates(d_logits.get(), cudatest::kF32, 1, 64, 64, host_offsets,
                                           nullptr, 0, 64, nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "row_offsets is host memory"),
            treemask_last_error());

  // Logits not aligned to their element size: refused before any launch (a
  // GPU faults on such a load, and the fault ruins the context).
  auto *odd = reinterpret_cast<float *>(reinterpret_cast<char *>(d_logits.get()) + 2);
  s = treemask_cuda_apply_token_bitmask(odd, cudatest::kF32, 1, 32, 32, d_mask.get(), 2, 1, 32,
                                        nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "not aligned"), treemask_last_error());
  s = treemask_cuda_apply_token_bitmask(odd, cudatest::kBF16, 1, 32, 32, d_mask.get(), 2, 1, 32,
                                        nullptr, 0, stream);
  CHECK_MSG(s == TREEMASK_OK, treemask_last_error());  // 2-byte elements at a 2-byte offset

  // Pinned host memory is addressable by the device: accepted.
  void *pinned_memory = nullptr;
  CHECK_CUDA(cudaMallocHost(&pinned_memory, 2 * sizeof(int32_t)));
  auto *pinned = static_cast<int32_t *>(pinned_memory);
  pinned[0] = pinned[1] = 0;
  CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits.get(), cudatest::kF32, 1, 64, 64, pinned, 2,
                                             1, 64, nullptr, 0, stream));
  const auto masked = d_logits.download(stream);
  CHECK(std::all_of(masked.begin(), masked.end(), [](float x) { return x < -3e38f; }));
  CHECK_CUDA(cudaFreeHost(pinned));

  // TREEMASK_CUDA_CALLER_CHECKED_POINTERS: no pointer query (where the
  // emulation counts them; the stable call makes one per pointer), the
  // same masking; every other check stays, and unknown bits are refused.
  std::vector<int32_t> half_mask = {0x0000FFFF, -1};
  DeviceArray<int32_t> d_half(half_mask);
  for (const uint32_t flags : {0u, TREEMASK_CUDA_CALLER_CHECKED_POINTERS}) {
    DeviceArray<float> fresh(std::vector<float>(64, 2.0f));
    const long queries = cudatest::pointer_queries_in([&] {
      CHECK_TM(treemask_cuda_apply_token_bitmask_flags(fresh.get(), cudatest::kF32, 1, 64, 64,
                                                       d_half.get(), 2, 1, 64, nullptr, 0, flags,
                                                       stream));
    });
    CHECK_MSG(queries < 0 || queries == (flags ? 0 : 2), std::to_string(queries) + " queries");
    const auto got = fresh.download(stream);
    for (size_t i = 0; i < 64; ++i) {
      CHECK_MSG(i < 16 || i >= 32 ? got[i] == 2.0f : got[i] < -3e38f,
                "column " + std::to_string(i) + " with flags " + std::to_string(flags));
    }
  }
  s = treemask_cuda_apply_token_bitmask_flags(odd, cudatest::kF32, 1, 32, 32, d_mask.get(), 2, 1,
                                              32, nullptr, 0, TREEMASK_CUDA_CALLER_CHECKED_POINTERS,
                                              stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "not aligned"), treemask_last_error());
  s = treemask_cuda_apply_token_bitmask_flags(d_logits.get(), cudatest::kF32, 1, 64, 64,
                                              d_mask.get(), 2, 1, 64, nullptr, 0, 0x80000001u,
                                              stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "unknown bits 0x80000000") &&
                error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT,
                               "treemask_cuda_apply_token_bitmask_flags"),
            treemask_last_error());
  s = treemask_cuda_apply_token_bitmask(host_logits.data(), cudatest::kF32, 1, 64, 64, d_mask.get(),
                                        2, 1, 64, nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "treemask_cuda_apply_token_bitmask:"),
            treemask_last_error());

  // Empty selections succeed without touching anything, even with host pointers.
  CHECK_TM(treemask_cuda_apply_token_bitmask(host_logits.data(), cudatest::kF32, 0, 64, 64,
                                             host_mask.data(), 2, 0, 64, nullptr, 0, stream));
  CHECK_TM(treemask_cuda_apply_token_bitmask(host_logits.data(), cudatest::kF32, 1, 64, 64,
                                             host_mask.data(), 2, 1, 64, &host_index, 0, stream));
  CHECK(host_logits[0] == 1.0f);
}

// Issue 14 item 14: as in xgrammar, with indices the logits and the bitmask
// may have different row counts; index i masks logits row i with bitmask
// row i, and an index outside either array is skipped on the device.
void test_different_row_counts(cudaStream_t stream) {
  const size_t rows = 4;
  std::vector<float> host(rows * 32, 1.0f);
  DeviceArray<float> d_logits(host);
  DeviceArray<int32_t> d_mask(std::vector<int32_t>{0b10, 0b01});  // 2 bitmask rows
  const std::vector<int32_t> indices = {1, 3};                    // 3: no bitmask row
  DeviceArray<int32_t> d_indices(indices);
  CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits.get(), cudatest::kF32, rows, 32, 32,
                                             d_mask.get(), 1, 2, 32, d_indices.get(), 2, stream));
  const auto got = d_logits.download(stream);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < 32; ++c) {
      const bool finite = got[r * 32 + c] > -3e38f;
      CHECK_MSG(finite == (r != 1 || c == 0), "row " + std::to_string(r));
    }
  }
  // Without indices the bitmask needs a row per logits row.
  const treemask_status s = treemask_cuda_apply_token_bitmask(
      d_logits.get(), cudatest::kF32, rows, 32, 32, d_mask.get(), 1, 2, 32, nullptr, 0, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_BUFFER_TOO_SMALL, "the bitmask has 2 rows"),
            treemask_last_error());
}

}  // namespace

int main() {
  cudatest::skip_without_device("test_cuda_apply");
  std::mt19937_64 rng(20260722);
  // The caller's stream comes from this program's runtime, not libtreemask's.
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int round = 0, rounds = testutil::scaled(1); round < rounds; ++round) {
    test_dense(rng, round % 2 ? nullptr : stream);
    test_sparse(rng, round % 2 ? nullptr : stream);
  }
  test_many_rows(rng, stream);
  test_pointer_errors(stream);
  test_different_row_counts(stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return cudatest::finish("test_cuda_apply");
}
