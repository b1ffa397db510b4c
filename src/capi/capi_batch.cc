// The extern "C" entry points of treemask.h section 6 (batch and state
// arrays): argument checks, conversion, and a catch-all per call.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <string>

#include "batch/batch.h"
#include "batch/state_array.h"
#include "capi/shim.h"
#include "matcher/matcher.h"

using treemask::Batch;
using treemask::Code;
using treemask::Status;
using treemask::capi::check_bitmask_rows;
using treemask::capi::check_count;
using treemask::capi::guard;
using treemask::capi::to_matcher;
using treemask::capi::to_trie;

namespace {

Batch *to_batch(treemask_batch *b) { return reinterpret_cast<Batch *>(b); }
const Batch *to_batch(const treemask_batch *b) { return reinterpret_cast<const Batch *>(b); }

}  // namespace

extern "C" {

void treemask_batch_options_init(treemask_batch_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
}

treemask_status treemask_batch_create(const treemask_batch_options *opts, treemask_batch **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(opts);
    TM_REQUIRE_ARG(out);
    treemask_batch_options o;
    treemask_batch_options_init(&o);
    TM_TRY(treemask::capi::read_options(opts, o, "treemask_batch_options"));
    treemask::BatchOptions bo;
    bo.n_slots = o.n_slots;
    bo.n_threads = o.n_threads;
    TM_ASSIGN_OR_RETURN(auto batch, Batch::create(bo));
    *out = reinterpret_cast<treemask_batch *>(batch.release());
    return Status::Ok();
  });
}

void treemask_batch_free(treemask_batch *batch) { delete to_batch(batch); }

size_t treemask_batch_n_slots(const treemask_batch *batch) {
  return batch ? to_batch(batch)->size() : 0;
}

treemask_status treemask_batch_set_matcher(treemask_batch *batch, size_t slot,
                                           const treemask_matcher *m) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    return to_batch(batch)->set_matcher(slot, m ? to_matcher(m) : nullptr);
  });
}

treemask_matcher *treemask_batch_get_matcher(treemask_batch *batch, size_t slot) {
  return batch ? treemask::capi::to_handle(to_batch(batch)->matcher(slot)) : nullptr;
}

treemask_status treemask_batch_fill_next_token_bitmask(treemask_batch *batch, int32_t *bitmask,
                                                       size_t bitmask_row_words,
                                                       const int32_t *slots, size_t n_slots,
                                                       bool *need_apply) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    TM_TRY(check_count("n_slots", n_slots, sizeof(int32_t)));
    TM_TRY(check_bitmask_rows("the batch's n_slots", to_batch(batch)->size(), bitmask_row_words));
    return to_batch(batch)->fill(reinterpret_cast<uint32_t *>(bitmask), bitmask_row_words, slots,
                                 n_slots, need_apply);
  });
}

treemask_status treemask_batch_bind_bitmask(treemask_batch *batch, int32_t *bitmask,
                                            size_t bitmask_row_words) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    TM_TRY(check_bitmask_rows("the batch's n_slots", to_batch(batch)->size(), bitmask_row_words));
    return to_batch(batch)->bind(reinterpret_cast<uint32_t *>(bitmask), bitmask_row_words);
  });
}

treemask_status treemask_batch_fill_bound(treemask_batch *batch, const int32_t *slots,
                                          size_t n_slots, int32_t mode, bool *need_apply) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    if (mode != TREEMASK_FILL_FULL && mode != TREEMASK_FILL_INCREMENTAL) {
      return treemask::error(Code::kInvalidArgument, "unknown mode ", mode,
                             " (expected 0 = TREEMASK_FILL_FULL, 1 = TREEMASK_FILL_INCREMENTAL)");
    }
    TM_TRY(check_count("n_slots", n_slots, sizeof(int32_t)));
    return to_batch(batch)->fill_bound(slots, n_slots, mode == TREEMASK_FILL_INCREMENTAL,
                                       need_apply);
  });
}

treemask_status treemask_batch_invalidate(treemask_batch *batch, const int32_t *rows,
                                          size_t n_rows) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    TM_TRY(check_count("n_rows", n_rows, sizeof(int32_t)));
    return to_batch(batch)->invalidate(rows, n_rows);
  });
}

treemask_status treemask_batch_accept_tokens(treemask_batch *batch, const int32_t *tokens,
                                             size_t n_tokens, bool *accepted) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    // Rejections are reported by accepted[] and the counters, not as errors.
    TM_TRY(check_count("n_tokens", n_tokens, sizeof(int32_t)));
    std::string rejection;
    return to_batch(batch)->accept(tokens, n_tokens, accepted, &rejection);
  });
}

treemask_status treemask_batch_reorder(treemask_batch *batch, const int32_t *src, size_t n) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(batch);
    TM_TRY(check_count("n", n, sizeof(int32_t)));
    return to_batch(batch)->reorder(src, n);
  });
}

treemask_status treemask_trie_fill_states(const treemask_trie *trie, const uint32_t *states,
                                          size_t n_states, int32_t *bitmask,
                                          size_t bitmask_row_words) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_TRY(check_count("n_states", n_states, sizeof(uint32_t)));
    TM_TRY(check_bitmask_rows("n_states", n_states, bitmask_row_words));
    if (n_states > 0) TM_REQUIRE_ARG(states);
    return treemask::fill_states(*to_trie(trie), {states, n_states},
                                 reinterpret_cast<uint32_t *>(bitmask), bitmask_row_words);
  });
}

treemask_status treemask_trie_advance_states(const treemask_trie *trie, uint32_t *states,
                                             const int32_t *tokens, size_t n_states,
                                             int32_t failure_policy, bool *accepted) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_TRY(check_count("n_states", n_states, sizeof(uint32_t)));
    if (n_states > 0) TM_REQUIRE_ARG(states);
    return treemask::advance_states(*to_trie(trie), {states, n_states}, tokens,
                                    static_cast<treemask::FailurePolicy>(failure_policy), accepted);
  });
}

treemask_status treemask_matcher_get_state(const treemask_matcher *m, uint32_t *state) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(state);
    TM_ASSIGN_OR_RETURN(*state, treemask::matcher_state_id(*to_matcher(m)));
    return Status::Ok();
  });
}

}  // extern "C"
