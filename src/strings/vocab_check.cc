// Whether a trie fits a model's vocabulary (string_set.h: check_trie_vocab,
// treemask.h: treemask_trie_check_vocab): one pass over both vocabularies,
// plus, when ids differ, one pass over the string set's byte trie for all of
// them at once.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strings/string_set.h"
#include "strings/string_trie.h"

namespace treemask {

namespace {

// Token t of a vocabulary for a message: its text (escaped, cut at 40
// bytes), or what it is instead.
std::string describe_token(const Vocab &v, int32_t t) {
  if (t >= v.vocab_size()) return cat("past its vocab_size ", v.vocab_size());
  if (t >= v.n_tokens()) return "padding (never text)";
  if (!v.is_text_token(t)) return "special or empty (never text)";
  const std::string_view b = v.token_bytes(t);
  std::string text;
  for (const char c : escape_control(b.substr(0, 40))) {
    if (c == '"') text += '\\';  // a quote inside the quotes stays readable
    text += c;
  }
  return cat("text \"", text, b.size() > 40 ? "...\"" : "\"");
}

// Whether token t means the same in both vocabularies for the masks: text
// with the same bytes in both, or text in neither.
bool same_meaning(const Vocab &own, const Vocab &model, int32_t t) {
  const bool a = t < own.vocab_size() && own.is_text_token(t);
  const bool b = model.is_text_token(t);
  return a == b && (!a || own.token_bytes(t) == model.token_bytes(t));
}

// The ids that differ and get the "never spelled" exemption, at most; past
// them the vocabularies are another tokenizer's.
constexpr size_t kMaxSpelledChecks = 64;
// The exemption's automaton: at most this many transitions (4 bytes each),
// so the check never allocates more than 64 MiB whatever the tokens' lengths
// (128 patterns of 512 bytes over every byte value fit).
constexpr uint64_t kMaxAutomatonCells = uint64_t{1} << 24;

// Which patterns occur in a string set: pattern p occurs iff its bytes spell
// a path from some node (walk(s, p) != kNoNode for some s: it is a substring
// of prefix + some string). An Aho-Corasick automaton over the patterns, its
// transitions complete over the bytes the patterns use (any other byte leads
// to the root), run down the byte trie depth-first: one transition per node.
// Cost: the automaton's cells plus the trie's nodes, whatever the patterns'
// lengths (a search per pattern from every node was nodes x patterns x
// length). Patterns longer than the trie is deep cannot occur and take no
// room. Empty patterns are never asked (an empty token is never text).
class PatternSearch {
 public:
  // found[i]: pattern i occurs; nullopt when the automaton would exceed
  // kMaxAutomatonCells.
  static std::optional<std::vector<bool>> run(const StringTrie &set,
                                              const std::vector<std::string_view> &patterns) {
    PatternSearch s;
    const uint64_t depth = set.arrays().max_depth;
    uint64_t total = 0;
    for (const std::string_view p : patterns) {
      if (p.size() > depth) continue;
      total += p.size();
      for (const char c : p) s.klass_[static_cast<uint8_t>(c)] = 1;
    }
    uint32_t k = 1;  // class 0: bytes no pattern uses
    for (uint8_t &c : s.klass_) c = c ? static_cast<uint8_t>(k++) : 0;
    // k <= 257 classes: a byte's class fits once the unused class is 0.
    s.width_ = k;
    if ((total + 1) * k > kMaxAutomatonCells) return std::nullopt;
    s.build(patterns, depth);
    return s.search(set, patterns.size());
  }

 private:
  uint32_t byte_class(uint8_t byte) const { return klass_[byte]; }
  uint32_t &next(uint32_t state, uint32_t c) { return delta_[size_t{state} * width_ + c]; }

  // The goto trie of the patterns, then, breadth-first, the complete
  // transitions and each state's outputs: the pattern ending there, and the
  // nearest state on its failure chain with one (dict_).
  void build(const std::vector<std::string_view> &patterns, uint64_t depth) {
    constexpr uint32_t kNone = 0xFFFFFFFFu;
    delta_.assign(width_, kNone);
    ends_.assign(1, {});
    for (size_t i = 0; i < patterns.size(); ++i) {
      if (patterns[i].size() > depth) continue;
      uint32_t s = 0;
      for (const char ch : patterns[i]) {
        const uint32_t c = byte_class(static_cast<uint8_t>(ch));
        if (next(s, c) == kNone) {
          next(s, c) = static_cast<uint32_t>(ends_.size());
          ends_.emplace_back();
          delta_.resize(delta_.size() + width_, kNone);
        }
        s = next(s, c);
      }
      ends_[s].push_back(static_cast<uint32_t>(i));
    }
    const size_t n = ends_.size();
    std::vector<uint32_t> fail(n, 0), queue;
    dict_.assign(n, kNone);
    queue.reserve(n);
    for (uint32_t c = 0; c < width_; ++c) {
      uint32_t &t = next(0, c);
      if (t == kNone) {
        t = 0;
      } else {
        queue.push_back(t);
      }
    }
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t s = queue[head];
      const uint32_t f = fail[s];
      dict_[s] = ends_[f].empty() ? dict_[f] : f;
      for (uint32_t c = 0; c < width_; ++c) {
        uint32_t &t = next(s, c);
        if (t == kNone) {
          t = next(f, c);
        } else {
          fail[t] = next(f, c);
          queue.push_back(t);
        }
      }
    }
  }

