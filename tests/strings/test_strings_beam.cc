// The beam step over string sets returns distinct strings (treemask.h, the
// beam step's "String sets" paragraph): hypotheses that spell the same bytes
// merge, the best kept, live ones by the string spelled so far and finished
// ones by the whole string, including a finished string that carries over
// from an earlier step (the state-array form's ends). Checked against a
// brute-force step written here from the header's words (every candidate of
// every slot from the strings model, a full sort with the pinned tie rule,
// then the first B distinct hypotheses), for whole searches over random sets
// and vocabularies, in the state-array form (treemask_beam_step_strings) and
// the batch form, on one thread and on several; the example
// ({"red", "blue"}, B = 3); the refusals; and token-path tries, whose steps
// must not change (treemask_beam_step_strings over them is
// treemask_beam_step_states bit for bit).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "strings_oracle.h"
#include "treemask/treemask.h"

namespace {

using strings_oracle::make_vocab;
using strings_oracle::random_vocab;
using strings_oracle::SetModel;
using strings_oracle::VocabModel;
using testutil::MatcherHandle;
using testutil::TrieHandle;
using testutil::VocabHandle;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string last_error() { return treemask_last_error(); }

struct BeamHandle {
  treemask_beam *p = nullptr;
  BeamHandle(size_t width, size_t threads) {
    treemask_beam_options o;
    treemask_beam_options_init(&o);
    o.beam_width = width;
    o.n_threads = threads;
    TM_MUST(treemask_beam_create(&o, &p));
  }
  BeamHandle(const BeamHandle &) = delete;
  BeamHandle &operator=(const BeamHandle &) = delete;
  ~BeamHandle() { treemask_beam_free(p); }
};

struct BatchHandle {
  treemask_batch *p = nullptr;
  explicit BatchHandle(size_t n) {
    treemask_batch_options o;
    treemask_batch_options_init(&o);
    o.n_slots = n;
    TM_MUST(treemask_batch_create(&o, &p));
  }
  BatchHandle(const BatchHandle &) = delete;
  BatchHandle &operator=(const BatchHandle &) = delete;
  ~BatchHandle() { treemask_batch_free(p); }
};

treemask_status make_strings(const treemask_vocab *vocab, const std::vector<std::string> &strings,
                             const std::vector<int32_t> &stops, TrieHandle &out) {
  std::string bytes;
  std::vector<size_t> offsets{0};
  for (const auto &s : strings) {
    bytes += s;
    offsets.push_back(bytes.size());
  }
  const treemask_trie_options opts = testutil::trie_options(0, stops);
  return treemask_trie_from_strings(&opts, vocab, bytes.data(), offsets.data(), strings.size(),
                                    nullptr, &out.p);
}

treemask_logits log_prob_rows(const std::vector<float> &rows) {
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = rows.data();
  lg.dtype = TREEMASK_F32;
  lg.log_probs = true;  // scores are s + x[t] in float: the reference's exactly
  return lg;
}

// A hypothesis of the reference: the bytes it spelled, whether it finished.
struct Hyp {
  std::string text;
  bool finished = false;
  bool operator<(const Hyp &o) const {
    return std::tie(finished, text) < std::tie(o.finished, o.text);
  }
};

struct Cand {
  float score;
  int32_t beam, token;
  Hyp hyp;
};

// One request's step, from the header's words: every candidate, ranked
// (higher score, lower beam, lower token), then the first B whose
// hypotheses differ; the rest dead.
struct RefStep {
  std::vector<int32_t> parents, tokens;
  std::vector<float> scores;
  std::vector<Hyp> hyps;
};

RefStep reference_step(const SetModel &m, const VocabModel &v, const std::vector<Hyp> &hyps,
                       const std::vector<float> &scores, const float *rows, size_t B) {
  std::vector<Cand> cands;
  for (size_t b = 0; b < B; ++b) {
    const float s = scores[b];
    if (!(s > kNegInf)) continue;
    if (hyps[b].finished) {
      cands.push_back({s, static_cast<int32_t>(b), m.stops[0], hyps[b]});
      continue;
    }
    for (int32_t t = 0; t < v.vocab_size; ++t) {
      if (!m.allowed(hyps[b].text, t)) continue;
      const float score = s + rows[b * static_cast<size_t>(v.vocab_size) + static_cast<size_t>(t)];
      if (!(score > kNegInf)) continue;
      const bool stop = m.is_stop(t);
      cands.push_back(
          {score,
           static_cast<int32_t>(b),
           t,
           {stop ? hyps[b].text : hyps[b].text + v.tokens[static_cast<size_t>(t)], stop}});
    }
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Cand &a, const Cand &b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.beam != b.beam) return a.beam < b.beam;
    return a.token < b.token;
  });
  RefStep out;
  std::set<Hyp> seen;
  for (const Cand &c : cands) {
    if (out.parents.size() == B) break;
    if (!seen.insert(c.hyp).second) continue;
    out.parents.push_back(c.beam);
    out.tokens.push_back(c.token);
    out.scores.push_back(c.score);
    out.hyps.push_back(c.hyp);
  }
  while (out.parents.size() < B) {
    out.parents.push_back(-1);
    out.tokens.push_back(-1);
    out.scores.push_back(kNegInf);
    out.hyps.push_back({"", true});
  }
  return out;
}

