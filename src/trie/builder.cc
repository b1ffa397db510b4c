// Building a trie from token paths, level by level (an MSD radix walk): the
// paths sharing a node's prefix form one contiguous group; sorting a group by
// its next token yields the node's children in order, and handing out child
// ids group by group, level by level, numbers the nodes breadth-first.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <numeric>

#include "trie/trie.h"

namespace treemask {

namespace {

struct Group {
  uint32_t node;
  uint32_t begin;  // range in the permutation of path indices
  uint32_t end;
};

Status validate_paths(const TrieBuildOptions &opts, std::span<const int32_t> tokens,
                      std::span<const size_t> offsets) {
  const size_t n_paths = offsets.size() - 1;
  if (n_paths == 0) return error(Code::kInvalidArgument, "at least one path is required");
  if (n_paths >= kMaxNodes) {
    return error(Code::kOutOfRange, "too many paths: ", n_paths, " (at most ", kMaxNodes - 1, ")");
  }
  if (offsets[0] != 0) {
    return error(Code::kInvalidArgument, "offsets[0] must be 0, got ", offsets[0]);
  }
  for (size_t i = 0; i < n_paths; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return error(Code::kInvalidArgument, "offsets must be non-decreasing: offsets[", i + 1,
                   "] = ", offsets[i + 1], " < offsets[", i, "] = ", offsets[i]);
    }
  }
  if (offsets[n_paths] != tokens.size()) {
    return error(Code::kInternal, "token span does not match offsets");
  }
  const auto &stops = opts.stop_tokens;
  const int32_t stop_min = stops.front(), stop_max = stops.back();
  const int32_t vocab = opts.vocab_size;
  for (size_t i = 0; i < n_paths; ++i) {
    for (size_t j = offsets[i]; j < offsets[i + 1]; ++j) {
      const int32_t t = tokens[j];
      if (t < 0 || t >= vocab) {
        return error(Code::kOutOfRange, "path ", i, ", position ", j - offsets[i], ": token ", t,
                     " is out of range [0, vocab_size=", vocab, ")");
      }
      if (t >= stop_min && t <= stop_max && std::binary_search(stops.begin(), stops.end(), t)) {
        return error(Code::kInvalidArgument, "path ", i, ", position ", j - offsets[i],
                     ": stop token ", t,
                     " may not appear in a path at all (not even last: a path ends where its "
                     "sequence ends, and the stop token is then allowed by itself)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Ref<Trie>> build_trie_from_paths(const TrieBuildOptions &opts_in,
                                        std::span<const int32_t> tokens,
                                        std::span<const size_t> offsets, const int64_t *label_ids) {
  TrieBuildOptions opts = opts_in;
  if (opts.vocab_size <= 0) {
    return error(Code::kInvalidArgument, "vocab_size must be positive, got ", opts.vocab_size);
  }
  TM_TRY(normalize_stop_tokens(opts.vocab_size, opts.stop_tokens));
  if (offsets.empty())
    return error(Code::kInvalidArgument, "offsets must have n_paths + 1 entries");
  TM_TRY(validate_paths(opts, tokens, offsets));

  const auto n_paths = static_cast<uint32_t>(offsets.size() - 1);
  auto storage = std::make_unique<VectorTrieStorage>();
  auto &node_offsets = storage->node_offsets;
  auto &edge_tokens = storage->edge_tokens;
  auto &terminal_bits = storage->terminal_bits;
  auto &first_labels = storage->first_labels;
  auto &multi_ranks = storage->multi_ranks;
  auto &multi_offsets = storage->multi_offsets;
  auto &multi_labels = storage->multi_labels;

  std::vector<uint32_t> perm(n_paths);
  std::iota(perm.begin(), perm.end(), 0u);
  std::vector<Group> level{{0, 0, n_paths}}, next_level;
  // (token + 1) << 32 | path: token -1 (the path ends here) sorts first.
  std::vector<uint64_t> keys;
  std::vector<int64_t> node_labels;
  uint64_t n_nodes = 1;
  uint32_t depth = 0, max_depth = 0, max_fanout = 0;
  node_offsets.push_back(0);
  multi_offsets.push_back(0);
  uint64_t n_terminals = 0;

  auto path_len = [&](uint32_t p) { return offsets[p + 1] - offsets[p]; };
  // Tails: unary chains down to a leaf, stored as uint16 deltas from
  // tail_base (the smallest token of any path) when each fits.
  auto &head_bits = storage->head_bits;
  auto &tail_tokens = storage->tail_tokens;
  std::vector<int64_t> tail_labels;  // by tail, after every CSR terminal in rank
  int32_t tail_base = 0;
  if (!tokens.empty()) tail_base = *std::min_element(tokens.begin(), tokens.end());
  auto fits_tail = [&](uint32_t p) {
    if (!opts.compress_tails || path_len(p) - depth > 255) return false;
    if (tail_tokens.size() + path_len(p) - depth + n_nodes >= kMaxNodes) return false;
    for (size_t j = offsets[p] + depth; j < offsets[p + 1]; ++j) {
      if (uint32_t(tokens[j]) - uint32_t(tail_base) > 0xFFFFu) return false;
    }
    return true;
  };
  auto mark_terminal = [&](uint32_t node) {
    if (terminal_bits.size() <= node / 64) terminal_bits.resize(node / 64 + 1, 0);
    terminal_bits[node / 64] |= uint64_t{1} << (node % 64);
    std::sort(node_labels.begin(), node_labels.end());
    node_labels.erase(std::unique(node_labels.begin(), node_labels.end()), node_labels.end());
    if (!node_labels.empty()) first_labels.push_back(node_labels.front());
    if (node_labels.size() > 1) {
      multi_ranks.push_back(static_cast<uint32_t>(n_terminals));
      multi_labels.insert(multi_labels.end(), node_labels.begin(), node_labels.end());
      multi_offsets.push_back(static_cast<uint32_t>(multi_labels.size()));
    }
    ++n_terminals;
    node_labels.clear();
  };
  auto add_label = [&](uint32_t p) {
    if (!opts.no_labels) node_labels.push_back(label_ids ? label_ids[p] : int64_t{p});
  };
  auto add_child = [&](int32_t token, uint32_t begin, uint32_t end) -> Status {
    if (n_nodes >= kMaxNodes) {
      return error(Code::kOutOfRange, "the trie would have more than ", kMaxNodes, " nodes");
    }
    edge_tokens.push_back(token);
    next_level.push_back({static_cast<uint32_t>(n_nodes++), begin, end});
    return Status::Ok();
  };

  while (!level.empty()) {
    for (const Group &g : level) {
      const uint32_t count = g.end - g.begin;
      const size_t edges_before = edge_tokens.size();
      if (count == 1) {  // a single path continues: no sort needed
        const uint32_t p = perm[g.begin];
        if (path_len(p) == depth) {
          add_label(p);
          mark_terminal(g.node);
        } else if (fits_tail(p)) {
          // The rest of the path is a unary chain to a leaf: g.node heads a
          // tail (its leaf is terminal; its id and bit are set in finish_trie).
          if (head_bits.size() <= g.node / 64) head_bits.resize(g.node / 64 + 1, 0);
          head_bits[g.node / 64] |= uint64_t{1} << (g.node % 64);
          storage->tail_lengths.push_back(static_cast<uint8_t>(path_len(p) - depth));
          for (size_t j = offsets[p] + depth; j < offsets[p + 1]; ++j) {
            tail_tokens.push_back(static_cast<uint16_t>(uint32_t(tokens[j]) - uint32_t(tail_base)));
          }
          if (!opts.no_labels) tail_labels.push_back(label_ids ? label_ids[p] : int64_t{p});
          max_depth = std::max<uint32_t>(max_depth, static_cast<uint32_t>(path_len(p)));
          max_fanout = std::max(max_fanout, 1u);
        } else {
          TM_TRY(add_child(tokens[offsets[p] + depth], g.begin, g.end));
        }
      } else {
        keys.clear();
        for (uint32_t i = g.begin; i < g.end; ++i) {
          const uint32_t p = perm[i];
          const int64_t token = path_len(p) > depth ? tokens[offsets[p] + depth] : -1;
          keys.push_back(static_cast<uint64_t>(token + 1) << 32 | p);
        }
        std::sort(keys.begin(), keys.end());
        uint32_t i = 0;
        for (; i < count && (keys[i] >> 32) == 0; ++i) add_label(uint32_t(keys[i]));
        if (i > 0) mark_terminal(g.node);
        while (i < count) {
          const uint64_t token_key = keys[i] >> 32;
          uint32_t j = i;
          for (; j < count && (keys[j] >> 32) == token_key; ++j)
            perm[g.begin + j] = uint32_t(keys[j]);
          TM_TRY(add_child(static_cast<int32_t>(token_key - 1), g.begin + i, g.begin + j));
          i = j;
        }
      }
      max_fanout = std::max(max_fanout, static_cast<uint32_t>(edge_tokens.size() - edges_before));
      node_offsets.push_back(static_cast<uint32_t>(edge_tokens.size()));
    }
    if (!next_level.empty()) max_depth = std::max(max_depth, ++depth);
    level.swap(next_level);
    next_level.clear();
  }

  if (multi_labels.size() > 0xFFFFFFFFull) {
    return error(Code::kOutOfRange, "too many labels on duplicate paths: ", multi_labels.size());
  }
  first_labels.insert(first_labels.end(), tail_labels.begin(), tail_labels.end());
  // Labels that all fit in [0, 2^32) (item ids, path indices) take 4 bytes.
  if (!opts.no_labels && std::all_of(first_labels.begin(), first_labels.end(), [](int64_t l) {
        return l >= 0 && l <= int64_t{0xFFFFFFFF};
      })) {
    storage->first_labels32.assign(first_labels.begin(), first_labels.end());
    std::vector<int64_t>().swap(first_labels);
  }
  storage->stop_tokens = opts.stop_tokens;
  storage->tail_base = tail_tokens.empty() ? 0 : tail_base;
  return finish_trie(std::move(storage), opts, max_depth, max_fanout);
}

Result<Ref<Trie>> finish_trie(std::unique_ptr<VectorTrieStorage> storage,
                              const TrieBuildOptions &opts, uint32_t max_depth,
                              uint32_t max_fanout) {
  const uint64_t n_explicit = storage->node_offsets.size() - 1;
  const uint64_t n_nodes = n_explicit + storage->tail_tokens.size();
  if (n_nodes > kMaxNodes) {
    return error(Code::kOutOfRange, "the trie would have more than ", kMaxNodes, " nodes");
  }
  auto &terminal_bits = storage->terminal_bits;
  terminal_bits.resize((n_nodes + 63) / 64, 0);
  // The last node of each tail is its leaf; every 16th tail's start is
  // sampled.
  const auto &lengths = storage->tail_lengths;
  auto &samples = storage->tail_samples;
  samples.clear();
  uint64_t end = 0;
  for (size_t k = 0; k < lengths.size(); ++k) {
    if (k % kTailSample == 0) samples.push_back(static_cast<uint32_t>(end));
    end += lengths[k];
    const uint64_t leaf = n_explicit + end - 1;
    terminal_bits[leaf / 64] |= uint64_t{1} << (leaf % 64);
  }
  auto rank_of = [](const std::vector<uint64_t> &bits, std::vector<uint32_t> &rank) {
    rank.resize(bits.size());
    uint32_t running = 0;
    for (size_t w = 0; w < bits.size(); ++w) {
      rank[w] = running;
      running += static_cast<uint32_t>(std::popcount(bits[w]));
    }
    return running;
  };
  const uint32_t running = rank_of(terminal_bits, storage->terminal_rank);
  storage->head_bits.resize(lengths.empty() ? 0 : (n_explicit + 63) / 64, 0);
  rank_of(storage->head_bits, storage->head_rank);
  uint32_t tail_range = 0;
  for (uint16_t t : storage->tail_tokens) tail_range = std::max<uint32_t>(tail_range, t + 1u);
  if (storage->multi_offsets.empty()) storage->multi_offsets.push_back(0);

  TrieArrays arrays;
  arrays.n_nodes = n_nodes;
  arrays.n_explicit = n_explicit;
  arrays.n_heads = lengths.size();
  arrays.n_terminals = running;
  arrays.n_multi = storage->multi_ranks.size();
  arrays.n_multi_labels = storage->multi_labels.size();
  arrays.n_stop_tokens = static_cast<uint32_t>(storage->stop_tokens.size());
  arrays.vocab_size = opts.vocab_size;
  arrays.tail_base = storage->tail_base;
  arrays.tail_range = tail_range;
  arrays.label_bytes = opts.no_labels ? 0 : !storage->first_labels32.empty() ? 4 : 8;
  arrays.max_depth = max_depth;
  arrays.max_fanout = max_fanout;
  TM_TRY(storage->check_sizes(arrays));
  storage->view(arrays);
  // Validated with the derived tail_values table in place, as every trie.
  auto trie = Ref<Trie>::adopt(new Trie(std::move(storage), arrays, opts.dense_row_cache_bytes));
  if (Status s = validate_trie_arrays(trie->arrays()); !s.ok()) {
    return error(Code::kInternal, "built an inconsistent trie: ", s.message());
  }
  return trie;
}

}  // namespace treemask
