// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/vocab.h"

#include <cstring>
#include <limits>

#include "trie/xxh64.h"

namespace treemask {

namespace {

Status check_spec(const VocabSpec &spec) {
  if (spec.offsets.size() < 2) {
    return error(Code::kInvalidArgument,
                 "a vocabulary needs at least one token (offsets has n_tokens + 1 entries, got ",
                 spec.offsets.size(), ")");
  }
  const size_t n = spec.offsets.size() - 1;
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return error(Code::kOutOfRange, "too many tokens: ", n);
  }
  if (spec.vocab_size < static_cast<int64_t>(n)) {
    return error(Code::kInvalidArgument, "vocab_size ", spec.vocab_size,
                 " is smaller than the tokenizer's ", n, " tokens");
  }
  if (!spec.flags.empty() && spec.flags.size() != n) {
    return error(Code::kInvalidArgument, "flags has ", spec.flags.size(), " entries for ", n,
                 " tokens");
  }
  if (spec.offsets[0] != 0) {
    return error(Code::kInvalidArgument, "offsets[0] must be 0, got ", spec.offsets[0]);
  }
  for (size_t t = 0; t < n; ++t) {
    const uint64_t begin = spec.offsets[t], end = spec.offsets[t + 1];
    if (end < begin) {
      return error(Code::kInvalidArgument, "token ", t, ": offsets decrease (", begin, " -> ", end,
                   ")");
    }
    const uint8_t flags = spec.flags.empty() ? 0 : spec.flags[t];
    if (flags & ~kKnownTokenFlags) {
      return error(Code::kInvalidArgument, "token ", t, ": unknown flag bits ",
                   Hex{static_cast<uint64_t>(flags & ~kKnownTokenFlags)});
    }
    if (end - begin > kMaxTokenBytes && !(flags & kTokenSpecial)) {
      return error(Code::kOutOfRange, "token ", t, " has ", end - begin, " bytes; at most ",
                   kMaxTokenBytes, " are supported");
    }
  }
  if (spec.offsets[n] != spec.bytes.size()) {
    return error(Code::kInvalidArgument, "offsets[", n, "] = ", spec.offsets[n],
                 " does not match the ", spec.bytes.size(), " bytes given");
  }
  if (spec.bytes.size() > std::numeric_limits<uint32_t>::max()) {
    return error(Code::kOutOfRange, "the tokens hold ", spec.bytes.size(),
                 " bytes; at most 4 GiB are supported");
  }
  return Status::Ok();
}

template <class T>
void hash_value(Xxh64 &h, T v) {
  unsigned char le[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) le[i] = static_cast<unsigned char>(uint64_t(v) >> (8 * i));
  h.update(le, sizeof le);
}

}  // namespace

uint64_t Vocab::memory_bytes() const {
  return bytes_.capacity() + offsets_.capacity() * sizeof(uint32_t) + flags_.capacity() +
         token_trie_.memory_bytes();
}

Result<Ref<Vocab>> build_vocab(const VocabSpec &spec) {
  TM_TRY(check_spec(spec));
  const size_t n = spec.offsets.size() - 1;
  Ref<Vocab> v = Ref<Vocab>::adopt(new Vocab());
  v->vocab_size_ = spec.vocab_size;
  v->bytes_.assign(spec.bytes.begin(), spec.bytes.end());
  v->offsets_.resize(n + 1);
  for (size_t t = 0; t <= n; ++t) v->offsets_[t] = static_cast<uint32_t>(spec.offsets[t]);
  v->flags_.assign(n, 0);
  if (!spec.flags.empty()) std::memcpy(v->flags_.data(), spec.flags.data(), n);

  // Layout hashed (little-endian): "treemask-vocab-1", vocab_size (u32),
  // n_tokens (u32), then per token flags (u8), length (u32), bytes.
  Xxh64 h;
  static constexpr char kTag[] = "treemask-vocab-1";
  h.update(kTag, sizeof kTag - 1);
  hash_value(h, static_cast<uint32_t>(spec.vocab_size));
  hash_value(h, static_cast<uint32_t>(n));
  std::vector<bool> include(n);
  for (size_t t = 0; t < n; ++t) {
    const uint32_t len = v->offsets_[t + 1] - v->offsets_[t];
    hash_value(h, v->flags_[t]);
    hash_value(h, len);
    if (len > 0) h.update(v->bytes_.data() + v->offsets_[t], len);
    include[t] = len > 0 && !(v->flags_[t] & kTokenSpecial);
  }
  v->fingerprint_ = h.digest();

  TM_ASSIGN_OR_RETURN(v->token_trie_,
                      TokenTrie::build(v->bytes_.data(), v->offsets_.data(), include));
  return v;
}

}  // namespace treemask
