// The beam step and top-k against a brute-force reference written here from
// the header's rules: a set of paths (no trie), the full log-softmax of every
// row, every allowed candidate, a full sort with the pinned tie rule. Random
// tries (depths 1-8, fanouts from 1 to the whole vocabulary, terminal nodes
// with children), random logits in every dtype, beam widths 1-64, requests
// with fewer candidates than beams, finished and dead beams; whole searches,
// checked at every step (parents, tokens, scores, and each slot's state),
// on one thread and on several. Then every bad argument.
//
// The reference uses the library's normalizer function (so scores compare
// exactly); tests/kernels/test_beam_kernels.cc checks that normalizer
// against a double-precision one.
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
#include <vector>

#include "common/test_util.h"
#include "kernels/cpu/beam.h"
#include "treemask/treemask.h"

namespace {

using treemask::kernels::BeamCandidate;
using treemask::kernels::DType;
using Path = std::vector<int32_t>;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string last_error() { return treemask_last_error() ? treemask_last_error() : ""; }

// The header's ranking, written here again: higher score, then lower beam,
// then lower token.
bool header_rank(const BeamCandidate &a, const BeamCandidate &b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// The paths, as the oracle sees them: allowed(prefix) and terminal(prefix).
struct Oracle {
  std::set<Path> paths;
  std::set<Path> prefixes;  // every proper and full prefix, the empty one included
  std::vector<int32_t> stops;

  Oracle(const std::vector<Path> &ps, std::vector<int32_t> st) : stops(std::move(st)) {
    std::sort(stops.begin(), stops.end());
    for (const auto &p : ps) {
      paths.insert(p);
      for (size_t i = 0; i <= p.size(); ++i) prefixes.insert(Path(p.begin(), p.begin() + i));
    }
  }
  bool terminal(const Path &p) const { return paths.count(p) > 0; }
  std::vector<int32_t> children(const Path &p) const {
    std::set<int32_t> out;
    for (auto it = prefixes.lower_bound(p); it != prefixes.end(); ++it) {
      if (it->size() < p.size() || !std::equal(p.begin(), p.end(), it->begin())) break;
      if (it->size() == p.size() + 1) out.insert((*it)[p.size()]);
    }
    return {out.begin(), out.end()};
  }
};

// A hypothesis of the reference: the tokens it took and whether it ended.
struct Hyp {
  Path prefix;
  bool terminated = false;
  bool failed = false;  // TREEMASK_STATE_FAILED: allows the stop tokens
};

// Logits rows stored as bytes of the dtype; value(i, t) as the library reads it.
struct Rows {
  DType dtype;
  size_t stride;
  std::vector<uint8_t> bytes;
  Rows(DType d, size_t n_rows, size_t stride_) : dtype(d), stride(stride_) {
    bytes.resize(n_rows * stride * treemask::kernels::dtype_bytes(d));
  }
  void set(size_t i, size_t c, float v) {
    const size_t at = i * stride + c;
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * at, &v, 4);
      return;
    }
    uint32_t b;
    std::memcpy(&b, &v, 4);
    uint16_t h;
    if (dtype == DType::kBF16) {
      h = static_cast<uint16_t>(b >> 16);
    } else {  // fp16 from values in its normal range (or -inf)
      if (std::isinf(v)) {
        h = 0xFC00;
      } else {
        const int e = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
        const auto sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
        h = e <= 0 ? sign : static_cast<uint16_t>(sign | (e << 10) | ((b >> 13) & 0x3FFu));
      }
    }
    std::memcpy(bytes.data() + 2 * at, &h, 2);
  }
  const void *row(size_t i) const {
    return bytes.data() + i * stride * treemask::kernels::dtype_bytes(dtype);
  }
  float value(size_t i, size_t c) const { return treemask::kernels::load_logit(row(i), dtype, c); }
};

struct RefOut {
  std::vector<int32_t> parents, tokens;
  std::vector<float> scores;
  std::vector<Hyp> hyps;
};

