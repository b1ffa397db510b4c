// CUDA benchmarks (suite `bench`, exits 77 without a GPU). Two tables, every
// number measured in this process:
//
// 1. Apply, V = 151,936, rows 1 / 64 / 512 / 4,096, fp32 and bf16, trie-like
//    masks (64 allowed tokens per row) and half-full masks: our dense apply,
//    our sparse apply (trie-like rows only), a straightforward
//    one-thread-per-logit kernel, and the device-to-device copy of the same
//    logits buffer (the bandwidth limit). Targets: dense apply >= 80 % of
//    copy bandwidth at >= 64 rows; batch-1 apply <= 10 us.
// 2. One constrained decode step on a 20,000-label semantic-ID trie (root
//    fanout up to 7,835): fused advance + fill + apply on the device, the
//    fused step writing -inf straight into the logits, and the host path
//    (matchers accept + fill on the CPU, H2D copy, apply, synchronise).
//    Target: fused >= 5x faster than the host path at 512 rows.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "cuda/cuda_test_util.h"

namespace {

using cudatest::DeviceArray;
using Clock = std::chrono::steady_clock;

constexpr int32_t kVocab = 151936;
constexpr int32_t kStop = 151645;

// The baseline: one thread per logit, one bitmask load and at most one
// store each (what a first CUDA port of the CPU loop looks like).
template <class Elem>
__global__ void naive_apply_kernel(Elem *logits, const int32_t *bitmask, int64_t n_rows,
                                   int64_t width, int64_t row_words, int32_t vocab, Elem neg_inf) {
  const int64_t n = n_rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / width, col = i % width;
    const bool keep =
        col < vocab &&
        ((static_cast<uint32_t>(bitmask[row * row_words + col / 32]) >> (col % 32)) & 1u);
    if (!keep) logits[i] = neg_inf;
  }
}

void naive_apply(void *logits, int32_t dtype, int64_t n_rows, const int32_t *bitmask,
                 int64_t row_words, cudaStream_t stream) {
  const int64_t n = n_rows * kVocab;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1 << 20));
  if (dtype == cudatest::kF32) {
    naive_apply_kernel<uint32_t><<<blocks, 256, 0, stream>>>(
        static_cast<uint32_t *>(logits), bitmask, n_rows, kVocab, row_words, kVocab, 0xFF800000u);
  } else {
    naive_apply_kernel<uint16_t><<<blocks, 256, 0, stream>>>(
        static_cast<uint16_t *>(logits), bitmask, n_rows, kVocab, row_words, kVocab,
        static_cast<uint16_t>(cudatest::neg_inf_bits(dtype)));
  }
  CHECK_CUDA(cudaGetLastError());
}

struct Timing {
  double gpu_us = 0;   // per call, from events around back-to-back calls
  double host_us = 0;  // per call, wall time of the enqueueing loop
};

// Median of five rounds of `iters` back-to-back calls.
template <class F>
Timing measure(cudaStream_t stream, int iters, F &&call) {
  for (int i = 0; i < 3; ++i) call();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> gpu, host;
  for (int round = 0; round < 5; ++round) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) call();
    const auto t1 = Clock::now();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    gpu.push_back(ms * 1000.0 / iters);
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(gpu.begin(), gpu.end());
  std::sort(host.begin(), host.end());
  return {gpu[2], host[2]};
}

// Bytes the dense apply must move for this mask: nothing for an all-allowed
// 16-byte chunk, a store for an all-masked one, load + store for a mixed
// one, plus the bitmask itself.
double apply_traffic_bytes(const std::vector<int32_t> &mask, size_t rows, size_t words,
                           size_t elem_bytes) {
  const size_t vec = 16 / elem_bytes;
  double bytes = static_cast<double>(rows * words * 4);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < static_cast<size_t>(kVocab); c += vec) {
      const uint32_t word = static_cast<uint32_t>(mask[r * words + c / 32]);
      const uint32_t bits = (word >> (c % 32)) & ((1u << vec) - 1u);
      if (bits == (1u << vec) - 1u) continue;
      bytes += (bits == 0 ? 16.0 : 32.0);
    }
  }
  return bytes;
}