// Log-probabilities from a few values (ties between beams and tokens are
// common) with some -inf.
std::vector<float> random_rows(std::mt19937_64 &rng, size_t n_rows, int32_t vocab) {
  static const float values[] = {-0.25f, -0.5f, -0.75f, -1.0f, -1.5f, -2.0f, -3.0f, kNegInf};
  std::vector<float> rows(n_rows * static_cast<size_t>(vocab));
  for (auto &x : rows) x = values[rng() % 8];
  return rows;
}

struct Search {
  size_t n_requests, B;
  std::vector<uint32_t> states, ends;
  std::vector<float> scores;
  std::vector<Hyp> hyps;  // the reference's
  Search(size_t n, size_t b)
      : n_requests(n),
        B(b),
        states(n * b, TREEMASK_STATE_ROOT),
        ends(n * b, TREEMASK_STATE_FAILED),
        scores(n * b, kNegInf),
        hyps(n * b) {
    for (size_t r = 0; r < n; ++r) scores[r * b] = 0.0f;
  }
  bool done() const {
    for (size_t i = 0; i < states.size(); ++i) {
      if (scores[i] > kNegInf && states[i] != TREEMASK_STATE_TERMINATED) return false;
    }
    return true;
  }
};

TEST(StringSetBeam, RandomSearchesAgainstTheBruteForce) {
  std::mt19937_64 rng(31);
  const std::string alphabets[] = {"ab", "abc", std::string("a\0\xff", 3)};
  const int rounds = testutil::scaled(150);
  uint64_t steps = 0, merges = 0, carried = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string &alphabet = alphabets[round % 3];
    VocabModel v = random_vocab(rng, alphabet);
    if (round % 2) {  // every single byte again: more ways to spell each string
      for (char c : alphabet) {
        v.tokens.emplace_back(1, c);
        v.flags.push_back(0);
      }
      v.vocab_size = std::max(v.vocab_size, static_cast<int32_t>(v.tokens.size()));
    }
    std::vector<std::string> strings;
    const size_t n = 1 + rng() % 8;
    for (size_t i = 0; i < n; ++i) {
      std::string s(rng() % 6, ' ');
      for (auto &c : s) c = alphabet[rng() % alphabet.size()];
      strings.push_back(s);
    }
    std::vector<int32_t> stops{static_cast<int32_t>(rng() % v.tokens.size())};
    if (rng() % 3 == 0) stops.push_back(static_cast<int32_t>(rng() % v.vocab_size));
    VocabHandle vh;
    ASSERT_EQ(make_vocab(v, vh), TREEMASK_OK) << last_error();
    TrieHandle trie;
    ASSERT_EQ(make_strings(vh.p, strings, stops, trie), TREEMASK_OK) << last_error();
    SetModel m{&v, {}, stops};
    std::sort(m.stops.begin(), m.stops.end());
    m.stops.erase(std::unique(m.stops.begin(), m.stops.end()), m.stops.end());
    for (const auto &s : strings) m.full.insert(s);

    const size_t B = 1 + rng() % 6;
    const size_t n_requests = 1 + rng() % 3;
    const size_t n_slots = n_requests * B;
    BeamHandle beam(B, round % 3 == 2 ? 3 : 1);
    BeamHandle batch_beam(B, 1);
    Search st(n_requests, B);
    // The batch form: one matcher per slot, all at the root.
    BatchHandle batch(n_slots);
    {
      treemask_matcher *raw = nullptr;
      ASSERT_EQ(treemask_matcher_create(trie.p, nullptr, &raw), TREEMASK_OK);
      MatcherHandle root(raw);
      for (size_t i = 0; i < n_slots; ++i) {
        ASSERT_EQ(treemask_batch_set_matcher(batch.p, i, root.p), TREEMASK_OK);
      }
    }
    std::vector<float> batch_scores = st.scores;
    std::map<uint32_t, std::string> node_text{{TREEMASK_STATE_ROOT, ""}};  // live states seen
    for (int step = 0; step < 12 && !st.done(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::vector<float> rows = random_rows(rng, n_slots, v.vocab_size);
      const treemask_logits lg = log_prob_rows(rows);
      const std::vector<uint32_t> states_before = st.states, ends_before = st.ends;
      const std::vector<float> scores_before = st.scores;
      std::vector<int32_t> parents(n_slots), tokens(n_slots);
      ASSERT_EQ(treemask_beam_step_strings(beam.p, trie.p, n_requests, &lg, st.states.data(),
                                           st.ends.data(), st.scores.data(), parents.data(),
                                           tokens.data()),
                TREEMASK_OK)
          << last_error();
      std::vector<int32_t> batch_parents(n_slots), batch_tokens(n_slots);
      ASSERT_EQ(
          treemask_beam_step_batch(batch_beam.p, batch.p, n_requests, &lg, batch_scores.data(),
                                   batch_parents.data(), batch_tokens.data()),
          TREEMASK_OK)
          << last_error();
      // Both forms choose the same, bit for bit.
      EXPECT_EQ(batch_parents, parents);
      EXPECT_EQ(batch_tokens, tokens);
      EXPECT_EQ(0, std::memcmp(batch_scores.data(), st.scores.data(), n_slots * sizeof(float)));
      std::vector<Hyp> next(n_slots);
      for (size_t r = 0; r < n_requests; ++r) {
        const size_t base = r * B;
        const std::vector<Hyp> hyps(st.hyps.begin() + base, st.hyps.begin() + base + B);
        const std::vector<float> scores(scores_before.begin() + base,
                                        scores_before.begin() + base + B);
        const RefStep ref =
            reference_step(m, v, hyps, scores, rows.data() + base * v.vocab_size, B);
        std::set<Hyp> chosen;
        for (size_t i = 0; i < B; ++i) {
          SCOPED_TRACE("slot " + std::to_string(base + i));
          ASSERT_EQ(parents[base + i], ref.parents[i]);
          ASSERT_EQ(tokens[base + i], ref.tokens[i]);
          ASSERT_EQ(st.scores[base + i], ref.scores[i]);
          next[base + i] = ref.hyps[i];
          const int32_t p = ref.parents[i];
          if (p < 0) {
            EXPECT_EQ(st.states[base + i], TREEMASK_STATE_TERMINATED);
            EXPECT_EQ(st.ends[base + i], TREEMASK_STATE_FAILED);
            continue;
          }
          EXPECT_TRUE(chosen.insert(ref.hyps[i]).second);
          const uint32_t parent_state = states_before[base + static_cast<size_t>(p)];
          if (ref.hyps[i].finished) {
            EXPECT_EQ(st.states[base + i], TREEMASK_STATE_TERMINATED);
            EXPECT_TRUE(m.terminal(ref.hyps[i].text));
            // The node the string ended at: the parent's, or carried over.
            const uint32_t want = parent_state == TREEMASK_STATE_TERMINATED
                                      ? ends_before[base + static_cast<size_t>(p)]
                                      : parent_state;
            EXPECT_EQ(st.ends[base + i], want);
            EXPECT_EQ(node_text.at(want), ref.hyps[i].text);
            if (parent_state == TREEMASK_STATE_TERMINATED) ++carried;
          } else {
            EXPECT_EQ(st.ends[base + i], TREEMASK_STATE_FAILED);
            uint32_t s = parent_state;
            bool ok = false;
            ASSERT_EQ(treemask_trie_advance_states(trie.p, &s, &tokens[base + i], 1,
                                                   TREEMASK_FAILURE_REJECT, &ok),
                      TREEMASK_OK);
            EXPECT_TRUE(ok);
            EXPECT_EQ(st.states[base + i], s);
            auto [it, fresh] = node_text.emplace(s, ref.hyps[i].text);
            EXPECT_EQ(it->second, ref.hyps[i].text) << "one node, two strings";
          }
        }
        // Did a merge matter? (Some rounds must exercise it.)
        std::set<std::pair<int32_t, int32_t>> picks;
        for (size_t i = 0; i < B; ++i) picks.emplace(ref.parents[i], ref.tokens[i]);
        for (size_t b = 0; b < B; ++b) {
          if (!(scores[b] > kNegInf) || hyps[b].finished) continue;
          for (int32_t t = 0; t < v.vocab_size; ++t) {
            if (!m.allowed(hyps[b].text, t) || picks.count({static_cast<int32_t>(b), t})) continue;
            const Hyp h{m.is_stop(t) ? hyps[b].text : hyps[b].text + v.tokens[size_t(t)],
                        m.is_stop(t)};
            if (chosen.count(h)) ++merges;
          }
        }
      }
      st.hyps = next;
      ++steps;
    }
    // Finished strings are distinct and in the set.
    for (size_t r = 0; r < n_requests; ++r) {
      std::set<std::string> finished;
      for (size_t i = r * B; i < (r + 1) * B; ++i) {
        if (st.scores[i] > kNegInf && st.states[i] == TREEMASK_STATE_TERMINATED) {
          EXPECT_TRUE(finished.insert(st.hyps[i].text).second) << st.hyps[i].text;
          EXPECT_TRUE(m.terminal(st.hyps[i].text));
        }
      }
    }
  }
  std::printf("%llu steps, %llu merged candidates, %llu finished carried over\n",
              static_cast<unsigned long long>(steps), static_cast<unsigned long long>(merges),
              static_cast<unsigned long long>(carried));
  EXPECT_GT(merges, 100u);
  EXPECT_GT(carried, 20u);
}

