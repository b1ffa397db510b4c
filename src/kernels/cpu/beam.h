// CPU kernels of the constrained beam step: the log-softmax normalizer of a
// logits row (one read of the row, vectorized, never written) and an exact
// top-k over candidates with the pinned tie rule (one logit as a float is
// kernels/dtype.h's load_logit). Pure functions over raw spans, a scalar
// reference beside every SIMD variant.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/apply.h"

namespace treemask::kernels {

// ---- the normalizer ------------------------------------------------------------

// log(sum over c < n of exp(row[c])): the log-softmax normalizer, so that
// log_softmax(row)[t] = row[t] - logsumexp(row). Reads each element once
// (blocks small enough for L1 are read twice from L1: once for their maximum,
// once for the sum). Returns -inf when every element is -inf or n == 0, and
// NaN when an element is NaN or +inf (as torch's log_softmax gives NaN).
// Variants differ from the reference only by rounding (summation order and
// the exp approximation): within 2e-6 relative on the sum.
using LogSumExpFn = float (*)(const void *row, DType dtype, size_t n);

// Double-precision two-pass reference (the test oracle).
float logsumexp_scalar(const void *row, DType dtype, size_t n);

#if defined(__x86_64__) || defined(__i386__)
#define TREEMASK_BEAM_X86 1
// Call only when the CPU has AVX2, FMA and F16C.
float logsumexp_avx2(const void *row, DType dtype, size_t n);
// Call only when the CPU has AVX-512F.
float logsumexp_avx512(const void *row, DType dtype, size_t n);
#endif

// Whether the CPU has what logsumexp_avx2 needs (AVX2, FMA, F16C; from
// core/cpu.h).
bool cpu_has_avx2_fma_f16c();

// The fastest variant this CPU supports, chosen on first use and then fixed.
LogSumExpFn logsumexp_best();
// Its name ("avx512", "avx2" or "scalar").
const char *logsumexp_best_name();

// ---- exact top-k with the pinned tie rule -----------------------------------------

// One candidate of a beam step: beam b extended by token t, cumulative score.
struct BeamCandidate {
  float score;
  int32_t beam;
  int32_t token;
  uint32_t next;  // the caller's: where the candidate leads (not ranked)
};

// a ranks before b: higher score, then lower beam, then lower token. Scores
// are never NaN or -inf here (such candidates are dropped before ranking).
inline bool ranks_before(const BeamCandidate &a, const BeamCandidate &b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// The k best candidates offered to it, kept in caller-owned storage of k
// entries as a binary heap whose top is the worst kept candidate: O(log k)
// per candidate that beats the worst, O(1) per candidate that does not.
// Never allocates.
class TopK {
 public:
  TopK(BeamCandidate *storage, size_t k) : heap_(storage), k_(k) {}

  // Whether a candidate with this score could still be kept (a cheap
  // pre-test before building the candidate; ties go to offer()).
  bool may_take(float score) const { return size_ < k_ || (k_ > 0 && score >= heap_[0].score); }

  void offer(const BeamCandidate &c);

  size_t size() const { return size_; }

  // Sorts the kept candidates best first (in place, in the storage) and
  // returns how many there are. The heap is spent afterwards.
  size_t finish();

 private:
  void sift_down(size_t i);
  void sift_up(size_t i);

  BeamCandidate *heap_;
  size_t k_;
  size_t size_ = 0;
};

}  // namespace treemask::kernels
