// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "matcher/beam_step.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <utility>

#include "matcher/worker_pool.h"

namespace treemask {

namespace {

using kernels::BeamCandidate;
using kernels::DType;
using kernels::TopK;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool is_reserved(uint32_t state) { return state == kStateTerminated || state == kStateFailed; }

Status check_states(const Trie &trie, const uint32_t *states, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (states[i] >= trie.n_nodes() && !is_reserved(states[i])) {
      return error(Code::kOutOfRange, "states[", i, "] = ", states[i],
                   " is neither a node id (< n_nodes = ", trie.n_nodes(),
                   ") nor TREEMASK_STATE_TERMINATED / TREEMASK_STATE_FAILED");
    }
  }
  return Status::Ok();
}

// The normalizer of row i, or an error naming the row when it holds NaN or
// +inf (every candidate score would be NaN: a silent empty step otherwise).
Result<float> normalizer(const LogitsView &v, size_t i, kernels::LogSumExpFn lse) {
  if (v.log_probs) return 0.0f;
  const float z = lse(v.row(i), v.dtype, v.n_columns);
  if (std::isnan(z)) {
    return error(Code::kInvalidArgument, "logits row ", i,
                 " holds NaN or +inf: its log-softmax is undefined");
  }
  return z;
}

// Offers the candidates of one active or failed state. z = normalizer.
template <class Offer>
void gather(const Trie &trie, uint32_t state, const void *row, DType dtype, float s, float z,
            Offer &&offer) {
  const auto stops = trie.stop_tokens();
  bool terminal = state == kStateFailed;
  if (state != kStateFailed) {
    Children c;
    if (trie.children(state, c)) {
      for (uint32_t j = 0; j < c.count; ++j) {
        const int32_t t = c.tokens[j];
        offer(s + (kernels::load_value(row, dtype, static_cast<size_t>(t)) - z), t,
              c.first_child + j);
      }
    }
    terminal = trie.is_terminal(state);
  }
  if (terminal) {
    for (const int32_t t : stops) {
      offer(s + (kernels::load_value(row, dtype, static_cast<size_t>(t)) - z), t, kStateTerminated);
    }
  }
}

}  // namespace

Status check_logits(const Trie &trie, const LogitsView &v, size_t n_rows) {
  const auto d = static_cast<int32_t>(v.dtype);
  if (d < 0 || d > 2) {
    return error(Code::kInvalidArgument, "unknown dtype ", d,
                 " (expected 0 = TREEMASK_F32, 1 = TREEMASK_F16, 2 = TREEMASK_BF16)");
  }
  if (v.n_columns < static_cast<size_t>(trie.vocab_size())) {
    return error(Code::kInvalidArgument, "logits n_columns ", v.n_columns,
                 " is smaller than the trie's vocab_size ", trie.vocab_size());
  }
  if (v.row_stride < v.n_columns) {
    return error(Code::kInvalidArgument, "logits row_stride ", v.row_stride,
                 " is smaller than n_columns ", v.n_columns);
  }
  if (n_rows > 0 && !v.data) return error(Code::kInvalidArgument, "logits data is NULL");
  const size_t max_elems = std::numeric_limits<size_t>::max() / kernels::dtype_bytes(v.dtype);
  if (n_rows > 1 && (n_rows - 1) > (max_elems - v.n_columns) / v.row_stride) {
    return error(Code::kOutOfRange, "n_rows ", n_rows, " x row_stride ", v.row_stride,
                 " overflows the address space");
  }
  return Status::Ok();
}

BeamStepper::BeamStepper(size_t beam_width, size_t n_threads)
    : beam_width_(beam_width), scratch_(n_threads == 0 ? 1 : n_threads) {
  for (auto &s : scratch_) {
    s.heap.resize(beam_width);
    s.old_states.resize(beam_width);
    s.old_scores.resize(beam_width);
  }
  if (scratch_.size() > 1) pool_ = std::make_unique<WorkerPool>(scratch_.size() - 1);
}

BeamStepper::~BeamStepper() = default;

