// RTP-LLM's masking rule, written the way RTP-LLM applies it (string keys in
// a map), to check the loaders against: at a generated prefix the allowed
// tokens are the list of key "<start><sep><t0><sep><t1>...", or only
// end_token_id when that key is missing or its list is empty.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace rtp {

struct Dict {
  int32_t start = 225;
  int32_t end = 2;
  std::string sep = "_";
  std::vector<std::pair<std::string, std::vector<int64_t>>> entries;  // file order

  std::string key(const std::vector<int32_t> &generated) const {
    std::string k = std::to_string(start);
    for (int32_t t : generated) k += sep + std::to_string(t);
    return k;
  }
};

inline std::vector<int32_t> allowed(const std::map<std::string, std::vector<int64_t>> &index,
                                    const Dict &d, const std::vector<int32_t> &generated) {
  const auto it = index.find(d.key(generated));
  if (it == index.end() || it->second.empty()) return {d.end};
  std::set<int32_t> s(it->second.begin(), it->second.end());
  return {s.begin(), s.end()};
}

// Walks every prefix the rule reaches, checking the trie's bitmask (stop
// token = end_token_id) against it. Returns the keys of the dictionary it
// reached, for counting unreachable ones.
inline std::set<std::string> expect_trie_follows_rule(treemask_trie *trie, const Dict &d) {
  std::map<std::string, std::vector<int64_t>> index(d.entries.begin(), d.entries.end());
  std::set<std::string> reached;
  const int32_t vocab = treemask_trie_vocab_size(trie);
  std::vector<int32_t> row(treemask_bitmask_words(vocab));
  treemask_matcher *root = nullptr;
  EXPECT_EQ(treemask_matcher_create(trie, nullptr, &root), TREEMASK_OK) << treemask_last_error();
  testutil::MatcherHandle root_handle(root);
  struct Frame {
    testutil::MatcherHandle m;
    std::vector<int32_t> generated;
  };
  std::vector<Frame> stack;
  stack.push_back({std::move(root_handle), {}});
  while (!stack.empty()) {
    Frame f = std::move(stack.back());
    stack.pop_back();
    const std::string key = d.key(f.generated);
    if (index.count(key)) reached.insert(key);
    const auto want = allowed(index, d, f.generated);
    EXPECT_EQ(
        treemask_matcher_fill_next_token_bitmask(f.m.p, row.data(), row.size(), nullptr, nullptr),
        TREEMASK_OK);
    const auto got = testutil::decode_row(row.data(), row.size());
    EXPECT_EQ(got, want) << "at key \"" << key << "\"";
    if (got != want) return reached;
    for (int32_t t : want) {
      treemask_matcher *child = nullptr;
      EXPECT_EQ(treemask_matcher_clone(f.m.p, &child), TREEMASK_OK);
      bool accepted = false;
      EXPECT_EQ(treemask_matcher_accept_token(child, t, &accepted), TREEMASK_OK);
      EXPECT_TRUE(accepted) << "token " << t << " at key \"" << key << "\"";
      if (t == d.end) {
        EXPECT_TRUE(treemask_matcher_is_terminated(child));
        treemask_matcher_free(child);
        continue;
      }
      auto generated = f.generated;
      generated.push_back(t);
      stack.push_back({testutil::MatcherHandle(child), std::move(generated)});
    }
  }
  return reached;
}

inline std::string to_json(const Dict &d, bool sep_field = true,
                           const std::string &extra_fields = "") {
  std::ostringstream o;
  o << "{\"start_token_id\": " << d.start << ", " << extra_fields << "\"prefix_dict\": {";
  for (size_t i = 0; i < d.entries.size(); ++i) {
    o << (i ? ", " : "") << "\"" << d.entries[i].first << "\": [";
    for (size_t j = 0; j < d.entries[i].second.size(); ++j) {
      o << (j ? "," : "") << d.entries[i].second[j];
    }
    o << "]";
  }
  o << "}, \"end_token_id\": " << d.end;
  if (sep_field) o << ", \"sep\": \"" << d.sep << "\"";
  o << "}";
  return o.str();
}

inline std::string to_tsv(const Dict &d, const char *eol = "\n") {
  std::string out;
  for (const auto &[key, ids] : d.entries) {
    out += key + "\t";
    for (size_t j = 0; j < ids.size(); ++j) {
      if (j) out += '\x02';
      out += std::to_string(ids[j]);
    }
    out += eol;
  }
  return out;
}

inline std::string source_path(const std::string &relative) {
  const char *root = std::getenv("TREEMASK_SOURCE_ROOT");
  return std::string(root ? root : ".") + "/" + relative;
}

inline std::string read_text(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace rtp
