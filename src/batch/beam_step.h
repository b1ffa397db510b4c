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
// - over a string set, candidates whose hypotheses spell the same bytes
//   merge, the best kept (its rank by the rules above): a live hypothesis is
//   its byte-trie node, a finished one the node its string ended at (a
//   carried-over finished slot's from `ends`, unknown when FAILED: never
//   merged). The B winners are then B distinct hypotheses; token paths never
//   merge (every candidate is its own token sequence).
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
  // n_requests * beam_width entries. ends (as many entries, in and out): for
  // a finished slot of a string set, the byte-trie node its string ended at
  // (kStateFailed: unknown); required for a string set (the step cannot
  // tell finished strings apart without it: kUnsupported), ignored in and
  // written kStateFailed for a token-path trie, may be null then. Every
  // argument and state is checked before anything is written.
  Status step_states(const Trie &trie, size_t n_requests, const BeamLogits &logits,
                     uint32_t *states, uint32_t *ends, float *scores, int32_t *parents,
                     int32_t *tokens);

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
  // What a candidate's hypothesis is, for a string set's merge: the string
  // it spells (a node of the string trie `space`), live or finished. kNone:
  // never merged (a token path, a string the step does not know).
  struct HypothesisKey {
    enum Kind : uint8_t { kNone, kLive, kFinished };
    const void *space = nullptr;
    uint32_t node = 0;
    Kind kind = kNone;
    bool operator==(const HypothesisKey &) const = default;
  };

  // Per-thread working memory (public for the slot adapters in beam_step.cc).
  struct Scratch {
    // beam_width entries, sized by the first step (a string set's merge
    // grows it while duplicates push distinct candidates further down).
    std::vector<kernels::BeamCandidate> heap;
    std::vector<int32_t> allowed;  // next_tokens of a matcher in a decoding mode
    // A string set's merge: the winners' keys in order, and a hash set of
    // them (open addressing, kNone marks an empty bucket).
    std::vector<HypothesisKey> keys, seen;
    Status status;
  };

 private:
  // The step both forms share: normalizers, then per request gather, exact
  // top-B (distinct hypotheses when slots.merges(r)) and slots.keep(r, best,
  // n_kept, keys) (beam_step.cc).
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
