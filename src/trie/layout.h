// The trie's flat arrays and counts, described once: every struct that holds
// them (TrieCounts, PlainTrieView here; TrieArrays and VectorTrieStorage in
// trie.h) and every pass over them (building, .tmtrie save and load with
// their size checks, the CUDA upload, memory statistics) is generated from
// the two tables below. Adding an array is one line in
// TREEMASK_TRIE_ARRAYS (plus its count, if new, in TREEMASK_TRIE_COUNTS),
// its rule in validate_trie_arrays (trie/validate.cc), and a new
// kTmtrieFormatVersion (trie/file.h) if it is saved. trie.h describes what
// the arrays mean.
//
// Includable by nvcc: no standard-library types; the count helpers are
// callable on host and device.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <stdint.h>

#include "core/hd.h"

// The counts of a trie: X(type, name). A .tmtrie header stores each one as a
// 64-bit value in this order (signed values sign-extended); the loader checks
// that every value fits its type before anything else reads it.
#define TREEMASK_TRIE_COUNTS(X)  \
  X(uint64_t, n_nodes)           \
  X(uint64_t, n_explicit)        \
  X(uint64_t, n_heads)           \
  X(uint64_t, n_terminals)       \
  X(uint64_t, n_multi)           \
  X(uint64_t, n_multi_labels)    \
  X(uint32_t, n_stop_tokens)     \
  X(int32_t, vocab_size)         \
  X(int32_t, tail_base)          \
  X(uint32_t, tail_range)        \
  X(uint32_t, label_bytes)       \
  X(uint32_t, max_depth)         \
  X(uint32_t, max_fanout)        \
  X(uint64_t, n_branches)        \
  X(uint64_t, n_branch_children) \
  X(uint32_t, n_vocab_tokens)    \
  X(uint64_t, n_vocab_bytes)

// The arrays: X(name, element type, element count over the counts `c`,
// kind). Kinds:
//   kPlain    read by the plain rule (PlainTrieView), on the host and on a
//             device: built, saved, loaded and uploaded;
//   kHost     read on the host only (ranks, labels): built, saved, loaded;
//   kDerived  computed from the others when a Trie is made (never saved),
//             read by the plain rule, uploaded;
//   kVocab    a string-set trie's vocabulary (strings/vocab.h): saved and
//             loaded, read on the host only, owned by the vocabulary object
//             (shared by every trie over it) and so not counted in the
//             trie's bytes.
//
// Two kinds of trie share the table (src/README.md, "Kinds of trie"). A
// token-path trie has the plain arrays and the host arrays of its labels. A
// string-set trie (n_vocab_tokens > 0) has none of the plain arrays but
// terminal_bits and stop_tokens: its nodes are the byte trie of
// strings/string_trie.h (byte_labels .. child_ids, with terminal_bits), its
// labels the same host arrays, and its vocabulary the kVocab arrays.
// An array whose count is 0 has a null pointer. The saved arrays are the
// .tmtrie sections in this order, each 64-byte aligned in the file (and
// 256-byte aligned on a device), which covers every element type: append new
// arrays, never reorder (the order is the file format). Element alignment is
// the type's own.
#define TREEMASK_TRIE_ARRAYS(X)                                                    \
  X(node_offsets, uint32_t, c.n_plain_offsets(), kPlain)                           \
  X(edge_tokens, int32_t, c.n_csr_edges(), kPlain)                                 \
  X(terminal_bits, uint64_t, c.terminal_words(), kPlain)                           \
  X(terminal_rank, uint32_t, c.terminal_words(), kHost)                            \
  X(first_labels, int64_t, c.label_bytes == 8 ? c.n_terminals : 0, kHost)          \
  X(first_labels32, uint32_t, c.label_bytes == 4 ? c.n_terminals : 0, kHost)       \
  X(multi_ranks, uint32_t, c.n_multi, kHost)                                       \
  X(multi_offsets, uint32_t, c.n_multi + 1, kHost)                                 \
  X(multi_labels, int64_t, c.n_multi_labels, kHost)                                \
  X(stop_tokens, int32_t, c.n_stop_tokens, kPlain)                                 \
  X(head_bits, uint64_t, c.head_words(), kPlain)                                   \
  X(head_rank, uint32_t, c.head_words(), kPlain)                                   \
  X(tail_lengths, uint8_t, c.n_heads, kPlain)                                      \
  X(tail_samples, uint32_t, c.n_tail_samples(), kPlain)                            \
  X(tail_tokens, uint16_t, c.n_tail_nodes(), kPlain)                               \
  X(tail_values, int32_t, c.n_heads ? c.tail_range : 0, kDerived)                  \
  X(byte_labels, uint8_t, c.n_byte_nodes(), kHost)                                 \
  X(unary_bits, uint64_t, c.byte_words(), kHost)                                   \
  X(branch_bits, uint64_t, c.byte_words(), kHost)                                  \
  X(branch_rank, uint32_t, c.byte_words(), kHost)                                  \
  X(branch_first, uint32_t, c.is_string_set() ? c.n_branches + 1 : 0, kHost)       \
  X(child_bytes, uint8_t, c.n_branch_children, kHost)                              \
  X(child_ids, uint32_t, c.n_branch_children, kHost)                               \
  X(vocab_fingerprint, uint64_t, c.is_string_set() ? 1 : 0, kVocab)                \
  X(vocab_offsets, uint32_t, c.is_string_set() ? c.n_vocab_tokens + 1 : 0, kVocab) \
  X(vocab_flags, uint8_t, c.n_vocab_tokens, kVocab)                                \
  X(vocab_bytes, uint8_t, c.n_vocab_bytes, kVocab)

