// A string set as a Trie: the byte trie of strings/string_trie.h stored in
// the trie's arrays (trie/layout.h: byte_labels .. child_ids with
// terminal_bits, the labels as a token-path trie's, the vocabulary as the
// kVocab arrays), so that a string-set trie is saved, loaded, validated,
// counted and handed out through the C API like any other, while its masks
// and steps come from the StringTrie the Trie holds as its kind
// (Trie::kind(), trie/trie_kind.h).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/refcount.h"
#include "core/status.h"
#include "strings/string_trie.h"
#include "strings/vocab.h"
#include "trie/file.h"
#include "trie/trie.h"

namespace treemask {

struct StringSetOptions {
  // vocab_size: 0 (the vocabulary's) or the vocabulary's; stop tokens (at
  // least one, < vocab_size); the dense-row cache budget; no_labels.
  TrieBuildOptions trie;
  std::string prefix;  // put before every string
  // The dense-row cache's admission threshold (StringTrieOptions; 0: the
  // default). Tests and benchmarks set it.
  uint64_t dense_row_min_visits = 0;
};

// Builds the trie of prefix + each string over vocab. String i carries
// label_ids[i] (label_ids null: i; none with opts.trie.no_labels); strings
// with the same bytes merge into one terminal that carries all their
// labels. Errors name the argument or the string.
Result<Ref<Trie>> build_trie_from_strings(const StringSetOptions &opts, Ref<Vocab> vocab,
                                          const StringList &strings, const int64_t *label_ids);

// The byte trie of a string-set trie (its masks, steps and vocabulary);
// null for a token-path trie.
const StringTrie *string_set_of(const Trie &trie);
// Whether trie is a string-set trie, and its vocabulary (null for a
// token-path trie): what the C API asks about the kind.
bool is_string_set(const Trie &trie);
const Vocab *vocab_of(const Trie &trie);

// A string-set trie's vocabulary, as a view of its arrays.
SavedVocab saved_vocab(const TrieArrays &a);

// A Trie over validated arrays (validate_trie_arrays: a loaded file's),
// completed when they hold a string set: its vocabulary is `vocab` when
// given (its fingerprint must be the one the trie was built for, else
// kInvalidArgument naming both), else rebuilt from the saved one. A
// token-path trie is refused only when wider than `vocab`.
Result<Ref<Trie>> make_validated_trie(std::unique_ptr<TrieStorage> storage, const TrieArrays &a,
                                      size_t dense_row_cache_bytes, Ref<Vocab> vocab = {});

// Whether a trie fits the model whose vocabulary is `model` (treemask.h,
// treemask_trie_check_vocab): no wider than it, and a string set's masks
// the same over both vocabularies (equal fingerprints, or every id the same
// text bytes or not text in both). kInvalidArgument naming both fingerprints
// and the first token that differs.
Status check_trie_vocab(const Trie &trie, const Vocab &model);

// Loads a .tmtrie file of either kind: map_trie_file (trie/file.h: every
// structural check), then make_validated_trie with `vocab`. Here rather
// than in trie/file.cc because only this layer can make a string set's
// kind. Errors name the path.
Result<Ref<Trie>> load_trie(const std::string &path, uint32_t flags,
                            size_t dense_row_cache_bytes = size_t{64} << 20, Ref<Vocab> vocab = {});

}  // namespace treemask
