// The compiled trie: immutable flat arrays, shared by matchers and threads.
// Its kind (src/README.md, "Kinds of trie"; trie_kind.h) says what its nodes
// are; below, the layout of a token-path trie's nodes (a string set's byte
// trie is strings/string_trie.h's).
//
// Layout (BFS order). Nodes are numbered breadth-first with the root = 0 and
// the children of each node in ascending token order. Then the edges, listed
// node by node, are in the same order as the nodes they lead to: edge e leads
// to node e + 1. So a node needs only the CSR offset of its first edge, and a
// child id is computed, not stored. The arrays, their element types and
// counts are listed once, in trie/layout.h; what they mean:
//
//   node_offsets               edges of CSR node n are [node_offsets[n], node_offsets[n + 1])
//   edge_tokens                sorted ascending within a node
//   terminal_bits, terminal_rank: bitset over the nodes + rank directory
//   first_labels               by terminal rank: the smallest label of each
//                              terminal (absent when the trie has no labels);
//                              uint32 (first_labels32) when every one fits
//                              (label_bytes: 8, 4, or 0 without labels)
//   multi_ranks, multi_offsets, multi_labels: the few terminals with more
//     than one label (duplicate paths, semantic-ID collisions), ascending by
//     rank, with all their labels
//   stop_tokens                ascending, distinct
//
// Tails. Below the depth where a catalogue stops branching, most nodes lie
// on unary chains: one child each, down to a leaf. Such a chain is stored as
// a tail instead of as CSR nodes. Nodes [0, n_explicit) are the CSR nodes
// above; nodes [n_explicit, n_nodes) are tail nodes, tail by tail:
//
//   head_bits, head_rank       the explicit nodes without CSR edges whose
//                              one child starts a tail (a head may itself be
//                              terminal), with their rank directory
//   tail_lengths               uint8, one per head: the length of head k's
//                              tail (1..255; a longer chain keeps CSR nodes
//                              above its tail)
//   tail_samples               where tails 0, 16, 32, ... start
//
// Tail k is the nodes n_explicit + [start(k), start(k) + tail_lengths[k]),
// start(k) = tail_samples[k / 16] + the lengths of the tails before k in its
// group of 16 (node_edges.h), so a tail costs 1.25 bytes of index.
//   tail_tokens                uint16, one per tail node: the token into
//                              tail node n_explicit + i is tail_base + tail_tokens[i]
//
// Within a tail only the last node (a leaf) is terminal, so a tail node's one
// child is the next id unless its terminal bit is set. Chains whose tokens
// do not fit tail_base + [0, 65536) stay CSR nodes. tail_values (derived,
// not stored in a file) holds tail_base + k at k < tail_range, so that a tail node's
// child token is a pointer into the trie like a CSR edge's (node_edges.h).
// The path builder emits a tail as soon as one path is left below a node;
// the breadth-first builder (an RTP-LLM dictionary) rewrites its chains into
// tails once complete. A trie without tails has empty head arrays
// (n_explicit == n_nodes).
//
// About 8 bytes per CSR node, 2 per tail node and 1.25 per tail, plus 4 per
// labelled terminal (8 when a label lies outside [0, 2^32)). Because a CSR
// node's first edge index is >= its own id and tail nodes follow every CSR
// node, child ids strictly increase along any walk. Every trie is validated
// once when it is built or loaded (validate_trie_arrays), so the accessors
// below trust the arrays and check nothing.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/bits.h"
#include "core/refcount.h"
#include "core/status.h"
#include "trie/find_token.h"
#include "trie/layout.h"
#include "trie/node_edges.h"
#include "trie/trie_kind.h"