void bench_apply(cudaStream_t stream) {
  std::printf(
      "\nApply, V = %d (times per call; GB/s = bytes moved / time; copy = D2D memcpy of the "
      "same logits buffer, read + write)\n",
      kVocab);
  std::printf("%6s %5s %6s | %10s %8s | %10s %8s %7s %9s | %10s | %10s %8s\n", "rows", "dtype",
              "mask", "copy us", "GB/s", "dense us", "GB/s", "%copy", "host us", "sparse us",
              "naive us", "naive/x");
  std::mt19937_64 rng(1);
  const size_t words = treemask_bitmask_words(kVocab);
  for (size_t rows : {size_t{1}, size_t{64}, size_t{512}, size_t{4096}}) {
    for (int32_t dtype : {cudatest::kF32, cudatest::kBF16}) {
      const size_t eb = cudatest::dtype_bytes(dtype);
      const size_t logits_bytes = rows * kVocab * eb;
      DeviceArray<uint8_t> d_logits(logits_bytes), d_copy(logits_bytes);
      CHECK_CUDA(cudaMemset(d_logits.get(), 0x3c, logits_bytes));
      const int iters = rows >= 512 ? 10 : 100;
      const Timing copy = measure(stream, iters, [&] {
        CHECK_CUDA(cudaMemcpyAsync(d_copy.get(), d_logits.get(), logits_bytes,
                                   cudaMemcpyDeviceToDevice, stream));
      });
      const double copy_gbs = 2.0 * logits_bytes / (copy.gpu_us * 1e3);
      for (const char *kind : {"trie", "half"}) {
        const bool trie_like = kind[0] == 't';
        std::vector<int32_t> mask(rows * words, 0);
        std::vector<int32_t> offsets{0}, candidates;
        for (size_t r = 0; r < rows; ++r) {
          if (trie_like) {
            for (int k = 0; k < 64; ++k) {
              const auto t = static_cast<int32_t>(rng() % kVocab);
              mask[r * words + t / 32] |= static_cast<int32_t>(1u << (t % 32));
              candidates.push_back(t);
            }
          } else {
            for (size_t w = 0; w < words; ++w) mask[r * words + w] = static_cast<int32_t>(rng());
            if (kVocab % 32 != 0) {
              mask[r * words + words - 1] &= static_cast<int32_t>((1u << (kVocab % 32)) - 1u);
            }
          }
          offsets.push_back(static_cast<int32_t>(candidates.size()));
        }
        DeviceArray<int32_t> d_mask(mask), d_offsets(offsets);
        DeviceArray<int32_t> d_candidates(candidates.empty() ? std::vector<int32_t>{0}
                                                             : candidates);
        const Timing dense = measure(stream, iters, [&] {
          CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits.get(), dtype, rows, kVocab, kVocab,
                                                     d_mask.get(), words, rows, kVocab, nullptr, 0,
                                                     stream));
        });
        const double dense_gbs = apply_traffic_bytes(mask, rows, words, eb) / (dense.gpu_us * 1e3);
        std::string sparse = "-";
        if (trie_like) {
          const Timing t = measure(stream, iters, [&] {
            CHECK_TM(treemask_cuda_apply_token_candidates(
                d_logits.get(), dtype, rows, kVocab, kVocab, d_offsets.get(), d_candidates.get(),
                candidates.size(), kVocab, nullptr, 0, stream));
          });
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.1f", t.gpu_us);
          sparse = buf;
        }
        const Timing naive = measure(stream, iters, [&] {
          naive_apply(d_logits.get(), dtype, static_cast<int64_t>(rows), d_mask.get(),
                      static_cast<int64_t>(words), stream);
        });
        std::printf(
            "%6zu %5s %6s | %10.1f %8.0f | %10.1f %8.0f %6.0f%% %9.1f | %10s | %10.1f %7.1fx\n",
            rows, cudatest::dtype_name(dtype), kind, copy.gpu_us, copy_gbs, dense.gpu_us, dense_gbs,
            100.0 * dense_gbs / copy_gbs, dense.host_us, sparse.c_str(), naive.gpu_us,
            naive.gpu_us / dense.gpu_us);
      }
    }
  }
  std::printf(
      "(host us: wall time per call spent enqueueing, argument and pointer checks "
      "included; the GPU time is what the stream sees)\n");
}

// A 20,000-label semantic-ID trie: level-0 tokens among 7,835 ids (the root
// fanout of RTP-LLM's real fixture), three levels of 256 codes below.
void build_step_trie(std::mt19937_64 &rng, testutil::TrieHandle &trie,
                     std::vector<std::vector<int32_t>> &paths) {
  for (int i = 0; i < 20000; ++i) {
    paths.push_back({static_cast<int32_t>(rng() % 7835), 30000 + static_cast<int32_t>(rng() % 256),
                     60000 + static_cast<int32_t>(rng() % 256),
                     90000 + static_cast<int32_t>(rng() % 256)});
  }
  CHECK_TM(testutil::make_trie(paths, kVocab, {kStop}, trie));
}

// An episode of six steps per row: the fill at the root (token -1), four
// label tokens, the stop token; states go back to the root in between.
constexpr int kEpisodeSteps = 6;

