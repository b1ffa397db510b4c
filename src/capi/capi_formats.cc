// The extern "C" entry points of the trie sources in treemask.h section 4:
// RTP-LLM dictionaries, JSON Lines paths, .tmtrie files and metadata.
// Argument checks and conversion only; the loaders live in src/sources and
// src/trie/file.cc.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <string>
#include <vector>

#include "capi/events.h"
#include "capi/shim.h"
#include "sources/read_file.h"
#include "sources/rtp.h"
#include "strings/string_set.h"
#include "trie/annotations.h"
#include "trie/file.h"

using treemask::Code;
using treemask::Diagnostics;
using treemask::Ref;
using treemask::Result;
using treemask::Status;
using treemask::Trie;
using treemask::capi::guard;
using treemask::capi::to_handle;
using treemask::capi::to_trie;

// The file format's pinned values, as the C header states them.
static_assert(treemask::kTmtrieFormatVersion == TREEMASK_TMTRIE_FORMAT_VERSION);
static_assert(treemask::kLoadTrusted == TREEMASK_LOAD_TRUSTED);

namespace {

// Reads the trie options and the RTP-LLM loader options. Explicit values
// must agree with the file (as the CLI's flags do); RTP-LLM's defaults only
// fill what neither gives.
Status rtp_options(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
                   treemask::RtpOptions &out) {
  TM_TRY(treemask::capi::trie_build_options(opts, out.build));
  treemask_rtp_options r;
  treemask_rtp_options_init(&r);
  TM_TRY(treemask::capi::read_options(rtp, r, "treemask_rtp_options"));
  for (const auto &[value, name] :
       {std::pair{r.start_token_id, "start_token_id"}, std::pair{r.end_token_id, "end_token_id"}}) {
    if (value < -1) {
      return treemask::error(Code::kInvalidArgument, "rtp->", name, " is ", value,
                             " (a token id >= 0, or -1 to take it from the file)");
    }
  }
  if (r.start_token_id >= 0) out.start_token_id = r.start_token_id;
  if (r.end_token_id >= 0) out.end_token_id = r.end_token_id;
  if (r.sep) out.sep = std::string(r.sep);
  out.values_must_match = r.start_token_id >= 0 || r.end_token_id >= 0 || r.sep;
  if (r.rtp_llm_defaults) {
    if (!out.start_token_id) out.start_token_id = treemask::kRtpDefaultStartToken;
    if (!out.end_token_id) out.end_token_id = treemask::kRtpDefaultEndToken;
  }
  out.compat = r.rtp_llm_compat;
  return Status::Ok();
}

// Hands a loaded trie to the caller and logs the load (source: the path, or
// what the in-memory input was) with the problems the loader tolerated.
Status publish(Result<Ref<Trie>> trie, treemask_trie **out, std::string_view source,
               const Diagnostics &diag) {
  treemask::capi::log_warnings(source, diag);
  if (!trie.ok()) return trie.take_status();
  treemask::capi::log_trie_event("loaded", source, *trie.value());
  *out = to_handle(trie.value().leak());
  return Status::Ok();
}

std::string in_memory(std::string_view kind, size_t len) {
  return treemask::cat(kind, " (", len, " bytes)");
}

Status rtp_tsv(const treemask_trie_options *opts, const treemask_rtp_options *rtp,
               std::string_view data, std::string_view source, treemask_trie **out) {
  treemask::RtpOptions o;
  TM_TRY(rtp_options(opts, rtp, o));
  if (!o.start_token_id || !o.end_token_id) {
    return treemask::error(Code::kInvalidArgument,
                           "the TSV form has no header: set rtp->start_token_id and "
                           "rtp->end_token_id (or rtp->rtp_llm_defaults)");
  }
  if (!o.sep) o.sep = std::string(treemask::kRtpDefaultSep);
  Diagnostics diag;
  return publish(treemask::load_rtp_tsv(o, data, diag), out, source, diag);
}

Status jsonl(const treemask_trie_options *opts, std::string_view data, std::string_view source,
             treemask_trie **out) {
  treemask::TrieBuildOptions build;
  TM_TRY(treemask::capi::trie_build_options(opts, build));
  Diagnostics diag;
  return publish(treemask::load_jsonl_paths(build, data, diag), out, source, diag);
}

// Prefixes a loader error with the file it came from.
Status with_path(Status s, const char *path) {
  if (s.ok()) return s;
  return Status(s.code(), treemask::cat("\"", path, "\": ", s.message()));
}

}  // namespace

extern "C" {

void treemask_rtp_options_init(treemask_rtp_options *rtp) {
  if (!rtp) return;
  std::memset(static_cast<void *>(rtp), 0, sizeof(*rtp));
  rtp->struct_size = sizeof(*rtp);
  rtp->start_token_id = -1;
  rtp->end_token_id = -1;
}

treemask_status treemask_trie_from_rtp_json(const treemask_trie_options *opts,
                                            const treemask_rtp_options *rtp, const char *json,
                                            size_t len, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_TRY(treemask::capi::check_count("len", len, 1, 64));
    if (!json && len > 0) {
      return treemask::error(Code::kInvalidArgument, "json is NULL but len is ", len);
    }
    treemask::RtpOptions o;
    TM_TRY(rtp_options(opts, rtp, o));
    Diagnostics diag;
    return publish(treemask::load_rtp_json(o, {json ? json : "", len}, diag), out,
                   in_memory("RTP-LLM JSON", len), diag);
  });
}

