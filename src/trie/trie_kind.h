// The kinds of trie (src/README.md, "Kinds of trie"). Every trie keeps its
// arrays in the one layout table (trie/layout.h); what its nodes mean
// depends on its kind:
//
// - a token-path trie: the nodes are the CSR nodes and tails of trie.h, a
//   token leads along one edge; the plain rule (rules/plain_rules.h) steps
//   it, on the host and on a device.
// - a string-set trie: the nodes are a byte trie's (strings/string_trie.h),
//   a token leads along its bytes, through the vocabulary.
//
// A kind other than token paths answers for its nodes through TrieKind, an
// interface the trie layer owns and the kind's own layer implements (the
// strings layer: StringTrie), so the trie layer never includes a layer
// above it. The Trie holds its kind's object (Trie::kind(), null for token
// paths). The layers above never test the kind themselves: the rule of
// either kind is chosen once by rules/trie_rules.h (TrieRules), and what a
// kind does not support is refused there, with one message
// (check_supported).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/refcount.h"

namespace treemask {

// What a token does at a node.
struct NodeStep {
  enum Kind : uint8_t {
    kAdvanced,    // to `node`
    kTerminated,  // a stop token where a sequence may end
    kRejected,    // not allowed here
  };
  Kind kind;
  uint32_t node;  // the node reached (kAdvanced), else 0xFFFFFFFF
};

// What the layers above ask of a trie that not every kind supports.
enum class TrieFeature : uint8_t {
  kDecodingModes,  // multi-label, leaves_only, think, length budgets, label filters, exclusions
  kDeviceSteps,    // the device trie of the CUDA steps
  kTokenPaths,     // listing the token paths
};

// The node rules of a kind of trie other than token paths. Node ids are the
// trie's (< n_nodes); `stops` are the stop tokens in force (the trie's or a
// matcher's override), ascending. Thread-safe: a trie is shared.
class TrieKind : public RefCounted {
 public:
  virtual ~TrieKind() = default;

  // The kind, for messages ("string-set trie").
  virtual const char *name() const = 0;
  // Why this kind does not support f (the end of a sentence that says it is
  // unsupported), or null when it does.
  virtual const char *unsupported(TrieFeature f) const = 0;

  // Writes node's row (the vocabulary's words, all of them): bit t set iff
  // t is allowed, the stop tokens where a sequence may end. Returns how many
  // tokens are allowed.
  virtual uint64_t write_row(uint32_t node, std::span<const int32_t> stops,
                             uint32_t *row) const = 0;
  // The allowed tokens, ascending, at most cap of them into out; returns
  // how many there are.
  virtual size_t list(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                      size_t cap) const = 0;
  // Where token leads from node.
  virtual NodeStep step(uint32_t node, int32_t token, std::span<const int32_t> stops) const = 0;
  // Whether node has no continuation but a stop token.
  virtual bool is_leaf(uint32_t node) const = 0;
  // The tokens every continuation from node begins with, as the kind
  // defines them (jump-forward), at most cap into out; returns how many.
  virtual size_t forced_tokens(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                               size_t cap) const = 0;
  // The bytes every continuation from node begins with, at most cap into
  // out; returns how many (0 for a kind without bytes).
  virtual size_t forced_bytes(uint32_t node, uint8_t *out, size_t cap) const = 0;
  // The node for a debug line (`bytes="..."`).
  virtual std::string describe(uint32_t node) const = 0;
};

}  // namespace treemask
