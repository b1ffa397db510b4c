// String-set tries through the C API: every entry point that takes a trie
// either works with a string set (matchers, batches full and incremental,
// state arrays, the beam step and top-k, .tmtrie save and load, stats) or
// refuses it with TREEMASK_ERR_UNSUPPORTED saying why (the decoding modes
// but override_stop_tokens, exclusion sets, label filters, length budgets,
// the device upload). The property test walks random string sets over
// random vocabularies and compares every view with the brute-force model
// (strings_oracle.h) at every state.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "strings/string_set.h"
#include "strings_oracle.h"
#include "treemask/treemask.h"
#include "treemask/treemask_cuda.h"
#include "trie/file.h"
#include "trie/xxh64.h"

namespace {

using strings_oracle::make_vocab;
using strings_oracle::random_vocab;
using strings_oracle::SetModel;
using strings_oracle::VocabModel;
using testutil::MatcherHandle;
using testutil::TrieHandle;
using testutil::VocabHandle;

std::string last_error() { return treemask_last_error(); }

struct StringsSpec {
  std::vector<std::string> strings;
  std::vector<int32_t> stops;
  std::string prefix;
  const std::vector<int64_t> *labels = nullptr;
  bool no_labels = false;
  size_t cache_bytes = size_t{1} << 20;
};

treemask_status make_strings(const treemask_vocab *vocab, const StringsSpec &s, TrieHandle &out) {
  std::string bytes;
  std::vector<size_t> offsets{0};
  for (const auto &str : s.strings) {
    bytes += str;
    offsets.push_back(bytes.size());
  }
  treemask_trie_options opts = testutil::trie_options(0, s.stops);
  opts.dense_row_cache_bytes = s.cache_bytes;
  opts.no_labels = s.no_labels;
  treemask_strings_options so;
  treemask_strings_options_init(&so);
  so.prefix = s.prefix.data();
  so.prefix_len = s.prefix.size();
  so.label_ids = s.labels ? s.labels->data() : nullptr;
  return treemask_trie_from_strings(&opts, vocab, bytes.data(), offsets.data(), s.strings.size(),
                                    &so, &out.p);
}

SetModel model(const VocabModel &v, const StringsSpec &s) {
  SetModel m{&v, {}, s.stops};
  std::sort(m.stops.begin(), m.stops.end());
  m.stops.erase(std::unique(m.stops.begin(), m.stops.end()), m.stops.end());
  for (const auto &str : s.strings) m.full.insert(s.prefix + str);
  return m;
}

std::vector<int32_t> matcher_row(treemask_matcher *m, int32_t vocab, bool *need_apply) {
  const size_t words = treemask_bitmask_words(vocab);
  std::vector<int32_t> row(words + 1, -1);
  EXPECT_EQ(
      treemask_matcher_fill_next_token_bitmask(m, row.data(), row.size(), nullptr, need_apply),
      TREEMASK_OK)
      << last_error();
  EXPECT_EQ(row[words], 0);
  return testutil::decode_row(row.data(), words);
}

std::vector<int32_t> state_row(const treemask_trie *t, uint32_t state, int32_t vocab) {
  const size_t words = treemask_bitmask_words(vocab);
  std::vector<int32_t> row(words, -1);
  EXPECT_EQ(treemask_trie_fill_states(t, &state, 1, row.data(), words), TREEMASK_OK)
      << last_error();
  return testutil::decode_row(row.data(), words);
}

uint32_t state_of(const treemask_matcher *m) {
  uint32_t s = 0;
  EXPECT_EQ(treemask_matcher_get_state(m, &s), TREEMASK_OK) << last_error();
  return s;
}

std::string forced_bytes(const treemask_matcher *m) {
  std::string out(treemask_matcher_forced_bytes(m, nullptr, 0), '\0');
  treemask_matcher_forced_bytes(m, reinterpret_cast<uint8_t *>(out.data()), out.size());
  return out;
}

// The labels the model expects at a terminal w: every i with prefix + s_i
// == w (or labels[i]).
std::vector<int64_t> model_labels(const StringsSpec &s, const std::string &w) {
  std::set<int64_t> out;
  for (size_t i = 0; i < s.strings.size(); ++i) {
    if (s.prefix + s.strings[i] == w) out.insert(s.labels ? (*s.labels)[i] : int64_t(i));
  }
  return {out.begin(), out.end()};
}

// Every view of state w at once: matcher fill and lists, the state-array
// fill, top-k over all tokens, the batch's incremental row, labels, forced
// bytes and tokens, and the rejection of a token the model refuses.
struct Views {
  const VocabModel &v;
  const StringsSpec &spec;
  const SetModel &m;
  treemask_trie *trie;
  treemask_batch *batch;
  std::vector<int32_t> *batch_row;

