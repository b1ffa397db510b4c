// The extern "C" entry points of treemask_cuda.h: host-side argument checks
// and a catch-all per call; the CUDA bridge does the rest. Compiled into
// every libtreemask: without CUDA the bridge answers kUnsupported.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstdint>

#include "capi/shim.h"
#include "kernels/cuda/bridge.h"
#include "treemask/treemask_cuda.h"

using treemask::Code;
using treemask::error;
using treemask::Result;
using treemask::Status;
using treemask::capi::guard;
namespace bridge = treemask::cuda;

namespace {

bridge::DeviceTrie *to_device_trie(treemask_cuda_trie *t) {
  return reinterpret_cast<bridge::DeviceTrie *>(t);
}
const bridge::DeviceTrie *to_device_trie(const treemask_cuda_trie *t) {
  return reinterpret_cast<const bridge::DeviceTrie *>(t);
}

Status require_built() {
  if (bridge::built()) return Status::Ok();
  return error(Code::kUnsupported,
               "this libtreemask was built without CUDA (meson option cuda; nvcc not found?)");
}

Status check_dtype(int32_t dtype) {
  if (dtype >= 0 && dtype <= 2) return Status::Ok();
  return error(Code::kInvalidArgument, "unknown dtype ", dtype,
               " (expected 0 = TREEMASK_F32, 1 = TREEMASK_F16, 2 = TREEMASK_BF16)");
}

Status check_failure_policy(int32_t policy) {
  if (policy >= TREEMASK_FAILURE_REJECT && policy <= TREEMASK_FAILURE_STICKY_ERROR) {
    return Status::Ok();
  }
  return error(Code::kInvalidArgument, "unknown failure_policy ", policy,
               " (expected 0 = REJECT, 1 = FAIL_CLOSED, 2 = STICKY_ERROR)");
}

// A device array of n_rows rows of `row` elements (of elem_bytes) spaced
// `stride` apart must be addressable with signed 64-bit offsets.
Status check_extent(const char *name, size_t n_rows, size_t stride, size_t row, size_t elem_bytes) {
  if (n_rows == 0) return Status::Ok();
  size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(n_rows - 1, stride, &elements) ||
      __builtin_add_overflow(elements, row, &elements) ||
      __builtin_mul_overflow(elements, elem_bytes, &bytes) || bytes > size_t{INT64_MAX}) {
    return error(Code::kInvalidArgument, name, " of ", n_rows, " rows with stride ", stride,
                 " elements is too large to address");
  }
  return Status::Ok();
}

size_t element_bytes(int32_t dtype) { return dtype == 0 ? 4 : 2; }

// The checks every masking call shares, after checking that CUDA is built.
Result<bridge::LogitsArg> logits_arg(void *logits, int32_t dtype, size_t n_rows,
                                     size_t logits_row_stride, size_t logits_width,
                                     int32_t vocab_size) {
  TM_TRY(require_built());
  TM_REQUIRE_ARG(logits);
  TM_TRY(check_dtype(dtype));
  if (logits_row_stride < logits_width) {
    return error(Code::kInvalidArgument, "logits_row_stride ", logits_row_stride,
                 " is smaller than logits_width ", logits_width);
  }
  if (vocab_size < 1 || static_cast<uint64_t>(vocab_size) > logits_width) {
    return error(Code::kInvalidArgument, "vocab_size ", vocab_size,
                 " is outside [1, logits_width=", logits_width, "]");
  }
  TM_TRY(check_extent("logits", n_rows, logits_row_stride, logits_width, element_bytes(dtype)));
  return bridge::LogitsArg{logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size};
}

Status check_bitmask_words(size_t bitmask_row_words, int32_t vocab_size, size_t n_rows) {
  const size_t needed = treemask::words_for_vocab(vocab_size);
  if (bitmask_row_words < needed) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", bitmask_row_words,
                 " is too small: vocab_size ", vocab_size, " needs ", needed);
  }
  return check_extent("bitmask", n_rows, bitmask_row_words, bitmask_row_words, 4);
}

// True when the selection names no row, so nothing is enqueued.
bool selects_nothing(size_t n_rows, const int32_t *indices, size_t n_indices) {
  return n_rows == 0 || (indices && n_indices == 0);
}

// The checks both step variants share, after checking that CUDA is built.
Result<bridge::StepArg> step_arg(const treemask_cuda_trie *dev_trie, uint32_t *states,
                                 const int32_t *tokens, size_t n_rows, int32_t failure_policy,
                                 uint8_t *accepted) {
  TM_TRY(require_built());
  TM_REQUIRE_ARG(dev_trie);
  TM_REQUIRE_ARG(states);
  TM_TRY(check_failure_policy(failure_policy));
  return bridge::StepArg{to_device_trie(dev_trie), states,  tokens, n_rows,
                         failure_policy,           accepted};
}

