// RTP-LLM prefix dictionaries (JSON and TSV) and JSONL paths through the C
// API: the real RTP-LLM fixtures, random dictionaries checked against
// RTP-LLM's rule (rtp_reference.h), and every documented error.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "formats/rtp_reference.h"

namespace {

using testutil::TrieHandle;

// Built with -Djson=disabled, the JSON loaders must say so instead of loading.
#define REQUIRE_JSON_OR_EXPECT_UNSUPPORTED()                                                      \
  if (!TREEMASK_TEST_HAVE_JSON) {                                                                 \
    treemask_trie_options o_;                                                                     \
    treemask_trie_options_init(&o_);                                                              \
    o_.vocab_size = 10;                                                                           \
    treemask_trie *t_ = nullptr;                                                                  \
    EXPECT_EQ(treemask_trie_from_rtp_json(&o_, nullptr, "{}", 2, &t_), TREEMASK_ERR_UNSUPPORTED); \
    EXPECT_EQ(treemask_trie_from_jsonl(&o_, "[1]", 3, &t_), TREEMASK_ERR_UNSUPPORTED);            \
    return;                                                                                       \
  }

treemask_trie_options options(int32_t vocab, std::vector<int32_t> *stops = nullptr) {
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = vocab;
  if (stops) {
    o.stop_tokens = stops->data();
    o.n_stop_tokens = stops->size();
  }
  return o;
}

treemask_status from_json(const std::string &json, TrieHandle &out, int32_t vocab = 100000,
                          const treemask_trie_options *opts = nullptr,
                          const treemask_rtp_options *rtp = nullptr) {
  const treemask_trie_options o = opts ? *opts : options(vocab);
  return treemask_trie_from_rtp_json(&o, rtp, json.data(), json.size(), &out.p);
}

treemask_status from_tsv(const std::string &tsv, TrieHandle &out, int32_t start, int32_t end,
                         const char *sep = "_", int32_t vocab = 100000) {
  const treemask_trie_options o = options(vocab);
  return treemask_trie_from_rtp_tsv(&o, testutil::Rtp(start, end, sep).get(), tsv.data(),
                                    tsv.size(), &out.p);
}

treemask_trie_stats stats(const treemask_trie *t) {
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  EXPECT_EQ(treemask_trie_get_stats(t, &s), TREEMASK_OK);
  return s;
}

std::string last_error() { return treemask_last_error(); }

// The fixture as RTP-LLM's TreeLogitsProcessorTest reads it.
rtp::Dict gir_json_dict() {
  rtp::Dict d;
  d.entries = {{"225", {64000, 64003, 64006, 64008, 64011}},
               {"225_64000", {64001}},
               {"225_64003", {64001}},
               {"225_64006", {64004}},
               {"225_64008", {64001}},
               {"225_64000_64001", {2}},
               {"225_64003_64001", {2}},
               {"225_64006_64004", {2}},
               {"225_64008_64001", {2}}};
  return d;
}

rtp::Dict parse_tsv_in_test(const std::string &text) {
  rtp::Dict d;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    std::vector<int64_t> ids;
    std::string rest = line.substr(tab + 1);
    for (size_t pos = 0; pos < rest.size();) {
      size_t end = rest.find('\x02', pos);
      if (end == std::string::npos) end = rest.size();
      ids.push_back(std::stoll(rest.substr(pos, end - pos)));
      pos = end + 1;
    }
    d.entries.emplace_back(line.substr(0, tab), ids);
  }
  return d;
}

TEST(RtpFixtures, GirJsonMasksLikeRtpLlm) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  TrieHandle t;
  const std::string path = rtp::source_path("tests/data/rtp-llm/gir_prefix_dict.json");
  const auto o = options(100000);
  ASSERT_EQ(treemask_trie_from_rtp_json_file(&o, nullptr, path.c_str(), &t.p), TREEMASK_OK)
      << last_error();
  const rtp::Dict d = gir_json_dict();
  EXPECT_EQ(rtp::expect_trie_follows_rule(t.p, d).size(), d.entries.size());
  // Root, 5 first-level nodes (64011 has no key: a leaf), 4 second-level leaves.
  const auto s = stats(t.p);
  EXPECT_EQ(s.n_nodes, 10u);
  EXPECT_EQ(s.n_terminals, 5u);
  EXPECT_EQ(s.max_depth, 2u);
  EXPECT_EQ(s.n_labels, 0u);
  EXPECT_EQ(s.n_warnings, 0u);
  int32_t stop = -1;
  EXPECT_EQ(treemask_trie_stop_tokens(t.p, &stop, 1), 1u);
  EXPECT_EQ(stop, 2);
}

