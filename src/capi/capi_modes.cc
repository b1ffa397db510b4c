// The extern "C" entry points of the decoding modes (treemask.h, section 5,
// "Decoding modes"): argument checks, conversion, and a catch-all per call.
// The logic lives in src/matcher.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "capi/shim.h"
#include "matcher/matcher.h"
#include "rules/exclusion_set.h"

using treemask::Code;
using treemask::ExclusionSet;
using treemask::Ref;
using treemask::Status;
using treemask::Trie;
using treemask::capi::guard;
using treemask::capi::to_matcher;
using treemask::capi::to_trie;

namespace treemask::capi {

namespace {

ExclusionSet *to_set(treemask_exclusion_set *s) { return reinterpret_cast<ExclusionSet *>(s); }
const ExclusionSet *to_set(const treemask_exclusion_set *s) {
  return reinterpret_cast<const ExclusionSet *>(s);
}

// A caller's (pointer, count) argument: NULL only with a count of 0.
template <class T>
Status check_array(const T *data, size_t n, const char *name, const char *count_name) {
  TM_TRY(check_count(count_name, n, sizeof(T)));
  if (n > 0 && !data)
    return error(Code::kInvalidArgument, name, " is NULL but ", count_name, " is ", n);
  return Status::Ok();
}

template <class T>
Status copy_array(const char *name, const T *data, size_t n, std::vector<T> &out) {
  TM_TRY(check_array(data, n, name, "its count"));
  out.assign(data, data + n);
  return Status::Ok();
}

}  // namespace

Status matcher_mode_options(const treemask_mode_options &o, ModeOptions &out) {
  TM_TRY(copy_array("opts->label_separator", o.label_separator, o.n_label_separator,
                    out.label_separator));
  TM_TRY(copy_array("opts->think_end_tokens", o.think_end_tokens, o.n_think_end_tokens,
                    out.think_end_tokens));
  TM_TRY(copy_array("opts->override_stop_tokens", o.override_stop_tokens, o.n_override_stop_tokens,
                    out.override_stop_tokens));
  out.max_labels = o.max_labels;
  out.leaves_only = o.leaves_only;
  out.think_begin_token = o.think_begin_token;
  out.start_in_thinking = o.start_in_thinking;
  out.max_thinking_tokens = o.max_thinking_tokens;
  out.think_force_end_after_prefix = o.think_force_end_after_prefix;
  out.max_new_tokens = o.max_new_tokens;
  return Status::Ok();
}

}  // namespace treemask::capi

extern "C" {

treemask_status treemask_exclusion_set_create(treemask_trie *trie, const int64_t *label_ids,
                                              size_t n, treemask_exclusion_set **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(out);
    TM_TRY(treemask::capi::check_array(label_ids, n, "label_ids", "n"));
    TM_ASSIGN_OR_RETURN(Ref<ExclusionSet> set,
                        ExclusionSet::create(Ref<const Trie>::share(to_trie(trie)),
                                             {label_ids, label_ids ? n : 0}));
    *out = reinterpret_cast<treemask_exclusion_set *>(set.leak());
    return Status::Ok();
  });
}

treemask_exclusion_set *treemask_exclusion_set_retain(treemask_exclusion_set *set) {
  if (set) treemask::capi::to_set(set)->retain();
  return set;
}

void treemask_exclusion_set_free(treemask_exclusion_set *set) {
  if (set && treemask::capi::to_set(set)->release()) delete treemask::capi::to_set(set);
}

size_t treemask_exclusion_set_n_terminals(const treemask_exclusion_set *set) {
  return set ? treemask::capi::to_set(set)->terminals().size() : 0;
}