// The review's case: {"red", "blue"}, B = 3. "red" has many spellings
// ("re" + "d", "red", ...) and the model likes them: without the merge the
// search ended with "red" twice (and a third beam would have held it again
// had the model liked "r" + "ed" too). Now each string comes back once, by
// its best tokenization, and the third beam dies: there is no third string.
TEST(StringSetBeam, RedAndBlueFillTwoBeamsNotThree) {
  VocabModel v;
  v.tokens = {"r", "e", "d", "re", "ed", "red", "b", "l", "u", "lue", "blue", "<eos>"};
  v.flags.assign(v.tokens.size(), 0);
  v.flags.back() = 1;  // special
  v.vocab_size = static_cast<int32_t>(v.tokens.size());
  const int32_t eos = 11;
  VocabHandle vh;
  ASSERT_EQ(make_vocab(v, vh), TREEMASK_OK) << last_error();
  TrieHandle trie;
  ASSERT_EQ(make_strings(vh.p, {"red", "blue"}, {eos}, trie), TREEMASK_OK) << last_error();
  const size_t B = 3;
  BeamHandle beam(B, 1);
  Search st(1, B);
  // Every row alike. Step 1 keeps "re", "red", "blue"; step 2 finishes "red"
  // (-0.6) and "blue" (-1.1) and spells "red" again as "re" + "d" (-1.0);
  // step 3 finishes that one too (-1.1): the same string, merged away.
  std::vector<float> row(static_cast<size_t>(v.vocab_size), -4.0f);
  for (int32_t t : {1, 2, 3, 4, 5}) row[static_cast<size_t>(t)] = -0.5f;
  row[0] = -3.0f;
  row[10] = -1.0f;
  row[static_cast<size_t>(eos)] = -0.1f;
  std::vector<float> rows;
  for (size_t b = 0; b < B; ++b) rows.insert(rows.end(), row.begin(), row.end());
  const treemask_logits lg = log_prob_rows(rows);
  std::vector<std::string> text(B);
  for (int step = 0; step < 8 && !st.done(); ++step) {
    std::vector<int32_t> parents(B), tokens(B);
    ASSERT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg, st.states.data(), st.ends.data(),
                                         st.scores.data(), parents.data(), tokens.data()),
              TREEMASK_OK)
        << last_error();
    std::vector<std::string> next(B);
    for (size_t i = 0; i < B; ++i) {
      if (parents[i] < 0) continue;
      const auto &p = text[static_cast<size_t>(parents[i])];
      next[i] = tokens[i] == eos ? p : p + v.tokens[static_cast<size_t>(tokens[i])];
    }
    text = next;
  }
  EXPECT_TRUE(st.done());
  EXPECT_EQ(text[0], "red");
  EXPECT_EQ(text[1], "blue");
  EXPECT_EQ(st.scores[0], -0.5f + -0.1f);
  EXPECT_EQ(st.scores[1], -1.0f + -0.1f);
  EXPECT_EQ(st.states[0], TREEMASK_STATE_TERMINATED);
  EXPECT_EQ(st.states[1], TREEMASK_STATE_TERMINATED);
  EXPECT_EQ(st.scores[2], kNegInf);  // dead: no third string

  // The batch form agrees.
  BatchHandle batch(B);
  treemask_matcher *raw = nullptr;
  ASSERT_EQ(treemask_matcher_create(trie.p, nullptr, &raw), TREEMASK_OK);
  MatcherHandle root(raw);
  for (size_t i = 0; i < B; ++i) ASSERT_EQ(treemask_batch_set_matcher(batch.p, i, root.p), 0);
  std::vector<float> scores{0.0f, kNegInf, kNegInf};
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> parents(B), tokens(B);
    ASSERT_EQ(treemask_beam_step_batch(beam.p, batch.p, 1, &lg, scores.data(), parents.data(),
                                       tokens.data()),
              TREEMASK_OK)
        << last_error();
  }
  EXPECT_EQ(scores, st.scores);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(treemask_matcher_is_terminated(treemask_batch_get_matcher(batch.p, i)));
  }
}

