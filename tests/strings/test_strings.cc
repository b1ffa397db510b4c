// String sets at the byte level: unit tests of the vocabulary, the token
// trie, the sort, the byte trie and its masks (edge cases by hand), and the
// property test: random vocabularies and string sets over small alphabets,
// random walks, every query compared with the brute-force model
// (strings_oracle.h) at every state.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "strings/string_set.h"
#include "strings/string_sort.h"
#include "strings/string_trie.h"
#include "strings/vocab.h"
#include "strings_oracle.h"

namespace {

using strings_oracle::random_vocab;
using strings_oracle::SetModel;
using strings_oracle::VocabModel;
using treemask::NodeStep;
using treemask::Ref;
using treemask::StringTrie;

struct Packed {
  std::string bytes;
  std::vector<uint64_t> offsets{0};
  treemask::StringList list() const {
    return {{reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()}, offsets};
  }
};

Packed pack(const std::vector<std::string> &strings) {
  Packed p;
  for (const auto &s : strings) {
    p.bytes += s;
    p.offsets.push_back(p.bytes.size());
  }
  return p;
}

// A string-set trie built as the library builds one (build_trie_from_strings),
// seen through its byte trie.
struct Built {
  Ref<treemask::Trie> trie;
  const StringTrie *operator->() const { return treemask::string_set_of(*trie); }
  const StringTrie &operator*() const { return *operator->(); }
};

treemask::Result<Built> try_build(const VocabModel &v, const std::vector<std::string> &strings,
                                  std::vector<int32_t> stops, std::string prefix = "",
                                  uint64_t min_visits = 0, size_t cache_bytes = 1 << 20) {
  treemask::StringSetOptions o;
  o.trie.stop_tokens = std::move(stops);
  o.trie.dense_row_cache_bytes = cache_bytes;
  o.prefix = std::move(prefix);
  o.dense_row_min_visits = min_visits;
  const Packed p = pack(strings);
  TM_ASSIGN_OR_RETURN(Ref<treemask::Trie> trie,
                      treemask::build_trie_from_strings(o, v.build(), p.list(), nullptr));
  return Built{std::move(trie)};
}

Built build(const VocabModel &v, const std::vector<std::string> &strings,
            std::vector<int32_t> stops, std::string prefix = "", uint64_t min_visits = 0,
            size_t cache_bytes = 1 << 20) {
  auto r = try_build(v, strings, std::move(stops), std::move(prefix), min_visits, cache_bytes);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r.take_value();
}

std::vector<int32_t> list(const StringTrie &t, uint32_t node) {
  std::vector<int32_t> out(t.list_allowed(node, t.stop_tokens(), nullptr, 0));
  EXPECT_EQ(t.list_allowed(node, t.stop_tokens(), out.data(), out.size()), out.size());
  return out;
}

// The row, written over garbage into a buffer two words longer than needed,
// read back as a list (the extra words must come back zero).
std::vector<int32_t> row_list(const StringTrie &t, uint32_t node, uint64_t *count = nullptr) {
  const size_t words = t.row_words();
  std::vector<uint32_t> row(words + 2, 0xA5A5A5A5u);
  const uint64_t n = t.write_allowed_row(node, t.stop_tokens(), row.data(), row.size());
  if (count) *count = n;
  EXPECT_EQ(row[words], 0u);
  EXPECT_EQ(row[words + 1], 0u);
  std::vector<int32_t> out;
  for (size_t w = 0; w < words; ++w) {
    for (int b = 0; b < 32; ++b) {
      if ((row[w] >> b) & 1) out.push_back(static_cast<int32_t>(w * 32 + b));
    }
  }
  return out;
}

std::vector<int32_t> forced(const StringTrie &t, uint32_t node) {
  std::vector<int32_t> out(t.forced_tokens(node, nullptr, 0));
  EXPECT_EQ(t.forced_tokens(node, out.data(), out.size()), out.size());
  return out;
}

std::string forced_bytes(const StringTrie &t, uint32_t node) {
  std::string out(t.forced_bytes(node, nullptr, 0), '\0');
  t.forced_bytes(node, reinterpret_cast<uint8_t *>(out.data()), out.size());
  return out;
}

// Checks every query at state w (node in the trie) against the model.
void check_state(const StringTrie &t, const SetModel &m, const std::string &w, uint32_t node) {
  SCOPED_TRACE("state \"" + treemask::escape_control(w) + "\"");
  const auto expected = m.allowed_list(w);
  uint64_t count = 0;
  EXPECT_EQ(row_list(t, node, &count), expected);
  EXPECT_EQ(count, expected.size());
  EXPECT_EQ(list(t, node), expected);
  // A short buffer gets a prefix of the list and the full count.
  if (expected.size() > 1) {
    std::vector<int32_t> some(expected.size() / 2);
    EXPECT_EQ(t.list_allowed(node, t.stop_tokens(), some.data(), some.size()), expected.size());
    EXPECT_TRUE(std::equal(some.begin(), some.end(), expected.begin()));
  }
  EXPECT_EQ(t.is_terminal(node), m.terminal(w));
  EXPECT_EQ(forced_bytes(t, node), m.forced_bytes(w));
  const auto ft = forced(t, node);
  EXPECT_EQ(ft, m.forced_tokens(w));
  // Forced tokens are accepted one after the other.
  uint32_t at = node;
  for (int32_t tok : ft) {
    const NodeStep s = t.step_token(at, tok);
    ASSERT_EQ(s.kind, NodeStep::kAdvanced);
    at = s.node;
  }
  // Every token: accepted iff allowed, and to the right node.
  for (int32_t tok = -1; tok <= m.vocab->vocab_size; ++tok) {
    const NodeStep s = t.step_token(node, tok);
    const bool allowed = tok >= 0 && tok < m.vocab->vocab_size && m.allowed(w, tok);
    ASSERT_EQ(s.kind != NodeStep::kRejected, allowed) << "token " << tok;
    if (!allowed) continue;
    if (m.is_stop(tok)) {
      EXPECT_EQ(s.kind, NodeStep::kTerminated);
    } else {
      EXPECT_EQ(s.kind, NodeStep::kAdvanced);
      EXPECT_EQ(s.node, t.walk(node, m.vocab->tokens[static_cast<size_t>(tok)]));
    }
  }
}

// ------------------------------------------------------------ vocabulary

VocabModel letters_vocab() {
  // 0 "<s>" special, 1 "</s>" special (stop), 2 "" (empty), then text tokens.
  VocabModel v;
  v.tokens = {"<s>", "</s>", "",  "a",  "b",        "c",    "ab",   "bc",
              "abc", "ca",   " ", " a", "\xc3\xa9", "\xc3", "\xa9", "x"};
  v.flags.assign(v.tokens.size(), 0);
  v.flags[0] = v.flags[1] = treemask::kTokenSpecial;
  v.vocab_size = 40;  // padded past the tokenizer's 16
  return v;
}

TEST(Vocab, FingerprintCoversEverything) {
  VocabModel v = letters_vocab();
  const uint64_t base = v.build()->fingerprint();
  EXPECT_EQ(v.build()->fingerprint(), base);
  VocabModel w = v;
  w.tokens[3] = "A";
  EXPECT_NE(w.build()->fingerprint(), base);
  w = v;
  w.flags[5] = treemask::kTokenSpecial;
  EXPECT_NE(w.build()->fingerprint(), base);
  w = v;
  w.vocab_size = 41;
  EXPECT_NE(w.build()->fingerprint(), base);
  w = v;  // moving a byte from one token to the next
  w.tokens[6] = "a";
  w.tokens[7] = "bbc";
  EXPECT_NE(w.build()->fingerprint(), base);
}

TEST(Vocab, BadSpecsNameTheProblem) {
  const std::string bytes = "abc";
  std::vector<uint64_t> offsets = {0, 1, 3};
  std::vector<uint8_t> flags = {0, 0};
  treemask::VocabSpec spec;
  spec.bytes = {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()};
  spec.offsets = offsets;
  spec.flags = flags;
  spec.vocab_size = 2;
  const auto expect_error = [&](const char *needle) {
    spec.offsets = offsets;  // the spans follow the vectors' new sizes
    spec.flags = flags;
    auto r = treemask::build_vocab(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  offsets = {0, 1, 3};
  spec.vocab_size = 1;
  expect_error("vocab_size 1 is smaller than the tokenizer's 2 tokens");
  spec.vocab_size = 2;
  offsets = {0, 2, 1};
  expect_error("token 1: offsets decrease");
  offsets = {0, 1, 2};
  expect_error("does not match the 3 bytes");
  offsets = {1, 1, 3};
  expect_error("offsets[0] must be 0");
  offsets = {0, 1, 3};
  flags = {0, 0x80};
  expect_error("token 1: unknown flag bits 0x80");
  flags = {0};
  expect_error("flags has 1 entries for 2 tokens");
  flags = {0, 0};
  offsets = {0};
  expect_error("at least one token");
  offsets = {0, 1, 3};
  spec.offsets = offsets;
  EXPECT_TRUE(treemask::build_vocab(spec).ok());
}

TEST(VocabTrie, DepthFirstLayoutHoldsEveryTextTokenOnce) {
  std::mt19937_64 rng(7);
  VocabModel v;
  for (int i = 0; i < 400; ++i) {
    std::string t(1 + rng() % 5, ' ');
    for (auto &c : t) c = "ab\xff"[rng() % 3];
    v.tokens.push_back(t);
    v.flags.push_back(rng() % 10 == 0 ? treemask::kTokenSpecial : 0);
  }
  v.tokens.push_back("");
  v.flags.push_back(0);
  v.vocab_size = static_cast<int32_t>(v.tokens.size());
  const auto vocab = v.build();
  const treemask::VocabTrie &tt = vocab->vocab_trie();
  const treemask::VocabTrieNode *n = tt.nodes();
  ASSERT_EQ(n[0].subtree_size(), tt.n_nodes());
  // Rebuild each node's bytes from the layout alone.
  std::vector<std::string> spelled(tt.n_nodes());
  std::vector<int> seen(v.tokens.size(), 0);
  size_t max_depth = 0;
  std::vector<std::pair<uint32_t, uint32_t>> open{{0, static_cast<uint32_t>(tt.n_nodes())}};
  for (uint32_t i = 1; i < tt.n_nodes(); ++i) {
    while (i >= open.back().second) open.pop_back();
    const uint32_t parent = open.back().first;
    spelled[i] = spelled[parent] + static_cast<char>(n[i].byte());
    ASSERT_GE(n[i].subtree_size(), 1u);
    ASSERT_LE(i + n[i].subtree_size(), open.back().second);
    if (i > parent + 1) {
      // Siblings ascend by byte (equal only for duplicate tokens).
      uint32_t prev = parent + 1;
      while (prev + n[prev].subtree_size() < i) prev += n[prev].subtree_size();
      ASSERT_LE(n[prev].byte(), n[i].byte());
    }
    if (n[i].token >= 0) {
      ASSERT_EQ(spelled[i], v.tokens[static_cast<size_t>(n[i].token)]);
      ++seen[static_cast<size_t>(n[i].token)];
    }
    max_depth = std::max(max_depth, spelled[i].size());
    open.push_back({i, i + n[i].subtree_size()});
  }
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    EXPECT_EQ(seen[t], v.is_text(static_cast<int32_t>(t)) ? 1 : 0) << "token " << t;
  }
  EXPECT_EQ(tt.max_depth(), max_depth);
  for (unsigned b = 0; b <= 256; ++b) {
    uint32_t c = 1;
    while (c < tt.n_nodes() && n[c].byte() < b) c += n[c].subtree_size();
    EXPECT_EQ(tt.root_child_at_or_after(b), c) << "byte " << b;
  }
}

// ------------------------------------------------------------ sort

TEST(StringSort, MatchesStdSortWithLcp) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> s;
    const int n = static_cast<int>(rng() % 3000);
    const std::string shared(rng() % 2 ? 0 : rng() % 300, 'q');  // long common prefixes
    for (int i = 0; i < n; ++i) {
      std::string x = rng() % 4 ? shared : "";
      const size_t len = rng() % 12;
      for (size_t j = 0; j < len; ++j) x.push_back("ab\0\xff"[rng() % (round % 2 ? 2 : 4)]);
      s.push_back(x);
      if (rng() % 8 == 0) s.push_back(x);  // duplicates
    }
    const Packed p = pack(s);
    const auto sorted = treemask::sort_strings(reinterpret_cast<const uint8_t *>(p.bytes.data()),
                                               p.offsets.data(), s.size());
    std::vector<std::string> expect = s;
    std::sort(expect.begin(), expect.end());
    ASSERT_EQ(sorted.order.size(), s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      ASSERT_EQ(s[sorted.order[i]], expect[i]) << "position " << i;
      if (i == 0) continue;
      const std::string &a = expect[i - 1], &b = expect[i];
      size_t l = 0;
      while (l < std::min(a.size(), b.size()) && a[l] == b[l]) ++l;
      ASSERT_EQ(sorted.lcp[i], l);
    }
  }
}

