// A string set as a byte trie over a vocabulary: the byte-level kind of
// trie (src/README.md, "Kinds of trie"). A state is a node id (uint32, root
// = 0); token t is allowed at node s iff its bytes spell a path from s (it
// may end inside a string, and it may run on from one string's end into a
// longer string that continues it); a stop token is allowed iff s ends a
// string. Special tokens, empty tokens and ids past the tokenizer are never
// allowed as text (vocab.h), and a stop token is only ever a stop token,
// whatever its bytes.
//
// Layout (depth-first ids). The nodes are numbered in depth-first order with
// children by ascending byte, so a node's first child is the next id and a
// chain of single children (the tail of a string once it differs from every
// other) is a run of consecutive ids. The arrays are the byte-trie rows of
// the layout table (trie/layout.h), n = n_nodes:
//
//   byte_labels[n]             the byte on the edge into node n (byte_labels[0] = 0)
//   terminal_bits[words]       a string ends at n
//   unary_bits[words]          n has exactly one child: n + 1
//   branch_bits[words]         n has two or more children (the branch table)
//   branch_rank[words]         branch nodes in the words before w
//   branch_first[n_branches + 1]  branch k's children are
//                              [branch_first[k], branch_first[k + 1]) of:
//   child_bytes[n_branch_children]  ascending within a branch
//   child_ids[n_branch_children]
//
// A node with neither bit is a leaf (always terminal). Branch k is the k-th
// branch node in id order (rank of its bit). About 1.4 bytes per node plus
// 5 per child of a branching node and 4 per branching node: GeoNames' 150,634
// names with prefix " " take 2.96 bytes per node, 1.5 per byte of the names
// (bench_strings prints it). Child ids are greater than their parent's, so
// every walk down the trie ends. validate_byte_trie_arrays (trie/trie.h)
// checks every invariant the accessors below rely on, when the trie is built
// or loaded.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/refcount.h"
#include "core/status.h"
#include "strings/vocab.h"
#include "trie/trie.h"

namespace treemask {

// No child / not a node. Node ids stay below the rules' two reserved state
// values (0xFFFFFFFE terminated, 0xFFFFFFFF failed), as a token-path trie's do.
inline constexpr uint32_t kNoNode = 0xFFFFFFFFu;
inline constexpr uint64_t kMaxByteTrieNodes = kMaxNodes;

// Strings as one byte buffer: string i is bytes[offsets[i], offsets[i + 1]).
struct StringList {
  std::span<const uint8_t> bytes;
  std::span<const uint64_t> offsets;  // n_strings + 1
};

struct StringTrieOptions {
  // Budget of the dense-row cache (rows of expensive states, built lazily).
  size_t dense_row_cache_bytes = size_t{64} << 20;
  // A state's row is cached once its walk visits at least this many
  // vocabulary-trie nodes; 0 picks max(256, row words / 4) (byte_mask.cc).
  uint64_t dense_row_min_visits = 0;
};

class DenseRowCache;  // byte_mask.cc

// The string-set kind of trie (trie/trie_kind.h): the Trie of a string set
// holds one (string_set_of in strings/string_set.h finds it).
class StringTrie final : public TrieKind {
 public:
  // Over the arrays of a string-set trie (trie/layout.h: the byte-trie rows,
  // terminal_bits and stop_tokens), validated (validate_trie_arrays) and
  // alive while this object is: the Trie that holds this object owns them.
  StringTrie(Ref<Vocab> vocab, const TrieArrays &arrays, const StringTrieOptions &opts);
  ~StringTrie() override;

  const Ref<Vocab> &vocab_ref() const { return vocab_; }

  const Vocab &vocab() const { return *vocab_; }
  const TrieArrays &arrays() const { return a_; }
  uint32_t n_nodes() const { return static_cast<uint32_t>(a_.n_nodes); }
  int32_t vocab_size() const { return vocab_->vocab_size(); }
  size_t row_words() const { return (static_cast<size_t>(vocab_size()) + 31) / 32; }
  // The trie's own stop tokens (ascending, distinct).
  std::span<const int32_t> stop_tokens() const { return {a_.stop_tokens, a_.n_stop_tokens}; }

