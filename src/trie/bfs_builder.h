// Builds a trie from nodes handed over already in the layout of trie.h:
// breadth first, the root first, each node with its child tokens ascending.
// The children of the nodes of one level are the nodes of the next, in order.
// Sources that list every node's children (an RTP-LLM prefix dictionary,
// walked level by level) use it to skip materialising and re-sorting paths.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"
#include "trie/trie.h"

namespace treemask {

class BfsTrieBuilder {
 public:
  // Checks vocab_size and the stop tokens. The trie has no labels.
  static Result<BfsTrieBuilder> create(const TrieBuildOptions &opts);

  // Adds the next node. children: strictly ascending, each in
  // [0, vocab_size) and not a stop token (callers check with better names for
  // the node; this check only guards the layout).
  Status add_node(std::span<const int32_t> children, bool terminal);

  // Nodes added so far, and how many the edges added so far lead to
  // (1 + edges): the build is complete when the two are equal.
  uint64_t nodes_added() const { return n_nodes_; }
  uint64_t nodes_expected() const { return storage_->edge_tokens.size() + 1; }

  // Errors if nodes_added() != nodes_expected().
  Result<Ref<Trie>> finish();

 private:
  explicit BfsTrieBuilder(const TrieBuildOptions &opts);

  TrieBuildOptions opts_;
  std::unique_ptr<VectorTrieStorage> storage_;
  uint64_t n_nodes_ = 0;
  uint64_t level_end_ = 1;  // first node id of the next level
  uint32_t max_depth_ = 0;
  uint32_t max_fanout_ = 0;
};

}  // namespace treemask