// ------------------------------------------------------------ edge cases

SetModel model(const VocabModel &v, const std::vector<std::string> &strings,
               std::vector<int32_t> stops, const std::string &prefix = "") {
  SetModel m{&v, {}, std::move(stops)};
  std::sort(m.stops.begin(), m.stops.end());
  for (const auto &s : strings) m.full.insert(prefix + s);
  return m;
}

// Every state of the set (every prefix of every full string).
void check_all_states(const StringTrie &t, const SetModel &m) {
  std::set<std::string> states;
  for (const auto &s : m.full) {
    for (size_t i = 0; i <= s.size(); ++i) states.insert(s.substr(0, i));
  }
  for (const auto &w : states) {
    const uint32_t node = t.walk(0, w);
    ASSERT_NE(node, treemask::kNoNode) << treemask::escape_control(w);
    check_state(t, m, w, node);
  }
  EXPECT_EQ(t.n_nodes(), states.size());
}

TEST(StringTrie, EmptyStringAlone) {
  const VocabModel v = letters_vocab();
  const auto t = build(v, {""}, {1});
  EXPECT_EQ(t->n_nodes(), 1u);
  EXPECT_TRUE(t->is_terminal(0));
  EXPECT_EQ(list(*t, 0), (std::vector<int32_t>{1}));
  check_all_states(*t, model(v, {""}, {1}));
}

