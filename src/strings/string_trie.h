// A string set as a byte trie over a vocabulary: the byte-level kind of
// constraint (DESIGN.md §1, sources item 4). A state is a node id (uint32,
// root = 0); token t is allowed at node s iff its bytes spell a path from s
// (it may end inside a string, and it may run on from one string's end into
// a longer string that continues it); a stop token is allowed iff s ends a
// string. Special tokens, empty tokens and ids past the tokenizer are never
// allowed as text (vocab.h), and a stop token is only ever a stop token,
// whatever its bytes.
//
// Layout (depth-first ids). The nodes are numbered in depth-first order with
// children by ascending byte, so a node's first child is the next id and a
// chain of single children (the tail of a string once it differs from every
// other) is a run of consecutive ids:
//
//   labels[n_nodes]            the byte on the edge into node n (labels[0] = 0)
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
// every walk down the trie ends. validate_byte_trie_arrays checks every
// invariant the accessors below rely on.
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

namespace treemask {

// No child / not a node. Node ids stay below the rules' two reserved state
// values (0xFFFFFFFE terminated, 0xFFFFFFFF failed), as a token trie's do.
inline constexpr uint32_t kNoNode = 0xFFFFFFFFu;
inline constexpr uint64_t kMaxByteTrieNodes = 0xFFFFFFFDu;

struct ByteTrieArrays {
  const uint8_t *labels = nullptr;
  const uint64_t *terminal_bits = nullptr;
  const uint64_t *unary_bits = nullptr;
  const uint64_t *branch_bits = nullptr;
  const uint32_t *branch_rank = nullptr;
  const uint32_t *branch_first = nullptr;
  const uint8_t *child_bytes = nullptr;
  const uint32_t *child_ids = nullptr;
  uint64_t n_nodes = 0;
  uint64_t n_branches = 0;
  uint64_t n_branch_children = 0;

  uint64_t words() const { return (n_nodes + 63) / 64; }
  uint64_t bytes() const {
    return n_nodes + words() * (3 * 8 + 4) + (n_branches + 1) * 4 + n_branch_children * 5;
  }
};

struct ByteTrieStorage {
  std::vector<uint8_t> labels;
  std::vector<uint64_t> terminal_bits, unary_bits, branch_bits;
  std::vector<uint32_t> branch_rank;
  std::vector<uint32_t> branch_first;
  std::vector<uint8_t> child_bytes;
  std::vector<uint32_t> child_ids;

  ByteTrieArrays view() const;
};

// Every invariant the accessors rely on, in one linear pass: sizes, the
// three bits (unary and branch exclusive, a leaf is terminal, a unary node's
// child exists and a branch's children are >= 2, in range, ascending by
// byte and by id, above the parent and labelled with their byte, the first
// being n + 1), the rank directory. kCorruptFile names the first violation.
Status validate_byte_trie_arrays(const ByteTrieArrays &a);

// Strings as one byte buffer: string i is bytes[offsets[i], offsets[i + 1]).
struct StringList {
  std::span<const uint8_t> bytes;
  std::span<const uint64_t> offsets;  // n_strings + 1
};

struct StringTrieOptions {
  std::vector<int32_t> stop_tokens;  // at least one, < vocab_size
  std::string prefix;                // put before every string (any bytes)
  // Budget of the dense-row cache (rows of expensive states, built lazily).
  size_t dense_row_cache_bytes = size_t{64} << 20;
  // A state's row is cached once its walk visits at least this many
  // token-trie nodes; 0 picks max(256, row words / 4) (byte_mask.cc).
  uint64_t dense_row_min_visits = 0;
};

// What a token does at a node.
struct TokenStep {
  enum Kind : uint8_t { kAdvanced, kTerminated, kRejected };
  Kind kind;
  uint32_t node;  // the node reached (kAdvanced), else kNoNode
};

class DenseRowCache;  // byte_mask.cc

class StringTrie final : public RefCounted {
 public:
  StringTrie(Ref<Vocab> vocab, std::unique_ptr<ByteTrieStorage> storage,
             std::vector<int32_t> stop_tokens, const StringTrieOptions &opts);
  // Over arrays someone else owns (a string-set Trie's storage: a built
  // trie's vectors or a mapped .tmtrie file), validated
  // (validate_byte_trie_arrays) and alive while this object is.
  StringTrie(Ref<Vocab> vocab, const ByteTrieArrays &arrays, std::vector<int32_t> stop_tokens,
             const StringTrieOptions &opts);
  ~StringTrie();

