// The extern "C" entry points of treemask_cuda.h: the argument checks the CPU
// twins use too (kernels/checks.h) and a catch-all per call; the CUDA bridge
// does the rest. Compiled into
// every libtreemask: without CUDA the bridge answers kUnsupported.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "capi/shim.h"
#include "kernels/checks.h"
#include "kernels/cuda/bridge.h"
#include "rules/policy.h"
#include "rules/trie_rules.h"
#include "treemask/treemask_cuda.h"

using treemask::Code;
using treemask::error;
using treemask::Result;
using treemask::Status;
using treemask::capi::guard;
namespace bridge = treemask::cuda;
namespace launch = treemask::cuda::launch;

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

using treemask::check_failure_policy;
using treemask::kernels::check_extent;
using treemask::kernels::Where;

// The pointer checks that flags ask for (treemask_cuda.h); unknown bits are
// refused by name, so that a caller built against a later header fails
// loudly instead of losing a flag.
Result<bridge::Pointers> pointers_of(uint32_t flags) {
  const uint32_t unknown = flags & ~uint32_t{TREEMASK_CUDA_CALLER_CHECKED_POINTERS};
  if (unknown != 0) {
    return error(Code::kInvalidArgument, "flags ", treemask::Hex{flags}, " has unknown bits ",
                 treemask::Hex{unknown}, " (known: TREEMASK_CUDA_CALLER_CHECKED_POINTERS = 0x1)");
  }
  return (flags & TREEMASK_CUDA_CALLER_CHECKED_POINTERS) ? bridge::Pointers::kCallerChecked
                                                         : bridge::Pointers::kQuery;
}

// The device view of checked logits rows: the kernels mask columns from
// vocab_size on, so they take min(vocab_size, width) (what the CPU twin
// computes), which keeps the semantics of a vocab_size past the width.
launch::Logits device_logits(const treemask::kernels::LogitsRows &r) {
  launch::Logits l;
  l.data = r.logits;
  l.dtype = r.dtype;
  l.n_rows = r.n_rows;
  l.row_stride = r.row_stride;
  l.width = r.width;
  l.vocab_size = static_cast<int32_t>(r.valid_columns());
  return l;
}

// The logits of a state-array step over dev_trie (not null: the caller
// checked it): the width must hold the trie's vocabulary.
Result<launch::Logits> step_logits_arg(const treemask_cuda_trie *dev_trie, void *logits,
                                       int32_t dtype, size_t n_rows, size_t logits_row_stride,
                                       size_t logits_width) {
  const int32_t vocab_size = bridge::trie_vocab_size(*to_device_trie(dev_trie));
  if (logits && logits_width < static_cast<uint64_t>(vocab_size)) {
    return error(Code::kInvalidArgument, "logits_width ", logits_width,
                 " is smaller than the trie's vocab_size ", vocab_size);
  }
  const treemask::kernels::LogitsRows r{logits,       dtype,      n_rows,  logits_row_stride,
                                        logits_width, vocab_size, nullptr, 0};
  TM_TRY(treemask::kernels::check_logits_rows(r, Where::kDevice));
  if (n_rows > 0 && !logits) return error(Code::kInvalidArgument, "logits is NULL");
  return device_logits(r);
}

Status check_bitmask_words(size_t bitmask_row_words, int32_t vocab_size, size_t n_rows) {
  const size_t needed = treemask::words_for_vocab(vocab_size);
  if (bitmask_row_words < needed) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", bitmask_row_words, " < ", needed,
                 ", the words covering the trie's vocab_size ", vocab_size);
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

// A device step's logits: read, then the CPU step's check
// (check_beam_logits) for device memory.
Result<treemask::kernels::BeamLogits> beam_logits_arg(const treemask_logits *in, int32_t vocab_size,
                                                      size_t n_rows) {
  if (!in) return error(Code::kInvalidArgument, "logits is NULL");
  treemask_logits o;
  treemask_logits_init(&o);
  TM_TRY(treemask::capi::read_options(in, o, "treemask_logits"));
  treemask::kernels::BeamLogits a;
  a.data = o.data;
  a.dtype = static_cast<treemask::kernels::DType>(o.dtype);  // checked below
  a.n_columns = o.n_columns;
  a.row_stride = o.row_stride;
  a.log_probs = o.log_probs;
  return treemask::kernels::check_beam_logits(a, vocab_size, n_rows, Where::kDevice);
}

