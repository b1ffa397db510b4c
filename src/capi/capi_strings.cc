// The extern "C" entry points of string sets at the byte level (treemask.h,
// section 8): vocabularies, tries from strings, and the queries only a
// string set answers. Argument checks and conversion only; the engine lives
// in src/strings.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "capi/events.h"
#include "capi/shim.h"
#include "matcher/matcher.h"
#include "strings/string_set.h"

using treemask::Code;
using treemask::Ref;
using treemask::Status;
using treemask::Trie;
using treemask::Vocab;
using treemask::capi::guard;
using treemask::capi::to_handle;
using treemask::capi::to_matcher;
using treemask::capi::to_trie;

static_assert(treemask::kTokenSpecial == TREEMASK_TOKEN_SPECIAL);

namespace {

const Vocab *to_vocab(const treemask_vocab *v) { return reinterpret_cast<const Vocab *>(v); }
Vocab *to_vocab(treemask_vocab *v) { return reinterpret_cast<Vocab *>(v); }
treemask_vocab *to_handle_vocab(const Vocab *v) {
  return reinterpret_cast<treemask_vocab *>(const_cast<Vocab *>(v));
}

}  // namespace

extern "C" {

treemask_status treemask_vocab_create(const uint8_t *bytes, const uint64_t *offsets,
                                      size_t n_tokens, const uint8_t *flags, int32_t vocab_size,
                                      treemask_vocab **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(offsets);
    TM_TRY(treemask::capi::check_count("n_tokens", n_tokens, sizeof(uint64_t), 1));
    // offsets[0] and the monotonicity are checked before offsets[n] bounds
    // a read of bytes.
    const uint64_t n_bytes = offsets[n_tokens];
    if (n_bytes > 0 && !bytes) {
      return treemask::error(Code::kInvalidArgument, "bytes is NULL but offsets[n_tokens] is ",
                             n_bytes);
    }
    TM_TRY(treemask::capi::check_count("offsets[n_tokens]", n_bytes, 1));
    treemask::VocabSpec spec;
    spec.bytes = {bytes, static_cast<size_t>(n_bytes)};
    spec.offsets = {offsets, n_tokens + 1};
    if (flags) spec.flags = {flags, n_tokens};
    spec.vocab_size = vocab_size;
    TM_ASSIGN_OR_RETURN(Ref<Vocab> v, treemask::build_vocab(spec));
    *out = to_handle_vocab(v.leak());
    return Status::Ok();
  });
}

treemask_vocab *treemask_vocab_retain(treemask_vocab *vocab) {
  if (vocab) to_vocab(vocab)->retain();
  return vocab;
}

void treemask_vocab_free(treemask_vocab *vocab) {
  if (vocab && to_vocab(vocab)->release()) delete to_vocab(vocab);
}

int32_t treemask_vocab_size(const treemask_vocab *vocab) {
  return vocab ? to_vocab(vocab)->vocab_size() : 0;
}

int32_t treemask_vocab_n_tokens(const treemask_vocab *vocab) {
  return vocab ? to_vocab(vocab)->n_tokens() : 0;
}

uint64_t treemask_vocab_fingerprint(const treemask_vocab *vocab) {
  return vocab ? to_vocab(vocab)->fingerprint() : 0;
}

size_t treemask_vocab_token_bytes(const treemask_vocab *vocab, int32_t token, uint8_t *out,
                                  size_t cap) {
  if (!vocab) return 0;
  const std::string_view b = to_vocab(vocab)->token_bytes(token);
  if (out) std::copy_n(b.begin(), std::min(cap, b.size()), out);
  return b.size();
}

treemask_status treemask_trie_check_vocab(const treemask_trie *trie, const treemask_vocab *vocab) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(trie);
    TM_REQUIRE_ARG(vocab);
    return treemask::check_trie_vocab(*to_trie(trie), *to_vocab(vocab));
  });
}