  const Ref<Vocab> &vocab_ref() const { return vocab_; }

  const Vocab &vocab() const { return *vocab_; }
  const ByteTrieArrays &arrays() const { return a_; }
  uint32_t n_nodes() const { return static_cast<uint32_t>(a_.n_nodes); }
  int32_t vocab_size() const { return vocab_->vocab_size(); }
  size_t row_words() const { return (static_cast<size_t>(vocab_size()) + 31) / 32; }
  std::span<const int32_t> stop_tokens() const { return stop_tokens_; }
  const std::string &prefix() const { return prefix_; }

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
  TokenStep step_token(uint32_t node, int32_t token, std::span<const int32_t> stops) const;
  TokenStep step_token(uint32_t node, int32_t token) const {
    return step_token(node, token, stop_tokens_);
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
  size_t forced_bytes(uint32_t node, uint8_t *out, size_t cap) const;
  // Forced tokens (jump-forward): see byte_mask.cc for the definition. At
  // most cap written; returns how many there are.
  size_t forced_tokens(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                       size_t cap) const;
  size_t forced_tokens(uint32_t node, int32_t *out, size_t cap) const {
    return forced_tokens(node, stop_tokens_, out, cap);
  }

  // The bytes from the root to node (prefix included), for messages.
  std::string path_bytes(uint32_t node) const;

  // Token-trie nodes a walk from node visits (the cost of an uncached row;
  // for benchmarks and diagnostics).
  uint64_t walk_visits(uint32_t node) const;

  // Dense-row cache statistics.
  uint64_t dense_cache_bytes() const;
  uint64_t dense_cache_rows() const;

  // Bytes held by the trie's arrays (the vocabulary not included).
  uint64_t memory_bytes() const { return a_.bytes(); }

 private:
  static bool bit(const uint64_t *bits, uint32_t n) { return (bits[n >> 6] >> (n & 63)) & 1; }
  uint32_t branch_index(uint32_t node) const {
    const uint64_t below = a_.branch_bits[node >> 6] & ((uint64_t{1} << (node & 63)) - 1);
    return a_.branch_rank[node >> 6] + static_cast<uint32_t>(std::popcount(below));
  }

  friend struct ByteWalk;  // byte_mask.cc

  Ref<Vocab> vocab_;
  std::unique_ptr<ByteTrieStorage> storage_;
  ByteTrieArrays a_;
  std::vector<int32_t> stop_tokens_;
  std::string prefix_;
  std::unique_ptr<DenseRowCache> cache_;
  uint64_t cache_min_visits_;
};

// The byte trie of prefix + each string, without a vocabulary: the arrays
// (not yet validated: the caller validates what it makes of them), the node
// each string ends at (by its index in the list) and the longest string
// with the prefix, in bytes. Errors: those of build_string_trie below about
// the strings.
struct BuiltByteTrie {
  std::unique_ptr<ByteTrieStorage> storage;
  std::vector<uint32_t> ends;
  uint64_t max_depth = 0;
};
Result<BuiltByteTrie> build_byte_trie(const StringList &strings, std::string_view prefix);

// Builds the trie of prefix + each string over vocab. Strings are any bytes
// (not checked as UTF-8: a tokenizer's bytes need not be either);
// duplicates merge; the empty string makes the node after the prefix
// terminal. Errors: no strings, offsets that do not start at 0, decrease or
// overrun the bytes, too many nodes, bad stop tokens.
Result<Ref<StringTrie>> build_string_trie(Ref<Vocab> vocab, const StringTrieOptions &opts,
                                          const StringList &strings);

}  // namespace treemask