  void check(treemask_matcher *mt, const std::string &w) const {
    SCOPED_TRACE("state \"" + treemask::escape_control(w) + "\"");
    const int32_t vocab = v.vocab_size;
    const auto expected = m.allowed_list(w);
    bool need_apply = false;
    EXPECT_EQ(matcher_row(mt, vocab, &need_apply), expected);
    EXPECT_EQ(need_apply, expected.size() != static_cast<size_t>(vocab));
    EXPECT_EQ(testutil::next_tokens(mt), expected);
    const uint32_t s = state_of(mt);
    EXPECT_EQ(state_row(trie, s, vocab), expected);
    EXPECT_EQ(treemask_matcher_can_terminate(mt), m.terminal(w));
    EXPECT_EQ(forced_bytes(mt), m.forced_bytes(w));
    EXPECT_EQ(testutil::forced_tokens(mt), m.forced_tokens(w));
    if (m.terminal(w)) {
      EXPECT_EQ(testutil::label_ids(mt), model_labels(spec, w));
    }
    // Top-k with k = every token, log-probabilities 0: the allowed set.
    std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
    treemask_logits lg;
    treemask_logits_init(&lg);
    lg.data = logits.data();
    lg.dtype = TREEMASK_F32;
    lg.log_probs = true;
    const size_t k = static_cast<size_t>(vocab);
    std::vector<int32_t> top(k);
    std::vector<float> scores(k);
    size_t count = 0;
    ASSERT_EQ(treemask_trie_topk_states(trie, &s, 1, &lg, k, top.data(), scores.data(), &count),
              TREEMASK_OK)
        << last_error();
    std::vector<int32_t> got(top.begin(), top.begin() + static_cast<ptrdiff_t>(count));
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected);
    // The batch's bound row, filled incrementally from the previous state.
    ASSERT_EQ(treemask_batch_set_matcher(batch, 0, mt), TREEMASK_OK);
    ASSERT_EQ(treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr),
              TREEMASK_OK)
        << last_error();
    EXPECT_EQ(testutil::decode_row(batch_row->data(), batch_row->size()), expected);
    // A token the model refuses is rejected by both forms, the state kept.
    for (int32_t t = 0; t < vocab; ++t) {
      if (std::binary_search(expected.begin(), expected.end(), t)) continue;
      treemask_matcher *raw = nullptr;
      ASSERT_EQ(treemask_matcher_clone(mt, &raw), TREEMASK_OK);
      MatcherHandle probe(raw);
      bool accepted = true;
      ASSERT_EQ(treemask_matcher_accept_token(probe.p, t, &accepted), TREEMASK_OK);
      EXPECT_FALSE(accepted) << "token " << t;
      uint32_t st = s;
      bool state_accepted = true;
      ASSERT_EQ(
          treemask_trie_advance_states(trie, &st, &t, 1, TREEMASK_FAILURE_REJECT, &state_accepted),
          TREEMASK_OK);
      EXPECT_FALSE(state_accepted);
      EXPECT_EQ(st, s);
      break;  // one outsider per state
    }
  }
};

