// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "trie/bfs_builder.h"

#include <algorithm>

namespace treemask {

BfsTrieBuilder::BfsTrieBuilder(const TrieBuildOptions &opts)
    : opts_(opts), storage_(std::make_unique<VectorTrieStorage>()) {
  opts_.no_labels = true;
}

Result<BfsTrieBuilder> BfsTrieBuilder::create(const TrieBuildOptions &opts) {
  if (opts.vocab_size <= 0) {
    return error(Code::kInvalidArgument, "vocab_size must be positive, got ", opts.vocab_size);
  }
  BfsTrieBuilder b(opts);
  TM_TRY(normalize_stop_tokens(b.opts_.vocab_size, b.opts_.stop_tokens));
  return b;
}

Status BfsTrieBuilder::add_node(std::span<const int32_t> children, bool terminal) {
  auto &s = *storage_;
  if (n_nodes_ >= nodes_expected()) {
    return error(Code::kInternal, "node ", n_nodes_, " has no parent edge");
  }
  if (s.edge_tokens.size() + children.size() >= kMaxNodes) {
    return error(Code::kOutOfRange, "the trie would have more than ", kMaxNodes, " nodes");
  }
  const auto &stops = opts_.stop_tokens;
  for (size_t i = 0; i < children.size(); ++i) {
    const int32_t t = children[i];
    if (t < 0 || t >= opts_.vocab_size || (i > 0 && t <= children[i - 1]) ||
        std::binary_search(stops.begin(), stops.end(), t)) {
      return error(Code::kInternal, "node ", n_nodes_, ": child token ", t,
                   " is out of order, out of range or a stop token");
    }
  }
  s.node_offsets.push_back(static_cast<uint32_t>(s.edge_tokens.size()));
  s.edge_tokens.insert(s.edge_tokens.end(), children.begin(), children.end());
  if (terminal) {
    if (s.terminal_bits.size() <= n_nodes_ / 64) s.terminal_bits.resize(n_nodes_ / 64 + 1, 0);
    s.terminal_bits[n_nodes_ / 64] |= uint64_t{1} << (n_nodes_ % 64);
  }
  max_fanout_ = std::max(max_fanout_, static_cast<uint32_t>(children.size()));
  if (++n_nodes_ == level_end_) {
    level_end_ = nodes_expected();
    if (level_end_ > n_nodes_) ++max_depth_;
  }
  return Status::Ok();
}

Result<Ref<Trie>> BfsTrieBuilder::finish() {
  if (n_nodes_ != nodes_expected()) {
    return error(Code::kInternal, "BFS build incomplete: ", n_nodes_, " nodes added, ",
                 nodes_expected(), " expected");
  }
  storage_->node_offsets.push_back(static_cast<uint32_t>(storage_->edge_tokens.size()));
  storage_->stop_tokens = opts_.stop_tokens;
  return finish_trie(std::move(storage_), opts_, max_depth_, max_fanout_);
}

}  // namespace treemask
