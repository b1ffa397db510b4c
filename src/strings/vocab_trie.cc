// Building the depth-first vocabulary trie: sort the tokens by their bytes, then
// walk them in order keeping the path of open nodes. A token shares the first
// lcp bytes with the one before it; the open nodes deeper than that are
// complete (their subtree sizes are known) and the token's remaining bytes
// become new nodes, appended in depth-first order.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/vocab_trie.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string_view>

namespace treemask {

namespace {

std::string_view bytes_of(const uint8_t *bytes, const uint32_t *offsets, uint32_t t) {
  return {reinterpret_cast<const char *>(bytes) + offsets[t], offsets[t + 1] - offsets[t]};
}

size_t common_prefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

Result<VocabTrie> VocabTrie::build(const uint8_t *bytes, const uint32_t *offsets,
                                   const std::vector<bool> &include) {
  std::vector<uint32_t> order;
  for (uint32_t t = 0; t < include.size(); ++t) {
    if (include[t]) order.push_back(t);
  }
  // By bytes, then by id: of two tokens with the same bytes the smaller id
  // gets the node that may have children (nothing depends on which).
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const std::string_view x = bytes_of(bytes, offsets, a), y = bytes_of(bytes, offsets, b);
    const int c = x.compare(y);
    return c != 0 ? c < 0 : a < b;
  });

  size_t total = 1;
  {
    std::string_view prev;
    for (uint32_t t : order) {
      const std::string_view w = bytes_of(bytes, offsets, t);
      const size_t lcp = std::min(common_prefix(prev, w), w.size() - 1);
      total += w.size() - lcp;
      prev = w;
    }
  }
  if (total > kMaxVocabTrieNodes) {
    return error(Code::kOutOfRange, "the vocabulary trie would have ", total, " nodes; at most ",
                 kMaxVocabTrieNodes, " are supported");
  }

  VocabTrie trie;
  auto &nodes = trie.nodes_;
  nodes.reserve(total);
  nodes.push_back({0, VocabTrieNode::kNoToken});
  std::vector<uint32_t> path{0};  // path[d]: the open node at depth d
  const auto close = [&](uint32_t n) {
    const auto size = static_cast<uint32_t>(nodes.size() - n);
    nodes[n].byte_and_size = (nodes[n].byte_and_size & 0xFF) | (size << 8);
  };
  std::string_view prev;
  for (uint32_t t : order) {
    const std::string_view w = bytes_of(bytes, offsets, t);
    // A duplicate of the previous token reopens its last byte: a new leaf
    // sibling with the same byte.
    const size_t lcp = std::min(common_prefix(prev, w), w.size() - 1);
    while (path.size() > lcp + 1) {
      close(path.back());
      path.pop_back();
    }
    for (size_t d = lcp; d < w.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({static_cast<uint8_t>(w[d]), VocabTrieNode::kNoToken});
    }
    nodes[path.back()].token = static_cast<int32_t>(t);
    trie.max_depth_ = std::max(trie.max_depth_, w.size());
    prev = w;
  }
  while (!path.empty()) {
    close(path.back());
    path.pop_back();
  }

  // root_index_[b]: the first root child with byte >= b.
  const auto end = static_cast<uint32_t>(nodes.size());
  trie.root_index_.fill(end);
  for (uint32_t c = nodes.size() > 1 ? 1 : end; c < end; c += nodes[c].subtree_size()) {
    const unsigned b = nodes[c].byte();
    for (unsigned x = b + 1; x-- > 0 && trie.root_index_[x] == end;) trie.root_index_[x] = c;
  }
  return trie;
}

}  // namespace treemask