treemask_status treemask_matcher_set_label_filter(treemask_matcher *m,
                                                  const treemask_exclusion_set *shared,
                                                  const int64_t *banned, size_t n_banned,
                                                  const int64_t *allowed, size_t n_allowed) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_TRY(treemask::capi::check_array(banned, n_banned, "banned", "n_banned"));
    TM_TRY(treemask::capi::check_array(allowed, n_allowed, "allowed", "n_allowed"));
    std::vector<int64_t> subset;
    if (allowed) subset.assign(allowed, allowed + n_allowed);
    return to_matcher(m)->set_label_filter(treemask::capi::to_set(shared),
                                           {banned, banned ? n_banned : 0},
                                           allowed ? &subset : nullptr);
  });
}

treemask_status treemask_matcher_set_remaining_tokens(treemask_matcher *m, int64_t remaining) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    return to_matcher(m)->set_remaining_tokens(remaining);
  });
}

int64_t treemask_matcher_remaining_tokens(const treemask_matcher *m) {
  return m ? to_matcher(m)->remaining_tokens() : -1;
}

size_t treemask_matcher_produced_labels(const treemask_matcher *m, int64_t *out, size_t cap) {
  if (!m) return 0;
  return treemask::capi::query(__func__, size_t{0},
                               [&] { return to_matcher(m)->produced_labels(out, out ? cap : 0); });
}

bool treemask_matcher_is_thinking(const treemask_matcher *m) {
  return m && to_matcher(m)->is_thinking();
}

treemask_status treemask_matcher_accept_tokens(treemask_matcher *m, const int32_t *tokens, size_t n,
                                               size_t *n_accepted) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(n_accepted);
    TM_TRY(treemask::capi::check_array(tokens, n, "tokens", "n"));
    std::string why;
    // A draft token that is not allowed ends the draft; it is no failure.
    return to_matcher(m)->accept_tokens({tokens, tokens ? n : 0}, n_accepted, &why);
  });
}

treemask_status treemask_matcher_fill_draft_bitmasks(const treemask_matcher *m,
                                                     const int32_t *tokens, const int32_t *parents,
                                                     size_t n, int32_t *bitmask, size_t bitmask_len,
                                                     size_t bitmask_row_words, size_t *n_valid) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(bitmask);
    TM_TRY(treemask::capi::check_array(tokens, n, "tokens", "n"));
    TM_TRY(treemask::capi::check_count("n", n, sizeof(int32_t), 1));
    // n + 1 rows; written as n >= rows so that no sum can wrap around.
    if (bitmask_row_words == 0 || n >= bitmask_len / bitmask_row_words) {
      return treemask::error(Code::kBufferTooSmall, "bitmask has ", bitmask_len, " words; ", n,
                             " + 1 rows of bitmask_row_words = ", bitmask_row_words, " are needed");
    }
    return to_matcher(m)->fill_draft({tokens, tokens ? n : 0}, parents,
                                     reinterpret_cast<uint32_t *>(bitmask), bitmask_row_words,
                                     n_valid);
  });
}

size_t treemask_matcher_stop_tokens(const treemask_matcher *m, int32_t *out, size_t cap) {
  if (!m) return 0;
  const auto stops = to_matcher(m)->stop_tokens();
  if (out) std::copy_n(stops.begin(), std::min(cap, stops.size()), out);
  return stops.size();
}

size_t treemask_matcher_max_rollback_tokens(const treemask_matcher *m) {
  return m ? to_matcher(m)->options().max_rollback_tokens : 0;
}

size_t treemask_matcher_debug_string(const treemask_matcher *m, char *buf, size_t cap) {
  if (!m) {
    if (buf && cap > 0) buf[0] = '\0';
    return 0;
  }
  return treemask::capi::query(__func__, size_t{0}, [&] {
    const std::string text = to_matcher(m)->debug_string();
    if (buf && cap > 0) {
      const size_t n = std::min(cap - 1, text.size());
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return text.size();
  });
}

treemask_status treemask_matcher_accept_forced_tokens(treemask_matcher *m, int32_t *out, size_t cap,
                                                      size_t *n_accepted) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(n_accepted);
    return to_matcher(m)->accept_forced(out, out ? cap : 0, n_accepted);
  });
}

}  // extern "C"
