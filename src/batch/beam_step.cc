// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "batch/beam_step.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <utility>

#include "batch/batch.h"
#include "batch/state_array.h"
#include "batch/worker_pool.h"
#include "kernels/checks.h"
#include "matcher/matcher.h"
#include "rules/rules.h"
#include "rules/trie_rules.h"

namespace treemask {

namespace {

using kernels::BeamCandidate;
using kernels::TopK;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The normalizer of row i, or an error naming the row when it holds NaN or
// +inf (every candidate score would be NaN: a silent empty step otherwise).
Result<float> normalizer(const BeamLogits &v, size_t i, kernels::LogSumExpFn lse) {
  if (v.log_probs) return 0.0f;
  const float z = lse(v.row(i), v.dtype, v.n_columns);
  if (std::isnan(z)) {
    return error(Code::kInvalidArgument, "logits row ", i,
                 " holds NaN or +inf: its log-softmax is undefined");
  }
  return z;
}

}  // namespace

// The heaps are sized by the first step, not here: a beam_width of 10^9
// costs nothing until a step holds that many slots (whose logits the caller
// has then allocated), instead of an eager allocation the OOM killer ends.
BeamStepper::BeamStepper(size_t beam_width, size_t n_threads)
    : beam_width_(beam_width), scratch_(n_threads == 0 ? 1 : n_threads) {
  if (scratch_.size() > 1) pool_ = std::make_unique<WorkerPool>(scratch_.size() - 1);
}

BeamStepper::~BeamStepper() = default;

namespace {

using Key = BeamStepper::HypothesisKey;

// The bucket of a key in a table of 2^n buckets (mask = 2^n - 1).
size_t key_bucket(const Key &k, size_t mask) {
  uint64_t h = reinterpret_cast<uintptr_t>(k.space) ^ (uint64_t{k.node} << 2) ^ k.kind;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<size_t>(h) & mask;
}

// The first B candidates of heap[0 .. n) (sorted best first) whose
// hypotheses differ, moved to the front in order, their keys to
// sc.keys; returns how many. A candidate whose key is kNone is always
// distinct.
template <class Slots>
size_t select_distinct(Slots &slots, size_t r, size_t B, BeamStepper::Scratch &sc, size_t n) {
  size_t buckets = 16;
  while (buckets < 2 * std::min(B, n)) buckets *= 2;
  sc.seen.assign(buckets, Key{});
  sc.keys.clear();
  const size_t mask = buckets - 1;
  size_t kept = 0;
  for (size_t i = 0; i < n && kept < B; ++i) {
    BeamCandidate c = sc.heap[i];
    const Key key = slots.key(r, c);  // may set c.next
    if (key.kind != Key::kNone) {
      size_t j = key_bucket(key, mask);
      while (sc.seen[j].kind != Key::kNone && !(sc.seen[j] == key)) j = (j + 1) & mask;
      if (sc.seen[j] == key) continue;  // a better candidate spells the same
      sc.seen[j] = key;
    }
    sc.heap[kept++] = c;
    sc.keys.push_back(key);
  }
  return kept;
}

}  // namespace

template <class Slots>
Status BeamStepper::step_core(size_t n_requests, const BeamLogits &logits, const float *scores,
                              Slots &slots) {
  const size_t B = beam_width_;
  const size_t n_slots = n_requests * B;
  const kernels::LogSumExpFn lse = kernels::logsumexp_best();
  // Phase 1: the normalizer of every slot that can offer a candidate, so
  // that a row with NaN / +inf fails the call before anything is written.
  // Phase 2: per request, gather and select into the scratch of the thread
  // that runs it, then hand the winners to slots.keep(). Requests are
  // independent and run on the pool.
  if (z_.size() < n_slots) z_.resize(n_slots);
  for (auto &sc : scratch_) {
    if (sc.heap.size() < B) sc.heap.resize(B);
  }
  auto normalize = [&](size_t r, Scratch &sc) {
    for (size_t i = r * B; i < (r + 1) * B; ++i) {
      if (!(scores[i] > kNegInf) || slots.terminated(i)) continue;
      auto z = normalizer(logits, i, lse);
      if (!z.ok()) {
        sc.status = z.take_status();
        return false;
      }
      z_[i] = z.value();
    }
    return true;
  };
  auto gather = [&](size_t r, Scratch &sc, TopK &top) {
    const size_t base = r * B;
    for (size_t b = 0; b < B; ++b) {
      const size_t slot = base + b;
      const float s = scores[slot];
      if (!(s > kNegInf)) continue;  // dead, an initial duplicate, or NaN
      if (slots.terminated(slot)) {
        top.offer({s, static_cast<int32_t>(b), slots.first_stop(slot), kStateTerminated});
        continue;
      }
      const void *row = logits.row(slot);
      const float z = z_[slot];
      slots.gather(slot, sc, [&](int32_t t, uint32_t next) {
        const float score =
            s + (kernels::load_logit(row, logits.dtype, static_cast<size_t>(t)) - z);
        if (score > kNegInf && top.may_take(score)) {
          top.offer({score, static_cast<int32_t>(b), t, next});
        }
      });
    }
  };
  auto request = [&](size_t r, Scratch &sc) {
    if (!slots.merges(r)) {
      TopK top(sc.heap.data(), B);
      gather(r, sc, top);
      slots.keep(r, sc.heap.data(), top.finish(), nullptr);
      return true;
    }
    // Distinct hypotheses: the best k candidates, merged; when merges leave
    // fewer than B and the heap was full, candidates further down may be
    // distinct: gather again with twice the room (each hypothesis has at
    // most B parents x the tokens spelling the same bytes, so this ends
    // after a few rounds; the heap keeps the largest size reached).
    for (size_t k = B;;) {
      if (sc.heap.size() < k) sc.heap.resize(k);
      TopK top(sc.heap.data(), k);
      gather(r, sc, top);
      const size_t n = top.finish();
      const size_t kept = select_distinct(slots, r, B, sc, n);
      if (kept == B || n < k) {
        slots.keep(r, sc.heap.data(), kept, sc.keys.data());
        return true;
      }
      k *= 2;  // n == k <= the candidates (B x the vocabulary at most): no overflow
    }
  };
  TM_TRY(for_each_request(n_requests, normalize));
  return for_each_request(n_requests, request);
}

namespace {

// Checks the shared arguments of both step forms and n_requests x B.
Status check_step(size_t n_requests, size_t B, const float *scores, const int32_t *parents,
                  const int32_t *tokens, size_t &n_slots) {
  if (n_requests > std::numeric_limits<size_t>::max() / B) {
    return error(Code::kOutOfRange, "n_requests ", n_requests, " x beam_width ", B,
                 " overflows size_t");
  }
  n_slots = n_requests * B;
  if (n_slots == 0) return Status::Ok();
  if (!scores) return error(Code::kInvalidArgument, "scores is NULL");
  if (!parents) return error(Code::kInvalidArgument, "parents is NULL");
  if (!tokens) return error(Code::kInvalidArgument, "tokens is NULL");
  return Status::Ok();
}

// The state-array form's slots: candidates from the trie's rule (of its
// kind: TrieRules), winners written straight to the outputs (request r's
// old states are read before).
struct StateSlots {
  const Trie &trie;
  TrieRules rules;
  size_t B;
  uint32_t *states;
  uint32_t *ends;  // null for a token-path trie without them (and top-k)
  float *scores;
  int32_t *parents, *tokens;

