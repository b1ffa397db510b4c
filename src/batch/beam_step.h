// The exact constrained beam step without full-vocabulary masks: per slot,
// one read of its logits row for the log-softmax normalizer and a gather of
// its allowed candidates; per request, an exact top-B over beams x
// candidates; the slots' states are reordered and advanced in the same call.
// Also the per-row top-k among allowed tokens for sampling engines.
// treemask.h (experimental tier) states the rules; they are pinned here:
//
// - candidates of slot r*B+b: (b, t) for every t allowed at its state, score
//   s[r,b] + (x[t] - lse(row)) in float (x[t] itself when the rows hold
//   log-probabilities); lse over the first n_columns columns.
// - a terminated slot offers only (b, first stop token) with score s[r,b].
// - candidates whose score is -inf or NaN are never selected; the rest rank
//   by score, then lower b, then lower t; fewer than B candidates leave the
//   remaining outputs (-1, -1, -inf) and those slots dead (terminated, -inf).
// - slot r*B+i becomes slot r*B+parent advanced by token.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "kernels/beam_logits.h"
#include "kernels/cpu/beam.h"
#include "trie/trie.h"

namespace treemask {

class Batch;
class WorkerPool;

// The logits rows of a step (kernels/beam_logits.h): the CPU and the CUDA
// step take the same struct and check it with the same function.
using kernels::BeamLogits;

// Owns what a step needs besides the caller's arrays, so that steps never
// allocate: per-thread candidate heaps and copies of a request's old beams,
// sized for beam_width, and an optional worker pool over requests.
class BeamStepper {
 public:
  // n_threads: threads working on one step, the caller's included (0 or 1:
  // the caller alone). Throws std::bad_alloc / std::system_error.
  BeamStepper(size_t beam_width, size_t n_threads);
  ~BeamStepper();
  BeamStepper(const BeamStepper &) = delete;
  BeamStepper &operator=(const BeamStepper &) = delete;

  size_t beam_width() const { return beam_width_; }
  size_t n_threads() const { return scratch_.size(); }

  // One step of n_requests x beam_width slots in state-array form: states,
  // scores (in: cumulative, out: new) and the outputs parents / tokens have
  // n_requests * beam_width entries. Every argument and state is checked
  // before anything is written.
  Status step_states(const Trie &trie, size_t n_requests, const BeamLogits &logits,
                     uint32_t *states, float *scores, int32_t *parents, int32_t *tokens);

  // The same step over the first n_requests * beam_width slots of a batch
  // (each must hold a matcher; decoding modes apply through the matchers'
  // allowed sets): slot r*B+i becomes a copy of slot r*B+parent that has
  // accepted the token (matchers are cloned, sharing history copy-on-write,
  // so this form allocates). A dead slot keeps its old matcher; its score
  // -inf keeps it out of every later step. Slots past n_requests *
  // beam_width are untouched.
  Status step_batch(Batch &batch, size_t n_requests, const BeamLogits &logits, float *scores,
                    int32_t *parents, int32_t *tokens);

 public:
  // Per-thread working memory (public for the slot adapters in beam_step.cc).
  struct Scratch {
    std::vector<kernels::BeamCandidate> heap;  // beam_width entries, sized by the first step
    std::vector<int32_t> allowed;              // next_tokens of a matcher in a decoding mode
    Status status;
  };

 private:
  // The step both forms share: normalizers, then per request gather, exact
  // top-B and slots.keep(r, best, n_kept) (beam_step.cc).
  template <class Slots>
  Status step_core(size_t n_requests, const BeamLogits &logits, const float *scores, Slots &slots);

  // Runs fn(r, scratch) for every request on the pool (or the caller); the
  // first failure's status (fn returned false after setting scratch.status).
  template <class Fn>
  Status for_each_request(size_t n_requests, Fn &fn);

  size_t beam_width_;
  std::vector<Scratch> scratch_;
  std::vector<float> z_;  // per-slot normalizers, grown to the largest step seen
  // The batch form's selections and reorder arguments, grown likewise.
  std::vector<int32_t> sel_parents_, sel_tokens_, src_, accept_;
  std::vector<float> sel_scores_;
  std::unique_ptr<WorkerPool> pool_;
};

// Per row i: the k best allowed tokens of states[i] by log-probability (or
// raw value when the rows hold log-probabilities), best first, ties to the
// lower token: out_tokens / out_scores[i * k ...], out_counts[i] how many
// (fewer when fewer tokens are allowed; -inf and NaN scores are left out).
Status topk_states(const Trie &trie, const uint32_t *states, size_t n_rows,
                   const BeamLogits &logits, size_t k, int32_t *out_tokens, float *out_scores,
                   size_t *out_counts);

}  // namespace treemask