namespace treemask {

class TrieAnnotations;  // trie/annotations.h

// Node ids stay below the two reserved state values of the rules
// (rules/plain_rules.h: kStateTerminated, kStateFailed).
inline constexpr uint64_t kMaxNodes = 0xFFFFFFFDu;

// Views of every array (trie/layout.h) with the counts. They point into
// memory owned by a TrieStorage (vectors for a built trie, a file mapping for
// a loaded one) and, for the derived arrays, by the Trie. The plain rule's
// view is the base: a Trie hands it out without copying fields.
struct TrieArrays : PlainTrieView {
#define TREEMASK_ARRAY_FIELD_kHost(name, type) const type *name = nullptr;
#define TREEMASK_ARRAY_FIELD_kVocab(name, type) const type *name = nullptr;
#define TREEMASK_ARRAY_FIELD_kPlain(name, type)
#define TREEMASK_ARRAY_FIELD_kDerived(name, type)
#define TREEMASK_ARRAY_FIELD(name, type, count, kind) TREEMASK_ARRAY_FIELD_##kind(name, type)
  TREEMASK_TRIE_ARRAYS(TREEMASK_ARRAY_FIELD)
#undef TREEMASK_ARRAY_FIELD
#undef TREEMASK_ARRAY_FIELD_kHost
#undef TREEMASK_ARRAY_FIELD_kVocab
#undef TREEMASK_ARRAY_FIELD_kPlain
#undef TREEMASK_ARRAY_FIELD_kDerived