  // Down the byte trie from the root with the automaton's state; a state's
  // outputs are reported once (a reported state's dictionary chain is).
  std::vector<bool> search(const StringTrie &set, size_t n_patterns) {
    constexpr uint32_t kNone = 0xFFFFFFFFu;
    std::vector<bool> found(n_patterns, false), reported(ends_.size(), false);
    size_t left = 0;
    for (const auto &e : ends_) left += e.size();
    std::vector<std::pair<uint32_t, uint32_t>> stack{{0u, 0u}};  // (node, state)
    while (!stack.empty() && left > 0) {
      const auto [node, state] = stack.back();
      stack.pop_back();
      for (uint32_t s = state; s != kNone && !reported[s]; s = dict_[s]) {
        reported[s] = true;
        for (const uint32_t p : ends_[s]) {
          if (!found[p]) {
            found[p] = true;
            --left;
          }
        }
      }
      const uint32_t n = set.child_count(node);
      for (uint32_t i = 0; i < n; ++i) {
        stack.emplace_back(set.child_id(node, i), next(state, byte_class(set.child_byte(node, i))));
      }
    }
    return found;
  }

  uint8_t klass_[256] = {};
  uint32_t width_ = 1;
  std::vector<uint32_t> delta_;              // state x class -> state
  std::vector<std::vector<uint32_t>> ends_;  // state -> patterns ending there
  std::vector<uint32_t> dict_;               // state -> nearest output state on its chain
};

}  // namespace

Status check_trie_vocab(const Trie &trie, const Vocab &model) {
  if (trie.vocab_size() > model.vocab_size()) {
    return error(Code::kInvalidArgument, "the trie has vocab_size ", trie.vocab_size(),
                 ", wider than the model's vocabulary (vocab_size ", model.vocab_size(),
                 ", fingerprint ", Hex{model.fingerprint()}, "): built for another model");
  }
  const StringTrie *strings = string_set_of(trie);
  if (!strings) return Status::Ok();  // token paths: no vocabulary to compare
  const Vocab &own = strings->vocab();
  if (own.fingerprint() == model.fingerprint()) return Status::Ok();
  auto refuse = [&](int32_t t, std::string_view what) {
    return error(Code::kInvalidArgument,
                 "the string set was compiled for another vocabulary: its vocabulary has "
                 "fingerprint ",
                 Hex{own.fingerprint()}, " (vocab_size ", own.vocab_size(),
                 "), the model's has fingerprint ", Hex{model.fingerprint()}, " (vocab_size ",
                 model.vocab_size(), "); ", what, "token ", t, " is ", describe_token(own, t),
                 " in the trie's and ", describe_token(model, t),
                 " in the model's (compile the strings with the model's tokenizer)");
  };
  // Ids the set allows by id, whatever the state's bytes: a stop token must
  // mean the same to the model (a control token in the set's vocabulary that
  // is the text "0" in the model's would let the model write "0" forever).
  for (const int32_t t : strings->stop_tokens()) {
    if (!same_meaning(own, model, t)) return refuse(t, "its stop ");
  }
  // Masks depend only on which ids are text and their bytes: the two
  // vocabularies may differ in special tokens' names or padding. An id
  // that differs still gives equal masks when neither of its texts is ever
  // allowed, i.e. neither spells a path from any node of the set (a model
  // loader that makes "</s>" a control token while the tokenizer keeps it
  // as text, for strings that never contain "</s>"). The first
  // kMaxSpelledChecks differing ids are collected in one pass over both
  // vocabularies and searched for together in one pass over the set.
  std::vector<int32_t> differing;
  std::vector<std::string_view> texts;  // their texts, in either vocabulary
  int32_t beyond = -1;                  // a differing id past the first kMaxSpelledChecks
  const int32_t n = std::max(own.vocab_size(), model.vocab_size());
  for (int32_t t = 0; t < n; ++t) {
    if (same_meaning(own, model, t)) continue;
    if (differing.size() == kMaxSpelledChecks) {
      beyond = t;
      break;
    }
    differing.push_back(t);
    if (t < own.vocab_size() && own.is_text_token(t)) texts.push_back(own.token_bytes(t));
    if (model.is_text_token(t)) texts.push_back(model.token_bytes(t));
  }
  if (differing.empty()) return Status::Ok();
  const std::optional<std::vector<bool>> found = PatternSearch::run(*strings, texts);
  if (!found) {
    return refuse(differing[0], cat("its tokens that differ are too long to search for (over ",
                                    kMaxAutomatonCells, " automaton cells); "));
  }
  size_t i = 0;
  for (const int32_t t : differing) {
    bool spelled = false;
    if (t < own.vocab_size() && own.is_text_token(t)) spelled = (*found)[i++] || spelled;
    if (model.is_text_token(t)) spelled = (*found)[i++] || spelled;
    if (spelled) return refuse(t, "");
  }
  if (beyond >= 0) return refuse(beyond, "");
  return Status::Ok();
}

}  // namespace treemask