TEST(StringSetApi, RandomSetsAgainstTheModel) {
  std::mt19937_64 rng(2027);
  const std::string alphabets[] = {"ab", "abc", std::string("a\0\xff", 3), "xy\xc3\xa9"};
  const int rounds = testutil::scaled(300);
  uint64_t states = 0, forced_accepts = 0, reloaded = 0, beam_steps = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string &alphabet = alphabets[round % 4];
    const VocabModel v = random_vocab(rng, alphabet);
    StringsSpec spec;
    const size_t n = 1 + rng() % 20;
    for (size_t i = 0; i < n; ++i) {
      std::string s(rng() % 8, ' ');
      for (auto &c : s) c = alphabet[rng() % alphabet.size()];
      spec.strings.push_back(s);
    }
    // Repeated strings: a terminal with several labels.
    if (rng() % 3 == 0) spec.strings.push_back(spec.strings[rng() % n]);
    spec.prefix.assign(rng() % 3 == 0 ? 1 + rng() % 2 : 0, ' ');
    for (auto &c : spec.prefix) c = alphabet[rng() % alphabet.size()];
    spec.stops = {static_cast<int32_t>(rng() % v.tokens.size())};
    if (rng() % 3 == 0) spec.stops.push_back(static_cast<int32_t>(rng() % v.vocab_size));
    std::vector<int64_t> labels;
    if (rng() % 2) {
      for (size_t i = 0; i < spec.strings.size(); ++i) {
        labels.push_back(static_cast<int64_t>(rng() % 7) - 3 + (rng() % 2 ? int64_t{1} << 40 : 0));
      }
      spec.labels = &labels;
    }
    if (rng() % 4 == 0) spec.cache_bytes = 0;
    VocabHandle vh;
    ASSERT_EQ(make_vocab(v, vh), TREEMASK_OK) << last_error();
    TrieHandle built;
    ASSERT_EQ(make_strings(vh.p, spec, built), TREEMASK_OK) << last_error();
    ASSERT_TRUE(treemask_trie_is_string_set(built.p));
    ASSERT_EQ(treemask_trie_vocab(built.p), vh.p);
    const SetModel m = model(v, spec);

    // Every other round walks a reloaded copy (with or without the
    // vocabulary given), so that the file holds everything.
    TrieHandle loaded;
    treemask_trie *trie = built.p;
    if (round % 2) {
      const std::string file = testing::TempDir() + "strings_api.tmtrie";
      ASSERT_EQ(treemask_trie_save(built.p, file.c_str(), nullptr), TREEMASK_OK) << last_error();
      const treemask_status s =
          round % 4 == 1 ? treemask_trie_load(file.c_str(), 0, &loaded.p)
                         : treemask_trie_load_with_vocab(file.c_str(), 0, vh.p, &loaded.p);
      ASSERT_EQ(s, TREEMASK_OK) << last_error();
      ASSERT_TRUE(treemask_trie_is_string_set(loaded.p));
      EXPECT_EQ(treemask_vocab_fingerprint(treemask_trie_vocab(loaded.p)),
                treemask_vocab_fingerprint(vh.p));
      trie = loaded.p;
      ++reloaded;
    }

    treemask_batch_options bo;
    treemask_batch_options_init(&bo);
    bo.n_slots = 1;
    treemask_batch *batch_raw = nullptr;
    ASSERT_EQ(treemask_batch_create(&bo, &batch_raw), TREEMASK_OK);
    const std::unique_ptr<treemask_batch, void (*)(treemask_batch *)> batch(batch_raw,
                                                                            treemask_batch_free);
    std::vector<int32_t> batch_row(treemask_bitmask_words(v.vocab_size));
    ASSERT_EQ(treemask_batch_bind_bitmask(batch.get(), batch_row.data(), batch_row.size()),
              TREEMASK_OK);
    const Views views{v, spec, m, trie, batch.get(), &batch_row};

    for (int walk = 0; walk < 3; ++walk) {
      treemask_matcher *raw = nullptr;
      ASSERT_EQ(treemask_matcher_create(trie, nullptr, &raw), TREEMASK_OK) << last_error();
      MatcherHandle mt(raw);
      std::string w;
      for (int step = 0; step < 30; ++step) {
        views.check(mt.p, w);
        if (HasFatalFailure()) return;
        ++states;
        const auto allowed = m.allowed_list(w);
        if (allowed.empty()) break;
        // Jump-forward now and then: the forced chain is accepted whole and
        // lands where the state arrays land.
        if (!m.forced_tokens(w).empty() && rng() % 2) {
          const auto chain = m.forced_tokens(w);
          uint32_t s = state_of(mt.p);
          std::vector<bool> ok(chain.size());
          for (const int32_t t : chain) {
            bool a = false;
            ASSERT_EQ(treemask_trie_advance_states(trie, &s, &t, 1, TREEMASK_FAILURE_REJECT, &a),
                      TREEMASK_OK);
            ASSERT_TRUE(a);
            w += v.tokens[static_cast<size_t>(t)];
          }
          std::vector<int32_t> out(chain.size());
          size_t n_accepted = 0;
          ASSERT_EQ(
              treemask_matcher_accept_forced_tokens(mt.p, out.data(), out.size(), &n_accepted),
              TREEMASK_OK)
              << last_error();
          EXPECT_EQ(out, chain);
          EXPECT_EQ(state_of(mt.p), s);
          ++forced_accepts;
          continue;
        }
        const int32_t tok = allowed[rng() % allowed.size()];
        uint32_t s = state_of(mt.p);
        bool state_accepted = false;
        ASSERT_EQ(treemask_trie_advance_states(trie, &s, &tok, 1, TREEMASK_FAILURE_STICKY_ERROR,
                                               &state_accepted),
                  TREEMASK_OK);
        bool accepted = false;
        ASSERT_EQ(treemask_matcher_accept_token(mt.p, tok, &accepted), TREEMASK_OK);
        ASSERT_TRUE(accepted && state_accepted);
        EXPECT_EQ(state_of(mt.p), s);
        if (m.is_stop(tok)) {
          EXPECT_TRUE(treemask_matcher_is_terminated(mt.p));
          EXPECT_EQ(s, TREEMASK_STATE_TERMINATED);
          // Only stop tokens after the end, by every view.
          EXPECT_EQ(testutil::next_tokens(mt.p), m.stops);
          EXPECT_EQ(state_row(trie, s, v.vocab_size), m.stops);
          break;
        }
        w += v.tokens[static_cast<size_t>(tok)];
      }
      // Rollback returns to the root: the same views as a fresh matcher.
      const size_t depth = treemask_matcher_rollback_depth(mt.p);
      ASSERT_EQ(treemask_matcher_rollback(mt.p, depth), TREEMASK_OK);
      views.check(mt.p, "");
    }

    // A beam step of one request: every winner is allowed at its parent and
    // its state is the parent's advanced by it.
    {
      const size_t B = 3;
      treemask_beam_options o;
      treemask_beam_options_init(&o);
      o.beam_width = B;
      treemask_beam *beam_raw = nullptr;
      ASSERT_EQ(treemask_beam_create(&o, &beam_raw), TREEMASK_OK);
      const std::unique_ptr<treemask_beam, void (*)(treemask_beam *)> beam(beam_raw,
                                                                           treemask_beam_free);
      std::vector<float> logits(B * static_cast<size_t>(v.vocab_size));
      for (auto &x : logits) x = static_cast<float>(rng() % 1000) / 100.0f;
      treemask_logits lg;
      treemask_logits_init(&lg);
      lg.data = logits.data();
      lg.dtype = TREEMASK_F32;
      std::vector<uint32_t> states(B, 0), ends(B, TREEMASK_STATE_FAILED);
      std::vector<float> scores{0.0f, -INFINITY, -INFINITY};
      std::vector<std::string> text(B);
      for (int step = 0; step < 6; ++step) {
        std::vector<int32_t> parents(B), tokens(B);
        const std::vector<uint32_t> before = states;
        const std::vector<std::string> text_before = text;
        ASSERT_EQ(treemask_beam_step_strings(beam.get(), trie, 1, &lg, states.data(), ends.data(),
                                             scores.data(), parents.data(), tokens.data()),
                  TREEMASK_OK)
            << last_error();
        for (size_t i = 0; i < B; ++i) {
          if (parents[i] < 0) continue;
          const auto p = static_cast<size_t>(parents[i]);
          uint32_t s = before[p];
          bool ok = false;
          ASSERT_EQ(
              treemask_trie_advance_states(trie, &s, &tokens[i], 1, TREEMASK_FAILURE_REJECT, &ok),
              TREEMASK_OK);
          EXPECT_TRUE(ok);
          EXPECT_EQ(states[i], s);
          if (before[p] != TREEMASK_STATE_TERMINATED) {
            const auto allowed = m.allowed_list(text_before[p]);
            EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), tokens[i]));
          }
          text[i] = text_before[p] + (m.is_stop(tokens[i]) || before[p] == TREEMASK_STATE_TERMINATED
                                          ? std::string()
                                          : v.tokens[static_cast<size_t>(tokens[i])]);
        }
        ++beam_steps;
      }
    }
  }
  std::printf(
      "%llu states, %llu forced chains accepted, %llu reloaded tries, %llu beam steps\n",
      static_cast<unsigned long long>(states), static_cast<unsigned long long>(forced_accepts),
      static_cast<unsigned long long>(reloaded), static_cast<unsigned long long>(beam_steps));
  EXPECT_GT(states, static_cast<uint64_t>(rounds) * 3);
  EXPECT_GT(forced_accepts, 0u);
}

