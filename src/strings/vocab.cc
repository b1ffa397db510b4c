// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/vocab.h"

#include <cstring>
#include <limits>

#include "trie/xxh64.h"

namespace treemask {

namespace {

// The checks of build_vocab over any offsets type (the caller's uint64
// ones, or the uint32 ones of a .tmtrie file). `what` is "" for a caller's
// input and names the sections of a file.
template <class Offset>
Status check_arrays(Code code, const char *what, size_t n_bytes, const Offset *offsets, size_t n,
                    const uint8_t *flags, int64_t vocab_size) {
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return error(Code::kOutOfRange, what, "too many tokens: ", n);
  }
  if (vocab_size < static_cast<int64_t>(n)) {
    return error(code, what, "vocab_size ", vocab_size, " is smaller than the tokenizer's ", n,
                 " tokens");
  }
  if (offsets[0] != 0) return error(code, what, "offsets[0] must be 0, got ", offsets[0]);
  for (size_t t = 0; t < n; ++t) {
    const uint64_t begin = offsets[t], end = offsets[t + 1];
    if (end < begin) {
      return error(code, what, "token ", t, ": offsets decrease (", begin, " -> ", end, ")");
    }
    const uint8_t f = flags ? flags[t] : 0;
    if (f & ~kKnownTokenFlags) {
      return error(code, what, "token ", t, ": unknown flag bits ",
                   Hex{static_cast<uint64_t>(f & ~kKnownTokenFlags)});
    }
    if (end - begin > kMaxTokenBytes && !(f & kTokenSpecial)) {
      return error(code == Code::kCorruptFile ? code : Code::kOutOfRange, what, "token ", t,
                   " has ", end - begin, " bytes; at most ", kMaxTokenBytes, " are supported");
    }
  }
  if (offsets[n] != n_bytes) {
    return error(code, what, "offsets[", n, "] = ", offsets[n], " does not match the ", n_bytes,
                 " bytes given");
  }
  if (n_bytes > std::numeric_limits<uint32_t>::max()) {
    return error(Code::kOutOfRange, what, "the tokens hold ", n_bytes,
                 " bytes; at most 4 GiB are supported");
  }
  return Status::Ok();
}

Status check_spec(const VocabSpec &spec) {
  if (spec.offsets.size() < 2) {
    return error(Code::kInvalidArgument,
                 "a vocabulary needs at least one token (offsets has n_tokens + 1 entries, got ",
                 spec.offsets.size(), ")");
  }
  const size_t n = spec.offsets.size() - 1;
  if (!spec.flags.empty() && spec.flags.size() != n) {
    return error(Code::kInvalidArgument, "flags has ", spec.flags.size(), " entries for ", n,
                 " tokens");
  }
  return check_arrays(Code::kInvalidArgument, "", spec.bytes.size(), spec.offsets.data(), n,
                      spec.flags.empty() ? nullptr : spec.flags.data(), spec.vocab_size);
}

template <class T>
void hash_value(Xxh64 &h, T v) {
  unsigned char le[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) le[i] = static_cast<unsigned char>(uint64_t(v) >> (8 * i));
  h.update(le, sizeof le);
}

// Layout hashed (little-endian): "treemask-vocab-1", vocab_size (u32),
// n_tokens (u32), then per token flags (u8), length (u32), bytes.
uint64_t fingerprint_of(int32_t vocab_size, const uint8_t *bytes, const uint32_t *offsets,
                        const uint8_t *flags, size_t n) {
  Xxh64 h;
  static constexpr char kTag[] = "treemask-vocab-1";
  h.update(kTag, sizeof kTag - 1);
  hash_value(h, static_cast<uint32_t>(vocab_size));
  hash_value(h, static_cast<uint32_t>(n));
  for (size_t t = 0; t < n; ++t) {
    const uint32_t len = offsets[t + 1] - offsets[t];
    hash_value(h, flags[t]);
    hash_value(h, len);
    if (len > 0) h.update(bytes + offsets[t], len);
  }
  return h.digest();
}

}  // namespace

uint64_t Vocab::memory_bytes() const {
  return bytes_.capacity() + offsets_.capacity() * sizeof(uint32_t) + flags_.capacity() +
         vocab_trie_.memory_bytes();
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
  TM_TRY(v->finish());
  return v;
}

Status Vocab::finish() {
  const size_t n = flags_.size();
  fingerprint_ = fingerprint_of(vocab_size_, bytes_.data(), offsets_.data(), flags_.data(), n);
  std::vector<bool> include(n);
  for (size_t t = 0; t < n; ++t) {
    include[t] = offsets_[t + 1] > offsets_[t] && !(flags_[t] & kTokenSpecial);
  }
  TM_ASSIGN_OR_RETURN(vocab_trie_, VocabTrie::build(bytes_.data(), offsets_.data(), include));
  return Status::Ok();
}

Status check_saved_vocab(const SavedVocab &s) {
  TM_TRY(check_arrays(Code::kCorruptFile, "vocabulary: ", s.n_bytes, s.offsets, s.n_tokens, s.flags,
                      s.vocab_size));
  const uint64_t actual = fingerprint_of(s.vocab_size, s.bytes, s.offsets, s.flags, s.n_tokens);
  if (actual != s.fingerprint) {
    return error(Code::kCorruptFile, "vocabulary: its fingerprint is ", Hex{s.fingerprint},
                 " but its tokens hash to ", Hex{actual});
  }
  return Status::Ok();
}

Result<Ref<Vocab>> vocab_from_saved(const SavedVocab &s) {
  Ref<Vocab> v = Ref<Vocab>::adopt(new Vocab());
  v->vocab_size_ = s.vocab_size;
  v->bytes_.assign(s.bytes, s.bytes + s.n_bytes);
  v->offsets_.assign(s.offsets, s.offsets + s.n_tokens + 1);
  v->flags_.assign(s.flags, s.flags + s.n_tokens);
  TM_TRY(v->finish());
  if (v->fingerprint() != s.fingerprint) {
    return error(Code::kCorruptFile, "vocabulary: fingerprint mismatch");
  }
  return v;
}

}  // namespace treemask
