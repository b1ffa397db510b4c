// The extern "C" entry points of sections 1-5 of treemask.h: argument checks,
// conversion, and a catch-all per call. No decoding logic lives here.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <string>

#include "capi/events.h"
#include "capi/shim.h"
#include "core/log.h"
#include "matcher/matcher.h"
#include "trie/annotations.h"

using treemask::Code;
using treemask::Matcher;
using treemask::Ref;
using treemask::Status;
using treemask::Trie;
using treemask::capi::guard;
using treemask::capi::to_handle;
using treemask::capi::to_matcher;
using treemask::capi::to_trie;

namespace treemask::capi {

namespace {
struct LastError {
  std::string text;
  const char *view = "";
};
thread_local LastError t_last_error;
}  // namespace

void set_last_error(const char *function, std::string_view message) noexcept {
  try {
    t_last_error.text.assign(function);
    t_last_error.text.append(": ");
    t_last_error.text.append(escape_control(message));
    t_last_error.view = t_last_error.text.c_str();
  } catch (...) {
    t_last_error.view = "treemask: out of memory while recording an error message";
  }
}

namespace {
bool logged_failure(Code code) { return code == Code::kInternal || code == Code::kOutOfMemory; }
}  // namespace

// Logging comes first: a log callback that calls treemask itself must not
// overwrite the error the caller is about to read.
treemask_status fail(const char *function, const Status &status) noexcept {
  if (logged_failure(status.code())) {
    log::emit_cat(log::Level::kError, function, ": ", status.message());
  }
  set_last_error(function, status.message());
  return static_cast<treemask_status>(status.code());
}

treemask_status fail_with_exception(const char *function, Code code,
                                    std::string_view what) noexcept {
  log::emit_cat(log::Level::kError, function, ": ", what);
  set_last_error(function, what);
  return static_cast<treemask_status>(code);
}

Status check_count(const char *name, size_t n, size_t elem_bytes, size_t extra) {
  const size_t max_elements = static_cast<size_t>(PTRDIFF_MAX) / elem_bytes;
  if (extra > max_elements || n > max_elements - extra) {
    return error(Code::kOutOfRange, name, " = ", n, " is too large: ", n, extra ? " + " : "",
                 extra ? std::to_string(extra) : std::string(), " elements of ", elem_bytes,
                 " bytes exceed the address space (a count computed as k - 1 with k = 0?)");
  }
  return Status::Ok();
}

Status check_bitmask_rows(const char *name, size_t n_rows, size_t bitmask_row_words) {
  if (n_rows == 0 || bitmask_row_words == 0) return Status::Ok();
  if (n_rows > static_cast<size_t>(PTRDIFF_MAX) / sizeof(uint32_t) / bitmask_row_words) {
    return error(Code::kOutOfRange, name, " = ", n_rows, " rows of ", bitmask_row_words,
                 " words exceed the address space (a count computed as k - 1 with k = 0?)");
  }
  return Status::Ok();
}

Status trie_build_options(const treemask_trie_options *opts, TrieBuildOptions &out) {
  if (!opts) return error(Code::kInvalidArgument, "opts is NULL");
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  TM_TRY(read_options(opts, o, "treemask_trie_options"));
  TM_TRY(check_count("opts->n_stop_tokens", o.n_stop_tokens, sizeof(int32_t)));
  if (o.n_stop_tokens > 0 && !o.stop_tokens) {
    return error(Code::kInvalidArgument, "opts->stop_tokens is NULL but opts->n_stop_tokens is ",
                 o.n_stop_tokens);
  }
  out.vocab_size = o.vocab_size;
  out.stop_tokens.assign(o.stop_tokens, o.stop_tokens + o.n_stop_tokens);
  out.dense_row_cache_bytes = o.dense_row_cache_bytes;
  out.no_labels = o.no_labels != 0;
  return Status::Ok();
}

}  // namespace treemask::capi