// A device step's logits: read, dtype checked, n_columns and row_stride
// resolved against the trie's vocab_size, the rows' extent addressable.
Result<bridge::BeamLogitsArg> beam_logits_arg(const treemask_logits *in, int32_t vocab_size,
                                              size_t n_rows) {
  if (!in) return error(Code::kInvalidArgument, "logits is NULL");
  treemask_logits o;
  treemask_logits_init(&o);
  TM_TRY(treemask::capi::read_options(in, o, "treemask_logits"));
  const int32_t dtype = o.dtype;
  TM_TRY(check_dtype(dtype));
  bridge::BeamLogitsArg a;
  a.data = o.data;
  a.dtype = dtype;
  a.n_columns = o.n_columns != 0 ? o.n_columns : static_cast<size_t>(vocab_size);
  a.row_stride = o.row_stride != 0 ? o.row_stride : a.n_columns;
  a.log_probs = o.log_probs;
  if (a.n_columns < static_cast<size_t>(vocab_size)) {
    return error(Code::kInvalidArgument, "logits n_columns ", a.n_columns,
                 " is smaller than the trie's vocab_size ", vocab_size);
  }
  if (a.row_stride < a.n_columns) {
    return error(Code::kInvalidArgument, "logits row_stride ", a.row_stride,
                 " is smaller than n_columns ", a.n_columns);
  }
  if (n_rows > 0 && !a.data) return error(Code::kInvalidArgument, "logits data is NULL");
  TM_TRY(check_extent("logits", n_rows, a.row_stride, a.n_columns, element_bytes(dtype)));
  return a;
}

}  // namespace

extern "C" {

bool treemask_cuda_available(void) {
  try {
    return bridge::available();
  } catch (...) {
    return false;
  }
}

treemask_status treemask_cuda_apply_token_bitmask(void *logits, int32_t dtype, size_t n_rows,
                                                  size_t logits_row_stride, size_t logits_width,
                                                  const int32_t *bitmask, size_t bitmask_row_words,
                                                  size_t n_bitmask_rows, int32_t vocab_size,
                                                  const int32_t *indices, size_t n_indices,
                                                  void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(
        const bridge::LogitsArg l,
        logits_arg(logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size));
    TM_REQUIRE_ARG(bitmask);
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    if (!indices && n_bitmask_rows < n_rows) {
      return error(Code::kBufferTooSmall, "the bitmask has ", n_bitmask_rows,
                   " rows but the logits have ", n_rows,
                   " (without indices every logits row is masked with its bitmask row)");
    }
    TM_TRY(check_bitmask_words(bitmask_row_words, vocab_size, n_bitmask_rows));
    if (selects_nothing(n_rows, indices, n_indices) || n_bitmask_rows == 0) return Status::Ok();
    return bridge::apply_bitmask(l, {indices, n_indices}, bitmask, bitmask_row_words,
                                 n_bitmask_rows, stream);
  });
}

treemask_status treemask_cuda_apply_token_candidates(void *logits, int32_t dtype, size_t n_rows,
                                                     size_t logits_row_stride, size_t logits_width,
                                                     const int32_t *row_offsets,
                                                     const int32_t *candidates, size_t n_candidates,
                                                     int32_t vocab_size, const int32_t *indices,
                                                     size_t n_indices, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(
        const bridge::LogitsArg l,
        logits_arg(logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size));
    TM_REQUIRE_ARG(row_offsets);
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    TM_TRY(treemask::capi::check_count("n_rows", n_rows, sizeof(int32_t), 1));
    if (n_candidates > 0 && !candidates) {
      return error(Code::kInvalidArgument, "candidates is NULL but n_candidates is ", n_candidates);
    }
    if (n_candidates > size_t{INT64_MAX} / sizeof(int32_t)) {
      return error(Code::kInvalidArgument, "n_candidates ", n_candidates,
                   " is too large to address");
    }
    if (selects_nothing(n_rows, indices, n_indices)) return Status::Ok();
    return bridge::apply_candidates(l, {indices, n_indices}, row_offsets, candidates, n_candidates,
                                    stream);
  });
}

treemask_status treemask_cuda_trie_upload(const treemask_trie *trie, void *stream,
                                          treemask_cuda_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(require_built());
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(out);
    TM_ASSIGN_OR_RETURN(bridge::DeviceTrie * uploaded,
                        bridge::upload_trie(*treemask::capi::to_trie(trie), stream));
    *out = reinterpret_cast<treemask_cuda_trie *>(uploaded);
    return Status::Ok();
  });
}

void treemask_cuda_trie_free(treemask_cuda_trie *dev_trie) {
  bridge::free_trie(to_device_trie(dev_trie));
}