TEST(StringTrie, EmptyStringWithPrefix) {
  const VocabModel v = letters_vocab();
  const auto t = build(v, {"", "a"}, {1}, " ");
  EXPECT_FALSE(t->is_terminal(0));
  EXPECT_TRUE(t->is_terminal(t->walk(0, " ")));
  check_all_states(*t, model(v, {"", "a"}, {1}, " "));
}

TEST(StringTrie, PrefixesOfEachOtherAndCrossingAStringEnd) {
  const VocabModel v = letters_vocab();
  const std::vector<std::string> s = {"a", "ab", "abc", "abca", "b"};
  const auto t = build(v, s, {1});
  // At "a" (an end), "bc" runs on into "abc" and "ca" past it into "abca".
  const uint32_t a = t->walk(0, "a");
  EXPECT_TRUE(t->is_terminal(a));
  EXPECT_EQ(list(*t, a), (std::vector<int32_t>{1, 4, 7}));  // </s>, "b", "bc"
  EXPECT_EQ(t->step_token(a, 1).kind, NodeStep::kTerminated);
  const uint32_t abc = t->walk(0, "abc");
  EXPECT_EQ(list(*t, abc), (std::vector<int32_t>{1, 3}));  // </s>, "a"
  check_all_states(*t, model(v, s, {1}));
}