extern "C" {

/* ---- Section 1: version ---- */

uint32_t treemask_version(void) { return TREEMASK_VERSION_NUMBER; }

const char *treemask_version_string(void) { return TREEMASK_VERSION_STRING; }

/* ---- Section 3: status ---- */

const char *treemask_status_string(treemask_status status) {
  switch (status) {
    case TREEMASK_OK: return "ok";
    case TREEMASK_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TREEMASK_ERR_OUT_OF_RANGE: return "out of range";
    case TREEMASK_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case TREEMASK_ERR_INVALID_STATE: return "invalid state";
    case TREEMASK_ERR_OUT_OF_MEMORY: return "out of memory";
    case TREEMASK_ERR_PARSE: return "parse error";
    case TREEMASK_ERR_IO: return "I/O error";
    case TREEMASK_ERR_CORRUPT_FILE: return "corrupt file";
    case TREEMASK_ERR_VERSION_MISMATCH: return "version mismatch";
    case TREEMASK_ERR_UNSUPPORTED: return "unsupported";
    case TREEMASK_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

const char *treemask_last_error(void) { return treemask::capi::t_last_error.view; }

/* ---- Section 4: trie ---- */

size_t treemask_bitmask_words(int32_t vocab_size) { return treemask::words_for_vocab(vocab_size); }

void treemask_trie_options_init(treemask_trie_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
  opts->dense_row_cache_bytes = size_t{64} << 20;
}

treemask_status treemask_trie_from_paths(const treemask_trie_options *opts, const int32_t *tokens,
                                         const size_t *offsets, size_t n_paths,
                                         const int64_t *label_ids, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(offsets);
    TM_TRY(treemask::capi::check_count("n_paths", n_paths, sizeof(size_t), 1));
    treemask::TrieBuildOptions build;
    TM_TRY(treemask::capi::trie_build_options(opts, build));
    if (build.no_labels && label_ids) {
      return treemask::error(Code::kInvalidArgument,
                             "label_ids is not NULL but opts->no_labels is set");
    }
    const size_t n_tokens = n_paths > 0 || offsets ? offsets[n_paths] : 0;
    if (n_tokens > 0 && !tokens) {
      return treemask::error(Code::kInvalidArgument, "tokens is NULL but offsets[n_paths] is ",
                             n_tokens);
    }
    // Offsets are validated (monotone, offsets[0] == 0) before any token is read;
    // offsets[n_paths] bounds every read.
    for (size_t i = 0; i < n_paths; ++i) {
      if (offsets[i] > n_tokens) {
        return treemask::error(Code::kInvalidArgument, "offsets[", i, "] = ", offsets[i],
                               " exceeds offsets[n_paths] = ", n_tokens);
      }
    }
    TM_ASSIGN_OR_RETURN(Ref<Trie> trie,
                        treemask::build_trie_from_paths(build, {tokens, n_tokens},
                                                        {offsets, n_paths + 1}, label_ids));
    treemask::capi::log_trie_event("built", treemask::cat("trie from ", n_paths, " token paths"),
                                   *trie);
    *out = to_handle(trie.leak());
    return Status::Ok();
  });
}

treemask_trie *treemask_trie_retain(treemask_trie *trie) {
  if (trie) to_trie(trie)->retain();
  return trie;
}

void treemask_trie_free(treemask_trie *trie) {
  if (trie && to_trie(trie)->release()) delete to_trie(trie);
}

int32_t treemask_trie_vocab_size(const treemask_trie *trie) {
  return trie ? to_trie(trie)->vocab_size() : 0;
}

size_t treemask_trie_stop_tokens(const treemask_trie *trie, int32_t *out, size_t cap) {
  if (!trie) return 0;
  const auto stops = to_trie(trie)->stop_tokens();
  if (out) std::copy_n(stops.begin(), std::min(cap, stops.size()), out);
  return stops.size();
}

treemask_status treemask_trie_get_stats(const treemask_trie *trie, treemask_trie_stats *out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(out);
    return treemask::capi::write_sized(out, "treemask_trie_stats", [&](treemask_trie_stats &s) {
      const auto &a = to_trie(trie)->arrays();
      s.n_nodes = a.n_nodes;
      s.n_edges = a.n_edges();
      s.n_terminals = a.n_terminals;
      s.n_labels = a.n_labels();
      s.max_depth = a.max_depth;
      s.max_fanout = a.max_fanout;
      s.bytes = a.bytes();
      s.dense_row_cache_bytes = to_trie(trie)->dense_cache_bytes();
      const auto *annotations = to_trie(trie)->annotations();
      s.n_warnings = annotations ? annotations->n_warnings() : 0;
      s.max_label_id = treemask::max_label_id(*to_trie(trie));
    });
  });
}

/* ---- Section 5: matcher ---- */

void treemask_matcher_options_init(treemask_matcher_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
  opts->failure_policy = TREEMASK_FAILURE_REJECT;
  opts->pad_token = -1;
}

void treemask_mode_options_init(treemask_mode_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  treemask_matcher_options_init(&opts->matcher);
  opts->matcher.struct_size = sizeof(*opts);
  opts->think_begin_token = -1;
  opts->max_thinking_tokens = -1;
  opts->max_new_tokens = -1;
}