  // Bytes of the saved arrays (the derived ones and a string set's
  // vocabulary, which is shared, not included).
  uint64_t bytes() const;
  bool has_labels() const { return label_bytes != 0; }
  int64_t first_label(uint64_t rank) const {
    return first_labels32 ? int64_t{first_labels32[rank]} : first_labels[rank];
  }
  // Label ids stored over all terminals.
  uint64_t n_labels() const { return has_labels() ? n_terminals + n_multi_labels - n_multi : 0; }
};

enum class ArrayKind : uint8_t { kPlain, kHost, kDerived, kVocab };

// One array of the table (trie/layout.h), as for_each_array hands it out.
struct ArrayInfo {
  const char *name;
  ArrayKind kind;
  size_t element_bytes;
  uint64_t count;  // elements, from the counts
  uint64_t bytes() const { return count * element_bytes; }
};

// Calls f(info, pointer) for every array of a (a TrieArrays, const or not),
// in table order; pointer is a reference to the array's `const T *` field,
// so f may read or set it.
template <class Arrays, class F>
void for_each_array(Arrays &a, F &&f) {
  const TrieCounts &c = a;
#define TREEMASK_ARRAY_VISIT(name, type, count, kind) \
  f(ArrayInfo{#name, ArrayKind::kind, sizeof(type), static_cast<uint64_t>(count)}, a.name);
  TREEMASK_TRIE_ARRAYS(TREEMASK_ARRAY_VISIT)
#undef TREEMASK_ARRAY_VISIT
}

// Keeps the memory behind a TrieArrays alive.
class TrieStorage {
 public:
  virtual ~TrieStorage() = default;
};

// Storage of a trie built in memory: a vector per saved array (trie/layout.h)
// but the vocabulary's (a string set's vocabulary object owns those) and the
// tail base; finish_trie derives every other count from the sizes.
struct VectorTrieStorage final : TrieStorage {
#define TREEMASK_STORAGE_FIELD_kPlain(name, type) std::vector<type> name;
#define TREEMASK_STORAGE_FIELD_kHost(name, type) std::vector<type> name;
#define TREEMASK_STORAGE_FIELD_kDerived(name, type)
#define TREEMASK_STORAGE_FIELD_kVocab(name, type)
#define TREEMASK_STORAGE_FIELD(name, type, count, kind) TREEMASK_STORAGE_FIELD_##kind(name, type)
  TREEMASK_TRIE_ARRAYS(TREEMASK_STORAGE_FIELD)
#undef TREEMASK_STORAGE_FIELD
#undef TREEMASK_STORAGE_FIELD_kPlain
#undef TREEMASK_STORAGE_FIELD_kHost
#undef TREEMASK_STORAGE_FIELD_kDerived
#undef TREEMASK_STORAGE_FIELD_kVocab
  int32_t tail_base = 0;

  // Points every array of `arrays` at these vectors (null where empty).
  void view(TrieArrays &arrays) const {
#define TREEMASK_STORAGE_VIEW_kPlain(name) arrays.name = name.empty() ? nullptr : name.data();
#define TREEMASK_STORAGE_VIEW_kHost(name) arrays.name = name.empty() ? nullptr : name.data();
#define TREEMASK_STORAGE_VIEW_kDerived(name)
#define TREEMASK_STORAGE_VIEW_kVocab(name)
#define TREEMASK_STORAGE_VIEW(name, type, count, kind) TREEMASK_STORAGE_VIEW_##kind(name)
    TREEMASK_TRIE_ARRAYS(TREEMASK_STORAGE_VIEW)
#undef TREEMASK_STORAGE_VIEW
#undef TREEMASK_STORAGE_VIEW_kPlain
#undef TREEMASK_STORAGE_VIEW_kHost
#undef TREEMASK_STORAGE_VIEW_kDerived
#undef TREEMASK_STORAGE_VIEW_kVocab
  }

  // Whether every vector holds exactly the elements the counts ask for (a
  // builder bug otherwise: kInternal naming the array).
  Status check_sizes(const TrieCounts &c) const {
#define TREEMASK_STORAGE_SIZE_kPlain(name, count) TREEMASK_STORAGE_SIZE_CHECK(name, count)
#define TREEMASK_STORAGE_SIZE_kHost(name, count) TREEMASK_STORAGE_SIZE_CHECK(name, count)
#define TREEMASK_STORAGE_SIZE_kDerived(name, count)
#define TREEMASK_STORAGE_SIZE_kVocab(name, count)
#define TREEMASK_STORAGE_SIZE_CHECK(name, count)                                           \
  if (name.size() != static_cast<uint64_t>(count)) {                                       \
    return error(Code::kInternal, "built " #name " holds ", name.size(), " entries, not ", \
                 static_cast<uint64_t>(count));                                            \
  }
#define TREEMASK_STORAGE_SIZE(name, type, count, kind) TREEMASK_STORAGE_SIZE_##kind(name, count)
    TREEMASK_TRIE_ARRAYS(TREEMASK_STORAGE_SIZE)
#undef TREEMASK_STORAGE_SIZE
#undef TREEMASK_STORAGE_SIZE_CHECK
#undef TREEMASK_STORAGE_SIZE_kPlain
#undef TREEMASK_STORAGE_SIZE_kHost
#undef TREEMASK_STORAGE_SIZE_kDerived
#undef TREEMASK_STORAGE_SIZE_kVocab
    return Status::Ok();
  }
};

// A node's outgoing edges: tokens[i] leads to node first_child + i.
struct Children {
  const int32_t *tokens = nullptr;
  uint32_t count = 0;
  uint32_t first_child = 0;

  std::span<const int32_t> span() const { return {tokens, count}; }
};

class Trie;
// The largest label id a terminal of the trie carries, -1 without labels:
// one pass over the labels on first use (Trie::derived), then cached.
// Thread-safe.
int64_t max_label_id(const Trie &trie);

// The labels of one terminal: one (held by value) or several (a view of the
// trie's multi-label array). Iterate it while it lives. Its iterator is
// deliberately not a pointer, so that a temporary LabelIds cannot turn into
// a std::span that outlives it (span's range constructor wants a contiguous
// range): copy it, or keep the LabelIds.
class LabelIds {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = int64_t;
    using difference_type = std::ptrdiff_t;
    using reference = int64_t;
    using pointer = void;
    Iterator() = default;
    explicit Iterator(const int64_t *p) : p_(p) {}
    int64_t operator*() const { return *p_; }
    Iterator &operator++() {
      ++p_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++p_;
      return old;
    }
    bool operator==(const Iterator &o) const { return p_ == o.p_; }

   private:
    const int64_t *p_ = nullptr;
  };

  LabelIds() = default;
  explicit LabelIds(int64_t one) : one_(one), n_(1) {}
  explicit LabelIds(std::span<const int64_t> many) : many_(many.data()), n_(many.size()) {}
  Iterator begin() const { return Iterator(data()); }
  Iterator end() const { return Iterator(data() + n_); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](size_t i) const { return data()[i]; }

 private:
  const int64_t *data() const { return many_ ? many_ : &one_; }

  const int64_t *many_ = nullptr;
  int64_t one_ = 0;
  size_t n_ = 0;
};

struct TrieBuildOptions {
  int32_t vocab_size = 0;
  std::vector<int32_t> stop_tokens;
  size_t dense_row_cache_bytes = size_t{64} << 20;
  // Terminal nodes carry no label ids (sources without labels, such as an
  // RTP-LLM prefix dictionary); label_ids is then ignored.
  bool no_labels = false;
  // Store unary chains down to a leaf as tails (the layout above). Off only
  // in tests, which compare both layouts.
  bool compress_tails = true;
};

class Trie final : public RefCounted {
 public:
  Trie(std::unique_ptr<TrieStorage> storage, const TrieArrays &arrays,
       size_t dense_row_cache_bytes);
  ~Trie();

  const TrieArrays &arrays() const { return a_; }
  // The node rules of a trie that is not made of token paths (trie_kind.h:
  // a string set's); null for a token-path trie, whose nodes are the CSR
  // nodes and tails read by children() and the plain rule. Only the chooser
  // of rules (rules/trie_rules.h) and the kind's own layer look at it.
  const TrieKind *kind() const { return kind_.get(); }
  // Set once by whoever makes a trie of another kind, before it is shared.
  void set_kind(Ref<const TrieKind> kind);
  int32_t vocab_size() const { return a_.vocab_size; }
  size_t row_words() const { return words_for_vocab(a_.vocab_size); }
  uint64_t n_nodes() const { return a_.n_nodes; }
  std::span<const int32_t> stop_tokens() const { return {a_.stop_tokens, a_.n_stop_tokens}; }
  bool is_stop_token(int32_t token) const;

  // The node id must be < n_nodes (callers check ids they did not make).
  Children children(uint32_t node) const {
    const NodeEdges e = node_edges(a_, node);
    return {e.tokens, e.count, e.first_child};
  }

  // The token on the edge into node (node >= 1) and the node's parent.
  int32_t token_into(uint32_t node) const;
  uint32_t parent(uint32_t node) const;

  bool is_terminal(uint32_t node) const { return test_bit64(a_.terminal_bits, node); }

  // Labels of a terminal node (empty for a non-terminal one or a trie
  // without labels).
  LabelIds labels(uint32_t node) const;

  // Index of token among children.tokens, or -1 (the rules' find_token).
  static int64_t find_child(const Children &c, int32_t token) {
    return find_token(c.tokens, c.count, token);
  }

  // Writes the bits of a node's children (tokens[0 .. count), the first
  // leading to node first_child) into row (all row_words() words are
  // overwritten; words beyond are the caller's). Stop tokens are not set. A
  // high-fanout node's row is cached, keyed by first_child (a child has one
  // parent, so it names the node). Separate arguments, not a Children: the
  // callers' fields then reach it without a merged load that would stall on
  // store forwarding.
  void write_children_row(const int32_t *tokens, uint32_t count, uint32_t first_child,
                          uint32_t *row) const;

  // Memory the dense-row cache holds now.
  uint64_t dense_cache_bytes() const { return dense_cache_used_.load(std::memory_order_relaxed); }

  // Fanout at or above which a node's row is cached (when the budget allows).
  size_t dense_threshold() const { return dense_threshold_; }

  // Data that other modules derive from the arrays on first use, so the
  // arrays, and with them the .tmtrie format, need not carry it. Keyed by a
  // type (Key: any type, usually T itself or a tag); the trie knows nothing
  // of its users. Each entry is built once, thread-safely, and freed with the
  // trie; build() returns a std::shared_ptr<const T>. If build() throws, a
  // later call builds again.
  template <class Key, class T = Key, class Build>
  const T &derived(Build &&build) const {
    Derived &d = derived_entry(derived_key<Key>());
    std::call_once(d.once, [&] { d.data = build(); });
    return *static_cast<const T *>(d.data.get());
  }

  // Metadata strings and loader warnings (null: none). Set once by whoever
  // makes the trie, before it is shared.
  const TrieAnnotations *annotations() const { return annotations_.get(); }
  void set_annotations(std::shared_ptr<const TrieAnnotations> a) { annotations_ = std::move(a); }

 private:
  const uint32_t *cached_row(const int32_t *tokens, uint32_t count, uint32_t first_child) const;

  std::unique_ptr<TrieStorage> storage_;
  TrieArrays a_;
  std::vector<int32_t> tail_values_;  // a_.tail_values
  Ref<const TrieKind> kind_;          // over storage_'s arrays: destroyed first
  std::shared_ptr<const TrieAnnotations> annotations_;

  // Dense-row cache: a fixed open-addressing table (first child -> row) allocated on
  // first use. Slots are claimed with a CAS on the key and published with a
  // release store of the row, so readers never lock.
  static constexpr uint32_t kEmptySlot = 0xFFFFFFFFu;  // no node has this id
  struct CacheSlot {
    std::atomic<uint32_t> node{kEmptySlot};
    std::atomic<const uint32_t *> row{nullptr};
  };
  size_t dense_budget_;
  size_t dense_threshold_;
  mutable std::once_flag cache_once_;
  mutable std::unique_ptr<CacheSlot[]> cache_;
  mutable size_t cache_mask_ = 0;
  mutable std::atomic<uint64_t> dense_cache_used_{0};

  struct Derived {
    std::once_flag once;
    std::shared_ptr<const void> data;
  };
  // A distinct address per key type.
  template <class Key>
  static const void *derived_key() {
    static const char key = 0;
    return &key;
  }
  // The entry of a key, created on first use (a short lock; entries never
  // move: a list of nodes).
  Derived &derived_entry(const void *key) const;
  struct DerivedNode {
    const void *key;
    Derived entry;
    std::unique_ptr<DerivedNode> next;
  };
  mutable std::mutex derived_mutex_;
  mutable std::unique_ptr<DerivedNode> derived_;
};

// Builds a trie from CSR paths (see treemask_trie_from_paths for the rules).
// Every problem is a Status that names the path and position.
Result<Ref<Trie>> build_trie_from_paths(const TrieBuildOptions &opts,
                                        std::span<const int32_t> tokens,
                                        std::span<const size_t> offsets, const int64_t *label_ids);

// Completes a trie whose storage holds node_offsets (n_explicit + 1
// entries), edge_tokens, terminal_bits (trailing zero words may be missing),
// labels, stop_tokens and the tails in the layout above: computes the tail
// samples, the rank directories, the counts and the views, then validates
// the arrays (a failure is kInternal: a builder bug). opts.no_labels leaves
// the trie without labels.
Result<Ref<Trie>> finish_trie(std::unique_ptr<VectorTrieStorage> storage,
                              const TrieBuildOptions &opts, uint32_t max_depth,
                              uint32_t max_fanout);

// Checks the counts alone, before anything is sized from them: every count
// within the range that keeps every array's byte size (trie/layout.h) far
// from overflowing and every derived table (tail_values) small, and the
// counts consistent with each other. The first step of validate_trie_arrays;
// the .tmtrie loader calls it before it checks the sections' sizes.
Status check_counts(const TrieCounts &c);

// Checks every structural invariant of the arrays that the accessors and the
// step rules rely on (trie/validate.cc; the layout comment above lists them,
// plus: every node without children is terminal, no edge carries a stop
// token, max_depth and max_fanout are exact, labels and ranks consistent),
// after check_counts and a pointer for every non-empty saved array. A
// string-set trie's byte trie is checked by validate_byte_trie below; its
// saved vocabulary's rules and fingerprint are the strings layer's to check
// (make_validated_trie, strings/string_set.h). Linear in the arrays' size.
// Every loaded or built trie passes it, so code that reads a Trie never
// re-checks the arrays. kCorruptFile names the first violation.
Status validate_trie_arrays(const TrieArrays &a);

// A string-set trie's byte trie (trie/validate_bytes.cc; the layout is
// strings/string_trie.h's): validate_byte_trie_arrays, then the depth-first
// nesting of the ids, max_depth and max_fanout.
Status validate_byte_trie(const TrieArrays &a);
// Each byte-trie node's own fields, in one linear pass: the counts, the
// three bits (unary and branch exclusive, a leaf is terminal, a unary node's
// child exists and a branch's children are >= 2, in range, ascending by
// byte and by id, above the parent and labelled with their byte, the first
// being n + 1), the rank directory. kCorruptFile names the first violation.
Status validate_byte_trie_arrays(const TrieArrays &a);

// The pass/fail scan of nodes and edges inside validate_trie_arrays (no
// message), with the AVX2 words where the CPU has them (vector) or only the
// scalar ones: tests check that both agree with an independent oracle. On
// success *max_fanout is the largest fanout and *near_stop whether an edge
// token lies within the stop tokens' range.
bool trie_structure_holds(const TrieArrays &a, bool vector, uint32_t *max_fanout, bool *near_stop);

// Checks and normalises (sorts, dedupes) stop tokens against vocab_size.
Status normalize_stop_tokens(int32_t vocab_size, std::vector<int32_t> &stop_tokens);

}  // namespace treemask