// Three tokens spell "a": the B = 2 best candidates are one string, so the
// step must look further down (it gathers again with twice the room) to find
// the second distinct one; both forms.
TEST(StringSetBeam, DuplicatesPushTheSecondStringFurtherDown) {
  VocabModel v;
  v.tokens = {"a", "a", "a", "b", "<s>"};
  v.flags = {0, 0, 0, 0, 1};
  v.vocab_size = 5;
  VocabHandle vh;
  ASSERT_EQ(make_vocab(v, vh), TREEMASK_OK);
  TrieHandle trie;
  ASSERT_EQ(make_strings(vh.p, {"a", "b"}, {4}, trie), TREEMASK_OK) << last_error();
  const std::vector<float> rows = {-0.1f, -0.2f, -0.3f, -1.0f, -9.0f,   // beam 0
                                   -9.0f, -9.0f, -9.0f, -9.0f, -9.0f};  // beam 1 (not live)
  const treemask_logits lg = log_prob_rows(rows);
  for (const size_t threads : {size_t{1}, size_t{2}}) {
    BeamHandle beam(2, threads);
    Search st(1, 2);
    std::vector<int32_t> parents(2), tokens(2);
    ASSERT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg, st.states.data(), st.ends.data(),
                                         st.scores.data(), parents.data(), tokens.data()),
              TREEMASK_OK)
        << last_error();
    EXPECT_EQ(parents, (std::vector<int32_t>{0, 0}));
    EXPECT_EQ(tokens, (std::vector<int32_t>{0, 3}));  // "a" once (its best token), then "b"
    EXPECT_EQ(st.scores, (std::vector<float>{-0.1f, -1.0f}));
    BatchHandle batch(2);
    treemask_matcher *raw = nullptr;
    ASSERT_EQ(treemask_matcher_create(trie.p, nullptr, &raw), TREEMASK_OK);
    MatcherHandle root(raw);
    for (size_t i = 0; i < 2; ++i) ASSERT_EQ(treemask_batch_set_matcher(batch.p, i, root.p), 0);
    std::vector<float> scores{0.0f, kNegInf};
    ASSERT_EQ(treemask_beam_step_batch(beam.p, batch.p, 1, &lg, scores.data(), parents.data(),
                                       tokens.data()),
              TREEMASK_OK)
        << last_error();
    EXPECT_EQ(tokens, (std::vector<int32_t>{0, 3}));
  }
}