Status BeamStepper::step_states(const Trie &trie, size_t n_requests, const LogitsView &logits,
                                uint32_t *states, float *scores, int32_t *parents,
                                int32_t *tokens) {
  const size_t B = beam_width_;
  if (n_requests > std::numeric_limits<size_t>::max() / (B == 0 ? 1 : B)) {
    return error(Code::kOutOfRange, "n_requests ", n_requests, " x beam_width ", B,
                 " overflows size_t");
  }
  const size_t n_slots = n_requests * B;
  if (n_slots == 0) return Status::Ok();
  if (!states) return error(Code::kInvalidArgument, "states is NULL");
  if (!scores) return error(Code::kInvalidArgument, "scores is NULL");
  if (!parents) return error(Code::kInvalidArgument, "parents is NULL");
  if (!tokens) return error(Code::kInvalidArgument, "tokens is NULL");
  TM_TRY(check_logits(trie, logits, n_slots));
  TM_TRY(check_states(trie, states, n_slots));
  if (trie.stop_tokens().empty()) {
    // Cannot happen for a trie that built or loaded; kept for a clear message.
    return error(Code::kInvalidState, "the trie has no stop token");
  }
  const int32_t first_stop = trie.stop_tokens()[0];
  const kernels::LogSumExpFn lse = kernels::logsumexp_best();

  // Phase 1: the normalizer of every slot that can offer a candidate, so
  // that a row with NaN / +inf fails the call before anything is written.
  // Phase 2: per request, gather, select and write. Requests are independent
  // and run on the pool; each thread owns one scratch.
  if (z_.size() < n_slots) z_.resize(n_slots);
  auto needs_row = [&](size_t i) { return scores[i] > kNegInf && states[i] != kStateTerminated; };
  auto normalize = [&](size_t r, Scratch &sc) {
    for (size_t i = r * B; i < (r + 1) * B; ++i) {
      if (!needs_row(i)) continue;
      const auto z = normalizer(logits, i, lse);
      if (!z.ok()) {
        sc.status = z.status().ok() ? Status::Ok() : error(z.status().code(), z.status().message());
        return false;
      }
      z_[i] = z.value();
    }
    return true;
  };
  auto request = [&](size_t r, Scratch &sc) {
    const size_t base = r * B;
    std::copy(states + base, states + base + B, sc.old_states.begin());
    std::copy(scores + base, scores + base + B, sc.old_scores.begin());
    TopK top(sc.heap.data(), B);
    for (size_t b = 0; b < B; ++b) {
      const float s = sc.old_scores[b];
      if (!(s > kNegInf)) continue;  // dead, an initial duplicate, or NaN
      const uint32_t state = sc.old_states[b];
      if (state == kStateTerminated) {
        top.offer({s, static_cast<int32_t>(b), first_stop, kStateTerminated});
        continue;
      }
      gather(trie, state, logits.row(base + b), logits.dtype, s, z_[base + b],
             [&](float score, int32_t t, uint32_t next) {
               if (score > kNegInf && top.may_take(score)) {
                 top.offer({score, static_cast<int32_t>(b), t, next});
               }
             });
    }
    const size_t kept = top.finish();
    for (size_t i = 0; i < B; ++i) {
      if (i < kept) {
        const BeamCandidate &c = sc.heap[i];
        parents[base + i] = c.beam;
        tokens[base + i] = c.token;
        scores[base + i] = c.score;
        states[base + i] = c.next;
      } else {
        parents[base + i] = -1;
        tokens[base + i] = -1;
        scores[base + i] = kNegInf;
        states[base + i] = kStateTerminated;
      }
    }
    return true;
  };
  TM_TRY(for_each_request(n_requests, normalize));
  return for_each_request(n_requests, request);
}

template <class Fn>
Status BeamStepper::for_each_request(size_t n_requests, Fn &fn) {
  if (!pool_ || n_requests == 1) {
    Scratch &sc = scratch_[0];
    for (size_t r = 0; r < n_requests; ++r) {
      if (!fn(r, sc)) return std::exchange(sc.status, Status::Ok());
    }
    return Status::Ok();
  }
  std::atomic<size_t> next_request{0};
  std::atomic<bool> failed{false};
  auto worker = [&](size_t w) {
    Scratch &sc = scratch_[w];
    for (size_t r; !failed.load(std::memory_order_relaxed) &&
                   (r = next_request.fetch_add(1, std::memory_order_relaxed)) < n_requests;) {
      if (!fn(r, sc)) failed.store(true, std::memory_order_relaxed);
    }
  };
  pool_->run(scratch_.size(), 1, worker);
  Status first = Status::Ok();
  for (auto &sc : scratch_) {
    if (!sc.status.ok() && first.ok()) first = std::move(sc.status);
    sc.status = Status::Ok();
  }
  return first;
}

Status topk_states(const Trie &trie, const uint32_t *states, size_t n_rows,
                   const LogitsView &logits, size_t k, int32_t *out_tokens, float *out_scores,
                   size_t *out_counts) {
  if (n_rows == 0) return Status::Ok();
  if (!states) return error(Code::kInvalidArgument, "states is NULL");
  if (!out_counts) return error(Code::kInvalidArgument, "out_counts is NULL");
  if (k > 0 && (!out_tokens || !out_scores)) {
    return error(Code::kInvalidArgument, "out_tokens and out_scores must not be NULL when k > 0");
  }
  if (k > 0 && n_rows > std::numeric_limits<size_t>::max() / k) {
    return error(Code::kOutOfRange, "n_rows ", n_rows, " x k ", k, " overflows size_t");
  }
  TM_TRY(check_logits(trie, logits, n_rows));
  TM_TRY(check_states(trie, states, n_rows));
  const kernels::LogSumExpFn lse = kernels::logsumexp_best();
  // The top-k heap lives in the output arrays' place: k candidates of 16
  // bytes do not fit in k tokens + k scores, so use a small per-call buffer
  // only when k is large.
  constexpr size_t kStack = 256;
  BeamCandidate stack[kStack];
  std::vector<BeamCandidate> big;
  BeamCandidate *heap = stack;
  if (k > kStack) {
    big.resize(k);
    heap = big.data();
  }
  for (size_t i = 0; i < n_rows; ++i) {
    TopK top(heap, k);
    const uint32_t state = states[i];
    if (k > 0) {
      const auto z = normalizer(logits, i, lse);
      if (!z.ok()) return z.status();
      // A terminated state allows its stop tokens (as fill does).
      const uint32_t as = state == kStateTerminated ? kStateFailed : state;
      gather(trie, as, logits.row(i), logits.dtype, 0.0f, z.value(),
             [&](float score, int32_t t, uint32_t next) {
               if (score > kNegInf && top.may_take(score)) top.offer({score, 0, t, next});
             });
    }
    const size_t kept = top.finish();
    for (size_t j = 0; j < kept; ++j) {
      out_tokens[i * k + j] = heap[j].token;
      out_scores[i * k + j] = heap[j].score;
    }
    out_counts[i] = kept;
  }
  return Status::Ok();
}

}  // namespace treemask