treemask_status treemask_cuda_trie_advance_fill_bitmask(const treemask_cuda_trie *dev_trie,
                                                        uint32_t *states, const int32_t *tokens,
                                                        size_t n_rows, int32_t failure_policy,
                                                        uint8_t *accepted, int32_t *bitmask,
                                                        size_t bitmask_row_words, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(const bridge::StepArg step,
                        step_arg(dev_trie, states, tokens, n_rows, failure_policy, accepted));
    TM_REQUIRE_ARG(bitmask);
    TM_TRY(check_bitmask_words(bitmask_row_words,
                               bridge::trie_vocab_size(*to_device_trie(dev_trie)), n_rows));
    if (n_rows == 0) return Status::Ok();
    return bridge::advance_fill_bitmask(step, bitmask, bitmask_row_words, stream);
  });
}

treemask_status treemask_cuda_trie_advance_mask_logits(const treemask_cuda_trie *dev_trie,
                                                       uint32_t *states, const int32_t *tokens,
                                                       size_t n_rows, int32_t failure_policy,
                                                       uint8_t *accepted, void *logits,
                                                       int32_t dtype, size_t logits_row_stride,
                                                       size_t logits_width, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(const bridge::StepArg step,
                        step_arg(dev_trie, states, tokens, n_rows, failure_policy, accepted));
    const int32_t vocab_size = bridge::trie_vocab_size(*to_device_trie(dev_trie));
    if (logits && logits_width < static_cast<uint64_t>(vocab_size)) {
      return error(Code::kInvalidArgument, "logits_width ", logits_width,
                   " is smaller than the trie's vocab_size ", vocab_size);
    }
    TM_ASSIGN_OR_RETURN(
        const bridge::LogitsArg l,
        logits_arg(logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size));
    if (n_rows == 0) return Status::Ok();
    return bridge::advance_mask_logits(step, l, stream);
  });
}

treemask_status treemask_cuda_beam_workspace_size(size_t n_requests, size_t beam_width,
                                                  size_t *out_bytes) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(require_built());
    TM_REQUIRE_ARG(out_bytes);
    TM_ASSIGN_OR_RETURN(*out_bytes, bridge::beam_workspace_bytes(n_requests, beam_width));
    return Status::Ok();
  });
}

treemask_status treemask_cuda_beam_step(const treemask_cuda_trie *dev_trie, size_t n_requests,
                                        size_t beam_width, const treemask_logits *logits,
                                        uint32_t *states, float *scores, int32_t *parents,
                                        int32_t *tokens, void *workspace, size_t workspace_bytes,
                                        uint32_t *n_bad_rows, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(require_built());
    TM_REQUIRE_ARG(dev_trie);
    TM_ASSIGN_OR_RETURN(const size_t needed, bridge::beam_workspace_bytes(n_requests, beam_width));
    (void)needed;
    const size_t n_slots = n_requests * beam_width;
    bridge::BeamArg step;
    step.trie = to_device_trie(dev_trie);
    step.n_requests = n_requests;
    step.beam_width = beam_width;
    TM_ASSIGN_OR_RETURN(step.logits,
                        beam_logits_arg(logits, bridge::trie_vocab_size(*step.trie), n_slots));
    if (n_slots > 0) {
      TM_REQUIRE_ARG(states);
      TM_REQUIRE_ARG(scores);
      TM_REQUIRE_ARG(parents);
      TM_REQUIRE_ARG(tokens);
      TM_REQUIRE_ARG(workspace);
    }
    step.states = states;
    step.scores = scores;
    step.parents = parents;
    step.tokens = tokens;
    step.workspace = workspace;
    step.workspace_bytes = workspace_bytes;
    step.n_bad_rows = n_bad_rows;
    return bridge::beam_step(step, stream);
  });
}

treemask_status treemask_cuda_trie_topk_states(const treemask_cuda_trie *dev_trie,
                                               const uint32_t *states, size_t n_rows,
                                               const treemask_logits *logits, size_t k,
                                               int32_t *out_tokens, float *out_scores,
                                               int32_t *out_counts, uint32_t *n_bad_rows,
                                               void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(require_built());
    TM_REQUIRE_ARG(dev_trie);
    bridge::TopkArg topk;
    topk.trie = to_device_trie(dev_trie);
    TM_ASSIGN_OR_RETURN(topk.logits, beam_logits_arg(logits, bridge::trie_vocab_size(*topk.trie),
                                                     k > 0 ? n_rows : 0));
    if (n_rows > 0) {
      TM_REQUIRE_ARG(states);
      TM_REQUIRE_ARG(out_counts);
      if (k > 0 && (!out_tokens || !out_scores)) {
        return error(Code::kInvalidArgument,
                     "out_tokens and out_scores must not be NULL when k > 0");
      }
      if (k > 0 && n_rows > size_t{INT64_MAX} / sizeof(float) / k) {
        return error(Code::kInvalidArgument, "n_rows ", n_rows, " x k ", k,
                     " is too large to address");
      }
    }
    topk.states = states;
    topk.n_rows = n_rows;
    topk.k = k;
    topk.out_tokens = out_tokens;
    topk.out_scores = out_scores;
    topk.out_counts = out_counts;
    topk.n_bad_rows = n_bad_rows;
    return bridge::trie_topk(topk, stream);
  });
}

}  // extern "C"
