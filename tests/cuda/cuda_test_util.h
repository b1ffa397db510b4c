// Helpers shared by the CUDA test and benchmark programs. They are plain
// programs (no gtest: the GPU machine has none of our system packages), so
// this header brings a failure counter, CHECK macros, the exit-77 skip, and
// device buffers allocated through the test's own (static) CUDA runtime --
// a second runtime instance beside libtreemask's, as in a PyTorch process.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "treemask/treemask_cuda.h"

namespace cudatest {

// Built against the CPU emulation of the CUDA runtime (emulation/): the
// programs then shrink their largest cases, since every GPU thread becomes
// a fiber on one core.
#ifdef TREEMASK_CUDA_EMULATION
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

// The pointer queries (cudaPointerGetAttributes) the library made while fn
// ran, where the emulation counts them; -1 on a GPU (whose runtime does not
// say).
template <class F>
long pointer_queries_in(F &&fn) {
#ifdef TREEMASK_CUDA_EMULATION
  const size_t before = cuda_emulation::pointer_queries();
  fn();
  return static_cast<long>(cuda_emulation::pointer_queries() - before);
#else
  fn();
  return -1;
#endif
}

// 0 or TREEMASK_CUDA_CALLER_CHECKED_POINTERS at random: the flag may skip
// the library's pointer queries and nothing else, so no result may depend on
// it.
inline uint32_t random_flags(std::mt19937_64 &rng) {
  return rng() % 2 ? TREEMASK_CUDA_CALLER_CHECKED_POINTERS : 0;
}

inline int g_failures = 0;

inline void report_failure(const char *file, int line, const char *what, const std::string &why) {
  if (++g_failures <= 25) {
    std::fprintf(stderr, "%s:%d: CHECK failed: %s%s%s\n", file, line, what, why.empty() ? "" : ": ",
                 why.c_str());
  } else if (g_failures == 26) {
    std::fprintf(stderr, "(further failures not printed)\n");
  }
}

// Exits with the CUDA error: the harness itself cannot continue.
inline void cuda_ok(cudaError_t e, const char *what, const char *file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, what, cudaGetErrorName(e),
               cudaGetErrorString(e));
  std::exit(1);
}

// Programs exit 77 (meson's skip) where no usable device is present.
inline void skip_without_device(const char *program) {
  if (treemask_cuda_available()) return;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  std::printf("SKIP %s: no usable CUDA device (cudaGetDeviceCount: %s, %d devices)\n", program,
              e == cudaSuccess ? "ok" : cudaGetErrorName(e), count);
  std::exit(77);
}

inline int finish(const char *program) {
  if (g_failures > 0) {
    std::fprintf(stderr, "%s: %d check(s) failed\n", program, g_failures);
    return 1;
  }
  std::printf("%s: all checks passed\n", program);
  return 0;
}

}  // namespace cudatest

#define CHECK_CUDA(expr) ::cudatest::cuda_ok((expr), #expr, __FILE__, __LINE__)