// A small fixed set for the refusals and the hand-checked cases.
struct Fixture : testing::Test {
  VocabModel v;
  VocabHandle vocab;
  TrieHandle trie;
  StringsSpec spec;

  void SetUp() override {
    // 0 </s> (special, the stop), 1..: pieces.
    v.tokens = {"</s>", "p", "pos", "itive", "positive", "neg", "ative", "negative", "o",
                "s",    "i", "t",   "v",     "e",        "n",   "g",     "a"};
    v.flags.assign(v.tokens.size(), 0);
    v.flags[0] = treemask::kTokenSpecial;
    v.vocab_size = 40;
    spec.strings = {"positive", "negative"};
    spec.stops = {0};
    ASSERT_EQ(make_vocab(v, vocab), TREEMASK_OK) << last_error();
    ASSERT_EQ(make_strings(vocab.p, spec, trie), TREEMASK_OK) << last_error();
  }

  MatcherHandle matcher(const treemask_matcher_options *o = nullptr) {
    treemask_matcher *raw = nullptr;
    EXPECT_EQ(treemask_matcher_create(trie.p, o, &raw), TREEMASK_OK) << last_error();
    return MatcherHandle(raw);
  }
};

TEST_F(Fixture, AnyTokenizationOfAChoice) {
  MatcherHandle m = matcher();
  // pos + itive, p + o + s + itive, positive: each reaches the end.
  for (const std::vector<int32_t> &seq :
       {std::vector<int32_t>{2, 3}, std::vector<int32_t>{1, 8, 9, 3}, std::vector<int32_t>{4}}) {
    treemask_matcher_reset(m.p);
    for (const int32_t t : seq) {
      bool ok = false;
      ASSERT_EQ(treemask_matcher_accept_token(m.p, t, &ok), TREEMASK_OK);
      ASSERT_TRUE(ok) << t;
    }
    EXPECT_TRUE(treemask_matcher_can_terminate(m.p));
    bool ok = false;
    ASSERT_EQ(treemask_matcher_accept_token(m.p, 0, &ok), TREEMASK_OK);
    EXPECT_TRUE(ok && treemask_matcher_is_terminated(m.p));
    EXPECT_EQ(testutil::label_ids(m.p), std::vector<int64_t>{0});
  }
  // The debug string names the bytes so far.
  treemask_matcher_reset(m.p);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 5, &ok), TREEMASK_OK);
  std::string dbg(treemask_matcher_debug_string(m.p, nullptr, 0) + 1, '\0');
  treemask_matcher_debug_string(m.p, dbg.data(), dbg.size());
  EXPECT_NE(dbg.find("bytes=\"neg\""), std::string::npos) << dbg;
  // Forced after "neg": the bytes "ative", whose longest-match token no
  // allowed token runs past (the string ends there).
  EXPECT_EQ(forced_bytes(m.p), "ative");
  EXPECT_EQ(testutil::forced_tokens(m.p), (std::vector<int32_t>{6}));
}

TEST_F(Fixture, StatsCountBytesNotTokens) {
  treemask_trie_stats st;
  st.struct_size = sizeof(st);
  ASSERT_EQ(treemask_trie_get_stats(trie.p, &st), TREEMASK_OK);
  EXPECT_EQ(st.n_nodes, 1u + 8 + 8);  // root, "positive", "negative"
  EXPECT_EQ(st.n_edges, st.n_nodes - 1);
  EXPECT_EQ(st.n_terminals, 2u);
  EXPECT_EQ(st.n_labels, 2u);
  EXPECT_EQ(st.max_depth, 8u);
  EXPECT_EQ(st.max_fanout, 2u);
  EXPECT_GT(st.bytes, 0u);
  EXPECT_LT(st.bytes, 200u);  // the shared vocabulary is not counted
}

TEST_F(Fixture, TerminateWithoutStopTokenEndsAtALastString) {
  spec.strings = {"pos", "positive"};
  TrieHandle t2;
  ASSERT_EQ(make_strings(vocab.p, spec, t2), TREEMASK_OK);
  treemask_matcher_options o;
  treemask_matcher_options_init(&o);
  o.terminate_without_stop_token = true;
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(t2.p, &o, &raw), TREEMASK_OK);
  MatcherHandle m(raw);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 2, &ok), TREEMASK_OK);  // "pos": continued
  EXPECT_FALSE(treemask_matcher_is_terminated(m.p));
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 3, &ok), TREEMASK_OK);  // "itive": the end
  EXPECT_TRUE(ok && treemask_matcher_is_terminated(m.p));
}

