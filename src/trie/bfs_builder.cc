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

namespace {

// Rewrites a breadth-first trie without labels into the tail layout of
// trie.h: every unary chain down to a leaf (at most 255 nodes, tokens within
// 65,536 of the smallest edge token) below a node becomes that node's tail;
// the other nodes keep their breadth-first order. Node ids change (they are
// opaque); the paths do not.
void compress_tails(VectorTrieStorage &s, uint64_t n) {
  const auto &off = s.node_offsets;
  const auto &tok = s.edge_tokens;
  if (n < 2) return;
  const int32_t base = *std::min_element(tok.begin(), tok.end());
  auto fits = [&](uint64_t child) { return uint32_t(tok[child - 1]) - uint32_t(base) <= 0xFFFFu; };
  // chain[v]: the nodes of the unary chain down to a leaf that starts at v
  // (v included), 0 if v starts none; children have larger ids.
  std::vector<uint8_t> chain(n, 0);
  for (uint64_t v = n; v-- > 1;) {
    if (!fits(v)) continue;
    const uint32_t b = off[v], e = off[v + 1];
    if (b == e) {
      chain[v] = 1;  // a leaf (terminal: every leaf is)
    } else if (e - b == 1 && !test_bit64(s.terminal_bits.data(), static_cast<uint32_t>(v)) &&
               chain[b + 1] != 0 && chain[b + 1] < 255) {
      chain[v] = static_cast<uint8_t>(chain[b + 1] + 1);
    }
  }
  // A CSR node heads a tail when its one child starts a chain; the chain's
  // nodes follow one another by their single edges.
  auto heads_tail = [&](uint64_t v) { return off[v + 1] - off[v] == 1 && chain[off[v] + 1] != 0; };
  auto next_in_chain = [&](uint64_t c) -> uint64_t {
    return off[c] != off[c + 1] ? off[c] + 1 : 0;
  };
  std::vector<bool> in_tail(n, false);
  uint64_t n_explicit = 0;
  for (uint64_t v = 0; v < n; ++v) {
    if (in_tail[v]) continue;
    ++n_explicit;
    if (!heads_tail(v)) continue;
    for (uint64_t c = off[v] + 1; c != 0; c = next_in_chain(c)) in_tail[c] = true;
  }
  if (n_explicit == n) return;
  // The CSR nodes keep their order (new id = rank among them); each tail
  // follows in the order of its head.
  VectorTrieStorage out;
  out.node_offsets.reserve(n_explicit + 1);
  out.terminal_bits.assign((n + 63) / 64, 0);
  out.head_bits.assign((n_explicit + 63) / 64, 0);
  uint64_t id = 0;
  for (uint64_t v = 0; v < n; ++v) {
    if (in_tail[v]) continue;
    out.node_offsets.push_back(static_cast<uint32_t>(out.edge_tokens.size()));
    if (test_bit64(s.terminal_bits.data(), static_cast<uint32_t>(v))) {
      out.terminal_bits[id / 64] |= uint64_t{1} << (id % 64);
    }
    const uint32_t b = off[v], e = off[v + 1];
    if (heads_tail(v)) {
      out.head_bits[id / 64] |= uint64_t{1} << (id % 64);
      out.tail_lengths.push_back(chain[b + 1]);
      for (uint64_t c = b + 1; c != 0; c = next_in_chain(c)) {
        out.tail_tokens.push_back(static_cast<uint16_t>(uint32_t(tok[c - 1]) - uint32_t(base)));
      }
    } else {
      out.edge_tokens.insert(out.edge_tokens.end(), tok.begin() + b, tok.begin() + e);
    }
    ++id;
  }
  out.node_offsets.push_back(static_cast<uint32_t>(out.edge_tokens.size()));
  out.tail_base = base;
  out.stop_tokens = std::move(s.stop_tokens);
  s = std::move(out);  // tail leaves' terminal bits: finish_trie
}

}  // namespace

Result<Ref<Trie>> BfsTrieBuilder::finish() {
  if (n_nodes_ != nodes_expected()) {
    return error(Code::kInternal, "BFS build incomplete: ", n_nodes_, " nodes added, ",
                 nodes_expected(), " expected");
  }
  storage_->node_offsets.push_back(static_cast<uint32_t>(storage_->edge_tokens.size()));
  storage_->stop_tokens = opts_.stop_tokens;
  if (opts_.compress_tails) compress_tails(*storage_, n_nodes_);
  return finish_trie(std::move(storage_), opts_, max_depth_, max_fanout_);
}

}  // namespace treemask