TEST(StringSetBeam, TheStateFormNeedsTheEnds) {
  VocabModel v;
  v.tokens = {"a", "b", "ab", "<s>"};
  v.flags = {0, 0, 0, 1};
  v.vocab_size = 4;
  VocabHandle vh;
  ASSERT_EQ(make_vocab(v, vh), TREEMASK_OK);
  TrieHandle trie;
  ASSERT_EQ(make_strings(vh.p, {"ab", "a"}, {3}, trie), TREEMASK_OK) << last_error();
  BeamHandle beam(2, 1);
  std::vector<float> rows(8, -1.0f);
  const treemask_logits lg = log_prob_rows(rows);
  std::vector<uint32_t> states{0, 0}, ends{TREEMASK_STATE_FAILED, TREEMASK_STATE_FAILED};
  std::vector<float> scores{0.0f, kNegInf};
  std::vector<int32_t> parents(2), tokens(2);
  // treemask_beam_step_states cannot tell finished strings apart.
  EXPECT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, &lg, states.data(), scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("treemask_beam_step_strings"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg, states.data(), nullptr,
                                       scores.data(), parents.data(), tokens.data()),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ends is NULL"), std::string::npos) << last_error();
  // A finished slot's end must be unknown or a node where a string ends:
  // node 0 (the root, "") ends none.
  states = {TREEMASK_STATE_TERMINATED, 0};
  scores = {-1.0f, -2.0f};
  ends = {0, TREEMASK_STATE_FAILED};
  EXPECT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg, states.data(), ends.data(),
                                       scores.data(), parents.data(), tokens.data()),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("ends[0] = 0"), std::string::npos) << last_error();
  ends = {12345, TREEMASK_STATE_FAILED};
  EXPECT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg, states.data(), ends.data(),
                                       scores.data(), parents.data(), tokens.data()),
            TREEMASK_ERR_OUT_OF_RANGE);
  // Nothing was written.
  EXPECT_EQ(scores, (std::vector<float>{-1.0f, -2.0f}));
  // An unknown end is never merged: the carried "a" (unknown) and the live
  // "a" finishing now both stay.
  uint32_t a_node = 0;
  {
    uint32_t s = 0;
    const int32_t a = 0;
    bool ok = false;
    ASSERT_EQ(treemask_trie_advance_states(trie.p, &s, &a, 1, TREEMASK_FAILURE_REJECT, &ok), 0);
    a_node = s;
  }
  states = {TREEMASK_STATE_TERMINATED, a_node};
  ends = {TREEMASK_STATE_FAILED, TREEMASK_STATE_FAILED};
  scores = {-1.0f, -0.5f};
  rows.assign(8, -10.0f);
  rows[4 + 3] = -0.1f;  // slot 1: the stop token
  const treemask_logits lg2 = log_prob_rows(rows);
  ASSERT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg2, states.data(), ends.data(),
                                       scores.data(), parents.data(), tokens.data()),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(parents, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(ends, (std::vector<uint32_t>{a_node, TREEMASK_STATE_FAILED}));
  // Known, the same string merges: the carried one (-1.0) loses to -0.6.
  states = {TREEMASK_STATE_TERMINATED, a_node};
  ends = {a_node, TREEMASK_STATE_FAILED};
  scores = {-1.0f, -0.5f};
  ASSERT_EQ(treemask_beam_step_strings(beam.p, trie.p, 1, &lg2, states.data(), ends.data(),
                                       scores.data(), parents.data(), tokens.data()),
            TREEMASK_OK)
      << last_error();
  EXPECT_EQ(parents[0], 1);
  EXPECT_EQ(tokens[0], 3);
  EXPECT_NE(parents[1], 0) << "the carried \"a\" is the same string";
}

