// The vocabulary trie: every text token's bytes in one byte trie,
// flattened in depth-first order with subtree sizes (the layout of
// llguidance's toktrie), so that a walk against a constraint can skip a whole
// subtree (every token that starts with a rejected byte string) in one step.
//
// Layout. Node 0 is the root (no byte, no token). The nodes of a subtree are
// contiguous, the subtree's root first: node n's first child is n + 1 (when
// subtree_size(n) > 1), and its next sibling is n + subtree_size(n).
// Siblings ascend by byte. A token id sits on the node its bytes lead to;
// two tokens with the same bytes get two sibling nodes with the same byte
// (the second a leaf), so every node carries at most one token. 8 bytes a
// node; Qwen2.5's 151,643 text tokens make 333,010 nodes.
//
// The root keeps a table from a first byte to its child, so that a walk from
// a state that allows few first bytes jumps to them instead of scanning the
// root's ~256 children.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace treemask {

struct VocabTrieNode {
  uint32_t byte_and_size;  // byte in the low 8 bits, subtree size (this node included) above
  int32_t token;           // the token ending here, or kNoToken

  static constexpr int32_t kNoToken = -1;
  uint8_t byte() const { return static_cast<uint8_t>(byte_and_size & 0xFF); }
  uint32_t subtree_size() const { return byte_and_size >> 8; }
};
static_assert(sizeof(VocabTrieNode) == 8);

// At most 2^24 - 1 nodes (the subtree size's 24 bits): ~2 million tokens of
// 8 bytes each; a vocabulary past it is a build error.
inline constexpr size_t kMaxVocabTrieNodes = (size_t{1} << 24) - 1;

class VocabTrie {
 public:
  // Builds the trie of tokens [0, n_tokens) whose include[t] is true: token
  // t's bytes are bytes[offsets[t], offsets[t + 1]) (non-empty for every
  // included token).
  static Result<VocabTrie> build(const uint8_t *bytes, const uint32_t *offsets,
                                 const std::vector<bool> &include);

  const VocabTrieNode *nodes() const { return nodes_.data(); }
  size_t n_nodes() const { return nodes_.size(); }
  // The root's first child whose byte is >= b, or root_end() (b in [0, 256]).
  uint32_t root_child_at_or_after(unsigned b) const { return root_index_[b]; }
  uint32_t root_end() const { return static_cast<uint32_t>(nodes_.size()); }
  // Bytes of the longest token (the deepest node).
  size_t max_depth() const { return max_depth_; }
  size_t memory_bytes() const { return nodes_.capacity() * sizeof(VocabTrieNode); }

 private:
  std::vector<VocabTrieNode> nodes_;
  std::array<uint32_t, 257> root_index_{};
  size_t max_depth_ = 0;
};

}  // namespace treemask