// One reference step of n_requests x B slots.
RefOut reference_step(const Oracle &o, const std::vector<Hyp> &hyps,
                      const std::vector<float> &scores, const Rows &rows, size_t n_columns,
                      bool log_probs, size_t n_requests, size_t B) {
  RefOut out;
  out.parents.assign(n_requests * B, -1);
  out.tokens.assign(n_requests * B, -1);
  out.scores.assign(n_requests * B, kNegInf);
  out.hyps.assign(n_requests * B, Hyp{{}, true, false});
  const auto lse = treemask::kernels::logsumexp_best();
  for (size_t r = 0; r < n_requests; ++r) {
    std::vector<BeamCandidate> cands;
    std::vector<Hyp> next;  // by candidate index, stored in .next
    for (size_t b = 0; b < B; ++b) {
      const size_t slot = r * B + b;
      const float s = scores[slot];
      const Hyp &h = hyps[slot];
      if (!(s > kNegInf)) continue;
      auto push = [&](float sc, int32_t t, Hyp nh) {
        if (!(sc > kNegInf)) return;
        cands.push_back({sc, static_cast<int32_t>(b), t, static_cast<uint32_t>(next.size())});
        next.push_back(std::move(nh));
      };
      if (h.terminated) {
        push(s, o.stops[0], h);
        continue;
      }
      const float z = log_probs ? 0.0f : lse(rows.row(slot), rows.dtype, n_columns);
      auto score = [&](int32_t t) { return s + (rows.value(slot, static_cast<size_t>(t)) - z); };
      if (!h.failed) {
        for (int32_t t : o.children(h.prefix)) {
          Hyp nh = h;
          nh.prefix.push_back(t);
          push(score(t), t, nh);
        }
      }
      if (h.failed || o.terminal(h.prefix)) {
        for (int32_t t : o.stops) push(score(t), t, Hyp{h.prefix, true, false});
      }
    }
    std::sort(cands.begin(), cands.end(), header_rank);
    for (size_t i = 0; i < std::min(B, cands.size()); ++i) {
      out.parents[r * B + i] = cands[i].beam;
      out.tokens[r * B + i] = cands[i].token;
      out.scores[r * B + i] = cands[i].score;
      out.hyps[r * B + i] = next[cands[i].next];
    }
  }
  return out;
}

// The state-array state of a hypothesis, walked from the root through the
// public API (independent of the beam step).
uint32_t state_of(const treemask_trie *trie, const Hyp &h) {
  if (h.terminated) return TREEMASK_STATE_TERMINATED;
  if (h.failed) return TREEMASK_STATE_FAILED;
  uint32_t s = TREEMASK_STATE_ROOT;
  for (int32_t t : h.prefix) {
    bool ok = false;
    EXPECT_EQ(treemask_trie_advance_states(trie, &s, &t, 1, 0, &ok), TREEMASK_OK);
    EXPECT_TRUE(ok);
  }
  return s;
}

using testutil::random_paths;

struct Beam {
  treemask_beam *p = nullptr;
  Beam(size_t B, size_t threads) {
    treemask_beam_options o;
    treemask_beam_options_init(&o);
    o.beam_width = B;
    o.n_threads = threads;
    EXPECT_EQ(treemask_beam_create(&o, &p), TREEMASK_OK) << last_error();
  }
  ~Beam() { treemask_beam_free(p); }
};