TEST(RtpFixtures, GirTsvMasksLikeRtpLlm) {
  const std::string text =
      rtp::read_text(rtp::source_path("tests/data/rtp-llm/gir_prefix_dict.txt"));
  const rtp::Dict d = parse_tsv_in_test(text);
  ASSERT_EQ(d.entries.size(), 9u);
  TrieHandle t;
  ASSERT_EQ(from_tsv(text, t, 225, 2), TREEMASK_OK) << last_error();
  EXPECT_EQ(rtp::expect_trie_follows_rule(t.p, d).size(), d.entries.size());
  const auto s = stats(t.p);
  EXPECT_EQ(s.max_fanout, 7835u);
  EXPECT_EQ(s.n_warnings, 0u);
  // The _file form reads the same bytes.
  TrieHandle f;
  const auto o = options(100000);
  const std::string path = rtp::source_path("tests/data/rtp-llm/gir_prefix_dict.txt");
  ASSERT_EQ(
      treemask_trie_from_rtp_tsv_file(&o, testutil::Rtp(225, 2, nullptr).get(), path.c_str(), &f.p),
      TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats(f.p).n_nodes, s.n_nodes);
}

TEST(RtpFixtures, UtilsFixtureKeysDoNotStartWithTheStartToken) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  TrieHandle t;
  const std::string path = rtp::source_path("tests/data/rtp-llm/utils_test_gir_prefix_dict.json");
  const auto o = options(100000);
  EXPECT_EQ(treemask_trie_from_rtp_json_file(&o, nullptr, path.c_str(), &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.p, nullptr);
  const std::string msg = last_error();
  EXPECT_NE(msg.find("key \"1_2\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("start_token_id 225"), std::string::npos) << msg;
}

// Random dictionaries with every feature of the format: missing keys, empty
// lists, end_token_id inside lists, duplicate ids, unreachable keys, any key
// order, other separators. JSON and TSV must both follow the rule exactly
// and count each unreachable key as a warning.
TEST(RtpRandom, JsonAndTsvFollowTheRule) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  std::mt19937_64 rng(20260401);
  const char *seps[] = {"_", ",", "::", "|", " "};
  const int rounds = testutil::scaled(300);
  for (int round = 0; round < rounds; ++round) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    rtp::Dict d;
    const int32_t vocab = pick(8, 400);
    d.start = pick(0, 100000);
    d.end = pick(0, vocab - 1);
    d.sep = seps[pick(0, 4)];
    std::set<std::string> keys;
    std::vector<std::vector<int32_t>> frontier;
    if (pick(0, 9) > 0) frontier.push_back({});
    while (!frontier.empty()) {
      auto generated = frontier.back();
      frontier.pop_back();
      std::vector<int64_t> ids;
      const int n = pick(0, 4) == 0 ? 0 : pick(1, 5);
      for (int i = 0; i < n; ++i) {
        const int64_t id = pick(0, 6) == 0 ? d.end : pick(0, vocab - 1);
        ids.push_back(id);
        if (pick(0, 5) == 0) ids.push_back(id);  // a duplicate id
        if (id != d.end && generated.size() < 4 && pick(0, 9) < 6) {
          auto child = generated;
          child.push_back(static_cast<int32_t>(id));
          frontier.push_back(child);
        }
      }
      if (keys.insert(d.key(generated)).second) d.entries.emplace_back(d.key(generated), ids);
    }
    for (int i = pick(d.entries.empty() ? 1 : 0, 3); i > 0; --i) {  // probably unreachable
      std::vector<int32_t> g{pick(0, vocab - 1), pick(0, vocab - 1)};
      if (keys.insert(d.key(g)).second) d.entries.emplace_back(d.key(g), std::vector<int64_t>{});
    }
    std::shuffle(d.entries.begin(), d.entries.end(), rng);

    SCOPED_TRACE("round " + std::to_string(round) + ": " + rtp::to_json(d));
    TrieHandle j;
    const bool unknown_field = pick(0, 1);
    const auto opts = options(vocab);
    ASSERT_EQ(from_json(rtp::to_json(d, true, unknown_field ? "\"weight_dict\": {\"x\": 1}, " : ""),
                        j, vocab, &opts),
              TREEMASK_OK)
        << last_error();
    const auto reached = rtp::expect_trie_follows_rule(j.p, d);
    const uint64_t unreachable = d.entries.size() - reached.size();
    const uint64_t no_root = keys.count(d.key({})) ? 0 : 1;
    EXPECT_EQ(stats(j.p).n_warnings, unreachable + no_root + (unknown_field ? 1 : 0));

    TrieHandle t;
    ASSERT_EQ(from_tsv(rtp::to_tsv(d, pick(0, 1) ? "\n" : "\r\n"), t, d.start, d.end, d.sep.c_str(),
                       vocab),
              TREEMASK_OK)
        << last_error();
    rtp::expect_trie_follows_rule(t.p, d);
    EXPECT_EQ(stats(t.p).n_warnings, unreachable + no_root);
    EXPECT_EQ(stats(t.p).n_nodes, stats(j.p).n_nodes);
  }
}