namespace treemask {

// Tails per start sample (trie.h).
inline constexpr uint32_t kTailSample = 16;

struct TrieCounts {
#define TREEMASK_COUNT_FIELD(type, name) type name = 0;
  TREEMASK_TRIE_COUNTS(TREEMASK_COUNT_FIELD)
#undef TREEMASK_COUNT_FIELD

  // Derived counts (trie.h describes the layout).
  // A string-set trie (layout comment above): its nodes are byte-trie nodes.
  TREEMASK_HD bool is_string_set() const { return n_vocab_tokens != 0; }
  TREEMASK_HD uint64_t n_plain_offsets() const { return is_string_set() ? 0 : n_explicit + 1; }
  TREEMASK_HD uint64_t n_byte_nodes() const { return is_string_set() ? n_nodes : 0; }
  TREEMASK_HD uint64_t byte_words() const { return is_string_set() ? terminal_words() : 0; }
  TREEMASK_HD uint64_t n_edges() const { return n_nodes == 0 ? 0 : n_nodes - 1; }
  TREEMASK_HD uint64_t n_csr_edges() const { return n_explicit == 0 ? 0 : n_explicit - 1; }
  TREEMASK_HD uint64_t n_tail_nodes() const { return is_string_set() ? 0 : n_nodes - n_explicit; }
  TREEMASK_HD uint64_t terminal_words() const { return (n_nodes + 63) / 64; }
  // The head arrays are empty in a trie without tails.
  TREEMASK_HD uint64_t head_words() const { return n_heads ? (n_explicit + 63) / 64 : 0; }
  TREEMASK_HD uint64_t n_tail_samples() const { return (n_heads + kTailSample - 1) / kTailSample; }
};

// The arrays the plain rule reads (rules/plain_rules.h), with every count: a
// view of memory a Trie (TrieArrays, trie.h, derives from it) or a device
// copy (kernels/cuda) owns. The rule and the CUDA kernels take it by value.
struct PlainTrieView : TrieCounts {
#define TREEMASK_ARRAY_FIELD_kPlain(name, type) const type *name = nullptr;
#define TREEMASK_ARRAY_FIELD_kDerived(name, type) const type *name = nullptr;
#define TREEMASK_ARRAY_FIELD_kHost(name, type)
#define TREEMASK_ARRAY_FIELD_kVocab(name, type)
#define TREEMASK_ARRAY_FIELD(name, type, count, kind) TREEMASK_ARRAY_FIELD_##kind(name, type)
  TREEMASK_TRIE_ARRAYS(TREEMASK_ARRAY_FIELD)
#undef TREEMASK_ARRAY_FIELD
#undef TREEMASK_ARRAY_FIELD_kPlain
#undef TREEMASK_ARRAY_FIELD_kDerived
#undef TREEMASK_ARRAY_FIELD_kHost
#undef TREEMASK_ARRAY_FIELD_kVocab
};

}  // namespace treemask