void run_search(uint64_t seed, size_t n_threads) {
  std::mt19937_64 rng(seed);
  const int32_t vocab = 2 + static_cast<int32_t>(rng() % 70);
  const int32_t stop = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  const auto paths = random_paths(rng, vocab, stop, 1 + rng() % 8, 1 + rng() % 40);
  bool nonempty = false;
  for (const auto &p : paths) nonempty |= !p.empty();
  if (!nonempty) return;
  const Oracle oracle(paths, {stop});
  testutil::TrieHandle trie;
  ASSERT_EQ(testutil::make_trie(paths, vocab, {stop}, trie), TREEMASK_OK) << last_error();

  const size_t B = 1 + rng() % (rng() % 3 == 0 ? 64 : 6);
  const size_t n_requests = 1 + rng() % 4;
  const DType dtype = static_cast<DType>(rng() % 3);
  const bool log_probs = rng() % 4 == 0;
  const size_t n_columns = static_cast<size_t>(vocab) + rng() % 5;  // padded vocab
  const size_t stride = n_columns + rng() % 3;
  const size_t n_slots = n_requests * B;
  SCOPED_TRACE("seed " + std::to_string(seed) + " B " + std::to_string(B) + " requests " +
               std::to_string(n_requests) + " dtype " + std::to_string(int(dtype)) + " vocab " +
               std::to_string(vocab) + " threads " + std::to_string(n_threads));

  Beam beam(B, n_threads);
  std::vector<Hyp> hyps(n_slots);
  std::vector<float> scores(n_slots, kNegInf);
  for (size_t r = 0; r < n_requests; ++r) scores[r * B] = 0.0f;  // transformers' first step
  std::vector<uint32_t> states(n_slots, TREEMASK_STATE_ROOT);
  // Some requests start from a FAILED or finished state too.
  if (rng() % 6 == 0) {
    states[0] = TREEMASK_STATE_FAILED;
    hyps[0].failed = true;
  }
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int step = 0; step < 12; ++step) {
    Rows rows(dtype, n_slots, stride);
    for (size_t i = 0; i < n_slots; ++i) {
      for (size_t c = 0; c < stride; ++c) {
        float v = log_probs ? -std::fabs(dist(rng)) : dist(rng);
        if (rng() % 17 == 0) v = kNegInf;  // an already-masked column
        if (rng() % 23 == 0) v = 1.0f;     // ties between candidates
        rows.set(i, c, v);
      }
    }
    const RefOut want =
        reference_step(oracle, hyps, scores, rows, n_columns, log_probs, n_requests, B);
    treemask_logits lg;
    treemask_logits_init(&lg);
    lg.data = rows.bytes.data();
    lg.dtype = static_cast<int32_t>(dtype);
    lg.n_columns = n_columns;
    lg.row_stride = stride;
    lg.log_probs = log_probs;
    std::vector<int32_t> parents(n_slots, 99), tokens(n_slots, 99);
    ASSERT_EQ(treemask_beam_step_states(beam.p, trie.p, n_requests, &lg, states.data(),
                                        scores.data(), parents.data(), tokens.data()),
              TREEMASK_OK)
        << last_error();
    for (size_t i = 0; i < n_slots; ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + " slot " + std::to_string(i));
      ASSERT_EQ(parents[i], want.parents[i]);
      ASSERT_EQ(tokens[i], want.tokens[i]);
      ASSERT_EQ(scores[i], want.scores[i]);  // exact: same float expression
      ASSERT_EQ(states[i], state_of(trie.p, want.hyps[i]));
    }
    hyps = want.hyps;
    bool all_done = true;
    for (size_t i = 0; i < n_slots; ++i) all_done &= hyps[i].terminated;
    if (all_done) break;
  }
}

TEST(BeamStep, MatchesBruteForceOverWholeSearches) {
  const int n = testutil::scaled(300);
  for (int i = 0; i < n; ++i) {
    run_search(1000 + static_cast<uint64_t>(i), 1);
    if (HasFatalFailure()) return;
  }
}

TEST(BeamStep, ThreadedMatchesBruteForce) {
  const int n = testutil::scaled(120);
  for (int i = 0; i < n; ++i) {
    run_search(5000 + static_cast<uint64_t>(i), 2 + static_cast<size_t>(i % 3));
    if (HasFatalFailure()) return;
  }
}