void bench_step(cudaStream_t stream) {
  std::printf(
      "\nOne decode step, V = %d, bf16 logits, 20,000-label trie (times per step; host "
      "path = CPU matchers accept + fill, H2D copy, apply, synchronise)\n",
      kVocab);
  std::printf("%6s | %14s %14s | %12s | %10s %10s\n", "rows", "fused+apply us", "fused->logits us",
              "host path us", "host/fused", "host/logits");
  std::mt19937_64 rng(2);
  testutil::TrieHandle trie;
  std::vector<std::vector<int32_t>> paths;
  build_step_trie(rng, trie, paths);
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(trie.p, stream, &dt));
  const size_t words = treemask_bitmask_words(kVocab);
  const int32_t dtype = cudatest::kBF16;
  for (size_t rows : {size_t{1}, size_t{64}, size_t{512}, size_t{4096}}) {
    std::vector<int32_t> tokens(kEpisodeSteps * rows);
    for (size_t r = 0; r < rows; ++r) {
      const auto &p = paths[rng() % paths.size()];
      tokens[r] = -1;
      for (int s = 1; s <= 4; ++s) tokens[s * rows + r] = p[s - 1];
      tokens[5 * rows + r] = kStop;
    }
    DeviceArray<int32_t> d_tokens(tokens), d_mask(rows * words);
    DeviceArray<uint32_t> d_states(rows);
    DeviceArray<uint16_t> d_logits(rows * kVocab);
    CHECK_CUDA(cudaMemset(d_logits.get(), 0x3c, rows * kVocab * 2));
    const int episodes = rows >= 512 ? 3 : 20;

    auto apply_mask = [&] {
      CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits.get(), dtype, rows, kVocab, kVocab,
                                                 d_mask.get(), words, rows, kVocab, nullptr, 0,
                                                 stream));
    };
    auto run_fused = [&](bool to_logits) {
      const auto t0 = Clock::now();
      for (int e = 0; e < episodes; ++e) {
        CHECK_CUDA(cudaMemsetAsync(d_states.get(), 0, rows * sizeof(uint32_t), stream));
        for (int s = 0; s < kEpisodeSteps; ++s) {
          const int32_t *step_tokens = d_tokens.get() + s * rows;
          if (to_logits) {
            CHECK_TM(treemask_cuda_trie_advance_mask_logits(
                dt, d_states.get(), step_tokens, rows, TREEMASK_FAILURE_REJECT, nullptr,
                d_logits.get(), dtype, kVocab, kVocab, stream));
          } else {
            CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, d_states.get(), step_tokens, rows,
                                                             TREEMASK_FAILURE_REJECT, nullptr,
                                                             d_mask.get(), words, stream));
            apply_mask();
          }
        }
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
             (episodes * kEpisodeSteps);
    };

    int32_t *pinned = nullptr;
    CHECK_CUDA(cudaMallocHost(&pinned, rows * words * sizeof(int32_t)));
    std::vector<testutil::MatcherHandle> matchers;
    for (size_t r = 0; r < rows; ++r) {
      treemask_matcher *m = nullptr;
      CHECK_TM(treemask_matcher_create(trie.p, nullptr, &m));
      matchers.emplace_back(m);
    }
    auto run_host = [&] {
      const auto t0 = Clock::now();
      for (int e = 0; e < episodes; ++e) {
        for (auto &m : matchers) treemask_matcher_reset(m.p);
        for (int s = 0; s < kEpisodeSteps; ++s) {
          for (size_t r = 0; r < rows; ++r) {
            bool accepted = false;
            const int32_t t = tokens[s * rows + r];
            if (t >= 0) CHECK_TM(treemask_matcher_accept_token(matchers[r].p, t, &accepted));
            CHECK_TM(treemask_matcher_fill_next_token_bitmask(matchers[r].p, pinned + r * words,
                                                              words, nullptr, nullptr));
          }
          CHECK_CUDA(cudaMemcpyAsync(d_mask.get(), pinned, rows * words * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream));
          apply_mask();
          // The next step's tokens come from sampling these logits.
          CHECK_CUDA(cudaStreamSynchronize(stream));
        }
      }
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
             (episodes * kEpisodeSteps);
    };

    run_fused(false);  // warm-up
    const double fused = run_fused(false);
    const double fused_logits = run_fused(true);
    run_host();
    const double host = run_host();
    std::printf("%6zu | %14.1f %14.1f | %12.1f | %9.1fx %9.1fx\n", rows, fused, fused_logits, host,
                host / fused, host / fused_logits);
    CHECK_CUDA(cudaFreeHost(pinned));
  }
  treemask_cuda_trie_free(dt);
}

}  // namespace

int main() {
  cudatest::skip_without_device("bench_cuda");
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench_apply(stream);
  bench_step(stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return cudatest::finish("bench_cuda");
}
