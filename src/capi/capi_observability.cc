// The extern "C" entry points for observability: the log callback (section
// 3 of treemask.h) and the per-matcher counters (section 5).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "capi/events.h"
#include "capi/shim.h"
#include "core/log.h"
#include "matcher/matcher.h"

using treemask::Status;
using treemask::capi::guard;
using treemask::capi::to_matcher;

namespace treemask::capi {

void log_trie_event(std::string_view verb, std::string_view source, const Trie &trie) noexcept {
  const TrieArrays &a = trie.arrays();
  log::emit_cat(log::Level::kInfo, verb, " ", source, ": ", a.n_terminals, " paths, ", a.n_nodes,
                " nodes, ", a.bytes(), " bytes");
}

void log_warnings(std::string_view source, const Diagnostics &diag) noexcept {
  if (!log::enabled() || diag.n_warnings() == 0) return;
  for (const std::string &w : diag.warnings()) log::emit_cat(log::Level::kWarning, source, ": ", w);
  const uint64_t untold = diag.n_warnings() - diag.warnings().size();
  if (untold > 0) {
    log::emit_cat(log::Level::kWarning, source, ": ", untold, " more warnings not shown (",
                  diag.n_warnings(), " in all)");
  }
}

}  // namespace treemask::capi

extern "C" {

void treemask_set_log_callback(treemask_log_fn fn, void *user_data) {
  treemask::log::set_sink(fn, user_data);
}

treemask_status treemask_matcher_get_counters(const treemask_matcher *m,
                                              treemask_matcher_counters *out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(out);
    const treemask::MatcherCounters c = to_matcher(m)->counters();
    return treemask::capi::write_sized(out, "treemask_matcher_counters",
                                       [&](treemask_matcher_counters &counters) {
                                         counters.n_fills = c.fills;
                                         counters.n_accepted_tokens = c.accepted_tokens;
                                         counters.n_rejected_tokens = c.rejected_tokens;
                                         counters.n_fail_closed = c.fail_closed;
                                         counters.n_rolled_back_tokens = c.rolled_back_tokens;
                                         counters.n_resets = c.resets;
                                       });
  });
}

}  // extern "C"
