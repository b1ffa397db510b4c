// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/string_set.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trie/node_edges.h"

namespace treemask {

namespace {

// The labels of the terminals (trie.h: first_labels, multi_*), by terminal
// rank: a counting sort of the strings by the rank of the node each ends
// at, then each terminal's labels sorted and deduplicated (a terminal has
// several only when strings repeat).
void place_labels(VectorTrieStorage &st, const std::vector<uint32_t> &ends, uint64_t n_terminals,
                  const int64_t *label_ids) {
  const size_t n = ends.size();
  std::vector<uint32_t> first(n_terminals + 1, 0);
  for (const uint32_t node : ends) {
    ++first[rank64(st.terminal_bits.data(), st.terminal_rank.data(), node) + 1];
  }
  for (uint64_t r = 0; r < n_terminals; ++r) first[r + 1] += first[r];
  std::vector<uint32_t> by_rank(n);
  {
    std::vector<uint32_t> next(first.begin(), first.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      by_rank[next[rank64(st.terminal_bits.data(), st.terminal_rank.data(), ends[i])]++] =
          static_cast<uint32_t>(i);
    }
  }
  // Labels that all fit in [0, 2^32) (string indices always do) take 4
  // bytes, as a token-path trie's; they are written there directly.
  const bool narrow = !label_ids || std::all_of(label_ids, label_ids + n, [](int64_t l) {
    return l >= 0 && l <= int64_t{0xFFFFFFFF};
  });
  if (narrow) {
    st.first_labels32.resize(n_terminals);
  } else {
    st.first_labels.resize(n_terminals);
  }
  std::vector<int64_t> labels;
  st.multi_offsets.assign(1, 0);
  for (uint64_t r = 0; r < n_terminals; ++r) {
    labels.clear();
    for (uint32_t k = first[r]; k < first[r + 1]; ++k) {
      labels.push_back(label_ids ? label_ids[by_rank[k]] : int64_t{by_rank[k]});
    }
    std::sort(labels.begin(), labels.end());
    labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
    if (narrow) {
      st.first_labels32[r] = static_cast<uint32_t>(labels.front());
    } else {
      st.first_labels[r] = labels.front();
    }
    if (labels.size() > 1) {
      st.multi_ranks.push_back(static_cast<uint32_t>(r));
      st.multi_labels.insert(st.multi_labels.end(), labels.begin(), labels.end());
      st.multi_offsets.push_back(static_cast<uint32_t>(st.multi_labels.size()));
    }
  }
}

uint32_t max_children(const VectorTrieStorage &b) {
  uint32_t most = 0;
  for (size_t k = 0; k + 1 < b.branch_first.size(); ++k) {
    most = std::max(most, b.branch_first[k + 1] - b.branch_first[k]);
  }
  if (most == 0) {
    for (const uint64_t w : b.unary_bits) {
      if (w) return 1;
    }
  }
  return most;
}

// Points the kVocab arrays of a at the vocabulary's own (it outlives the
// trie: the StringTrie holds it).
void view_vocab(TrieArrays &a, const Vocab &v) {
  a.vocab_fingerprint = v.fingerprint_data();
  a.vocab_offsets = v.offsets_data();
  a.vocab_flags = v.flags_data();
  a.vocab_bytes = v.n_bytes() ? v.bytes_data() : nullptr;
}

// The kind of a string-set Trie: the byte trie over the Trie's own arrays.
Ref<const TrieKind> string_trie_over(const Trie &trie, Ref<Vocab> vocab,
                                     const StringTrieOptions &opts) {
  return Ref<const TrieKind>::adopt(new StringTrie(std::move(vocab), trie.arrays(), opts));
}

}  // namespace

const StringTrie *string_set_of(const Trie &trie) {
  return dynamic_cast<const StringTrie *>(trie.kind());
}

bool is_string_set(const Trie &trie) { return string_set_of(trie) != nullptr; }

const Vocab *vocab_of(const Trie &trie) {
  const StringTrie *s = string_set_of(trie);
  return s ? &s->vocab() : nullptr;
}

SavedVocab saved_vocab(const TrieArrays &a) {
  SavedVocab v;
  v.bytes = a.vocab_bytes;
  v.n_bytes = a.n_vocab_bytes;
  v.offsets = a.vocab_offsets;
  v.flags = a.vocab_flags;
  v.n_tokens = a.n_vocab_tokens;
  v.vocab_size = a.vocab_size;
  v.fingerprint = a.vocab_fingerprint ? *a.vocab_fingerprint : 0;
  return v;
}

Result<Ref<Trie>> build_trie_from_strings(const StringSetOptions &opts, Ref<Vocab> vocab,
                                          const StringList &strings, const int64_t *label_ids) {
  if (!vocab) return error(Code::kInvalidArgument, "vocab is NULL");
  TrieBuildOptions to = opts.trie;
  if (to.vocab_size != 0 && to.vocab_size != vocab->vocab_size()) {
    return error(Code::kInvalidArgument, "vocab_size ", to.vocab_size,
                 " differs from the vocabulary's ", vocab->vocab_size(),
                 " (pass 0 or the vocabulary's)");
  }
  to.vocab_size = vocab->vocab_size();
  if (to.no_labels && label_ids) {
    return error(Code::kInvalidArgument, "label_ids is not NULL but no_labels is set");
  }
  TM_TRY(normalize_stop_tokens(to.vocab_size, to.stop_tokens));
  TM_ASSIGN_OR_RETURN(BuiltByteTrie built, build_byte_trie(strings, opts.prefix));
  if (built.max_depth > std::numeric_limits<uint32_t>::max()) {
    return error(Code::kOutOfRange, "a string of ", built.max_depth, " bytes is too long");
  }

  // The byte trie's arrays are the storage's byte-trie rows already
  // (trie/layout.h); the counts follow from their sizes.
  std::unique_ptr<VectorTrieStorage> st = std::move(built.storage);
  TrieArrays a;
  a.n_nodes = st->byte_labels.size();
  a.n_branches = st->branch_first.size() - 1;
  a.n_branch_children = st->child_ids.size();
  a.max_fanout = max_children(*st);
  a.max_depth = static_cast<uint32_t>(built.max_depth);

  // The terminal rank directory, then the labels by rank.
  st->terminal_rank.resize(st->terminal_bits.size());
  uint64_t n_terminals = 0;
  for (size_t w = 0; w < st->terminal_bits.size(); ++w) {
    st->terminal_rank[w] = static_cast<uint32_t>(n_terminals);
    n_terminals += static_cast<uint64_t>(std::popcount(st->terminal_bits[w]));
  }
  if (to.no_labels) {
    st->multi_offsets.assign(1, 0);
  } else {
    place_labels(*st, built.ends, n_terminals, label_ids);
  }
  built.ends = {};
  if (st->multi_labels.size() > 0xFFFFFFFFull) {
    return error(Code::kOutOfRange,
                 "too many labels on repeated strings: ", st->multi_labels.size());
  }
  st->stop_tokens = to.stop_tokens;

  a.n_terminals = n_terminals;
  a.n_multi = st->multi_ranks.size();
  a.n_multi_labels = st->multi_labels.size();
  a.n_stop_tokens = static_cast<uint32_t>(st->stop_tokens.size());
  a.vocab_size = to.vocab_size;
  a.label_bytes = to.no_labels ? 0 : !st->first_labels32.empty() ? 4 : 8;
  a.n_vocab_tokens = static_cast<uint32_t>(vocab->n_tokens());
  a.n_vocab_bytes = vocab->n_bytes();
  TM_TRY(st->check_sizes(a));
  st->view(a);
  view_vocab(a, *vocab);
  // The vocabulary's own arrays were checked when it was built: skip
  // hashing them again (a small string set builds in microseconds).
  if (Status s = validate_trie_arrays(a); !s.ok()) {
    return error(Code::kInternal, "built an inconsistent string-set trie: ", s.message());
  }
  auto trie = Ref<Trie>::adopt(new Trie(std::move(st), a, to.dense_row_cache_bytes));
  StringTrieOptions so;
  so.dense_row_cache_bytes = to.dense_row_cache_bytes;
  so.dense_row_min_visits = opts.dense_row_min_visits;
  trie->set_kind(string_trie_over(*trie, std::move(vocab), so));
  return trie;
}

Result<Ref<Trie>> make_validated_trie(std::unique_ptr<TrieStorage> storage, const TrieArrays &a,
                                      size_t dense_row_cache_bytes, Ref<Vocab> vocab) {
  if (a.is_string_set()) {
    // The saved vocabulary is checked (its rules, its fingerprint) even
    // when another is given: a file that loads holds nothing unchecked.
    TM_TRY(check_saved_vocab(saved_vocab(a)));
    const uint64_t wanted = *a.vocab_fingerprint;
    if (vocab && vocab->fingerprint() != wanted) {
      return error(Code::kInvalidArgument,
                   "the trie was built for the vocabulary with fingerprint ", Hex{wanted},
                   "; the vocabulary given has fingerprint ", Hex{vocab->fingerprint()});
    }
    if (!vocab) {
      TM_ASSIGN_OR_RETURN(vocab, vocab_from_saved(saved_vocab(a)));
    }
  }
  auto trie = Ref<Trie>::adopt(new Trie(std::move(storage), a, dense_row_cache_bytes));
  if (a.is_string_set()) {
    StringTrieOptions so;
    so.dense_row_cache_bytes = dense_row_cache_bytes;
    trie->set_kind(string_trie_over(*trie, std::move(vocab), so));
  } else if (vocab && trie->vocab_size() > vocab->vocab_size()) {
    // Token paths carry no vocabulary to compare, but ids past the model's
    // width are certainly another model's.
    return error(Code::kInvalidArgument, "the token-path trie has vocab_size ", trie->vocab_size(),
                 ", wider than the vocabulary given (vocab_size ", vocab->vocab_size(),
                 ", fingerprint ", Hex{vocab->fingerprint()}, ")");
  }
  return trie;
}

Result<Ref<Trie>> load_trie(const std::string &path, uint32_t flags, size_t dense_row_cache_bytes,
                            Ref<Vocab> vocab) {
  TM_ASSIGN_OR_RETURN(MappedTrie mapped, map_trie_file(path, flags));
  auto made = make_validated_trie(std::move(mapped.storage), mapped.arrays, dense_row_cache_bytes,
                                  std::move(vocab));
  if (!made.ok()) {
    return Status(made.status().code(), cat("\"", path, "\": ", made.status().message()));
  }
  Ref<Trie> trie = made.take_value();
  if (!mapped.metadata.empty()) {
    trie->set_annotations(TrieAnnotations::borrow(std::move(mapped.metadata)));
  }
  return trie;
}

}  // namespace treemask