TEST(StringTrie, DuplicatesMerge) {
  const VocabModel v = letters_vocab();
  const std::vector<std::string> s = {"ab", "ab", "a", "ab", "a", ""};
  const auto t = build(v, s, {1});
  EXPECT_EQ(t->n_nodes(), 3u);
  check_all_states(*t, model(v, s, {1}));
}

TEST(StringTrie, NonAsciiBytes) {
  const VocabModel v = letters_vocab();
  // "é" is one token or two byte tokens; \xff and \0 appear in no token.
  const std::vector<std::string> s = {"\xc3\xa9", "a\xc3\xa9x", std::string("\xff\0a", 3)};
  const auto t = build(v, s, {1});
  EXPECT_EQ(list(*t, 0), (std::vector<int32_t>{3, 12, 13}));  // "a", "é", "\xc3"
  EXPECT_EQ(t->walk(0, "\xff"), t->walk(0, std::string("\xff", 1)));
  check_all_states(*t, model(v, s, {1}));
}

TEST(StringTrie, PrefixBeforeEveryString) {
  const VocabModel v = letters_vocab();
  const std::vector<std::string> s = {"a", "ab", "c"};
  const auto t = build(v, s, {1}, " ");
  // " " and " a" start; "a" alone does not.
  EXPECT_EQ(list(*t, 0), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(forced_bytes(*t, 0), " ");
  check_all_states(*t, model(v, s, {1}, " "));
}

TEST(StringTrie, SpecialEmptyAndPaddedTokensAreNeverText) {
  VocabModel v = letters_vocab();
  // "<s>" is special even though a string spells it.
  const std::vector<std::string> s = {"<s>", "a"};
  const auto t = build(v, s, {1});
  for (const int32_t tok : {0, 2, 16, 39}) {
    EXPECT_EQ(t->step_token(0, tok).kind, NodeStep::kRejected) << tok;
  }
  EXPECT_EQ(t->step_token(0, 40).kind, NodeStep::kRejected);
  EXPECT_EQ(t->step_token(0, -5).kind, NodeStep::kRejected);
  check_all_states(*t, model(v, s, {1}));
}

TEST(StringTrie, AStopTokenWithTextIsOnlyAStop) {
  const VocabModel v = letters_vocab();
  // Stop token 4 is "b": not allowed inside "ab", allowed (as a stop) at ends.
  const auto t = build(v, {"a", "ab"}, {4});
  const uint32_t a = t->walk(0, "a");
  EXPECT_EQ(list(*t, a), (std::vector<int32_t>{4}));
  EXPECT_EQ(t->step_token(a, 4).kind, NodeStep::kTerminated);
  EXPECT_EQ(list(*t, 0), (std::vector<int32_t>{3, 6}));  // "a", "ab"
  check_all_states(*t, model(v, {"a", "ab"}, {4}));
}

TEST(StringTrie, ForcedTokensStopWhereAContinuationDecides) {
  VocabModel v;
  v.tokens = {"</s>", "N", "e", "w", "Ne", "New", "ew", " Y", "Y", "a", "r", "k", "ark", "wa"};
  v.flags.assign(v.tokens.size(), 0);
  v.flags[0] = treemask::kTokenSpecial;
  v.vocab_size = static_cast<int32_t>(v.tokens.size());
  // The forced bytes are "New". The longest match at 0 is "New", and no
  // token starting at 0 runs past it ("wa" starts at 2, inside the token,
  // where longest match never starts one): "New" is forced.
  const std::vector<std::string> s = {"New York", "Newark"};
  const auto t = build(v, s, {0});
  EXPECT_EQ(forced_bytes(*t, 0), "New");
  EXPECT_EQ(forced(*t, 0), (std::vector<int32_t>{5}));
  // With "Newa" in the vocabulary, a token from 0 runs past "New": nothing
  // is forced.
  VocabModel w = v;
  w.tokens.push_back("Newa");
  w.flags.push_back(0);
  w.vocab_size += 1;
  const auto t2 = build(w, s, {0});
  EXPECT_TRUE(forced(*t2, 0).empty());
  check_all_states(*t, model(v, s, {0}));
  check_all_states(*t2, model(w, s, {0}));
}

TEST(StringTrie, BadInputsNameTheProblem) {
  const VocabModel v = letters_vocab();
  const auto expect_error = [&](const auto &r, const char *needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(try_build(v, {}, {1}), "at least one string");
  expect_error(try_build(v, {"a"}, {}), "at least one stop token");
  expect_error(try_build(v, {"a"}, {40}), "stop token 40");
  treemask::StringSetOptions o;
  o.trie.stop_tokens = {1};
  const std::string bytes = "ab";
  std::vector<uint64_t> offsets = {0, 2, 1};
  treemask::StringList l{{reinterpret_cast<const uint8_t *>(bytes.data()), 2}, offsets};
  expect_error(treemask::build_trie_from_strings(o, v.build(), l, nullptr),
               "string 1: offsets decrease");
  offsets = {0, 1};
  expect_error(treemask::build_trie_from_strings(o, v.build(), l, nullptr),
               "does not match the 2 bytes");
  expect_error(treemask::build_trie_from_strings(o, Ref<treemask::Vocab>(), l, nullptr),
               "vocab is NULL");
}

TEST(StringTrie, ValidationCatchesCorruptArrays) {
  const VocabModel v = letters_vocab();
  const auto t = build(v, {"abc", "abd", "b", "ab"}, {1});
  const treemask::TrieArrays good = t.trie->arrays();
  ASSERT_TRUE(treemask::validate_byte_trie_arrays(good).ok());
  // Copies to corrupt.
  std::vector<uint8_t> labels(good.byte_labels, good.byte_labels + good.n_nodes);
  std::vector<uint64_t> term(good.terminal_bits, good.terminal_bits + good.byte_words());
  std::vector<uint64_t> unary(good.unary_bits, good.unary_bits + good.byte_words());
  std::vector<uint32_t> ids(good.child_ids, good.child_ids + good.n_branch_children);
  const auto with = [&](auto mutate) {
    auto l = labels;
    auto te = term;
    auto u = unary;
    auto i = ids;
    treemask::TrieArrays a = good;
    mutate(l, te, u, i);
    a.byte_labels = l.data();
    a.terminal_bits = te.data();
    a.unary_bits = u.data();
    a.child_ids = i.data();
    return treemask::validate_byte_trie_arrays(a);
  };
  EXPECT_TRUE(with([](auto &, auto &, auto &, auto &) {}).ok());
  EXPECT_FALSE(with([](auto &, auto &te, auto &, auto &) { te[0] = 0; }).ok());  // leaves
  EXPECT_FALSE(with([](auto &l, auto &, auto &, auto &) { l[3] ^= 1; }).ok());
  EXPECT_FALSE(with([](auto &, auto &, auto &, auto &i) { i[1] = 0; }).ok());
  EXPECT_FALSE(with([&](auto &, auto &, auto &u, auto &) { u[0] |= good.branch_bits[0]; }).ok());
  EXPECT_FALSE(with([&](auto &, auto &te, auto &, auto &) { te[0] |= uint64_t{1} << 63; }).ok());
}

// ------------------------------------------------------------ property

TEST(StringTrieProperty, RandomSetsAgainstTheModel) {
  std::mt19937_64 rng(20260);
  const std::string alphabets[] = {"ab", "abc", std::string("a\0\xff", 3), "xy\xc3\xa9"};
  const int rounds = testutil::scaled(1000);
  // What the walks covered: checked below, so that a generator change that
  // stops reaching a case fails instead of passing vacuously.
  uint64_t states = 0, with_forced_tokens = 0, forced_bytes_only = 0, crossing_tokens = 0;
  uint64_t cached_rows = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string &alphabet = alphabets[round % 4];
    const VocabModel v = random_vocab(rng, alphabet);
    std::vector<std::string> strings;
    const size_t n = 1 + rng() % 25;
    for (size_t i = 0; i < n; ++i) {
      std::string s(rng() % 9, ' ');
      for (auto &c : s) c = alphabet[rng() % alphabet.size()];
      strings.push_back(s);
    }
    std::string prefix(rng() % 3 == 0 ? 1 + rng() % 2 : 0, ' ');
    for (auto &c : prefix) c = alphabet[rng() % alphabet.size()];
    // Stop tokens: a special one, sometimes a text one too.
    std::vector<int32_t> stops = {static_cast<int32_t>(rng() % v.tokens.size())};
    if (rng() % 3 == 0) stops.push_back(static_cast<int32_t>(rng() % v.vocab_size));
    // Cache every row (min visits 1) in some rounds: cold and warm reads.
    const uint64_t min_visits = rng() % 2 ? 1 : 0;
    const auto t = build(v, strings, stops, prefix, min_visits);
    const SetModel m = model(v, strings, stops, prefix);
    ASSERT_TRUE(treemask::validate_byte_trie_arrays(t->arrays()).ok());
    // Random walks, choosing among allowed tokens (mostly not canonical).
    for (int walk = 0; walk < 3; ++walk) {
      std::string w;
      uint32_t node = 0;
      for (int step = 0; step < 40; ++step) {
        check_state(*t, m, w, node);
        if (HasFatalFailure()) return;
        ++states;
        const auto allowed = m.allowed_list(w);
        const std::string f = m.forced_bytes(w);
        if (!m.forced_tokens(w).empty()) ++with_forced_tokens;
        if (!f.empty() && m.forced_tokens(w).empty()) ++forced_bytes_only;
        for (int32_t tok : allowed) {
          if (m.is_stop(tok)) continue;
          // A token that runs from a string's end into a longer string.
          const std::string after = w + v.tokens[static_cast<size_t>(tok)];
          for (size_t i = w.size() + 1; i < after.size(); ++i) {
            if (m.terminal(after.substr(0, i))) ++crossing_tokens;
          }
        }
        if (allowed.empty()) break;
        const int32_t tok = allowed[rng() % allowed.size()];
        const NodeStep s = t->step_token(node, tok);
        if (s.kind == NodeStep::kTerminated) break;
        ASSERT_EQ(s.kind, NodeStep::kAdvanced);
        w += v.tokens[static_cast<size_t>(tok)];
        node = s.node;
      }
    }
    if (min_visits == 1) cached_rows += t->dense_cache_rows();
  }
  std::printf(
      "%llu states, %llu with forced tokens, %llu with forced bytes but no token, "
      "%llu tokens crossing a string end\n",
      static_cast<unsigned long long>(states), static_cast<unsigned long long>(with_forced_tokens),
      static_cast<unsigned long long>(forced_bytes_only),
      static_cast<unsigned long long>(crossing_tokens));
  EXPECT_GT(states, static_cast<uint64_t>(rounds) * 3);
  EXPECT_GT(with_forced_tokens, 0u);
  EXPECT_GT(forced_bytes_only, 0u);
  EXPECT_GT(crossing_tokens, 0u);
  EXPECT_GT(cached_rows, 0u);
}

// Many threads fill rows of the same states at once, through a shared cache
// that admits every row (TSan runs this in the concurrency build too).
TEST(StringTrieProperty, ConcurrentFillsShareTheCache) {
  std::mt19937_64 rng(99);
  const VocabModel v = random_vocab(rng, "abc");
  std::vector<std::string> strings;
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 10, ' ');
    for (auto &c : s) c = "abc"[rng() % 3];
    strings.push_back(s);
  }
  // Room for 20 rows: the budget, not the states, ends the caching.
  const size_t row_bytes = ((static_cast<size_t>(v.vocab_size) + 31) / 32 + 2) * 4;
  const auto t = build(v, strings, {0}, "", 1, 20 * row_bytes);
  const SetModel m = model(v, strings, {0});
  std::vector<std::pair<uint32_t, std::vector<int32_t>>> states;
  for (const auto &s : m.full) {
    for (size_t i = 0; i <= s.size(); i += 2) {
      const std::string w = s.substr(0, i);
      states.push_back({t->walk(0, w), m.allowed_list(w)});
    }
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = k; i < states.size() + k; ++i) {
          const auto &[node, expected] = states[i % states.size()];
          std::vector<uint32_t> row(t->row_words());
          t->write_allowed_row(node, t->stop_tokens(), row.data(), row.size());
          std::vector<int32_t> got;
          for (size_t x = 0; x < row.size() * 32; ++x) {
            if ((row[x / 32] >> (x % 32)) & 1) got.push_back(static_cast<int32_t>(x));
          }
          if (got != expected) ++mismatches;
        }
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(t->dense_cache_rows(), 20u);
  EXPECT_EQ(t->dense_cache_bytes(), 20 * row_bytes);
}

}  // namespace