TEST_F(Fixture, OverrideStopTokensIsTheOneMode) {
  treemask_mode_options o;
  treemask_mode_options_init(&o);
  const int32_t stops[] = {35, 36};
  o.override_stop_tokens = stops;
  o.n_override_stop_tokens = 2;
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(trie.p, &o.matcher, &raw), TREEMASK_OK) << last_error();
  MatcherHandle m(raw);
  bool ok = false;
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 4, &ok), TREEMASK_OK);
  EXPECT_EQ(testutil::next_tokens(m.p), (std::vector<int32_t>{35, 36}));
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 0, &ok), TREEMASK_OK);
  EXPECT_FALSE(ok);  // the trie's own stop token no longer ends it
  ASSERT_EQ(treemask_matcher_accept_token(m.p, 36, &ok), TREEMASK_OK);
  EXPECT_TRUE(ok && treemask_matcher_is_terminated(m.p));
  // Its state has no state-array form (the override is the matcher's).
  uint32_t s = 0;
  EXPECT_EQ(treemask_matcher_get_state(m.p, &s), TREEMASK_ERR_INVALID_STATE);
}

TEST_F(Fixture, ModesDefinedInTokensAreRefused) {
  struct Case {
    const char *name;
    void (*set)(treemask_mode_options &);
  };
  static const int32_t sep[] = {12};
  const Case cases[] = {
      {"multi-label",
       [](treemask_mode_options &o) {
         o.label_separator = sep;
         o.n_label_separator = 1;
       }},
      {"leaves_only", [](treemask_mode_options &o) { o.leaves_only = true; }},
      {"think",
       [](treemask_mode_options &o) {
         o.think_end_tokens = sep;
         o.n_think_end_tokens = 1;
         o.start_in_thinking = true;
       }},
      {"length budget", [](treemask_mode_options &o) { o.max_new_tokens = 5; }},
  };
  for (const Case &c : cases) {
    treemask_mode_options o;
    treemask_mode_options_init(&o);
    c.set(o);
    treemask_matcher *raw = nullptr;
    EXPECT_EQ(treemask_matcher_create(trie.p, &o.matcher, &raw), TREEMASK_ERR_UNSUPPORTED)
        << c.name;
    EXPECT_NE(last_error().find("string-set trie"), std::string::npos) << last_error();
    EXPECT_EQ(raw, nullptr);
  }
  MatcherHandle m = matcher();
  EXPECT_EQ(treemask_matcher_set_remaining_tokens(m.p, 4), TREEMASK_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("length budget"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_matcher_set_remaining_tokens(m.p, -1), TREEMASK_OK);
  treemask_budget_fill_options fo;
  treemask_budget_fill_options_init(&fo);
  fo.remaining_tokens = 3;
  std::vector<int32_t> row(treemask_bitmask_words(v.vocab_size));
  EXPECT_EQ(
      treemask_matcher_fill_next_token_bitmask(m.p, row.data(), row.size(), &fo.fill, nullptr),
      TREEMASK_ERR_UNSUPPORTED);
  const int64_t banned[] = {0};
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, banned, 1, nullptr, 0),
            TREEMASK_ERR_UNSUPPORTED);
  EXPECT_EQ(treemask_matcher_set_label_filter(m.p, nullptr, nullptr, 0, nullptr, 0), TREEMASK_OK);
  treemask_exclusion_set *set = nullptr;
  EXPECT_EQ(treemask_exclusion_set_create(trie.p, banned, 1, &set), TREEMASK_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("string-set trie"), std::string::npos) << last_error();
  EXPECT_EQ(set, nullptr);
}

