// The extern "C" entry points of treemask.h section 8 (beam step and
// top-k): argument checks, conversion, and a catch-all per call.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "batch/batch.h"
#include "batch/beam_step.h"
#include "capi/shim.h"
#include "kernels/cpu/beam.h"
#include "matcher/matcher.h"

using treemask::BeamStepper;
using treemask::Code;
using treemask::Result;
using treemask::Status;
using treemask::capi::guard;
using treemask::capi::to_trie;
using treemask::kernels::BeamLogits;

namespace {

BeamStepper *to_beam(treemask_beam *b) { return reinterpret_cast<BeamStepper *>(b); }

Result<BeamLogits> beam_logits(const treemask_logits *in) {
  if (!in) return treemask::error(Code::kInvalidArgument, "logits is NULL");
  treemask_logits o;
  treemask_logits_init(&o);
  TM_TRY(treemask::capi::read_options(in, o, "treemask_logits"));
  BeamLogits v;
  v.data = o.data;
  v.dtype = static_cast<treemask::kernels::DType>(o.dtype);  // checked by check_beam_logits
  v.n_columns = o.n_columns;  // 0: resolved against the vocabulary by the core
  v.row_stride = o.row_stride;
  v.log_probs = o.log_probs;
  return v;
}

}  // namespace

extern "C" {

void treemask_logits_init(treemask_logits *logits) {
  if (!logits) return;
  std::memset(static_cast<void *>(logits), 0, sizeof(*logits));
  logits->struct_size = sizeof(*logits);
  logits->dtype = TREEMASK_F32;
}

void treemask_beam_options_init(treemask_beam_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
  opts->beam_width = 1;
  opts->n_threads = 1;
}

treemask_status treemask_beam_create(const treemask_beam_options *opts, treemask_beam **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(opts);
    TM_REQUIRE_ARG(out);
    treemask_beam_options o;
    treemask_beam_options_init(&o);
    TM_TRY(treemask::capi::read_options(opts, o, "treemask_beam_options"));
    if (o.beam_width == 0) {
      return treemask::error(Code::kInvalidArgument, "beam_width must be at least 1");
    }
    if (o.n_threads > 1024) {
      return treemask::error(Code::kInvalidArgument, "n_threads ", o.n_threads,
                             " is more than 1024");
    }
    *out = reinterpret_cast<treemask_beam *>(new BeamStepper(o.beam_width, o.n_threads));
    return Status::Ok();
  });
}

void treemask_beam_free(treemask_beam *beam) { delete to_beam(beam); }

treemask_status treemask_beam_step_states(treemask_beam *beam, const treemask_trie *trie,
                                          size_t n_requests, const treemask_logits *logits,
                                          uint32_t *states, float *scores, int32_t *parents,
                                          int32_t *tokens) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(beam);
    TM_REQUIRE_ARG(trie);
    TM_ASSIGN_OR_RETURN(const BeamLogits v, beam_logits(logits));
    return to_beam(beam)->step_states(*to_trie(trie), n_requests, v, states, nullptr, scores,
                                      parents, tokens);
  });
}

treemask_status treemask_beam_step_strings(treemask_beam *beam, const treemask_trie *trie,
                                           size_t n_requests, const treemask_logits *logits,
                                           uint32_t *states, uint32_t *ends, float *scores,
                                           int32_t *parents, int32_t *tokens) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(beam);
    TM_REQUIRE_ARG(trie);
    TM_ASSIGN_OR_RETURN(const BeamLogits v, beam_logits(logits));
    if (n_requests > 0 && !ends) return treemask::error(Code::kInvalidArgument, "ends is NULL");
    return to_beam(beam)->step_states(*to_trie(trie), n_requests, v, states, ends, scores, parents,
                                      tokens);
  });
}

treemask_status treemask_beam_step_batch(treemask_beam *beam, treemask_batch *batch,
                                         size_t n_requests, const treemask_logits *logits,
                                         float *scores, int32_t *parents, int32_t *tokens) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(beam);
    TM_REQUIRE_ARG(batch);
    TM_ASSIGN_OR_RETURN(const BeamLogits v, beam_logits(logits));
    return to_beam(beam)->step_batch(*reinterpret_cast<treemask::Batch *>(batch), n_requests, v,
                                     scores, parents, tokens);
  });
}

treemask_status treemask_trie_topk_states(const treemask_trie *trie, const uint32_t *states,
                                          size_t n_rows, const treemask_logits *logits, size_t k,
                                          int32_t *out_tokens, float *out_scores,
                                          size_t *out_counts) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_ASSIGN_OR_RETURN(const BeamLogits v, beam_logits(logits));
    return treemask::topk_states(*to_trie(trie), states, n_rows, v, k, out_tokens, out_scores,
                                 out_counts);
  });
}

const char *treemask_beam_kernel_isa(void) { return treemask::kernels::logsumexp_best_name(); }

}  // extern "C"
