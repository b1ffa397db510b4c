// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/beam.h"

#include <algorithm>
#include <limits>

#include "core/cpu.h"

namespace treemask::kernels {

namespace {

LogSumExpFn select_logsumexp() {
#ifdef TREEMASK_BEAM_X86
  if (cpu_features().avx512f) return logsumexp_avx512;
  if (cpu_has_avx2_fma_f16c()) return logsumexp_avx2;
#endif
  return logsumexp_scalar;
}

}  // namespace

bool cpu_has_avx2_fma_f16c() {
  const CpuFeatures &f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

float logsumexp_scalar(const void *row, DType dtype, size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < n; ++c) {
    const double x = load_logit(row, dtype, c);
    if (std::isnan(x) || x == std::numeric_limits<double>::infinity()) {
      return std::numeric_limits<float>::quiet_NaN();
    }
    m = std::max(m, x);
  }
  if (m == -std::numeric_limits<double>::infinity()) return -std::numeric_limits<float>::infinity();
  double sum = 0;
  for (size_t c = 0; c < n; ++c) sum += std::exp(double{load_logit(row, dtype, c)} - m);
  return static_cast<float>(m + std::log(sum));
}

LogSumExpFn logsumexp_best() {
  static const LogSumExpFn best = select_logsumexp();
  return best;
}

const char *logsumexp_best_name() {
  const LogSumExpFn f = logsumexp_best();
#ifdef TREEMASK_BEAM_X86
  if (f == logsumexp_avx512) return "avx512";
  if (f == logsumexp_avx2) return "avx2";
#endif
  (void)f;
  return "scalar";
}

void TopK::sift_down(size_t i) {
  // The heap's top is the worst candidate: parent ranks after its children.
  for (;;) {
    size_t worst = i;
    const size_t l = 2 * i + 1, r = l + 1;
    if (l < size_ && ranks_before(heap_[worst], heap_[l])) worst = l;
    if (r < size_ && ranks_before(heap_[worst], heap_[r])) worst = r;
    if (worst == i) return;
    std::swap(heap_[i], heap_[worst]);
    i = worst;
  }
}

void TopK::sift_up(size_t i) {
  while (i > 0) {
    const size_t p = (i - 1) / 2;
    if (!ranks_before(heap_[p], heap_[i])) return;
    std::swap(heap_[p], heap_[i]);
    i = p;
  }
}

void TopK::offer(const BeamCandidate &c) {
  if (k_ == 0) return;
  if (size_ < k_) {
    heap_[size_] = c;
    sift_up(size_++);
    return;
  }
  if (!ranks_before(c, heap_[0])) return;
  heap_[0] = c;
  sift_down(0);
}

size_t TopK::finish() {
  std::sort(heap_, heap_ + size_, ranks_before);
  return size_;
}

}  // namespace treemask::kernels