// A call's token rows: struct read, row_stride resolved, arrays present
// where rows and ids exist, extent addressable.
Result<launch::TokenRows> token_rows_arg(const treemask_cuda_token_rows *in, const char *name) {
  treemask_cuda_token_rows o;
  treemask_cuda_token_rows_init(&o);
  TM_TRY(treemask::capi::read_options(in, o, "treemask_cuda_token_rows"));
  launch::TokenRows a{
      o.tokens, o.n_rows, o.n_tokens, o.row_stride != 0 ? o.row_stride : o.n_tokens,
      o.states, o.keys,   o.copy_to,  o.copy_stride != 0 ? o.copy_stride : o.n_tokens};
  if (a.row_stride < a.n_tokens) {
    return error(Code::kInvalidArgument, name, "->row_stride ", a.row_stride,
                 " is smaller than n_tokens ", a.n_tokens);
  }
  if (a.copy_to && a.copy_stride < a.n_tokens) {
    return error(Code::kInvalidArgument, name, "->copy_stride ", a.copy_stride,
                 " is smaller than n_tokens ", a.n_tokens);
  }
  if (a.n_rows == 0) return a;
  if (a.n_tokens > 0 && !a.tokens) return error(Code::kInvalidArgument, name, "->tokens is NULL");
  if (!a.states) return error(Code::kInvalidArgument, name, "->states is NULL");
  if (!a.keys) return error(Code::kInvalidArgument, name, "->keys is NULL");
  TM_TRY(check_extent(name, a.n_rows, a.row_stride, a.n_tokens, sizeof(int64_t)));
  TM_TRY(treemask::capi::check_count(name, a.n_rows, sizeof(uint64_t)));
  if (a.copy_to) TM_TRY(check_extent(name, a.n_rows, a.copy_stride, a.n_tokens, sizeof(int64_t)));
  return a;
}

// The bytes rows of `stride` elements span: [p, p + span).
size_t span_bytes(size_t n_rows, size_t stride, size_t width, size_t elem) {
  return n_rows == 0 || width == 0 ? 0 : ((n_rows - 1) * stride + width) * elem;
}

bool overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// The copy of this call's ids is written while other rows' warps read the
// ids and prev's: it must overlap neither.
Status check_copy_to(const launch::TokenRows &rows, const launch::TokenRows *prev) {
  if (!rows.copy_to || rows.n_rows == 0) return Status::Ok();
  const size_t copy = span_bytes(rows.n_rows, rows.copy_stride, rows.n_tokens, sizeof(int64_t));
  if (overlap(rows.copy_to, copy, rows.tokens,
              span_bytes(rows.n_rows, rows.row_stride, rows.n_tokens, sizeof(int64_t)))) {
    return error(Code::kInvalidArgument, "rows->copy_to overlaps rows->tokens");
  }
  if (prev &&
      overlap(rows.copy_to, copy, prev->tokens,
              span_bytes(prev->n_rows, prev->row_stride, prev->n_tokens, sizeof(int64_t)))) {
    return error(Code::kInvalidArgument,
                 "rows->copy_to overlaps prev->tokens (keep two copies and alternate)");
  }
  return Status::Ok();
}

// The rows of a follow_rows call, and prev's.
struct FollowArgs {
  launch::TokenRows rows;
  launch::TokenRows prev;
  bool has_prev = false;
};