// Token paths never merge: treemask_beam_step_strings over a token-path
// trie is treemask_beam_step_states bit for bit (whose results
// tests/batch/test_beam_step.cc checks against its own brute force), and
// it writes every end TREEMASK_STATE_FAILED.
TEST(StringSetBeam, TokenPathStepsAreUnchanged) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < testutil::scaled(40); ++round) {
    const int32_t vocab = 3 + static_cast<int32_t>(rng() % 20);
    std::vector<std::vector<int32_t>> paths;
    for (size_t i = 0; i < 1 + rng() % 12; ++i) {
      std::vector<int32_t> p(rng() % 5);
      for (auto &t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 1));
      paths.push_back(p);
    }
    TrieHandle trie;
    ASSERT_EQ(testutil::make_trie(paths, vocab, {vocab - 1}, trie), TREEMASK_OK) << last_error();
    const size_t B = 1 + rng() % 5, n_requests = 1 + rng() % 3, n = B * n_requests;
    BeamHandle one(B, 1), other(B, 2);
    Search a(n_requests, B), b(n_requests, B);
    for (int step = 0; step < 8 && !a.done(); ++step) {
      std::vector<float> rows(n * static_cast<size_t>(vocab));
      for (auto &x : rows) x = static_cast<float>(rng() % 64) / 8.0f - 4.0f;  // logits: normalized
      treemask_logits lg;
      treemask_logits_init(&lg);
      lg.data = rows.data();
      lg.dtype = TREEMASK_F32;
      std::vector<int32_t> pa(n), ta(n), pb(n), tb(n);
      ASSERT_EQ(treemask_beam_step_states(one.p, trie.p, n_requests, &lg, a.states.data(),
                                          a.scores.data(), pa.data(), ta.data()),
                TREEMASK_OK);
      std::fill(b.ends.begin(), b.ends.end(), 7u);  // ignored in
      ASSERT_EQ(treemask_beam_step_strings(other.p, trie.p, n_requests, &lg, b.states.data(),
                                           b.ends.data(), b.scores.data(), pb.data(), tb.data()),
                TREEMASK_OK);
      EXPECT_EQ(pa, pb);
      EXPECT_EQ(ta, tb);
      EXPECT_EQ(a.states, b.states);
      EXPECT_EQ(0, std::memcmp(a.scores.data(), b.scores.data(), n * sizeof(float)));
      EXPECT_EQ(b.ends, std::vector<uint32_t>(n, TREEMASK_STATE_FAILED));
    }
  }
}

}  // namespace