  // Node accessors: node < n_nodes() (callers check ids they did not make).
  bool is_terminal(uint32_t node) const { return bit(a_.terminal_bits, node); }
  // The child of node along byte, or kNoNode.
  uint32_t child(uint32_t node, uint8_t byte) const;
  // The node the bytes lead to from node, or kNoNode.
  uint32_t walk(uint32_t node, std::string_view bytes) const;
  // Children of a node: count, and (for i < count) byte and id of child i.
  uint32_t child_count(uint32_t node) const;
  uint8_t child_byte(uint32_t node, uint32_t i) const;
  uint32_t child_id(uint32_t node, uint32_t i) const;

  // Token acceptance: a stop token (of `stops`, ascending) terminates at a
  // terminal node and is rejected elsewhere; any other token advances along
  // its bytes or is rejected (special, empty, past the tokenizer, or a byte
  // string that leaves the trie).
  NodeStep step_token(uint32_t node, int32_t token, std::span<const int32_t> stops) const;
  NodeStep step_token(uint32_t node, int32_t token) const {
    return step_token(node, token, stop_tokens());
  }

  // Writes node's whole row (row_words() words; words up to
  // bitmask_row_words are zeroed): bit t set iff t is allowed. Returns the
  // number of allowed tokens. Thread-safe (the dense-row cache is shared).
  uint64_t write_allowed_row(uint32_t node, std::span<const int32_t> stops, uint32_t *row,
                             size_t bitmask_row_words) const;
  // The allowed tokens in ascending order, at most cap of them into out;
  // returns how many there are.
  size_t list_allowed(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                      size_t cap) const;

  // Forced bytes: the bytes every continuation from node begins with (the
  // chain of single children while the node is not terminal). Returns their
  // number, writing at most cap.
  size_t forced_bytes(uint32_t node, uint8_t *out, size_t cap) const override;
  // Forced tokens (jump-forward): see byte_mask.cc for the definition. At
  // most cap written; returns how many there are.
  size_t forced_tokens(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                       size_t cap) const override;
  size_t forced_tokens(uint32_t node, int32_t *out, size_t cap) const {
    return forced_tokens(node, stop_tokens(), out, cap);
  }

  // The bytes from the root to node (prefix included), for messages.
  std::string path_bytes(uint32_t node) const;

  // Vocabulary-trie nodes a walk from node visits (the cost of an uncached row;
  // for benchmarks and diagnostics).
  uint64_t walk_visits(uint32_t node) const;

  // Dense-row cache statistics.
  uint64_t dense_cache_bytes() const;
  uint64_t dense_cache_rows() const;

  // The kind's interface (trie/trie_kind.h), over the functions above.
  const char *name() const override { return "string-set trie"; }
  const char *unsupported(TrieFeature f) const override;
  uint64_t write_row(uint32_t node, std::span<const int32_t> stops, uint32_t *row) const override {
    return write_allowed_row(node, stops, row, 0);
  }
  size_t list(uint32_t node, std::span<const int32_t> stops, int32_t *out,
              size_t cap) const override {
    return list_allowed(node, stops, out, cap);
  }
  NodeStep step(uint32_t node, int32_t token, std::span<const int32_t> stops) const override {
    return step_token(node, token, stops);
  }
  bool is_leaf(uint32_t node) const override { return child_count(node) == 0; }
  std::string describe(uint32_t node) const override;

 private:
  static bool bit(const uint64_t *bits, uint32_t n) { return (bits[n >> 6] >> (n & 63)) & 1; }
  uint32_t branch_index(uint32_t node) const {
    const uint64_t below = a_.branch_bits[node >> 6] & ((uint64_t{1} << (node & 63)) - 1);
    return a_.branch_rank[node >> 6] + static_cast<uint32_t>(std::popcount(below));
  }

  friend struct ByteWalk;  // byte_mask.cc

  Ref<Vocab> vocab_;
  TrieArrays a_;  // a copy of the view, not of the arrays
  std::unique_ptr<DenseRowCache> cache_;
  uint64_t cache_min_visits_;
};

// The byte trie of prefix + each string, without a vocabulary: its arrays
// in a trie's storage (the byte-trie rows and terminal_bits of the layout
// table; not yet validated: the caller validates what it makes of them),
// the node each string ends at (by its index in the list) and the longest
// string with the prefix, in bytes. Errors: no strings, offsets that do not
// start at 0, decrease or overrun the bytes, too many nodes.
struct BuiltByteTrie {
  std::unique_ptr<VectorTrieStorage> storage;
  std::vector<uint32_t> ends;
  uint64_t max_depth = 0;
};
Result<BuiltByteTrie> build_byte_trie(const StringList &strings, std::string_view prefix);

}  // namespace treemask