TEST(BeamStep, FewerCandidatesThanBeamsLeavesDeadSlots) {
  testutil::TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{3, 4}, {3, 5}}, 8, {0}, trie), TREEMASK_OK);
  Beam beam(4, 1);
  std::vector<uint32_t> states(4, TREEMASK_STATE_ROOT);
  std::vector<float> scores{0, kNegInf, kNegInf, kNegInf};
  std::vector<float> logits(4 * 8, 0.0f);
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = logits.data();
  std::vector<int32_t> parents(4), tokens(4);
  ASSERT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, &lg, states.data(), scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_OK);
  EXPECT_EQ(parents, (std::vector<int32_t>{0, -1, -1, -1}));
  EXPECT_EQ(tokens, (std::vector<int32_t>{3, -1, -1, -1}));
  EXPECT_FLOAT_EQ(scores[0], -std::log(8.0f));
  EXPECT_EQ(scores[1], kNegInf);
  EXPECT_EQ(states[1], TREEMASK_STATE_TERMINATED);
  // Next step: the two children tie; the lower token wins the first place.
  ASSERT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, &lg, states.data(), scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_OK);
  EXPECT_EQ(parents, (std::vector<int32_t>{0, 0, -1, -1}));
  EXPECT_EQ(tokens, (std::vector<int32_t>{4, 5, -1, -1}));
  // Then both end with the stop token; then they carry over unchanged.
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> before(scores);
    ASSERT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, &lg, states.data(), scores.data(),
                                        parents.data(), tokens.data()),
              TREEMASK_OK);
    EXPECT_EQ(tokens, (std::vector<int32_t>{0, 0, -1, -1}));
    EXPECT_EQ(states[0], TREEMASK_STATE_TERMINATED);
    if (i == 1) {
      EXPECT_EQ(scores, before);  // finished hypotheses keep their score
    }
  }
}

