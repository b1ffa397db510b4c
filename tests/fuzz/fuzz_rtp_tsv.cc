// Fuzz target: RTP-LLM's TSV prefix dictionary ("key<TAB>id\x02id..."
// lines). The input is the file. Besides the loader agreement checks, a
// dictionary that loads is compared with RTP-LLM's own rule, applied to the
// raw lines: at every prefix the trie allows exactly the key's list (or
// only end_token_id when the key is missing or its list is empty).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <charconv>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/loader_harness.h"
#include "sources/rtp.h"

namespace {

constexpr int32_t kVocab = 1 << 17;
constexpr int32_t kStart = 225;
constexpr int32_t kEnd = 2;

// The rule, from the lines of a dictionary the loader accepted (so every
// line has a tab and every id is a valid integer).
std::map<std::string, std::set<int32_t>> reference_lists(std::string_view text) {
  std::map<std::string, std::set<int32_t>> lists;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t tab = line.find('\t');
    FUZZ_CHECK(tab != std::string_view::npos);
    auto &ids = lists[std::string(line.substr(0, tab))];
    std::string_view rest = line.substr(tab + 1);
    while (!rest.empty()) {
      const size_t sep = rest.find('\x02');
      const std::string_view id = rest.substr(0, sep);
      rest.remove_prefix(sep == std::string_view::npos ? rest.size() : sep + 1);
      int64_t v = 0;
      FUZZ_CHECK(std::from_chars(id.data(), id.data() + id.size(), v).ec == std::errc());
      ids.insert(static_cast<int32_t>(v));
    }
  }
  return lists;
}

void expect_rule(treemask_trie *trie, std::string_view text) {
  const auto lists = reference_lists(text);
  struct Prefix {
    testutil::MatcherHandle m;
    std::string key;
  };
  treemask_matcher *root = nullptr;
  FUZZ_CHECK(treemask_matcher_create(trie, nullptr, &root) == TREEMASK_OK);
  std::deque<Prefix> queue;
  queue.push_back({testutil::MatcherHandle(root), std::to_string(kStart)});
  for (size_t visited = 0; !queue.empty() && visited < 512; ++visited) {
    Prefix p = std::move(queue.front());
    queue.pop_front();
    const auto it = lists.find(p.key);
    const std::set<int32_t> want =
        it == lists.end() || it->second.empty() ? std::set<int32_t>{kEnd} : it->second;
    const auto got = testutil::next_tokens(p.m.p);
    FUZZ_CHECK(std::set<int32_t>(got.begin(), got.end()) == want);
    for (int32_t t : got) {
      if (t == kEnd || queue.size() > 64) continue;
      treemask_matcher *child = nullptr;
      FUZZ_CHECK(treemask_matcher_clone(p.m.p, &child) == TREEMASK_OK);
      bool accepted = false;
      FUZZ_CHECK(treemask_matcher_accept_token(child, t, &accepted) == TREEMASK_OK && accepted);
      queue.push_back({testutil::MatcherHandle(child), p.key + "_" + std::to_string(t)});
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  const treemask_trie_options o = testutil::trie_options(kVocab);
  treemask::RtpOptions internal;
  internal.build.vocab_size = kVocab;
  internal.start_token_id = kStart;
  internal.end_token_id = kEnd;
  internal.sep = "_";
  const fuzz::LoaderDoors doors{
      "treemask_trie_from_rtp_tsv",
      "treemask_trie_from_rtp_tsv_file",
      {TREEMASK_ERR_PARSE, TREEMASK_ERR_OUT_OF_RANGE, TREEMASK_ERR_INVALID_ARGUMENT}};
  testutil::TrieHandle trie(fuzz::load_through_every_door(
      data, size, doors,
      [&](treemask_trie **out) {
        return treemask_trie_from_rtp_tsv(&o, testutil::Rtp(kStart, kEnd, "_").get(), text, size,
                                          out);
      },
      [&](const char *path, treemask_trie **out) {
        return treemask_trie_from_rtp_tsv_file(&o, testutil::Rtp(kStart, kEnd, "_").get(), path,
                                               out);
      },
      [&](treemask::Diagnostics &diag) {
        return treemask::load_rtp_tsv(internal, {text, size}, diag);
      }));
  if (trie.p) expect_rule(trie.p, {text, size});
  return 0;
}