TEST(RtpJson, EndTokenInAListMakesATerminalWithChildren) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  TrieHandle t;
  ASSERT_EQ(from_json(R"({"start_token_id": 7, "end_token_id": 2, "prefix_dict": {
      "7": [5, 2, 5, 9], "7_5": [], "7_9": [2]}})",
                      t, 20),
            TREEMASK_OK)
      << last_error();
  rtp::Dict d;
  d.start = 7;
  d.entries = {{"7", {5, 2, 5, 9}}, {"7_5", {}}, {"7_9", {2}}};
  rtp::expect_trie_follows_rule(t.p, d);
  EXPECT_EQ(stats(t.p).n_terminals, 3u);  // the root, 7_5 (empty list) and 7_9
}

TEST(RtpJson, OptionStopTokensReplaceTheEndToken) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  std::vector<int32_t> stops{7, 8};
  auto o = options(20, &stops);
  TrieHandle t;
  const std::string json = R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3]}})";
  ASSERT_EQ(treemask_trie_from_rtp_json(&o, nullptr, json.data(), json.size(), &t.p), TREEMASK_OK)
      << last_error();
  treemask_matcher *m = nullptr;
  ASSERT_EQ(treemask_matcher_create(t.p, nullptr, &m), TREEMASK_OK);
  testutil::MatcherHandle mh(m);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(m, 3, &ok), TREEMASK_OK);
  EXPECT_TRUE(ok);
  EXPECT_EQ(testutil::next_tokens(m), (std::vector<int32_t>{7, 8}));
  // Another stop token inside a list is an error naming the key.
  const std::string bad = R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [8]}})";
  TrieHandle b;
  EXPECT_EQ(treemask_trie_from_rtp_json(&o, nullptr, bad.data(), bad.size(), &b.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("key \"1\": id 8 is a stop token"), std::string::npos)
      << last_error();
}

TEST(RtpJson, DefaultsOptionFillsMissingStartAndEnd) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const std::string json = R"({"prefix_dict": {"225": [10], "225_10": [2]}})";
  TrieHandle t;
  EXPECT_EQ(from_json(json, t), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("missing top-level field \"start_token_id\""), std::string::npos)
      << last_error();
  auto o = options(100);
  const testutil::Rtp defaults(-1, -1, nullptr, false, true);
  ASSERT_EQ(from_json(json, t, 100, &o, defaults.get()), TREEMASK_OK) << last_error();
  rtp::Dict d;
  d.entries = {{"225", {10}}, {"225_10", {2}}};
  EXPECT_EQ(rtp::expect_trie_follows_rule(t.p, d).size(), 2u);
  // Values in the file win over the defaults.
  TrieHandle f;
  const std::string own = R"({"start_token_id": 5, "end_token_id": 1, "prefix_dict": {"5": [3]}})";
  ASSERT_EQ(from_json(own, f, 100, &o, defaults.get()), TREEMASK_OK) << last_error();
  int32_t stop = -1;
  treemask_trie_stop_tokens(f.p, &stop, 1);
  EXPECT_EQ(stop, 1);
}

TEST(RtpJson, EscapedKeysAndFieldOrderDoNotMatter) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  TrieHandle t;
  ASSERT_EQ(from_json(R"({"prefix_dict": {"3\u005f4": [2], "3": [4]}, "sep": "_",
                          "end_token_id": 2, "start_token_id": 3})",
                      t, 10),
            TREEMASK_OK)
      << last_error();
  rtp::Dict d;
  d.start = 3;
  d.entries = {{"3", {4}}, {"3_4", {2}}};
  EXPECT_EQ(rtp::expect_trie_follows_rule(t.p, d).size(), 2u);
}

struct BadInput {
  const char *json;
  treemask_status code;
  const char *message;
};

