// A vocabulary at the byte level: each token id's bytes and flags, built once
// per tokenizer and shared (immutable, reference counted) by every string-set
// trie over it, with the vocabulary trie that the mask walk needs (vocab_trie.h).
//
// Rules a vocabulary pins (src/README.md, "Kinds of trie"):
// - ids [0, n_tokens) are the tokenizer's; each has a byte string (what the
//   token contributes to the decoded text) and flags;
// - a token flagged kTokenSpecial (control, added, special tokens) is never
//   allowed as text: the only way it is ever allowed is as a stop token of a
//   string-set trie;
// - a token with no bytes is treated like a special one (allowed anywhere, it
//   would let a model loop without progress);
// - ids [n_tokens, vocab_size) (a model's padded logits rows) are never
//   allowed, and vocab_size is the width of every mask row.
// The fingerprint hashes all of this, so a compiled string-set trie can name
// the vocabulary it was built for and a loader can refuse another one.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/refcount.h"
#include "core/status.h"
#include "strings/vocab_trie.h"

namespace treemask {

// Token flags (one byte per token). Bits not listed are reserved: a build
// with one set fails, so that a later meaning cannot be silently ignored.
inline constexpr uint8_t kTokenSpecial = 1;
inline constexpr uint8_t kKnownTokenFlags = kTokenSpecial;

// The longest token (bytes) a vocabulary accepts: the mask walk keeps one
// frame per byte of the token it is in. Real vocabularies stay far below
// (Qwen2.5: 128 bytes, GLM-4: 1,024).
inline constexpr size_t kMaxTokenBytes = 65535;

// The input of build_vocab, borrowed for the call: token i's bytes are
// bytes[offsets[i], offsets[i + 1]); flags is empty (no flags) or has
// n_tokens entries; n_tokens = offsets.size() - 1.
struct VocabSpec {
  std::span<const uint8_t> bytes;
  std::span<const uint64_t> offsets;
  std::span<const uint8_t> flags;
  int32_t vocab_size = 0;  // the logits width: >= n_tokens
};

// A vocabulary as a .tmtrie file holds it (the kVocab arrays of
// trie/layout.h), borrowed.
struct SavedVocab {
  const uint8_t *bytes = nullptr;
  uint64_t n_bytes = 0;
  const uint32_t *offsets = nullptr;  // n_tokens + 1
  const uint8_t *flags = nullptr;     // n_tokens
  uint32_t n_tokens = 0;
  int32_t vocab_size = 0;
  uint64_t fingerprint = 0;
};

class Vocab final : public RefCounted {
 public:
  int32_t vocab_size() const { return vocab_size_; }
  int32_t n_tokens() const { return static_cast<int32_t>(offsets_.size() - 1); }
  // The token's bytes (empty for ids at or past n_tokens, or out of range).
  std::string_view token_bytes(int32_t token) const {
    if (token < 0 || token >= n_tokens()) return {};
    const auto t = static_cast<size_t>(token);
    return {reinterpret_cast<const char *>(bytes_.data()) + offsets_[t],
            offsets_[t + 1] - offsets_[t]};
  }
  uint8_t flags(int32_t token) const {
    return token >= 0 && token < n_tokens() ? flags_[static_cast<size_t>(token)] : 0;
  }
  // Whether the token may be allowed for its bytes (not special, not empty,
  // not past the tokenizer): exactly the tokens of the vocabulary trie.
  bool is_text_token(int32_t token) const {
    return token >= 0 && token < n_tokens() && !(flags(token) & kTokenSpecial) &&
           !token_bytes(token).empty();
  }
  const VocabTrie &vocab_trie() const { return vocab_trie_; }
  // XXH64 of vocab_size, n_tokens and every token's flags and bytes (the
  // exact serialisation is in vocab.cc; changing it changes every value).
  uint64_t fingerprint() const { return fingerprint_; }
  // Bytes held (token bytes, offsets, flags, vocabulary trie).
  uint64_t memory_bytes() const;

  // The arrays as a string-set trie saves them (trie/layout.h, kVocab):
  // valid while the vocabulary lives.
  const uint8_t *bytes_data() const { return bytes_.data(); }
  uint64_t n_bytes() const { return bytes_.size(); }
  const uint32_t *offsets_data() const { return offsets_.data(); }
  const uint8_t *flags_data() const { return flags_.data(); }
  const uint64_t *fingerprint_data() const { return &fingerprint_; }

 private:
  friend Result<Ref<Vocab>> build_vocab(const VocabSpec &spec);
  friend Result<Ref<Vocab>> vocab_from_saved(const SavedVocab &s);
  Vocab() = default;
  // The fingerprint and the vocabulary trie, from the arrays.
  Status finish();

  int32_t vocab_size_ = 0;
  std::vector<uint8_t> bytes_;
  std::vector<uint32_t> offsets_;  // n_tokens + 1
  std::vector<uint8_t> flags_;     // n_tokens
  uint64_t fingerprint_ = 0;
  VocabTrie vocab_trie_;
};

// Every rule of build_vocab over saved arrays, and the fingerprint
// recomputed and compared with the saved one: kCorruptFile naming the first
// violation. Linear in the bytes.
Status check_saved_vocab(const SavedVocab &saved);

// A vocabulary with a copy of checked saved arrays (check_saved_vocab), its
// vocabulary trie built.
Result<Ref<Vocab>> vocab_from_saved(const SavedVocab &saved);

// Checks the spec (offsets start at 0, never decrease, end at bytes.size();
// flags sized and known; 1 <= n_tokens <= vocab_size; tokens no longer than
// kMaxTokenBytes; under 4 GiB of bytes) and builds the vocabulary and its
// vocabulary trie. Errors name the offending token id.
Result<Ref<Vocab>> build_vocab(const VocabSpec &spec);

}  // namespace treemask