  bool terminated(size_t slot) const { return states[slot] == kStateTerminated; }
  int32_t first_stop(size_t) const { return trie.stop_tokens()[0]; }
  template <class Offer>
  void gather(size_t slot, BeamStepper::Scratch &sc, Offer &&offer) const {
    rules.for_each_candidate(states[slot], sc.allowed, offer);
  }
  // A string set's candidates merge by the string they spell.
  bool merges(size_t) const { return rules.merges_by_node(); }
  Key key(size_t r, BeamCandidate &c) const {
    const void *space = rules.node_space();
    const size_t parent = r * B + static_cast<size_t>(c.beam);
    const uint32_t s = states[parent];
    if (s == kStateTerminated) {  // carried over: the string it ended with, if known
      const uint32_t end = ends[parent];
      return end == kStateFailed ? Key{} : Key{space, end, Key::kFinished};
    }
    if (!rules.is_node(s)) return {};  // FAILED: stop tokens after an unknown string
    if (c.next == kStateTerminated) return {space, s, Key::kFinished};  // a stop token
    const uint32_t next = rules.step_node(s, c.token);
    if (!rules.is_node(next)) {
      c.next = kStateTerminated;
      return {};
    }
    c.next = next;
    return {space, next, Key::kLive};
  }
  void keep(size_t r, BeamCandidate *best, size_t kept, const Key *keys) {
    const size_t base = r * B;
    // A winner whose next state was left to find (a string set's: only the
    // B winners are stepped along their bytes) is stepped now: every
    // winner's parent state is read before any slot is written.
    for (size_t i = 0; i < kept; ++i) {
      if (best[i].next == TrieRules::kNextUnknown) {
        best[i].next = rules.next_state(states[base + best[i].beam], best[i].token);
      }
    }
    for (size_t i = 0; i < B; ++i) {
      if (i < kept) {
        parents[base + i] = best[i].beam;
        tokens[base + i] = best[i].token;
        scores[base + i] = best[i].score;
        states[base + i] = best[i].next;
      } else {
        parents[base + i] = -1;
        tokens[base + i] = -1;
        scores[base + i] = kNegInf;
        states[base + i] = kStateTerminated;
      }
      // The keys were made before this loop, so a carried-over end is read
      // before its slot is written.
      if (ends) {
        ends[base + i] =
            i < kept && keys && keys[i].kind == Key::kFinished ? keys[i].node : kStateFailed;
      }
    }
  }
};

}  // namespace

namespace {

// A string set's ends: each finished slot's is unknown (kStateFailed) or a
// node where a string ends (the index named otherwise).
Status check_ends(const TrieRules &rules, std::span<const uint32_t> states, const uint32_t *ends) {
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i] != kStateTerminated || ends[i] == kStateFailed) continue;
    if (!rules.is_end(ends[i])) {
      return error(Code::kOutOfRange, "ends[", i, "] = ", ends[i],
                   " is neither a node where a string ends nor TREEMASK_STATE_FAILED (unknown)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status BeamStepper::step_states(const Trie &trie, size_t n_requests, const BeamLogits &logits,
                                uint32_t *states, uint32_t *ends, float *scores, int32_t *parents,
                                int32_t *tokens) {
  size_t n_slots = 0;
  TM_TRY(check_step(n_requests, beam_width_, scores, parents, tokens, n_slots));
  if (n_slots == 0) return Status::Ok();
  if (!states) return error(Code::kInvalidArgument, "states is NULL");
  const TrieRules rules(trie, trie.stop_tokens());
  if (rules.merges_by_node() && !ends) {
    return error(Code::kUnsupported,
                 "the beam step of a string set needs the ends of its finished strings, to "
                 "return distinct strings: use treemask_beam_step_strings");
  }
  TM_ASSIGN_OR_RETURN(
      const BeamLogits lv,
      kernels::check_beam_logits(logits, trie.vocab_size(), n_slots, kernels::Where::kHost));
  TM_TRY(check_states(trie, {states, n_slots}));
  if (rules.merges_by_node()) TM_TRY(check_ends(rules, {states, n_slots}, ends));
  // keep() overwrites a request's slots while its candidates were gathered
  // from them: the gather of a request finishes before its keep(), and
  // requests touch disjoint slots.
  StateSlots slots{trie, rules, beam_width_, states, ends, scores, parents, tokens};
  return step_core(n_requests, lv, scores, slots);
}

namespace {

// The batch form's slots: candidates from each slot's matcher (its allowed
// lists, or next_tokens for a matcher in a decoding mode), winners recorded
// for the reorder that follows the selection.
struct MatcherSlots {
  Batch &batch;
  size_t B;
  int32_t *parents, *tokens;
  float *scores;

  bool terminated(size_t slot) const { return batch.matcher(slot)->is_terminated(); }
  int32_t first_stop(size_t slot) const { return batch.matcher(slot)->stop_tokens()[0]; }
  template <class Offer>
  void gather(size_t slot, BeamStepper::Scratch &sc, Offer &&offer) const {
    const Matcher &m = *batch.matcher(slot);
    std::span<const int32_t> first, second;
    if (m.allowed_lists(first, second)) {
      for (const int32_t t : first) offer(t, 0);
      for (const int32_t t : second) offer(t, 0);
      return;
    }
    size_t n = m.next_tokens(sc.allowed.data(), sc.allowed.size());
    if (n > sc.allowed.size()) {
      sc.allowed.resize(n);  // grows once to the largest allowed set
      n = m.next_tokens(sc.allowed.data(), sc.allowed.size());
    }
    for (size_t j = 0; j < n; ++j) offer(sc.allowed[j], 0);
  }
  // A request with a string-set slot merges its candidates by the string
  // they spell (a token-path slot's candidates are never merged).
  bool merges(size_t r) const {
    for (size_t i = r * B; i < (r + 1) * B; ++i) {
      if (batch.matcher(i)->rules().merges_by_node()) return true;
    }
    return false;
  }
  Key key(size_t r, BeamCandidate &c) const {
    const Matcher &m = *batch.matcher(r * B + static_cast<size_t>(c.beam));
    const TrieRules &rules = m.rules();
    if (!rules.merges_by_node()) return {};
    const void *space = rules.node_space();
    const MatcherState &at = m.state();
    if (m.is_terminated()) {  // where it ended; kStateFailed after a closed state
      return rules.is_node(at.node) ? Key{space, at.node, Key::kFinished} : Key{};
    }
    if (at.phase != Phase::kActive) return {};  // closed or failed: an unknown string
    const uint32_t next = rules.step_node(at.node, c.token);
    if (next == kStateTerminated) return {space, at.node, Key::kFinished};
    if (!rules.is_node(next)) return {};
    if (m.options().terminate_without_stop_token && rules.is_leaf(next)) {
      return {space, next, Key::kFinished};  // the matcher ends at a leaf
    }
    return {space, next, Key::kLive};
  }
  void keep(size_t r, const BeamCandidate *best, size_t kept, const Key *) {
    for (size_t i = 0; i < B; ++i) {
      const size_t slot = r * B + i;
      parents[slot] = i < kept ? best[i].beam : -1;
      tokens[slot] = i < kept ? best[i].token : -1;
      scores[slot] = i < kept ? best[i].score : kNegInf;
    }
  }
};

}  // namespace

Status BeamStepper::step_batch(Batch &batch, size_t n_requests, const BeamLogits &logits,
                               float *scores, int32_t *parents, int32_t *tokens) {
  size_t n_slots = 0;
  TM_TRY(check_step(n_requests, beam_width_, scores, parents, tokens, n_slots));
  if (n_slots == 0) return Status::Ok();
  if (n_slots > batch.size()) {
    return error(Code::kInvalidArgument, "n_requests ", n_requests, " x beam_width ", beam_width_,
                 " = ", n_slots, " slots, but the batch has ", batch.size());
  }
  int32_t vocab = 0;
  for (size_t i = 0; i < n_slots; ++i) {
    const Matcher *m = batch.matcher(i);
    if (!m) return error(Code::kInvalidArgument, "slot ", i, " of the batch is empty");
    if (m->stop_tokens().empty()) {
      return error(Code::kInvalidState, "slot ", i, ": the matcher has no stop token");
    }
    vocab = std::max(vocab, m->trie().vocab_size());
  }
  TM_ASSIGN_OR_RETURN(const BeamLogits lv,
                      kernels::check_beam_logits(logits, vocab, n_slots, kernels::Where::kHost));
  const size_t n = batch.size();
  if (sel_scores_.size() < n_slots) {
    sel_parents_.resize(n_slots);
    sel_tokens_.resize(n_slots);
    sel_scores_.resize(n_slots);
  }
  if (src_.size() < n) {
    src_.resize(n);
    accept_.resize(n);
  }
  MatcherSlots slots{batch, beam_width_, sel_parents_.data(), sel_tokens_.data(),
                     sel_scores_.data()};
  TM_TRY(step_core(n_requests, lv, scores, slots));
  // Reorder (clones first; a failure leaves the batch unchanged), then each
  // winner's slot accepts its token (a stop token on a terminated matcher
  // changes nothing). Only then are the outputs written.
  for (size_t i = 0; i < n; ++i) {
    src_[i] = static_cast<int32_t>(i);
    accept_[i] = -1;
  }
  for (size_t i = 0; i < n_slots; ++i) {
    if (sel_parents_[i] < 0) continue;
    src_[i] = static_cast<int32_t>(i / beam_width_ * beam_width_) + sel_parents_[i];
    accept_[i] = sel_tokens_[i];
  }
  TM_TRY(batch.reorder(src_.data(), n));
  std::string rejection;
  TM_TRY(batch.accept(accept_.data(), n, nullptr, &rejection));
  if (!rejection.empty()) {
    return error(Code::kInternal, "beam step: a selected token was rejected (", rejection, ")");
  }
  std::copy(sel_parents_.begin(), sel_parents_.begin() + n_slots, parents);
  std::copy(sel_tokens_.begin(), sel_tokens_.begin() + n_slots, tokens);
  std::copy(sel_scores_.begin(), sel_scores_.begin() + n_slots, scores);
  return Status::Ok();
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
    // A task on the pool must not throw: a matcher's next_tokens may (out
    // of memory in a decoding mode's look-ahead).
    try {
      for (size_t r; !failed.load(std::memory_order_relaxed) &&
                     (r = next_request.fetch_add(1, std::memory_order_relaxed)) < n_requests;) {
        if (!fn(r, sc)) failed.store(true, std::memory_order_relaxed);
      }
    } catch (const std::bad_alloc &) {
      sc.status = error(Code::kOutOfMemory, "out of memory in a beam step");
      failed.store(true, std::memory_order_relaxed);
    } catch (const std::exception &e) {
      sc.status = error(Code::kInternal, "beam step: ", e.what());
      failed.store(true, std::memory_order_relaxed);
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

Status topk_states(const Trie &trie, const uint32_t *states, size_t n_rows, const BeamLogits &view,
                   size_t k, int32_t *out_tokens, float *out_scores, size_t *out_counts) {
  if (n_rows == 0) return Status::Ok();
  if (!states) return error(Code::kInvalidArgument, "states is NULL");
  if (!out_counts) return error(Code::kInvalidArgument, "out_counts is NULL");
  if (k > 0 && (!out_tokens || !out_scores)) {
    return error(Code::kInvalidArgument, "out_tokens and out_scores must not be NULL when k > 0");
  }
  if (k > 0 && n_rows > std::numeric_limits<size_t>::max() / k) {
    return error(Code::kOutOfRange, "n_rows ", n_rows, " x k ", k, " overflows size_t");
  }
  // k = 0 reads no logits (the device twin does not either).
  TM_ASSIGN_OR_RETURN(const BeamLogits logits,
                      kernels::check_beam_logits(view, trie.vocab_size(), k > 0 ? n_rows : 0,
                                                 kernels::Where::kHost));
  TM_TRY(check_states(trie, {states, n_rows}));
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
  // A terminated state allows its stop tokens, as fill does: gather it as
  // FAILED (stop tokens only).
  std::vector<uint32_t> one(1);
  StateSlots slots{
      trie, TrieRules(trie, trie.stop_tokens()), 1, one.data(), nullptr, nullptr, nullptr, nullptr};
  BeamStepper::Scratch unused;
  for (size_t i = 0; i < n_rows; ++i) {
    TopK top(heap, k);
    if (k > 0) {
      auto z = normalizer(logits, i, lse);
      if (!z.ok()) return z.take_status();
      one[0] = states[i] == kStateTerminated ? kStateFailed : states[i];
      const void *row = logits.row(i);
      slots.gather(0, unused, [&](int32_t t, uint32_t) {
        const float score =
            kernels::load_logit(row, logits.dtype, static_cast<size_t>(t)) - z.value();
        if (score > kNegInf && top.may_take(score)) top.offer({score, 0, t, 0});
      });
    }
    const size_t kept = top.finish();
    for (size_t j = 0; j < k; ++j) {  // past the count: token -1, score -inf (treemask.h)
      out_tokens[i * k + j] = j < kept ? heap[j].token : -1;
      out_scores[i * k + j] = j < kept ? heap[j].score : kNegInf;
    }
    out_counts[i] = kept;
  }
  return Status::Ok();
}

}  // namespace treemask