TEST(RtpJson, BadInputsNameTheProblem) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const BadInput cases[] = {
      {"", TREEMASK_ERR_PARSE, "empty input"},
      {"  \n ", TREEMASK_ERR_PARSE, "empty input"},
      {"[1, 2]", TREEMASK_ERR_PARSE, "top level must be a JSON object"},
      {R"({"end_token_id": 2, "prefix_dict": {}})", TREEMASK_ERR_INVALID_ARGUMENT,
       "missing top-level field \"start_token_id\""},
      {R"({"start_token_id": 1, "prefix_dict": {}})", TREEMASK_ERR_INVALID_ARGUMENT,
       "missing top-level field \"end_token_id\""},
      {R"({"start_token_id": 1, "end_token_id": 2})", TREEMASK_ERR_INVALID_ARGUMENT,
       "missing \"prefix_dict\""},
      {R"({"start_token_id": 1, "end_token_id": 2, "start_token_id": 1, "prefix_dict": {}})",
       TREEMASK_ERR_PARSE, "duplicate top-level field \"start_token_id\""},
      {R"({"start_token_id": "1", "end_token_id": 2, "prefix_dict": {}})", TREEMASK_ERR_PARSE,
       "\"start_token_id\" must be an integer"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": []})", TREEMASK_ERR_PARSE,
       "\"prefix_dict\" must be an object"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3], "1": [4]}})",
       TREEMASK_ERR_INVALID_ARGUMENT, "duplicate key \"1\""},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1_x": [3]}})",
       TREEMASK_ERR_PARSE, "key \"1_x\": \"x\" is not an integer"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1__3": [3]}})",
       TREEMASK_ERR_PARSE, "key \"1__3\": empty id"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1_03": [3]}})",
       TREEMASK_ERR_PARSE, "key \"1_03\": id \"03\" has leading zeros"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1_99999999999": [3]}})",
       TREEMASK_ERR_OUT_OF_RANGE, "key \"1_99999999999\": id 99999999999 is outside int32"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1_500": [3]}})",
       TREEMASK_ERR_OUT_OF_RANGE, "key \"1_500\": id 500 is out of range [0, vocab_size=100)"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"12": [3]}})",
       TREEMASK_ERR_INVALID_ARGUMENT, "key \"12\": does not start with start_token_id 1"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3, 100]}})",
       TREEMASK_ERR_OUT_OF_RANGE, "key \"1\": id 100 is out of range [0, vocab_size=100)"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [-4]}})",
       TREEMASK_ERR_OUT_OF_RANGE, "key \"1\": id -4 is out of range"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3, 9999999999]}})",
       TREEMASK_ERR_OUT_OF_RANGE, "key \"1\": id 9999999999 is outside int32"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3.5]}})",
       TREEMASK_ERR_PARSE, "key \"1\": list element 3.5 (at byte 63) is not an integer"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": ["3"]}})",
       TREEMASK_ERR_PARSE, "key \"1\": list element \"3\" (at byte 63) is not an integer"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": 3}})", TREEMASK_ERR_PARSE,
       "key \"1\": the value must be a list of token ids"},
      {R"({"start_token_id": 1, "end_token_id": 200, "prefix_dict": {}})",
       TREEMASK_ERR_OUT_OF_RANGE, "end_token_id 200 is out of range"},
      {R"({"start_token_id": 1, "end_token_id": 2, "sep": "", "prefix_dict": {}})",
       TREEMASK_ERR_INVALID_ARGUMENT, "sep must not be empty"},
      {R"({"start_token_id": 1, "end_token_id": 2, "sep": "0", "prefix_dict": {}})",
       TREEMASK_ERR_INVALID_ARGUMENT, "sep \"0\" contains a digit"},
      {R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3]}} x)",
       TREEMASK_ERR_PARSE, "malformed JSON at byte 68"},
  };
  for (const BadInput &c : cases) {
    TrieHandle t;
    EXPECT_EQ(from_json(c.json, t, 100), c.code) << c.json << "\n" << last_error();
    EXPECT_EQ(t.p, nullptr);
    EXPECT_NE(last_error().find(c.message), std::string::npos)
        << c.json << "\nwant: " << c.message << "\ngot:  " << last_error();
  }
}

TEST(RtpJson, MalformedJsonGivesTheByteOffset) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  struct Case {
    std::string json;
    size_t bad_at;  // where the problem is
  };
  const std::string head = R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": [3)";
  const Case cases[] = {
      {head + "}}}", head.size()},                         // ']' expected
      {head + "], \"1_3\" [2]}}", head.size() + 9},        // ':' expected
      {head + "], \"1_3: [2]}}", head.size() + 3},         // unclosed string
      {head + "], \"1_3\": [2\xff]}}", head.size() + 12},  // invalid UTF-8
      {head + "], \"1_3\": [2,]}}", head.size() + 13},     // trailing comma
  };
  for (const Case &c : cases) {
    TrieHandle t;
    EXPECT_EQ(from_json(c.json, t, 100), TREEMASK_ERR_PARSE) << c.json;
    const std::string msg = last_error();
    const size_t at = msg.find("at byte ");
    ASSERT_NE(at, std::string::npos) << msg;
    const long offset = std::stol(msg.substr(at + 8));
    EXPECT_LE(std::labs(offset - static_cast<long>(c.bad_at)), 2) << c.json << "\n" << msg;
  }
}