#define CHECK_MSG(cond, why)                                                   \
  do {                                                                         \
    if (!(cond)) ::cudatest::report_failure(__FILE__, __LINE__, #cond, (why)); \
  } while (0)

#define CHECK(cond) CHECK_MSG(cond, std::string())

// A treemask call that must succeed.
#define CHECK_TM(expr)                                                                     \
  do {                                                                                     \
    const treemask_status tm_status_ = (expr);                                             \
    if (tm_status_ != TREEMASK_OK)                                                         \
      ::cudatest::report_failure(                                                          \
          __FILE__, __LINE__, #expr,                                                       \
          std::string(treemask_status_string(tm_status_)) + ": " + treemask_last_error()); \
  } while (0)

namespace cudatest {

// Device memory of n elements of T, optionally shifted by `shift_bytes` from
// the (256-byte aligned) allocation to exercise unaligned paths.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n, size_t shift_bytes = 0) : n_(n) {
    CHECK_CUDA(cudaMalloc(&base_, n * sizeof(T) + shift_bytes + 1));
    data_ = reinterpret_cast<T *>(static_cast<char *>(base_) + shift_bytes);
  }
  DeviceArray(const std::vector<T> &host, size_t shift_bytes = 0)
      : DeviceArray(host.size(), shift_bytes) {
    upload(host);
  }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  DeviceArray(DeviceArray &&o) noexcept : base_(o.base_), data_(o.data_), n_(o.n_) {
    o.base_ = nullptr;
    o.data_ = nullptr;
  }
  ~DeviceArray() {
    if (base_) cudaFree(base_);
  }

  T *get() const { return data_; }
  size_t size() const { return n_; }

  void upload(const std::vector<T> &host, cudaStream_t stream = nullptr) {
    CHECK_CUDA(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                               stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  std::vector<T> download(cudaStream_t stream = nullptr) const {
    std::vector<T> host(n_);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void *base_ = nullptr;
  T *data_ = nullptr;
  size_t n_ = 0;
};

// dtype values of treemask_dtype (treemask.h section 7).
enum Dtype : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline const char *dtype_name(int32_t d) { return d == kF32 ? "f32" : d == kF16 ? "f16" : "bf16"; }
inline size_t dtype_bytes(int32_t d) { return d == kF32 ? 4 : 2; }
inline uint32_t neg_inf_bits(int32_t d) {
  return d == kF32 ? 0xFF800000u : d == kF16 ? 0xFC00u : 0xFF80u;
}

// Logits as raw bytes: masking only stores -inf bit patterns or keeps bits,
// so random bytes are as good a test input as real values.
struct HostLogits {
  int32_t dtype = kF32;
  size_t n_rows = 0, stride = 0, width = 0;
  std::vector<uint8_t> bytes;

  HostLogits(int32_t d, size_t rows, size_t row_stride, size_t row_width, std::mt19937_64 &rng)
      : dtype(d),
        n_rows(rows),
        stride(row_stride),
        width(row_width),
        bytes(rows * row_stride * dtype_bytes(d)) {
    for (auto &b : bytes) b = static_cast<uint8_t>(rng());
  }

  void mask(size_t row, size_t col) {
    const uint32_t neg = neg_inf_bits(dtype);
    std::memcpy(&bytes[(row * stride + col) * dtype_bytes(dtype)], &neg, dtype_bytes(dtype));
  }
  uint32_t at(size_t row, size_t col) const {
    uint32_t v = 0;
    std::memcpy(&v, &bytes[(row * stride + col) * dtype_bytes(dtype)], dtype_bytes(dtype));
    return v;
  }
};

inline bool bit_set(const int32_t *row, size_t token) {
  return (static_cast<uint32_t>(row[token / 32]) >> (token % 32)) & 1u;
}

// The scalar reference of the apply contract, written from the header text:
// in every selected row, column c < width is masked unless c < vocab_size
// and its bit is set; columns in [width, stride) are never touched.
inline void reference_apply(HostLogits &logits, const std::vector<int32_t> &bitmask,
                            size_t row_words, int32_t vocab_size,
                            const std::vector<int32_t> *indices) {
  auto apply_row = [&](size_t row) {
    for (size_t c = 0; c < logits.width; ++c) {
      const bool keep =
          c < static_cast<size_t>(vocab_size) && bit_set(&bitmask[row * row_words], c);
      if (!keep) logits.mask(row, c);
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

// First difference between two logits buffers, as text ("" when equal).
inline std::string first_difference(const HostLogits &want, const std::vector<uint8_t> &got) {
  if (got == want.bytes) return "";
  const size_t eb = dtype_bytes(want.dtype);
  for (size_t i = 0; i < want.bytes.size() / eb; ++i) {
    if (std::memcmp(&want.bytes[i * eb], &got[i * eb], eb) != 0) {
      uint32_t a = 0, b = 0;
      std::memcpy(&a, &want.bytes[i * eb], eb);
      std::memcpy(&b, &got[i * eb], eb);
      char buf[160];
      std::snprintf(buf, sizeof buf, "row %zu column %zu: want 0x%x, got 0x%x", i / want.stride,
                    i % want.stride, a, b);
      return buf;
    }
  }
  return "sizes differ";
}

}  // namespace cudatest