treemask_status treemask_trie_from_rtp_json_file(const treemask_trie_options *opts,
                                                 const treemask_rtp_options *rtp, const char *path,
                                                 treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(path);
    treemask::RtpOptions o;
    TM_TRY(rtp_options(opts, rtp, o));
    Diagnostics diag;
    return publish(treemask::load_rtp_json_file(o, path, diag), out, path, diag);
  });
}

treemask_status treemask_trie_from_rtp_tsv(const treemask_trie_options *opts,
                                           const treemask_rtp_options *rtp, const char *data,
                                           size_t len, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_TRY(treemask::capi::check_count("len", len, 1, 64));
    if (!data && len > 0) {
      return treemask::error(Code::kInvalidArgument, "data is NULL but len is ", len);
    }
    return rtp_tsv(opts, rtp, {data ? data : "", len}, in_memory("RTP-LLM TSV", len), out);
  });
}

treemask_status treemask_trie_from_rtp_tsv_file(const treemask_trie_options *opts,
                                                const treemask_rtp_options *rtp, const char *path,
                                                treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(path);
    TM_ASSIGN_OR_RETURN(auto file, treemask::read_file(path, 0));
    return with_path(rtp_tsv(opts, rtp, file.view(), path, out), path);
  });
}

treemask_status treemask_trie_from_jsonl(const treemask_trie_options *opts, const char *data,
                                         size_t len, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_TRY(treemask::capi::check_count("len", len, 1, 64));
    if (!data && len > 0) {
      return treemask::error(Code::kInvalidArgument, "data is NULL but len is ", len);
    }
    return jsonl(opts, {data ? data : "", len}, in_memory("JSONL paths", len), out);
  });
}

treemask_status treemask_trie_from_jsonl_file(const treemask_trie_options *opts, const char *path,
                                              treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(path);
    TM_ASSIGN_OR_RETURN(auto file, treemask::read_file(path, 0));
    return with_path(jsonl(opts, file.view(), path, out), path);
  });
}

void treemask_save_options_init(treemask_save_options *opts) {
  if (!opts) return;
  std::memset(static_cast<void *>(opts), 0, sizeof(*opts));
  opts->struct_size = sizeof(*opts);
}

treemask_status treemask_trie_save(const treemask_trie *trie, const char *path,
                                   const treemask_save_options *opts) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(path);
    treemask_save_options o;
    treemask_save_options_init(&o);
    TM_TRY(treemask::capi::read_options(opts, o, "treemask_save_options"));
    std::vector<std::pair<std::string, std::string>> metadata;
    if (o.n_metadata > 0 && (!o.metadata_keys || !o.metadata_values)) {
      return treemask::error(Code::kInvalidArgument,
                             "opts->metadata_keys or opts->metadata_values is NULL but "
                             "opts->n_metadata is ",
                             o.n_metadata);
    }
    for (size_t i = 0; i < o.n_metadata; ++i) {
      if (!o.metadata_keys[i] || !o.metadata_values[i]) {
        return treemask::error(Code::kInvalidArgument, "opts->metadata_keys[", i,
                               "] or opts->metadata_values[", i, "] is NULL");
      }
      for (size_t j = 0; j < i; ++j) {
        if (std::strcmp(o.metadata_keys[i], o.metadata_keys[j]) == 0) {
          return treemask::error(Code::kInvalidArgument, "duplicate metadata key \"",
                                 o.metadata_keys[i], "\" (opts->metadata_keys[", j, "] and [", i,
                                 "])");
        }
      }
      metadata.emplace_back(o.metadata_keys[i], o.metadata_values[i]);
    }
    TM_TRY(treemask::save_trie(*to_trie(trie), path, metadata));
    treemask::capi::log_trie_event("saved", path, *to_trie(trie));
    return Status::Ok();
  });
}

treemask_status treemask_trie_load(const char *path, uint32_t flags, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(path);
    TM_REQUIRE_ARG(out);
    return publish(treemask::load_trie(path, flags), out, path, Diagnostics());
  });
}

treemask_status treemask_trie_load_with_vocab(const char *path, uint32_t flags,
                                              const treemask_vocab *vocab, treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(path);
    TM_REQUIRE_ARG(out);
    auto *v = const_cast<treemask::Vocab *>(reinterpret_cast<const treemask::Vocab *>(vocab));
    return publish(
        treemask::load_trie(path, flags, size_t{64} << 20, Ref<treemask::Vocab>::share(v)), out,
        path, Diagnostics());
  });
}

size_t treemask_trie_metadata_count(const treemask_trie *trie) {
  const auto *a = trie ? to_trie(trie)->annotations() : nullptr;
  return a ? a->metadata().size() : 0;
}

treemask_status treemask_trie_metadata_at(const treemask_trie *trie, size_t index, const char **key,
                                          const char **value) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    const size_t n = treemask_trie_metadata_count(trie);
    if (index >= n) {
      return treemask::error(Code::kOutOfRange, "index ", index, " >= metadata count ", n);
    }
    const auto &entry = to_trie(trie)->annotations()->metadata()[index];
    if (key) *key = entry.key.data();
    if (value) *value = entry.value.data();
    return Status::Ok();
  });
}

const char *treemask_trie_metadata_get(const treemask_trie *trie, const char *key) {
  if (!trie || !key) return nullptr;
  const auto *a = to_trie(trie)->annotations();
  const auto *entry = a ? a->find(key) : nullptr;
  return entry ? entry->value.data() : nullptr;
}

}  // extern "C"