treemask_status treemask_matcher_create(treemask_trie *trie, const treemask_matcher_options *opts,
                                        treemask_matcher **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(out);
    treemask_mode_options o;  // the stable options, or their experimental extension
    treemask_mode_options_init(&o);
    TM_TRY(treemask::capi::read_options(opts, o, "treemask_matcher_options"));
    treemask::MatcherOptions mo;
    mo.failure_policy = static_cast<treemask::FailurePolicy>(o.matcher.failure_policy);
    mo.terminate_without_stop_token = o.matcher.terminate_without_stop_token;
    mo.max_rollback_tokens = o.matcher.max_rollback_tokens;
    mo.pad_token = o.matcher.pad_token;
    treemask::ModeOptions modes;
    TM_TRY(treemask::capi::matcher_mode_options(o, modes));
    TM_ASSIGN_OR_RETURN(auto m, Matcher::create(Ref<const Trie>::share(to_trie(trie)), mo, modes));
    *out = to_handle(m.release());
    return Status::Ok();
  });
}

treemask_status treemask_matcher_clone(const treemask_matcher *m, treemask_matcher **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(out);
    TM_ASSIGN_OR_RETURN(auto copy, to_matcher(m)->clone());
    *out = to_handle(copy.release());
    return Status::Ok();
  });
}

void treemask_matcher_free(treemask_matcher *m) { delete to_matcher(m); }

void treemask_fill_options_init(treemask_fill_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
}

void treemask_budget_fill_options_init(treemask_budget_fill_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->fill.struct_size = sizeof(*opts);
  opts->remaining_tokens = -1;
}

treemask_status treemask_matcher_fill_next_token_bitmask(treemask_matcher *m, int32_t *bitmask,
                                                         size_t bitmask_row_words,
                                                         const treemask_fill_options *opts,
                                                         bool *need_apply) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(bitmask);
    treemask_budget_fill_options o;  // the stable options, or their experimental extension
    treemask_budget_fill_options_init(&o);
    TM_TRY(treemask::capi::read_options(opts, o, "treemask_fill_options"));
    treemask::FillOptions fo;
    if (o.remaining_tokens < -1) {
      return treemask::error(Code::kInvalidArgument, "opts->remaining_tokens is ",
                             o.remaining_tokens, "; it must be >= 0, or -1 for the matcher's own");
    }
    if (o.remaining_tokens >= 0) fo.remaining_tokens = o.remaining_tokens;
    return to_matcher(m)->fill(reinterpret_cast<uint32_t *>(bitmask), bitmask_row_words, need_apply,
                               fo);
  });
}

treemask_status treemask_matcher_accept_token(treemask_matcher *m, int32_t token, bool *accepted) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    TM_REQUIRE_ARG(accepted);
    std::string why;
    // A rejection is not a failure: *accepted and the counters report it,
    // and the last error stays as it was.
    return to_matcher(m)->accept(token, accepted, &why);
  });
}

treemask_status treemask_matcher_rollback(treemask_matcher *m, size_t n_tokens) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(m);
    return to_matcher(m)->rollback(n_tokens);
  });
}

void treemask_matcher_reset(treemask_matcher *m) {
  if (m) to_matcher(m)->reset();
}

bool treemask_matcher_is_terminated(const treemask_matcher *m) {
  return m && to_matcher(m)->is_terminated();
}

bool treemask_matcher_can_terminate(const treemask_matcher *m) {
  if (!m) return false;
  return treemask::capi::query(__func__, false, [&] { return to_matcher(m)->can_terminate(); });
}

size_t treemask_matcher_next_tokens(const treemask_matcher *m, int32_t *out, size_t cap) {
  if (!m) return 0;
  return treemask::capi::query(__func__, size_t{0},
                               [&] { return to_matcher(m)->next_tokens(out, out ? cap : 0); });
}

size_t treemask_matcher_forced_tokens(const treemask_matcher *m, int32_t *out, size_t cap) {
  if (!m) return 0;
  return treemask::capi::query(__func__, size_t{0},
                               [&] { return to_matcher(m)->forced_tokens(out, out ? cap : 0); });
}

size_t treemask_matcher_label_ids(const treemask_matcher *m, int64_t *out, size_t cap) {
  if (!m) return 0;
  return to_matcher(m)->label_ids(out, out ? cap : 0);
}

treemask_trie *treemask_matcher_trie(const treemask_matcher *m) {
  return m ? to_handle(const_cast<Trie *>(&to_matcher(m)->trie())) : nullptr;
}

size_t treemask_matcher_rollback_depth(const treemask_matcher *m) {
  return m ? to_matcher(m)->rollback_depth() : 0;
}

}  // extern "C"