TEST(RtpJson, MissingFileAndNullArguments) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  TrieHandle t;
  const auto o = options(100);
  EXPECT_EQ(treemask_trie_from_rtp_json_file(&o, nullptr, "/nonexistent/dict.json", &t.p),
            TREEMASK_ERR_IO);
  EXPECT_NE(last_error().find("\"/nonexistent/dict.json\""), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_from_rtp_json_file(&o, nullptr, "/", &t.p), TREEMASK_ERR_IO);
  EXPECT_EQ(treemask_trie_from_rtp_json(&o, nullptr, nullptr, 3, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_from_rtp_json(&o, nullptr, "{}", 2, nullptr),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out is NULL"), std::string::npos);
  EXPECT_EQ(treemask_trie_from_rtp_json(nullptr, nullptr, "{}", 2, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  auto no_vocab = options(0);
  const std::string json = R"({"start_token_id": 1, "end_token_id": 0, "prefix_dict": {}})";
  EXPECT_EQ(treemask_trie_from_rtp_json(&no_vocab, nullptr, json.data(), json.size(), &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("vocab_size must be positive"), std::string::npos) << last_error();
}

TEST(RtpTsv, BadLinesNameTheLineAndKey) {
  TrieHandle t;
  EXPECT_EQ(from_tsv("225\t1\x02"
                     "3\n\n225_1 2\n",
                     t, 225, 2),
            TREEMASK_ERR_PARSE);
  EXPECT_NE(last_error().find("line 3: no tab"), std::string::npos) << last_error();
  EXPECT_EQ(from_tsv("225\t1\x02x\n", t, 225, 2), TREEMASK_ERR_PARSE);
  EXPECT_NE(last_error().find("line 1: key \"225\": list element \"x\""), std::string::npos)
      << last_error();
  EXPECT_EQ(from_tsv("225\t1\n225\t3\n", t, 225, 2), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("duplicate key \"225\""), std::string::npos) << last_error();
  EXPECT_EQ(from_tsv("", t, 225, 2), TREEMASK_ERR_PARSE);
  EXPECT_NE(last_error().find("empty input"), std::string::npos) << last_error();
  EXPECT_EQ(from_tsv("225\t1\n", t, 225, 2, ""), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("sep must not be empty"), std::string::npos) << last_error();
  EXPECT_EQ(from_tsv("225\t99999999999\n", t, 225, 2), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("id 99999999999 is outside int32"), std::string::npos)
      << last_error();
  EXPECT_EQ(t.p, nullptr);
  // A NULL sep is "_"; an empty id list after the tab is an empty list.
  ASSERT_EQ(from_tsv("225\t1\x02"
                     "3\r\n225_3\t\r\n",
                     t, 225, 2, nullptr),
            TREEMASK_OK)
      << last_error();
  rtp::Dict d;
  d.entries = {{"225", {1, 3}}, {"225_3", {}}};
  rtp::expect_trie_follows_rule(t.p, d);
}

TEST(Jsonl, ArraysAndObjectsBuildTheSameTrieAsPaths) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const std::string text =
      "[5, 6, 7]\n"
      "\n"
      "{\"tokens\": [5, 6], \"label\": 40}\r\n"
      "{\"label\": 41, \"tokens\": [9]}\n"
      "[5, 6, 7]\n"
      "[]";
  std::vector<int32_t> stops{0};
  auto o = options(10, &stops);
  TrieHandle j;
  ASSERT_EQ(treemask_trie_from_jsonl(&o, text.data(), text.size(), &j.p), TREEMASK_OK)
      << last_error();
  TrieHandle p;
  const std::vector<int64_t> labels{0, 40, 41, 3, 4};
  ASSERT_EQ(testutil::make_trie({{5, 6, 7}, {5, 6}, {9}, {5, 6, 7}, {}}, 10, {0}, p, &labels),
            TREEMASK_OK);
  EXPECT_EQ(stats(j.p).n_nodes, stats(p.p).n_nodes);
  EXPECT_EQ(stats(j.p).n_labels, stats(p.p).n_labels);
  // Same allowed sets and labels along every path.
  for (const std::vector<int32_t> &path : {std::vector<int32_t>{5, 6, 7}, {9}, {5, 6}, {}}) {
    treemask_matcher *a = nullptr, *b = nullptr;
    ASSERT_EQ(treemask_matcher_create(j.p, nullptr, &a), TREEMASK_OK);
    ASSERT_EQ(treemask_matcher_create(p.p, nullptr, &b), TREEMASK_OK);
    testutil::MatcherHandle ah(a), bh(b);
    for (int32_t t : path) {
      EXPECT_EQ(testutil::next_tokens(a), testutil::next_tokens(b));
      bool x = false, y = false;
      EXPECT_EQ(treemask_matcher_accept_token(a, t, &x), TREEMASK_OK);
      EXPECT_EQ(treemask_matcher_accept_token(b, t, &y), TREEMASK_OK);
      ASSERT_TRUE(x && y);
    }
    EXPECT_EQ(testutil::label_ids(a), testutil::label_ids(b));
  }
}

TEST(Jsonl, ErrorsNameTheLine) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  std::vector<int32_t> stops{0};
  auto o = options(10, &stops);
  struct Case {
    const char *text;
    treemask_status code;
    const char *message;
  };
  const Case cases[] = {
      {"[1]\n[2, 10]\n", TREEMASK_ERR_OUT_OF_RANGE,
       "line 2: token 10 at position 1 is out of range"},
      {"[1]\n\n[3, 0]\n", TREEMASK_ERR_INVALID_ARGUMENT, "line 3: stop token 0 at position 1"},
      {"[1, \"a\"]\n", TREEMASK_ERR_PARSE, "line 1: token at position 1 is not an integer"},
      {"{\"label\": 3}\n", TREEMASK_ERR_PARSE, "line 1: missing \"tokens\""},
      {"{\"tokens\": [1], \"label\": \"x\"}\n", TREEMASK_ERR_PARSE, "\"label\" must be an integer"},
      {"[1]\n7\n", TREEMASK_ERR_PARSE, "line 2: expected [token ids]"},
      {"[1]\n[1, 2\n", TREEMASK_ERR_PARSE, "malformed JSON on line 2 at byte"},
      {"[1] [2]\n", TREEMASK_ERR_PARSE, "malformed JSON on line 1 at byte 4"},
      {"\n\n", TREEMASK_ERR_PARSE, "empty input"},
  };
  for (const Case &c : cases) {
    TrieHandle t;
    EXPECT_EQ(treemask_trie_from_jsonl(&o, c.text, std::strlen(c.text), &t.p), c.code) << c.text;
    EXPECT_NE(last_error().find(c.message), std::string::npos)
        << c.text << "\nwant: " << c.message << "\ngot:  " << last_error();
  }
  // Unknown fields are warnings, not errors.
  TrieHandle t;
  const std::string ok = "{\"tokens\": [1], \"score\": 0.5}\n";
  ASSERT_EQ(treemask_trie_from_jsonl(&o, ok.data(), ok.size(), &t.p), TREEMASK_OK);
  EXPECT_EQ(stats(t.p).n_warnings, 1u);
}

// Issue 14 item 4: a repeated field was merged (tokens) or kept last (label).
TEST(Jsonl, DuplicateFieldsAreErrorsNamingTheLine) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  std::vector<int32_t> stops{0};
  auto o = options(10, &stops);
  for (const char *text : {"[1]\n{\"tokens\": [1, 2], \"tokens\": [3]}\n",
                           "[1]\n{\"tokens\": [1], \"label\": 4, \"label\": 5}\n"}) {
    TrieHandle t;
    EXPECT_EQ(treemask_trie_from_jsonl(&o, text, std::strlen(text), &t.p), TREEMASK_ERR_PARSE)
        << text;
    EXPECT_NE(last_error().find("line 2: duplicate field \""), std::string::npos) << last_error();
  }
}

// Item 8: what the messages say about odd JSON text.
TEST(RtpJson, BomUtf16TrailingJunkAndHugeIdsAreNamed) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const std::string body =
      R"({"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"225": [5]}})";
  TrieHandle t;
  ASSERT_EQ(from_json("\xEF\xBB\xBF" + body, t, 10), TREEMASK_OK) << last_error();
  std::string utf16 = "\xFF\xFE";
  for (char c : body) utf16 += std::string{c, '\0'};
  TrieHandle u;
  EXPECT_EQ(from_json(utf16, u, 10), TREEMASK_ERR_PARSE);
  EXPECT_NE(last_error().find("looks like UTF-16"), std::string::npos) << last_error();
  TrieHandle j;
  EXPECT_EQ(from_json(body + " xyz", j, 10), TREEMASK_ERR_PARSE);
  EXPECT_NE(last_error().find("trailing content after the top-level object"), std::string::npos)
      << last_error();
  TrieHandle h;
  EXPECT_EQ(
      from_json(
          R"({"start_token_id": 225, "end_token_id": 2, "prefix_dict": {"225": [12345678901234567890123456]}})",
          h, 10),
      TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("id 12345678901234567890123456 is outside int32"), std::string::npos)
      << last_error();
}