uint64_t treemask_vocab_copy_tokens(const treemask_vocab *vocab, uint8_t *bytes, uint64_t bytes_cap,
                                    uint64_t *offsets, uint8_t *flags) {
  if (!vocab) return 0;
  const treemask::Vocab &v = *to_vocab(vocab);
  const auto n = static_cast<size_t>(v.n_tokens());
  if (bytes && bytes_cap >= v.n_bytes()) std::copy_n(v.bytes_data(), v.n_bytes(), bytes);
  if (offsets) std::copy_n(v.offsets_data(), n + 1, offsets);
  if (flags) std::copy_n(v.flags_data(), n, flags);
  return v.n_bytes();
}

uint64_t treemask_vocab_memory_bytes(const treemask_vocab *vocab) {
  return vocab ? to_vocab(vocab)->memory_bytes() : 0;
}

void treemask_strings_options_init(treemask_strings_options *sopts) {
  if (!sopts) return;
  std::memset(static_cast<void *>(sopts), 0, sizeof(*sopts));
  sopts->struct_size = sizeof(*sopts);
}

treemask_status treemask_trie_from_strings(const treemask_trie_options *opts,
                                           const treemask_vocab *vocab, const char *bytes,
                                           const size_t *offsets, size_t n_strings,
                                           const treemask_strings_options *sopts,
                                           treemask_trie **out) {
  return guard(__func__, [&]() -> Status {
    TM_REQUIRE_ARG(out);
    TM_REQUIRE_ARG(vocab);
    TM_REQUIRE_ARG(offsets);
    TM_TRY(treemask::capi::check_count("n_strings", n_strings, sizeof(size_t), 1));
    treemask::StringSetOptions so;
    TM_TRY(treemask::capi::trie_build_options(opts, so.trie));
    treemask_strings_options s;
    treemask_strings_options_init(&s);
    TM_TRY(treemask::capi::read_options(sopts, s, "treemask_strings_options"));
    if (s.prefix_len > 0 && !s.prefix) {
      return treemask::error(Code::kInvalidArgument, "sopts->prefix is NULL but prefix_len is ",
                             s.prefix_len);
    }
    so.prefix.assign(s.prefix ? s.prefix : "", s.prefix_len);
    const size_t n_bytes = offsets[n_strings];
    if (n_bytes > 0 && !bytes) {
      return treemask::error(Code::kInvalidArgument, "bytes is NULL but offsets[n_strings] is ",
                             n_bytes);
    }
    std::vector<uint64_t> copied;
    const uint64_t *offs = nullptr;
    if constexpr (std::is_same_v<size_t, uint64_t>) {
      offs = offsets;
    } else {
      copied.assign(offsets, offsets + n_strings + 1);
      offs = copied.data();
    }
    treemask::StringList list;
    list.bytes = {reinterpret_cast<const uint8_t *>(bytes), n_bytes};
    list.offsets = {offs, n_strings + 1};
    auto *v = const_cast<Vocab *>(to_vocab(vocab));
    TM_ASSIGN_OR_RETURN(Ref<Trie> trie, treemask::build_trie_from_strings(so, Ref<Vocab>::share(v),
                                                                          list, s.label_ids));
    treemask::capi::log_trie_event(
        "built", treemask::cat("string-set trie from ", n_strings, " strings"), *trie);
    *out = to_handle(trie.leak());
    return Status::Ok();
  });
}

bool treemask_trie_is_string_set(const treemask_trie *trie) {
  return trie && treemask::is_string_set(*to_trie(trie));
}

treemask_vocab *treemask_trie_vocab(const treemask_trie *trie) {
  return trie ? to_handle_vocab(treemask::vocab_of(*to_trie(trie))) : nullptr;
}

size_t treemask_matcher_forced_bytes(const treemask_matcher *m, uint8_t *out, size_t cap) {
  return m ? to_matcher(m)->forced_bytes(out, out ? cap : 0) : 0;
}

}  // extern "C"