Result<FollowArgs> follow_args(const treemask_cuda_trie *dev_trie,
                               const treemask_cuda_token_rows *prev,
                               const treemask_cuda_token_rows *rows, int32_t failure_policy) {
  TM_TRY(require_built());
  TM_REQUIRE_ARG(dev_trie);
  TM_REQUIRE_ARG(rows);
  TM_TRY(check_failure_policy(failure_policy));
  FollowArgs a;
  TM_ASSIGN_OR_RETURN(a.rows, token_rows_arg(rows, "rows"));
  if (prev) {
    TM_ASSIGN_OR_RETURN(a.prev, token_rows_arg(prev, "prev"));
    a.has_prev = true;
  }
  TM_TRY(check_copy_to(a.rows, a.has_prev ? &a.prev : nullptr));
  return a;
}

}  // namespace

extern "C" {

void treemask_cuda_token_rows_init(treemask_cuda_token_rows *rows) {
  if (!rows) return;
  std::memset(static_cast<void *>(rows), 0, sizeof(*rows));
  rows->struct_size = sizeof(*rows);
}

bool treemask_cuda_available(void) {
  try {
    return bridge::available();
  } catch (...) {
    return false;
  }
}

namespace {

// The two bitmask apply calls (the stable one passes flags 0); errors are
// reported under the name of the call made.
treemask_status apply_token_bitmask(const char *function, void *logits, int32_t dtype,
                                    size_t n_rows, size_t logits_row_stride, size_t logits_width,
                                    const int32_t *bitmask, size_t bitmask_row_words,
                                    size_t n_bitmask_rows, int32_t vocab_size,
                                    const int32_t *indices, size_t n_indices, uint32_t flags,
                                    void *stream) {
  return guard(function, [&]() -> Status {
    TM_TRY(require_built());
    TM_ASSIGN_OR_RETURN(const bridge::Pointers pointers, pointers_of(flags));
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    treemask::kernels::BitmaskApply a;
    static_cast<treemask::kernels::LogitsRows &>(a) = {
        logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size, indices, n_indices};
    a.bitmask = reinterpret_cast<const uint32_t *>(bitmask);
    a.bitmask_row_words = bitmask_row_words;
    a.bitmask_rows = n_bitmask_rows;
    TM_TRY(treemask::kernels::check_bitmask_apply(a, Where::kDevice));
    if (selects_nothing(n_rows, indices, n_indices) || n_bitmask_rows == 0 || logits_width == 0) {
      return Status::Ok();
    }
    // The bitmask's rows bound the rows an index may name (xgrammar's
    // semantics); the device skips an index outside them.
    return bridge::apply_bitmask(
        device_logits(a),
        launch::Rows::select(indices, n_indices, std::min(n_rows, n_bitmask_rows)), bitmask,
        bitmask_row_words, pointers, stream);
  });
}

}  // namespace

treemask_status treemask_cuda_apply_token_bitmask(void *logits, int32_t dtype, size_t n_rows,
                                                  size_t logits_row_stride, size_t logits_width,
                                                  const int32_t *bitmask, size_t bitmask_row_words,
                                                  size_t n_bitmask_rows, int32_t vocab_size,
                                                  const int32_t *indices, size_t n_indices,
                                                  void *stream) {
  return apply_token_bitmask(__func__, logits, dtype, n_rows, logits_row_stride, logits_width,
                             bitmask, bitmask_row_words, n_bitmask_rows, vocab_size, indices,
                             n_indices, 0, stream);
}

treemask_status treemask_cuda_apply_token_bitmask_flags(
    void *logits, int32_t dtype, size_t n_rows, size_t logits_row_stride, size_t logits_width,
    const int32_t *bitmask, size_t bitmask_row_words, size_t n_bitmask_rows, int32_t vocab_size,
    const int32_t *indices, size_t n_indices, uint32_t flags, void *stream) {
  return apply_token_bitmask(__func__, logits, dtype, n_rows, logits_row_stride, logits_width,
                             bitmask, bitmask_row_words, n_bitmask_rows, vocab_size, indices,
                             n_indices, flags, stream);
}

treemask_status treemask_cuda_apply_token_candidates(void *logits, int32_t dtype, size_t n_rows,
                                                     size_t logits_row_stride, size_t logits_width,
                                                     const int32_t *row_offsets,
                                                     const int32_t *candidates, size_t n_candidates,
                                                     int32_t vocab_size, const int32_t *indices,
                                                     size_t n_indices, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_TRY(require_built());
    TM_TRY(treemask::capi::check_count("n_indices", n_indices, sizeof(int32_t)));
    TM_TRY(treemask::capi::check_count("n_rows", n_rows, sizeof(int32_t), 1));
    treemask::kernels::CandidateApply a;
    static_cast<treemask::kernels::LogitsRows &>(a) = {
        logits, dtype, n_rows, logits_row_stride, logits_width, vocab_size, indices, n_indices};
    a.row_offsets = row_offsets;
    a.tokens = candidates;
    a.n_candidates = n_candidates;
    TM_TRY(treemask::kernels::check_candidate_apply(a, Where::kDevice));
    if (selects_nothing(n_rows, indices, n_indices) || logits_width == 0) return Status::Ok();
    return bridge::apply_candidates(device_logits(a),
                                    launch::Rows::select(indices, n_indices, n_rows), row_offsets,
                                    candidates, n_candidates, stream);
  });
}