// Item 9: an empty element is an error wherever it is, trailing included.
TEST(RtpTsv, EmptyElementsAreErrorsEverywhere) {
  for (const char *text : {"225\t5\x02\n",
                           "225\t5\x02\x02"
                           "6\n",
                           "225\t\x02"
                           "5\n"}) {
    TrieHandle t;
    EXPECT_EQ(from_tsv(text, t, 225, 2), TREEMASK_ERR_PARSE) << text;
    EXPECT_NE(last_error().find("empty id at position"), std::string::npos) << last_error();
  }
  TrieHandle empty_list;
  EXPECT_EQ(from_tsv("225\t\n", empty_list, 225, 2), TREEMASK_OK) << last_error();
  TrieHandle tab;
  EXPECT_EQ(from_tsv("225\t5\n", tab, 225, 2, "\t"), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("sep must not contain a tab"), std::string::npos) << last_error();
}

// Item 15: in compatibility mode every bundled RTP-LLM fixture loads and
// every state masks as RTP-LLM's rule says.
TEST(RtpCompat, EveryBundledFixtureLoadsAndFollowsTheRule) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const auto o = options(100000);
  const testutil::Rtp compat(-1, -1, nullptr, true);
  for (const char *name : {"gir_prefix_dict.json", "utils_test_gir_prefix_dict.json"}) {
    const std::string path = rtp::source_path(std::string("tests/data/rtp-llm/") + name);
    TrieHandle t;
    ASSERT_EQ(treemask_trie_from_rtp_json_file(&o, compat.get(), path.c_str(), &t.p), TREEMASK_OK)
        << name << ": " << last_error();
    rtp::Dict d;
    const std::string text = rtp::read_text(path);
    // The entries as RTP-LLM's map holds them (ids as written).
    if (std::string(name) == "gir_prefix_dict.json") {
      d = gir_json_dict();
    } else {
      d.entries = {{"1_2", {3, 4, 5}}, {"1_2_3", {3, 4, 5}}};
    }
    rtp::expect_trie_follows_rule(t.p, d);
  }
  const std::string tsv_path = rtp::source_path("tests/data/rtp-llm/gir_prefix_dict.txt");
  const testutil::Rtp tsv_compat(225, 2, nullptr, true);
  TrieHandle t;
  ASSERT_EQ(treemask_trie_from_rtp_tsv_file(&o, tsv_compat.get(), tsv_path.c_str(), &t.p),
            TREEMASK_OK)
      << last_error();
  rtp::expect_trie_follows_rule(t.p, parse_tsv_in_test(rtp::read_text(tsv_path)));
}

