// The brute-force model of a string-set constraint, written from the rules
// alone (string_trie.h): a state is the byte string generated so far; token t
// is allowed iff state + bytes(t) begins some prefix + string; a stop token
// iff state is one of them. Every query is a loop over every token and every
// string, so only small cases use it.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "strings/string_trie.h"
#include "strings/vocab.h"

namespace strings_oracle {

// A vocabulary spelled out: token bytes, flags, width.
struct VocabModel {
  std::vector<std::string> tokens;
  std::vector<uint8_t> flags;
  int32_t vocab_size = 0;

  bool is_text(int32_t t) const {
    return t >= 0 && t < static_cast<int32_t>(tokens.size()) &&
           !(flags[static_cast<size_t>(t)] & treemask::kTokenSpecial) &&
           !tokens[static_cast<size_t>(t)].empty();
  }

  // The tokens as one byte buffer and its offsets (n + 1, from 0), as
  // treemask_vocab_create takes them.
  void joined(std::string &bytes, std::vector<uint64_t> &offsets) const {
    bytes.clear();
    offsets.assign(1, 0);
    for (const auto &t : tokens) {
      bytes += t;
      offsets.push_back(bytes.size());
    }
  }

  treemask::Ref<treemask::Vocab> build() const {
    std::string bytes;
    std::vector<uint64_t> offsets;
    joined(bytes, offsets);
    treemask::VocabSpec spec;
    spec.bytes = {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()};
    spec.offsets = offsets;
    spec.flags = flags;
    spec.vocab_size = vocab_size;
    auto r = treemask::build_vocab(spec);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return r.take_value();
  }
};

// The vocabulary through the C API (treemask_vocab_create), into out.
inline treemask_status make_vocab(const VocabModel &v, testutil::VocabHandle &out) {
  std::string bytes;
  std::vector<uint64_t> offsets;
  v.joined(bytes, offsets);
  return treemask_vocab_create(reinterpret_cast<const uint8_t *>(bytes.data()), offsets.data(),
                               v.tokens.size(), v.flags.data(), v.vocab_size, &out.p);
}

struct SetModel {
  const VocabModel *vocab;
  std::set<std::string> full;  // prefix + each string
  std::vector<int32_t> stops;  // ascending

  bool is_stop(int32_t t) const { return std::binary_search(stops.begin(), stops.end(), t); }
  bool begins_some(const std::string &w) const {
    auto it = full.lower_bound(w);
    return it != full.end() && it->compare(0, w.size(), w) == 0;
  }
  bool terminal(const std::string &w) const { return full.count(w) > 0; }
  bool allowed(const std::string &w, int32_t t) const {
    if (is_stop(t)) return terminal(w);
    return vocab->is_text(t) && begins_some(w + vocab->tokens[static_cast<size_t>(t)]);
  }
  std::vector<int32_t> allowed_list(const std::string &w) const {
    std::vector<int32_t> out;
    for (int32_t t = 0; t < vocab->vocab_size; ++t) {
      if (allowed(w, t)) out.push_back(t);
    }
    return out;
  }
  // The bytes every string below w continues with, stopping at a string end.
  std::string forced_bytes(std::string w) const {
    const size_t start = w.size();
    for (;;) {
      if (terminal(w)) break;
      std::set<char> next;
      for (auto it = full.lower_bound(w); it != full.end() && it->compare(0, w.size(), w) == 0;
           ++it) {
        if (it->size() > w.size()) next.insert((*it)[w.size()]);
      }
      if (next.size() != 1) break;
      w.push_back(*next.begin());
    }
    return w.substr(start);
  }
  // Longest-match tokens of the forced bytes, stopping before a position
  // from which an allowed token runs past them (byte_mask.cc's definition).
  std::vector<int32_t> forced_tokens(const std::string &w) const {
    const std::string f = forced_bytes(w);
    std::vector<int32_t> out;
    size_t p = 0;
    while (p < f.size()) {
      const std::string rest = f.substr(p);
      bool crosses = false;
      int32_t best = -1;
      size_t best_len = 0;
      for (int32_t t = 0; t < static_cast<int32_t>(vocab->tokens.size()); ++t) {
        if (!vocab->is_text(t) || is_stop(t)) continue;
        const std::string &b = vocab->tokens[static_cast<size_t>(t)];
        if (b.size() > rest.size() && b.compare(0, rest.size(), rest) == 0 &&
            begins_some(w + f.substr(0, p) + b)) {
          crosses = true;
        }
        if (b.size() <= rest.size() && rest.compare(0, b.size(), b) == 0 && b.size() > best_len) {
          best = t;
          best_len = b.size();
        }
      }
      if (crosses || best < 0) break;
      out.push_back(best);
      p += best_len;
    }
    return out;
  }
};

// A random vocabulary over an alphabet: 4..63 tokens of 1..6 bytes (many
// of one), some duplicates, some special or empty, sometimes every single
// byte, and a padded vocab_size.
inline VocabModel random_vocab(std::mt19937_64 &rng, const std::string &alphabet) {
  VocabModel v;
  const size_t n = 4 + rng() % 60;
  for (size_t i = 0; i < n; ++i) {
    std::string t(1 + rng() % 6, ' ');
    for (auto &c : t) c = alphabet[rng() % alphabet.size()];
    if (rng() % 3 == 0) t.resize(1);  // plenty of short tokens
    // Duplicates of an earlier token's bytes.
    if (i > 0 && rng() % 12 == 0) t = v.tokens[rng() % i];
    v.tokens.push_back(t);
    uint8_t flags = rng() % 15 == 0 ? treemask::kTokenSpecial : 0;
    if (rng() % 40 == 0) v.tokens.back().clear();
    v.flags.push_back(flags);
  }
  // Sometimes every single byte, so that every string can be spelled.
  if (rng() % 2) {
    for (char c : alphabet) {
      v.tokens.push_back(std::string(1, c));
      v.flags.push_back(0);
    }
  }
  v.vocab_size = static_cast<int32_t>(v.tokens.size() + rng() % 40);  // padded
  return v;
}

}  // namespace strings_oracle