treemask_status treemask_cuda_trie_upload(const treemask_trie *trie, void *stream,
                                          treemask_cuda_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(out);
    // The device steps implement the plain rule only.
    TM_TRY(treemask::check_supported(*treemask::capi::to_trie(trie),
                                     treemask::TrieFeature::kDeviceSteps, "uploading to a device"));
    TM_TRY(require_built());
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
    TM_ASSIGN_OR_RETURN(const launch::Logits l, step_logits_arg(dev_trie, logits, dtype, n_rows,
                                                                logits_row_stride, logits_width));
    if (n_rows == 0) return Status::Ok();
    return bridge::advance_mask_logits(step, l, stream);
  });
}

treemask_status treemask_cuda_trie_advance_states(const treemask_cuda_trie *dev_trie,
                                                  uint32_t *states, const int32_t *tokens,
                                                  size_t n_rows, int32_t failure_policy,
                                                  uint8_t *accepted, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(const bridge::StepArg step,
                        step_arg(dev_trie, states, tokens, n_rows, failure_policy, accepted));
    TM_REQUIRE_ARG(tokens);
    if (n_rows == 0) return Status::Ok();
    return bridge::advance_states(step, stream);
  });
}

treemask_status treemask_cuda_trie_follow_rows(const treemask_cuda_trie *dev_trie,
                                               const treemask_cuda_token_rows *prev,
                                               const treemask_cuda_token_rows *rows,
                                               int32_t failure_policy, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(const FollowArgs a, follow_args(dev_trie, prev, rows, failure_policy));
    if (a.rows.n_rows == 0) return Status::Ok();
    return bridge::follow_rows(*to_device_trie(dev_trie), a.has_prev ? &a.prev : nullptr, a.rows,
                               failure_policy, stream);
  });
}