// Item 15: what compatibility mode turns from errors into counted warnings.
TEST(RtpCompat, SkipsWhatRtpLlmSkipsAndCountsIt) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  const std::string json =
      R"({"start_token_id": 7, "end_token_id": 2, "sep": "-", "prefix_dict": {)"
      R"("7": [5, -3, 99999999999999999999999999, 4294967296], "7-5": [2], "x_1": [1], "8-1": [1]}})";
  TrieHandle strict;
  EXPECT_NE(from_json(json, strict, 10), TREEMASK_OK);
  const auto o = options(10);
  const testutil::Rtp compat(-1, -1, nullptr, true);
  TrieHandle t;
  ASSERT_EQ(from_json(json, t, 10, &o, compat.get()), TREEMASK_OK) << last_error();
  EXPECT_EQ(stats(t.p).n_warnings, 5u);  // -3, two huge ids, two foreign keys
  rtp::Dict d;
  d.start = 7;
  d.sep = "-";
  d.entries = {{"7", {5}}, {"7-5", {2}}};
  rtp::expect_trie_follows_rule(t.p, d);
  // Still errors in compatibility mode: ids >= vocab_size, non-integers.
  TrieHandle bad;
  EXPECT_EQ(from_json(R"({"start_token_id": 7, "end_token_id": 2, "prefix_dict": {"7": [50]}})",
                      bad, 10, &o, compat.get()),
            TREEMASK_ERR_OUT_OF_RANGE);
  // TSV too.
  TrieHandle tsv;
  const testutil::Rtp tsv_compat(7, 2, "-", true);
  const std::string text =
      "7\t5\x02-3\x02"
      "99999999999999999999\n7-5\t2\nx\t1\n";
  ASSERT_EQ(treemask_trie_from_rtp_tsv(&o, tsv_compat.get(), text.data(), text.size(), &tsv.p),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(stats(tsv.p).n_warnings, 3u);
  rtp::expect_trie_follows_rule(tsv.p, d);
}