TEST(BeamStep, BadArgumentsWriteNothing) {
  testutil::TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{3, 4}, {3, 5}}, 8, {0}, trie), TREEMASK_OK);
  Beam beam(2, 1);
  std::vector<uint32_t> states{TREEMASK_STATE_ROOT, TREEMASK_STATE_ROOT};
  std::vector<float> scores{0, -1};
  std::vector<float> logits(2 * 8, 0.0f);
  std::vector<int32_t> parents{7, 7}, tokens{7, 7};
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = logits.data();
  auto step = [&] {
    return treemask_beam_step_states(beam.p, trie.p, 1, &lg, states.data(), scores.data(),
                                     parents.data(), tokens.data());
  };
  auto unchanged = [&] {
    EXPECT_EQ(states, (std::vector<uint32_t>{0, 0}));
    EXPECT_EQ(scores, (std::vector<float>{0, -1}));
    EXPECT_EQ(parents, (std::vector<int32_t>{7, 7}));
  };
  // NaN / +inf in a row a live slot reads: the row is named.
  logits[8 + 2] = NAN;
  EXPECT_EQ(step(), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("logits row 1"), std::string::npos) << last_error();
  unchanged();
  logits[8 + 2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(step(), TREEMASK_ERR_INVALID_ARGUMENT);
  unchanged();
  // ... but not in a row no live slot reads.
  scores[1] = kNegInf;
  EXPECT_EQ(step(), TREEMASK_OK) << last_error();
  states = {0, 0};
  scores = {0, -1};
  parents = {7, 7};
  logits[8 + 2] = 0.0f;
  lg.n_columns = 7;  // smaller than vocab_size 8
  EXPECT_EQ(step(), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("n_columns"), std::string::npos) << last_error();
  unchanged();
  lg.n_columns = 8;
  lg.row_stride = 4;
  EXPECT_EQ(step(), TREEMASK_ERR_INVALID_ARGUMENT);
  unchanged();
  lg.row_stride = 0;
  lg.dtype = 7;
  EXPECT_EQ(step(), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("dtype"), std::string::npos);
  lg.dtype = TREEMASK_F32;
  states[1] = 12345;
  EXPECT_EQ(step(), TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("states[1]"), std::string::npos) << last_error();
  states[1] = 0;
  unchanged();
  EXPECT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, nullptr, states.data(), scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_beam_step_states(beam.p, trie.p, 1, &lg, nullptr, scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_beam_step_states(beam.p, trie.p, SIZE_MAX, &lg, states.data(), scores.data(),
                                      parents.data(), tokens.data()),
            TREEMASK_ERR_OUT_OF_RANGE);
  unchanged();
  treemask_beam_options o;
  treemask_beam_options_init(&o);
  o.beam_width = 0;
  treemask_beam *b = nullptr;
  EXPECT_EQ(treemask_beam_create(&o, &b), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  treemask_beam_free(nullptr);
}

// The batch form against a reference made of the C API's matchers: a
// slot's candidates are its matcher's next_tokens, the winners are clones of
// their parents that accepted the token. Matchers carry a length budget on
// some requests (a decoding mode: next_tokens then offers only branches that
// can end in time).
void run_batch_search(uint64_t seed, size_t n_threads) {
  std::mt19937_64 rng(seed);
  const int32_t vocab = 2 + static_cast<int32_t>(rng() % 50);
  const int32_t stop = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  const auto paths = random_paths(rng, vocab, stop, 1 + rng() % 6, 1 + rng() % 30);
  testutil::TrieHandle trie;
  ASSERT_EQ(testutil::make_trie(paths, vocab, {stop}, trie), TREEMASK_OK) << last_error();
  const size_t B = 1 + rng() % 8;
  const size_t n_requests = 1 + rng() % 3;
  const size_t n_slots = n_requests * B;
  const size_t extra = rng() % 2;  // a slot past the step's, left untouched
  SCOPED_TRACE("seed " + std::to_string(seed) + " B " + std::to_string(B));

  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = n_slots + extra;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  std::vector<testutil::MatcherHandle> ref(n_slots);
  for (size_t i = 0; i < n_slots + extra; ++i) {
    treemask_matcher *m = nullptr;
    ASSERT_EQ(treemask_matcher_create(trie.p, nullptr, &m), TREEMASK_OK);
    if ((i / B) % 2 == 1) {
      ASSERT_EQ(treemask_matcher_set_remaining_tokens(m, 1 + static_cast<int64_t>(rng() % 4)),
                TREEMASK_OK);
    }
    ASSERT_EQ(treemask_batch_set_matcher(batch, i, m), TREEMASK_OK);
    if (i < n_slots) {
      ref[i] = testutil::MatcherHandle(m);
    } else {
      treemask_matcher_free(m);
    }
  }
  Beam beam(B, n_threads);
  std::vector<float> scores(n_slots, kNegInf);
  for (size_t r = 0; r < n_requests; ++r) scores[r * B] = 0.0f;
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const auto lse = treemask::kernels::logsumexp_best();
  for (int step = 0; step < 10; ++step) {
    std::vector<float> logits(n_slots * static_cast<size_t>(vocab));
    for (auto &x : logits) x = rng() % 19 == 0 ? 1.0f : dist(rng);
    // Reference selection.
    std::vector<int32_t> want_p(n_slots, -1), want_t(n_slots, -1);
    std::vector<float> want_s(n_slots, kNegInf);
    for (size_t r = 0; r < n_requests; ++r) {
      std::vector<BeamCandidate> cands;
      for (size_t b = 0; b < B; ++b) {
        const size_t slot = r * B + b;
        if (!(scores[slot] > kNegInf)) continue;
        if (treemask_matcher_is_terminated(ref[slot].p)) {
          cands.push_back({scores[slot], static_cast<int32_t>(b), stop, 0});
          continue;
        }
        const float *row = logits.data() + slot * static_cast<size_t>(vocab);
        const float z = lse(row, DType::kF32, static_cast<size_t>(vocab));
        std::vector<int32_t> allowed(static_cast<size_t>(vocab) + 1);
        allowed.resize(treemask_matcher_next_tokens(ref[slot].p, allowed.data(), allowed.size()));
        for (int32_t t : allowed) {
          const float sc = scores[slot] + (row[t] - z);
          if (sc > kNegInf) cands.push_back({sc, static_cast<int32_t>(b), t, 0});
        }
      }
      std::sort(cands.begin(), cands.end(), header_rank);
      for (size_t i = 0; i < std::min(B, cands.size()); ++i) {
        want_p[r * B + i] = cands[i].beam;
        want_t[r * B + i] = cands[i].token;
        want_s[r * B + i] = cands[i].score;
      }
    }
    treemask_logits lg;
    treemask_logits_init(&lg);
    lg.data = logits.data();
    std::vector<int32_t> parents(n_slots), tokens(n_slots);
    ASSERT_EQ(treemask_beam_step_batch(beam.p, batch, n_requests, &lg, scores.data(),
                                       parents.data(), tokens.data()),
              TREEMASK_OK)
        << last_error();
    ASSERT_EQ(parents, want_p) << "step " << step;
    ASSERT_EQ(tokens, want_t) << "step " << step;
    ASSERT_EQ(scores, want_s) << "step " << step;
    // The reference's new matchers: clones of the parents that accepted.
    std::vector<testutil::MatcherHandle> next(n_slots);
    for (size_t i = 0; i < n_slots; ++i) {
      const size_t src = want_p[i] < 0 ? i : i / B * B + static_cast<size_t>(want_p[i]);
      treemask_matcher *c = nullptr;
      ASSERT_EQ(treemask_matcher_clone(ref[src].p, &c), TREEMASK_OK);
      next[i] = testutil::MatcherHandle(c);
      if (want_t[i] >= 0) {
        bool ok = false;
        ASSERT_EQ(treemask_matcher_accept_token(c, want_t[i], &ok), TREEMASK_OK);
        ASSERT_TRUE(ok);
      }
    }
    ref = std::move(next);
    for (size_t i = 0; i < n_slots; ++i) {
      if (!(scores[i] > kNegInf)) continue;  // dead slots keep an old matcher
      treemask_matcher *m = treemask_batch_get_matcher(batch, i);
      ASSERT_EQ(treemask_matcher_is_terminated(m), treemask_matcher_is_terminated(ref[i].p));
      std::vector<int32_t> a(static_cast<size_t>(vocab) + 1), b(a.size());
      a.resize(treemask_matcher_next_tokens(m, a.data(), a.size()));
      b.resize(treemask_matcher_next_tokens(ref[i].p, b.data(), b.size()));
      ASSERT_EQ(a, b) << "step " << step << " slot " << i;
    }
    if (extra) {
      // Untouched: still at the root.
      EXPECT_EQ(treemask_matcher_rollback_depth(treemask_batch_get_matcher(batch, n_slots)), 0u);
    }
  }
  treemask_batch_free(batch);
}

TEST(BeamStep, BatchFormMatchesMatcherReference) {
  const int n = testutil::scaled(150);
  for (int i = 0; i < n; ++i) {
    run_batch_search(9000 + static_cast<uint64_t>(i), 1 + static_cast<size_t>(i % 2));
    if (HasFatalFailure()) return;
  }
}

TEST(BeamStep, BatchFormBadArguments) {
  testutil::TrieHandle trie;
  ASSERT_EQ(testutil::make_trie({{3, 4}}, 8, {0}, trie), TREEMASK_OK);
  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 2;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  Beam beam(2, 1);
  std::vector<float> logits(3 * 8, 0.0f), scores{0, kNegInf, kNegInf};
  std::vector<int32_t> parents(3), tokens(3);
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = logits.data();
  EXPECT_EQ(
      treemask_beam_step_batch(beam.p, batch, 1, &lg, scores.data(), parents.data(), tokens.data()),
      TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("slot 0 of the batch is empty"), std::string::npos) << last_error();
  EXPECT_EQ(
      treemask_beam_step_batch(beam.p, batch, 2, &lg, scores.data(), parents.data(), tokens.data()),
      TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("the batch has 2"), std::string::npos) << last_error();
  treemask_batch_free(batch);
}

TEST(TopK, MatchesBruteForce) {
  std::mt19937_64 rng(99);
  const int n = testutil::scaled(300);
  for (int round = 0; round < n; ++round) {
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 60);
    const int32_t stop = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    const auto paths = random_paths(rng, vocab, stop, 1 + rng() % 5, 1 + rng() % 30);
    const Oracle oracle(paths, {stop});
    testutil::TrieHandle trie;
    ASSERT_EQ(testutil::make_trie(paths, vocab, {stop}, trie), TREEMASK_OK) << last_error();
    // Rows at random reachable prefixes, the reserved states included.
    std::vector<Path> prefixes(oracle.prefixes.begin(), oracle.prefixes.end());
    const size_t n_rows = 1 + rng() % 6;
    std::vector<Hyp> hyps(n_rows);
    std::vector<uint32_t> states(n_rows);
    for (size_t i = 0; i < n_rows; ++i) {
      const uint64_t pick = rng() % 10;
      hyps[i] = pick == 0   ? Hyp{{}, true, false}
                : pick == 1 ? Hyp{{}, false, true}
                            : Hyp{prefixes[rng() % prefixes.size()], false, false};
      states[i] = state_of(trie.p, hyps[i]);
    }
    const DType dtype = static_cast<DType>(rng() % 3);
    const bool log_probs = rng() % 3 == 0;
    Rows rows(dtype, n_rows, static_cast<size_t>(vocab));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    for (size_t i = 0; i < n_rows; ++i) {
      for (int32_t c = 0; c < vocab; ++c) {
        rows.set(i, static_cast<size_t>(c),
                 rng() % 13 == 0  ? kNegInf
                 : rng() % 7 == 0 ? 0.5f
                                  : dist(rng));
      }
    }
    const size_t k = rng() % 12;
    treemask_logits lg;
    treemask_logits_init(&lg);
    lg.data = rows.bytes.data();
    lg.dtype = static_cast<int32_t>(dtype);
    lg.log_probs = log_probs;
    std::vector<int32_t> tok(n_rows * k + 1, -7);
    std::vector<float> sc(n_rows * k + 1, -7);
    std::vector<size_t> counts(n_rows, 99);
    ASSERT_EQ(treemask_trie_topk_states(trie.p, states.data(), n_rows, &lg, k, tok.data(),
                                        sc.data(), counts.data()),
              TREEMASK_OK)
        << last_error();
    const auto lse = treemask::kernels::logsumexp_best();
    for (size_t i = 0; i < n_rows; ++i) {
      const float z = log_probs ? 0.0f : lse(rows.row(i), dtype, static_cast<size_t>(vocab));
      std::vector<int32_t> allowed;
      if (!hyps[i].terminated && !hyps[i].failed) allowed = oracle.children(hyps[i].prefix);
      if (hyps[i].terminated || hyps[i].failed || oracle.terminal(hyps[i].prefix))
        allowed.push_back(stop);
      std::vector<BeamCandidate> all;
      for (int32_t t : allowed) {
        const float s = 0.0f + (rows.value(i, static_cast<size_t>(t)) - z);
        if (s > kNegInf) all.push_back({s, 0, t, 0});
      }
      std::sort(all.begin(), all.end(), header_rank);
      const size_t want = std::min(k, all.size());
      ASSERT_EQ(counts[i], want) << "round " << round << " row " << i;
      for (size_t j = 0; j < want; ++j) {
        EXPECT_EQ(tok[i * k + j], all[j].token) << "round " << round;
        EXPECT_EQ(sc[i * k + j], all[j].score) << "round " << round;
      }
    }
  }
}

}  // namespace