treemask_status treemask_cuda_trie_follow_rows_mask_logits(
    const treemask_cuda_trie *dev_trie, const treemask_cuda_token_rows *prev,
    const treemask_cuda_token_rows *rows, int32_t failure_policy, const void *scores,
    size_t scores_row_stride, void *logits, int32_t dtype, size_t logits_row_stride,
    size_t logits_width, int32_t finished_token, uint32_t flags, void *stream) {
  return guard(__func__, [&]() -> Status {
    TM_ASSIGN_OR_RETURN(const FollowArgs a, follow_args(dev_trie, prev, rows, failure_policy));
    const int32_t vocab_size = bridge::trie_vocab_size(*to_device_trie(dev_trie));
    if (finished_token < -1 || finished_token >= vocab_size) {
      return error(Code::kInvalidArgument, "finished_token ", finished_token,
                   " is neither -1 nor a token in [0, ", vocab_size, ")");
    }
    TM_ASSIGN_OR_RETURN(const bridge::Pointers pointers, pointers_of(flags));
    const size_t n_rows = a.rows.n_rows;
    TM_ASSIGN_OR_RETURN(launch::Logits l, step_logits_arg(dev_trie, logits, dtype, n_rows,
                                                          logits_row_stride, logits_width));
    if (scores && scores != logits) {
      const size_t stride = scores_row_stride != 0 ? scores_row_stride : logits_width;
      if (n_rows > 1 && stride < logits_width) {
        return error(Code::kInvalidArgument, "scores_row_stride ", stride,
                     " is smaller than logits_width ", logits_width);
      }
      const size_t elem = treemask::kernels::dtype_bytes(l.dtype);
      TM_TRY(check_extent("scores", n_rows, stride, logits_width, elem));
      if (overlap(scores, span_bytes(n_rows, stride, logits_width, elem), logits,
                  span_bytes(n_rows, l.row_stride, logits_width, elem))) {
        return error(Code::kInvalidArgument,
                     "scores overlaps logits (pass the same pointer, or NULL, to mask in place)");
      }
      l.source = scores;
      l.source_stride = stride;
    } else if (scores && scores_row_stride != 0 && n_rows > 1 &&
               scores_row_stride != l.row_stride) {
      return error(Code::kInvalidArgument, "scores is logits but scores_row_stride ",
                   scores_row_stride, " is not logits_row_stride ", l.row_stride);
    }
    if (n_rows == 0) return Status::Ok();
    return bridge::follow_rows_mask_logits(*to_device_trie(dev_trie),
                                           a.has_prev ? &a.prev : nullptr, a.rows, failure_policy,
                                           finished_token, l, pointers, stream);
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

namespace {

treemask_status beam_step(const char *function, const treemask_cuda_trie *dev_trie,
                          size_t n_requests, size_t beam_width, const treemask_logits *logits,
                          uint32_t *states, float *scores, int32_t *parents, int32_t *tokens,
                          void *workspace, size_t workspace_bytes, uint32_t *n_bad_rows,
                          uint32_t flags, void *stream) {
  return guard(function, [&]() -> Status {
    TM_TRY(require_built());
    TM_REQUIRE_ARG(dev_trie);
    TM_ASSIGN_OR_RETURN(const bridge::Pointers pointers, pointers_of(flags));
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
    step.state = {states, scores, parents, tokens};
    step.workspace = workspace;
    step.workspace_bytes = workspace_bytes;
    step.n_bad_rows = n_bad_rows;
    step.pointers = pointers;
    return bridge::beam_step(step, stream);
  });
}

}  // namespace

treemask_status treemask_cuda_beam_step(const treemask_cuda_trie *dev_trie, size_t n_requests,
                                        size_t beam_width, const treemask_logits *logits,
                                        uint32_t *states, float *scores, int32_t *parents,
                                        int32_t *tokens, void *workspace, size_t workspace_bytes,
                                        uint32_t *n_bad_rows, void *stream) {
  return beam_step(__func__, dev_trie, n_requests, beam_width, logits, states, scores, parents,
                   tokens, workspace, workspace_bytes, n_bad_rows, 0, stream);
}

treemask_status treemask_cuda_beam_step_flags(const treemask_cuda_trie *dev_trie, size_t n_requests,
                                              size_t beam_width, const treemask_logits *logits,
                                              uint32_t *states, float *scores, int32_t *parents,
                                              int32_t *tokens, void *workspace,
                                              size_t workspace_bytes, uint32_t *n_bad_rows,
                                              uint32_t flags, void *stream) {
  return beam_step(__func__, dev_trie, n_requests, beam_width, logits, states, scores, parents,
                   tokens, workspace, workspace_bytes, n_bad_rows, flags, stream);
}

treemask_status treemask_cuda_trie_topk_states(const treemask_cuda_trie *dev_trie,
                                               const uint32_t *states, size_t n_rows,
                                               const treemask_logits *logits, size_t k,
                                               int32_t *out_tokens, float *out_scores,
                                               size_t *out_counts, uint32_t *n_bad_rows,
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