// Item 13 (issue 21): RTP-LLM's PrefixToCandidateTokensTest, every case of
// it that a prefix_dict file can express, in compatibility mode. Its keys
// ("k", "leaf", ...) do not start with start_token_id, so compatibility mode
// ignores them (as RTP-LLM never looks them up), but a malformed value is
// refused wherever it stands, as RTP-LLM's parser refuses it. Names are
// RTP-LLM's test names; `loads` is what RTP-LLM's initSuccess() expects.
TEST(RtpCompat, PortedPrefixToCandidateTokensTest) {
  REQUIRE_JSON_OR_EXPECT_UNSUPPORTED();
  struct Case {
    const char *name;
    const char *json;
    bool loads;
  };
  const Case cases[] = {
      {"SAXLegacyEquivalence",
       R"({"start_token_id": 100, "end_token_id": 200, "sep": "-",)"
       R"( "prefix_dict": {"a-b": [10,20,30], "a-b-c": [40,50]}})",
       true},
      {"SAXEmptyArray",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"leaf": [], "normal": [10,20]}})",
       true},
      {"SAXDuplicateTokens",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"dup": [5, 5, 3, 3, 5]}})",
       true},
      {"SAXInvalidJsonFallback", R"({ "start_token_id": 1, "end_token_id": 2, INVALID })", false},
      {"SAXLargeTokenIdOverflow",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"overflow": [10, 3000000000, 20]}})",
       true},
      {"SAXNegativeCandidateTokensSkipped",
       R"({"start_token_id": 1, "end_token_id": 2,)"
       R"( "prefix_dict": {"neg": [-10, 5, -3, 7], "all_neg": [-1, -2]}})",
       true},
      {"SAXRootNotObject", R"([1, 2, 3])", false},
      {"SAXRootScalar", R"(42)", false},
      {"SAXPrefixDictNotObject",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": [1, 2, 3]})", false},
      {"SAXPrefixDictValueNotArray",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"k": 5}})", false},
      {"SAXPrefixDictValueObject",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"k": {"nested": 1}}})", false},
      {"SAXPrefixDictArrayElementNotInt",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"k": [1, "x", 3]}})", false},
      {"SAXStartTokenIdString",
       R"({"start_token_id": "abc", "end_token_id": 2, "prefix_dict": {"k": [1, 2]}})", false},
      {"SAXEndTokenIdBool",
       R"({"start_token_id": 1, "end_token_id": true, "prefix_dict": {"k": [1, 2]}})", false},
      {"SAXStartTokenIdObject",
       R"({"start_token_id": {"x": 1}, "end_token_id": 2, "prefix_dict": {"k": [1, 2]}})", false},
      {"SAXSepNotString",
       R"({"start_token_id": 1, "end_token_id": 2, "sep": 5, "prefix_dict": {"k": [1, 2]}})",
       false},
      {"SAXPrefixDictNumber", R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": 5})",
       false},
      {"SAXNestedArray",
       R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"k": [[1, 2], [3]]}})", false},
      {"SAXUnknownRootObjectFieldTolerated",
       R"({"start_token_id": 100, "end_token_id": 200,)"
       R"( "metadata": {"author": "x", "version": 3, "nested": {"a": [1, 2], "b": "str"}},)"
       R"( "prefix_dict": {"k": [10, 20]}})",
       true},
      {"SAXUnknownRootArrayFieldTolerated",
       R"({"start_token_id": 1, "end_token_id": 2, "extra_list": [1, 2, [3, 4], {"x": 5}],)"
       R"( "prefix_dict": {"k": [10, 20]}})",
       true},
      {"SAXUnknownRootFieldBeforeAndAfter",
       R"({"lead": {"deep": {"deeper": [1, 2, 3]}}, "start_token_id": 7, "end_token_id": 8,)"
       R"( "prefix_dict": {"a": [1], "b": [2, 3]}, "trail": [{"k": "v"}, [9, [10]]]})",
       true},
      {"SAXStartTokenIdOverflow",
       R"({"start_token_id": 3000000000, "end_token_id": 2, "prefix_dict": {"k": [1, 2]}})", false},
      {"SAXEndTokenIdOverflow",
       R"({"start_token_id": 1, "end_token_id": -3000000000, "prefix_dict": {"k": [1, 2]}})",
       false},
  };
  const auto o = options(1000);
  const testutil::Rtp compat(-1, -1, nullptr, true);
  for (const Case &c : cases) {
    TrieHandle t;
    const treemask_status s = from_json(c.json, t, 1000, &o, compat.get());
    EXPECT_EQ(s == TREEMASK_OK, c.loads) << c.name << ": " << last_error();
  }
  // The four values compatibility mode used to ignore under a foreign key,
  // each named in the error.
  for (const char *value : {"5", "[[1, 2], [3]]", "[1, \"x\", 3]", "{\"nested\": 1}"}) {
    TrieHandle t;
    const std::string json = std::string(R"({"start_token_id": 1, "end_token_id": 2,)") +
                             R"( "prefix_dict": {"1": [5], "k": )" + value + "}}";
    EXPECT_EQ(from_json(json, t, 1000, &o, compat.get()), TREEMASK_ERR_PARSE) << value;
    EXPECT_NE(last_error().find("key \"k\""), std::string::npos) << last_error();
  }
  // Under an accepted key as well; and the strict default refuses them too.
  TrieHandle t;
  EXPECT_EQ(from_json(R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"1": {"a": 1}}})",
                      t, 1000, &o, compat.get()),
            TREEMASK_ERR_PARSE);
  TrieHandle strict;
  EXPECT_NE(from_json(R"({"start_token_id": 1, "end_token_id": 2, "prefix_dict": {"k": 5}})",
                      strict, 1000),
            TREEMASK_OK);
}

}  // namespace