TEST_F(Fixture, TheDeviceUploadRefusesAStringSet) {
  treemask_cuda_trie *dev = nullptr;
  EXPECT_EQ(treemask_cuda_trie_upload(trie.p, nullptr, &dev), TREEMASK_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("uploading to a device is not supported with a string-set trie: "
                              "the device steps walk token paths only"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(dev, nullptr);
}

TEST_F(Fixture, BadArgumentsNameTheProblem) {
  TrieHandle t;
  std::vector<size_t> offsets{0, 3, 2};
  treemask_trie_options opts = testutil::trie_options(0, spec.stops);
  EXPECT_EQ(treemask_trie_from_strings(&opts, vocab.p, "abc", offsets.data(), 2, nullptr, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("string 1"), std::string::npos) << last_error();
  offsets = {0, 3};
  opts.vocab_size = 41;
  EXPECT_EQ(treemask_trie_from_strings(&opts, vocab.p, "abc", offsets.data(), 1, nullptr, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("vocab_size 41"), std::string::npos) << last_error();
  opts.vocab_size = 0;
  EXPECT_EQ(treemask_trie_from_strings(&opts, nullptr, "abc", offsets.data(), 1, nullptr, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  const std::vector<int32_t> no_stops;
  treemask_trie_options none = testutil::trie_options(0, no_stops);
  EXPECT_EQ(treemask_trie_from_strings(&none, vocab.p, "abc", offsets.data(), 1, nullptr, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("stop token"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_from_strings(&opts, vocab.p, "abc", offsets.data(), 0, nullptr, &t.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.p, nullptr);
  // Vocabularies: a flag bit that means nothing yet, offsets that decrease.
  const uint8_t flags[] = {0, 4};
  const uint64_t voffs[] = {0, 1, 2};
  treemask_vocab *bad = nullptr;
  EXPECT_EQ(
      treemask_vocab_create(reinterpret_cast<const uint8_t *>("ab"), voffs, 2, flags, 2, &bad),
      TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("token 1"), std::string::npos) << last_error();
  const uint64_t down[] = {0, 2, 1};
  EXPECT_EQ(
      treemask_vocab_create(reinterpret_cast<const uint8_t *>("ab"), down, 2, nullptr, 2, &bad),
      TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      treemask_vocab_create(reinterpret_cast<const uint8_t *>("ab"), voffs, 2, nullptr, 1, &bad),
      TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("vocab_size 1"), std::string::npos) << last_error();
  EXPECT_EQ(bad, nullptr);
}

// Only empty strings: no bytes at all (NULL bytes, as a binding passes for
// an empty buffer). The sort of the strings compared them with memcmp(NULL,
// NULL, 0), undefined behaviour that UBSan reported (this suite runs under
// ASan+UBSan); the set is the root alone, terminal, with both labels.
TEST_F(Fixture, OnlyEmptyStringsWithNoBytes) {
  for (const size_t n : {size_t{1}, size_t{2}, size_t{40}}) {
    const std::vector<size_t> offsets(n + 1, 0);
    const treemask_trie_options opts = testutil::trie_options(0, spec.stops);
    TrieHandle t;
    ASSERT_EQ(treemask_trie_from_strings(&opts, vocab.p, nullptr, offsets.data(), n, nullptr, &t.p),
              TREEMASK_OK)
        << last_error();
    treemask_trie_stats st;
    st.struct_size = sizeof(st);
    ASSERT_EQ(treemask_trie_get_stats(t.p, &st), TREEMASK_OK);
    EXPECT_EQ(st.n_nodes, 1u);
    EXPECT_EQ(st.n_terminals, 1u);
    treemask_matcher *raw = nullptr;
    ASSERT_EQ(treemask_matcher_create(t.p, nullptr, &raw), TREEMASK_OK);
    MatcherHandle m(raw);
    EXPECT_EQ(testutil::next_tokens(m.p), spec.stops);
    bool ok = false;
    ASSERT_EQ(treemask_matcher_accept_token(m.p, spec.stops[0], &ok), TREEMASK_OK);
    EXPECT_TRUE(ok);
    std::vector<int64_t> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = static_cast<int64_t>(i);
    EXPECT_EQ(testutil::label_ids(m.p), want);
  }
}

TEST_F(Fixture, VocabularyQueries) {
  EXPECT_EQ(treemask_vocab_size(vocab.p), 40);
  EXPECT_EQ(treemask_vocab_n_tokens(vocab.p), 17);
  uint8_t buf[16];
  EXPECT_EQ(treemask_vocab_token_bytes(vocab.p, 4, buf, sizeof buf), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<char *>(buf), 8), "positive");
  EXPECT_EQ(treemask_vocab_token_bytes(vocab.p, 17, buf, sizeof buf), 0u);  // padding
  EXPECT_EQ(treemask_vocab_token_bytes(vocab.p, -1, buf, sizeof buf), 0u);
  EXPECT_GT(treemask_vocab_memory_bytes(vocab.p), 0u);
  EXPECT_NE(treemask_vocab_fingerprint(vocab.p), 0u);
  // retain / free balance; NULL everywhere is harmless.
  EXPECT_EQ(treemask_vocab_retain(vocab.p), vocab.p);
  treemask_vocab_free(vocab.p);
  treemask_vocab_free(nullptr);
  EXPECT_EQ(treemask_vocab_fingerprint(nullptr), 0u);
  EXPECT_FALSE(treemask_trie_is_string_set(nullptr));
  EXPECT_EQ(treemask_trie_vocab(nullptr), nullptr);
  // A token-path trie is none.
  TrieHandle paths;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 40, {0}, paths), TREEMASK_OK);
  EXPECT_FALSE(treemask_trie_is_string_set(paths.p));
  EXPECT_EQ(treemask_trie_vocab(paths.p), nullptr);
  MatcherHandle pm;
  ASSERT_EQ(treemask_matcher_create(paths.p, nullptr, &pm.p), TREEMASK_OK);
  EXPECT_EQ(treemask_matcher_forced_bytes(pm.p, buf, sizeof buf), 0u);
  // The vocabulary outlives its handle inside the trie.
  VocabHandle alone;
  ASSERT_EQ(make_vocab(v, alone), TREEMASK_OK);
  TrieHandle t;
  ASSERT_EQ(make_strings(alone.p, spec, t), TREEMASK_OK);
  treemask_vocab_free(alone.p);
  alone.p = nullptr;
  MatcherHandle m;
  ASSERT_EQ(treemask_matcher_create(t.p, nullptr, &m.p), TREEMASK_OK);
  EXPECT_EQ(testutil::next_tokens(m.p), (std::vector<int32_t>{1, 2, 4, 5, 7, 14}));
}

// A vocabulary's tokens copied out give it back (same fingerprint).
TEST_F(Fixture, CopyTokensRebuildsTheSameVocabulary) {
  const uint64_t n = treemask_vocab_copy_tokens(vocab.p, nullptr, 0, nullptr, nullptr);
  std::string bytes(n, '\0');
  std::vector<uint64_t> offsets(v.tokens.size() + 1, 7);
  std::vector<uint8_t> flags(v.tokens.size(), 9);
  // Too small a buffer: the bytes are not written, the rest is.
  EXPECT_EQ(treemask_vocab_copy_tokens(vocab.p, reinterpret_cast<uint8_t *>(bytes.data()), n - 1,
                                       offsets.data(), flags.data()),
            n);
  EXPECT_EQ(bytes, std::string(n, '\0'));
  EXPECT_EQ(treemask_vocab_copy_tokens(vocab.p, reinterpret_cast<uint8_t *>(bytes.data()), n,
                                       offsets.data(), flags.data()),
            n);
  std::string want;
  for (const auto &t : v.tokens) want += t;
  EXPECT_EQ(bytes, want);
  EXPECT_EQ(offsets.front(), 0u);
  EXPECT_EQ(offsets.back(), n);
  EXPECT_EQ(flags, v.flags);
  treemask_vocab *again = nullptr;
  ASSERT_EQ(treemask_vocab_create(reinterpret_cast<const uint8_t *>(bytes.data()), offsets.data(),
                                  v.tokens.size(), flags.data(), v.vocab_size, &again),
            TREEMASK_OK);
  EXPECT_EQ(treemask_vocab_fingerprint(again), treemask_vocab_fingerprint(vocab.p));
  treemask_vocab_free(again);
  EXPECT_EQ(treemask_vocab_copy_tokens(nullptr, nullptr, 0, nullptr, nullptr), 0u);
}

// Issue 29 item 2: a trie meets the model's vocabulary. Equal masks pass
// (other names of special tokens, more padding); other bytes at the same
// width, a smaller vocabulary, or a wider trie are refused, naming both
// fingerprints and the first token that differs.
TEST_F(Fixture, CheckVocabComparesMasksNotNames) {
  auto fingerprint_hex = [](const treemask_vocab *x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx",
                  static_cast<unsigned long long>(treemask_vocab_fingerprint(x)));
    return std::string(buf);
  };
  EXPECT_EQ(treemask_trie_check_vocab(trie.p, vocab.p), TREEMASK_OK) << last_error();
  VocabModel renamed = v;
  renamed.tokens[0] = "<|end|>";  // special: never text, its name does not matter
  renamed.vocab_size = 64;        // more padding past the tokenizer
  VocabHandle rh;
  ASSERT_EQ(make_vocab(renamed, rh), TREEMASK_OK);
  ASSERT_NE(treemask_vocab_fingerprint(rh.p), treemask_vocab_fingerprint(vocab.p));
  EXPECT_EQ(treemask_trie_check_vocab(trie.p, rh.p), TREEMASK_OK) << last_error();

  VocabModel swapped = v;
  std::swap(swapped.tokens[2], swapped.tokens[5]);  // "pos" <-> "neg"
  VocabHandle sh;
  ASSERT_EQ(make_vocab(swapped, sh), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_check_vocab(trie.p, sh.p), TREEMASK_ERR_INVALID_ARGUMENT);
  std::string why = last_error();
  EXPECT_NE(why.find(fingerprint_hex(vocab.p)), std::string::npos) << why;
  EXPECT_NE(why.find(fingerprint_hex(sh.p)), std::string::npos) << why;
  EXPECT_NE(why.find("token 2 is text \"pos\" in the trie's and text \"neg\" in the model's"),
            std::string::npos)
      << why;

  // Compiled over a smaller vocabulary than the model's: the model's token
  // 16 ("a") would never be allowed.
  VocabModel small = v;
  small.tokens.resize(16);
  small.flags.resize(16);
  small.vocab_size = 16;
  VocabHandle smh;
  ASSERT_EQ(make_vocab(small, smh), TREEMASK_OK);
  TrieHandle small_set;
  ASSERT_EQ(make_strings(smh.p, spec, small_set), TREEMASK_OK) << last_error();
  EXPECT_EQ(treemask_trie_check_vocab(small_set.p, vocab.p), TREEMASK_ERR_INVALID_ARGUMENT);
  why = last_error();
  EXPECT_NE(why.find("token 16 is past its vocab_size 16 in the trie's and text \"a\""),
            std::string::npos)
      << why;
  // The other way round the trie is wider than the model: refused, for both
  // kinds.
  EXPECT_EQ(treemask_trie_check_vocab(trie.p, smh.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("vocab_size 40, wider than the model's vocabulary (vocab_size 16"),
            std::string::npos)
      << last_error();
  TrieHandle paths;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 40, {0}, paths), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_check_vocab(paths.p, vocab.p), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_check_vocab(paths.p, smh.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_check_vocab(nullptr, vocab.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_check_vocab(trie.p, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
}

TEST_F(Fixture, LoadWithVocabRefusesATokenPathFileWiderThanIt) {
  const std::string file = testing::TempDir() + "wide_paths.tmtrie";
  for (const int32_t width : {40, 41}) {
    TrieHandle paths;
    ASSERT_EQ(testutil::make_trie({{1, 2}}, width, {0}, paths), TREEMASK_OK);
    ASSERT_EQ(treemask_trie_save(paths.p, file.c_str(), nullptr), TREEMASK_OK);
    TrieHandle loaded;
    const treemask_status s = treemask_trie_load_with_vocab(file.c_str(), 0, vocab.p, &loaded.p);
    if (width == 40) {
      EXPECT_EQ(s, TREEMASK_OK) << last_error();
    } else {
      EXPECT_EQ(s, TREEMASK_ERR_INVALID_ARGUMENT);
      EXPECT_NE(last_error().find("vocab_size 41, wider than the vocabulary given (vocab_size 40"),
                std::string::npos)
          << last_error();
      EXPECT_EQ(loaded.p, nullptr);
    }
  }
  std::remove(file.c_str());
}

// The file of a string set: the vocabulary travels with it and is checked
// against its fingerprint; a vocabulary given at load must be the one it was
// built for; corruptions of the new sections are refused, naming them.
class StringFile : public Fixture {
 protected:
  std::string file;
  std::vector<unsigned char> bytes;
  treemask::FileHeader h{};

  void SetUp() override {
    Fixture::SetUp();
    file = testing::TempDir() + "strings_file.tmtrie";
    ASSERT_EQ(treemask_trie_save(trie.p, file.c_str(), nullptr), TREEMASK_OK);
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::memcpy(&h, bytes.data(), sizeof(h));
    if (const char *dir = std::getenv("TREEMASK_WRITE_SEEDS")) {
      std::ofstream(std::string(dir) + "/seed-strings.tmtrie", std::ios::binary)
          .write(reinterpret_cast<const char *>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
  }

  struct Change {
    treemask::FileSection section;
    uint64_t at;
    const void *value;
    size_t n;
  };

  // The file with `value` written at byte `at` of a section, checksums fixed.
  treemask_status load_changed(treemask::FileSection s, uint64_t at, const void *value, size_t n,
                               uint32_t flags = 0) {
    return load_changes({{s, at, value, n}}, flags);
  }

  treemask_status load_changes(std::initializer_list<Change> changes, uint32_t flags = 0) {
    std::vector<unsigned char> b = bytes;
    for (const Change &c : changes) {
      std::memcpy(b.data() + h.section(c.section).offset + c.at, c.value, c.n);
    }
    treemask::FileHeader hh;
    std::memcpy(&hh, b.data(), sizeof(hh));
    hh.payload_checksum = treemask::xxh64(b.data() + sizeof(hh), b.size() - sizeof(hh));
    hh.header_checksum = treemask::xxh64(&hh, offsetof(treemask::FileHeader, header_checksum));
    std::memcpy(b.data(), &hh, sizeof(hh));
    const std::string bad = testing::TempDir() + "strings_bad.tmtrie";
    std::ofstream(bad, std::ios::binary)
        .write(reinterpret_cast<const char *>(b.data()), static_cast<std::streamsize>(b.size()));
    TrieHandle t;
    return treemask_trie_load(bad.c_str(), flags, &t.p);
  }
};

TEST_F(StringFile, RoundTripsWithItsVocabulary) {
  TrieHandle loaded;
  ASSERT_EQ(treemask_trie_load(file.c_str(), 0, &loaded.p), TREEMASK_OK) << last_error();
  ASSERT_TRUE(treemask_trie_is_string_set(loaded.p));
  EXPECT_EQ(treemask_vocab_fingerprint(treemask_trie_vocab(loaded.p)),
            treemask_vocab_fingerprint(vocab.p));
  EXPECT_NE(treemask_trie_vocab(loaded.p), vocab.p);  // rebuilt from the file
  TrieHandle shared;
  ASSERT_EQ(treemask_trie_load_with_vocab(file.c_str(), 0, vocab.p, &shared.p), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_vocab(shared.p), vocab.p);
  for (treemask_trie *t : {loaded.p, shared.p}) {
    for (uint32_t s = 0; s < 17; ++s) {
      EXPECT_EQ(state_row(t, s, 40), state_row(trie.p, s, 40)) << "state " << s;
    }
  }
  // Another vocabulary (one token's bytes differ) is refused by name.
  VocabModel other = v;
  other.tokens[16] = "b";
  VocabHandle ov;
  ASSERT_EQ(make_vocab(other, ov), TREEMASK_OK);
  TrieHandle refused;
  EXPECT_EQ(treemask_trie_load_with_vocab(file.c_str(), 0, ov.p, &refused.p),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("fingerprint"), std::string::npos) << last_error();
  // A token-path file ignores the vocabulary.
  TrieHandle paths;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 40, {0}, paths), TREEMASK_OK);
  const std::string pfile = testing::TempDir() + "paths.tmtrie";
  ASSERT_EQ(treemask_trie_save(paths.p, pfile.c_str(), nullptr), TREEMASK_OK);
  TrieHandle pl;
  ASSERT_EQ(treemask_trie_load_with_vocab(pfile.c_str(), 0, vocab.p, &pl.p), TREEMASK_OK);
  EXPECT_FALSE(treemask_trie_is_string_set(pl.p));
}

// Arrays every node of which is well-formed on its own, but whose ids are
// not the preorder of the trie: the root's second child made node 5 (the
// "t" of "negative", relabelled "p"), so "positive" (nodes 9..16) hangs
// nowhere. Only the nesting check sees it.
TEST_F(StringFile, ANodeOutOfDepthFirstOrderIsRefused) {
  using S = treemask::FileSection;
  const uint32_t five = 5;
  const uint8_t p = 'p';
  EXPECT_EQ(load_changes({{S::child_ids, 4, &five, 4}, {S::byte_labels, 5, &p, 1}}),
            TREEMASK_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("the next child of 0 is 5"), std::string::npos) << last_error();
}

TEST_F(StringFile, CorruptionsOfItsSectionsAreRefused) {
  using S = treemask::FileSection;
  struct Case {
    const char *name;
    S section;
    uint64_t at;
    uint32_t value;
    size_t n;
    const char *message;
  };
  const Case cases[] = {
      // A token's byte: the fingerprint no longer matches.
      {"vocab byte", S::vocab_bytes, 3, 'X', 1, "fingerprint"},
      {"vocab flag", S::vocab_flags, 2, 8, 1, "unknown flag"},
      {"vocab offset", S::vocab_offsets, 4 * 3, 200, 4, "offsets decrease"},
      {"fingerprint", S::vocab_fingerprint, 0, 12345, 4, "fingerprint"},
      {"child id", S::child_ids, 4, 3, 4, "out of order or range"},
      // The first child of the root: its label must be the branch's byte.
      {"label byte", S::byte_labels, 1, 'q', 1, "out of order or range"},
      {"unary bit", S::unary_bits, 1, 0xFF, 1, "byte trie"},
  };
  for (const Case &c : cases) {
    for (uint32_t flags : {0u, uint32_t{TREEMASK_LOAD_TRUSTED}}) {
      EXPECT_EQ(load_changed(c.section, c.at, &c.value, c.n, flags), TREEMASK_ERR_CORRUPT_FILE)
          << c.name;
      EXPECT_NE(last_error().find(c.message), std::string::npos) << c.name << ": " << last_error();
    }
  }
}

}  // namespace
