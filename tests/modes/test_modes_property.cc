// Property test of the decoding modes: random tries, random mode options
// (multi-label, leaves-only, think mode, length budget, label filters, stop
// override) and random walks through the public C API, compared at every
// step with the brute-force model of tests/common/oracle_modes.h: every
// mask bit for bit, every query, and speculative accepts and draft fills
// against step-by-step accepts and fills.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "modes/modes_util.h"

namespace {

using modes_util::ExclusionHandle;
using modes_util::MatcherHandle;
using modes_util::TrieHandle;
using oracle_modes::Phase;

constexpr int32_t kVocabs[] = {8, 16, 33, 64, 100, 1000};

struct Pair {
  MatcherHandle real;
  oracle_modes::Matcher model;
};

std::string list(const std::vector<int32_t> &v) {
  std::string s = "[";
  for (int32_t t : v) s += std::to_string(t) + " ";
  return s + "]";
}

std::string describe(const oracle_modes::Matcher &m) {
  const oracle_modes::Options &o = m.options();
  return "model: phase " + std::to_string(static_cast<int>(m.phase())) + " prefix " +
         list(m.prefix()) + " accepted " + std::to_string(m.accepted()) + "; options: sep " +
         list(o.separator) + " max_labels " + std::to_string(o.max_labels) + " leaves_only " +
         std::to_string(o.leaves_only) + " think_end " + list(o.think_end) + " begin " +
         std::to_string(o.think_begin) + " start_in " + std::to_string(o.start_in_thinking) +
         " max_thinking " + std::to_string(o.max_thinking) + " max_new " +
         std::to_string(o.max_new_tokens) + " stops " + list(m.stops()) + " twst " +
         std::to_string(o.terminate_without_stop_token) + " filter " +
         std::to_string(o.shared_banned.size()) + "/" + std::to_string(o.banned.size()) + "/" +
         (o.allowed ? std::to_string(o.allowed->size()) : "none");
}

std::vector<int32_t> row_for(const std::vector<int32_t> &allowed, size_t words) {
  return oracle::expected_row(allowed, words);
}

void check_state(const Pair &p, std::mt19937_64 &rng, int32_t vocab) {
  treemask_matcher *m = p.real.p;
  const oracle_modes::Matcher &o = p.model;
  SCOPED_TRACE(describe(o) + " | " + modes_util::debug_string(m));
  const size_t words = treemask_bitmask_words(vocab);
  const size_t bitmask_row_words = words + rng() % 2;
  std::vector<int32_t> row(bitmask_row_words);
  for (auto &w : row) w = static_cast<int32_t>(rng());
  bool need_apply = (rng() & 1) != 0;
  const treemask_status fs = treemask_matcher_fill_next_token_bitmask(
      m, row.data(), bitmask_row_words, nullptr, &need_apply);
  EXPECT_EQ(fs, o.phase() == Phase::kFailed ? TREEMASK_ERR_INVALID_STATE : TREEMASK_OK);
  const auto allowed = o.allowed();
  ASSERT_EQ(row, row_for(allowed, bitmask_row_words));
  EXPECT_EQ(need_apply, allowed.size() != static_cast<size_t>(vocab));
  ASSERT_EQ(testutil::next_tokens(m), o.next_tokens());
  ASSERT_EQ(testutil::forced_tokens(m), o.forced_tokens());
  EXPECT_EQ(testutil::label_ids(m), o.label_ids());
  EXPECT_EQ(modes_util::produced_labels(m), o.produced_labels());
  EXPECT_EQ(treemask_matcher_is_terminated(m), o.is_terminated());
  EXPECT_EQ(treemask_matcher_is_thinking(m), o.is_thinking());
  EXPECT_EQ(treemask_matcher_can_terminate(m), o.can_terminate());
  EXPECT_EQ(treemask_matcher_rollback_depth(m), o.rollback_depth());
  EXPECT_EQ(treemask_matcher_remaining_tokens(m), o.remaining_tokens());
  EXPECT_EQ(modes_util::stop_tokens(m), o.stops());

  // A budget for this fill only.
  if (o.phase() != Phase::kFailed && rng() % 2) {
    const int64_t r = static_cast<int64_t>(rng() % 9);
    std::fill(row.begin(), row.end(), -1);
    treemask_budget_fill_options fo;
    treemask_budget_fill_options_init(&fo);
    fo.remaining_tokens = r;
    ASSERT_EQ(treemask_matcher_fill_next_token_bitmask(m, row.data(), bitmask_row_words, &fo.fill,
                                                       nullptr),
              TREEMASK_OK)
        << modes_util::last_error();
    ASSERT_EQ(row, row_for(o.allowed(r), bitmask_row_words)) << "per-fill budget " << r;
  }
}

// Tokens that occur on an edge, and those that follow a terminal node.
struct TokenUse {
  std::set<int32_t> on_edge, after_terminal, root_children;
};

TokenUse token_use(const oracle::Trie &t) {
  TokenUse u;
  for (const auto &s : t.seqs) {
    u.on_edge.insert(s.begin(), s.end());
    for (size_t i = 0; i <= s.size(); ++i) {
      const oracle::Seq prefix(s.begin(), s.begin() + static_cast<long>(i));
      if (t.terminal(prefix) && i < s.size()) u.after_terminal.insert(s[i]);
    }
    if (!s.empty()) u.root_children.insert(s[0]);
  }
  return u;
}

// Random options that are valid by construction (errors have their own tests).
oracle_modes::Options random_options(std::mt19937_64 &rng, const oracle::RandomTrie &rt) {
  const oracle::Trie &t = rt.model;
  const TokenUse use = token_use(t);
  oracle_modes::Options o;
  auto pick = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  auto random_token = [&](auto ok) -> int32_t {
    for (int tries = 0; tries < 50; ++tries) {
      // Favour tokens the trie uses, so partial matches and conflicts are near.
      const int32_t tok =
          (pick(0, 1) && !use.on_edge.empty())
              ? *std::next(use.on_edge.begin(), pick(0, int32_t(use.on_edge.size()) - 1))
              : pick(0, t.vocab - 1);
      if (ok(tok)) return tok;
    }
    return -1;
  };
  o.failure_policy = pick(0, 2);
  o.terminate_without_stop_token = pick(0, 3) == 0;
  o.max_rollback_tokens = pick(0, 2) == 0 ? size_t(pick(1, 4)) : 0;
  o.leaves_only = pick(0, 3) == 0;
  std::vector<int32_t> stops = t.stops;
  if (pick(0, 4) == 0) {
    const int32_t s = random_token([&](int32_t x) { return !use.on_edge.count(x); });
    if (s >= 0) {
      o.override_stops = {s};
      if (pick(0, 1)) o.override_stops.push_back(stops[0]);  // may repeat: merged
      stops = o.override_stops;
    }
  }
  auto is_stop = [&](int32_t x) { return std::find(stops.begin(), stops.end(), x) != stops.end(); };
  o.pad_token = pick(0, 2) == 0 ? pick(0, t.vocab - 1) : -1;
  if (pick(0, 1)) {
    const int32_t first =
        random_token([&](int32_t x) { return !is_stop(x) && !use.after_terminal.count(x); });
    if (first >= 0) {
      o.separator = {first};
      if (pick(0, 1)) {
        const int32_t second = random_token([&](int32_t x) { return !is_stop(x); });
        if (second >= 0) o.separator.push_back(second);
      }
      o.max_labels = pick(0, 2) == 0 ? size_t(pick(1, 3)) : 0;
    }
  }
  if (pick(0, 2) == 0) {
    o.start_in_thinking = pick(0, 1) == 1;
    const int32_t begin = random_token([&](int32_t x) {
      return !is_stop(x) && (o.start_in_thinking || !use.root_children.count(x)) &&
             (o.separator.empty() || x != o.separator[0]);
    });
    if (pick(0, 1)) o.think_begin = begin;
    if (o.think_begin < 0) o.start_in_thinking = true;
    const int len = pick(1, 3);
    for (int i = 0; i < len; ++i) {
      const int32_t tok =
          random_token([&](int32_t x) { return !is_stop(x) && x != o.think_begin; });
      if (tok >= 0) o.think_end.push_back(tok);
    }
    // Repeat the first token sometimes: "a a b" has partial matches that restart.
    if (!o.think_end.empty() && pick(0, 2) == 0)
      o.think_end.insert(o.think_end.begin(), o.think_end[0]);
    if (o.think_end.empty()) {
      o.think_begin = -1;
      o.start_in_thinking = false;
    }
    o.max_thinking = o.think_end.empty() || pick(0, 1) ? -1 : pick(0, 5);
  }
  if (pick(0, 2) == 0) o.max_new_tokens = pick(0, 12);
  if (pick(0, 2) == 0) {
    std::set<int64_t> ids;
    for (const auto &[seq, labels] : t.labels) ids.insert(labels.begin(), labels.end());
    for (int64_t id : ids) {
      const int r = pick(0, 9);
      if (r == 0) o.shared_banned.insert(id);
      if (r == 1) o.banned.insert(id);
    }
    if (pick(0, 2) == 0) {
      o.allowed.emplace();
      for (int64_t id : ids) {
        if (pick(0, 2)) o.allowed->insert(id);
      }
      o.allowed->insert(99999);  // an id no path carries is ignored
    }
  }
  return o;
}

// Creates the real matcher and its label filter; the model drops the filter
// when the library (rightly) refuses it.
bool create_pair(treemask_trie *trie, const oracle::RandomTrie &rt, oracle_modes::Options o,
                 std::vector<std::unique_ptr<Pair>> &pairs) {
  const treemask_mode_options c = modes_util::c_options(o);
  treemask_matcher *m = nullptr;
  EXPECT_EQ(treemask_matcher_create(trie, &c.matcher, &m), TREEMASK_OK) << modes_util::last_error();
  if (!m) return false;
  auto pair = std::unique_ptr<Pair>(new Pair{MatcherHandle(m), oracle_modes::Matcher(rt.model, o)});
  const bool filtered = !o.shared_banned.empty() || !o.banned.empty() || o.allowed;
  if (filtered) {
    const std::vector<int64_t> shared(o.shared_banned.begin(), o.shared_banned.end());
    const std::vector<int64_t> banned(o.banned.begin(), o.banned.end());
    std::vector<int64_t> allowed;
    if (o.allowed) allowed.assign(o.allowed->begin(), o.allowed->end());
    treemask_exclusion_set *s = nullptr;
    EXPECT_EQ(treemask_exclusion_set_create(trie, shared.data(), shared.size(), &s), TREEMASK_OK);
    ExclusionHandle set(s);
    const treemask_status st = treemask_matcher_set_label_filter(
        m, s, banned.data(), banned.size(), o.allowed ? allowed.data() : nullptr, allowed.size());
    const bool possible = pair->model.dist({}, {}) < oracle_modes::kFar;
    EXPECT_EQ(st, possible ? TREEMASK_OK : TREEMASK_ERR_INVALID_ARGUMENT)
        << modes_util::last_error();
    if (st != TREEMASK_OK) {
      auto &fo = pair->model.filter_options();
      fo.shared_banned.clear();
      fo.banned.clear();
      fo.allowed.reset();
    }
  }
  pairs.push_back(std::move(pair));
  return true;
}

int32_t random_token(std::mt19937_64 &rng, const oracle_modes::Matcher &o, int32_t vocab) {
  const auto allowed = o.allowed();
  const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
  // While thinking, tokens of the end sequence make partial matches that
  // break and restart ("a a a b" for the end "a a b").
  const auto &end = o.options().think_end;
  if (o.is_thinking() && kind < 10) return end[rng() % end.size()];
  if (kind < 14 && !allowed.empty()) return allowed[rng() % allowed.size()];
  if (kind < 16) return o.stops()[rng() % o.stops().size()];
  if (kind == 16) return -1;
  return std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
}

// A draft: mostly tokens a walk would take, sometimes a wrong one.
std::vector<int32_t> random_draft(std::mt19937_64 &rng, const oracle_modes::Matcher &start,
                                  int32_t vocab) {
  oracle_modes::Matcher walk = start;
  std::vector<int32_t> draft;
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    const int32_t t = random_token(rng, walk, vocab);
    draft.push_back(t);
    bool ok = false;
    walk.accept(t, &ok, false);
  }
  return draft;
}

void check_draft_fill(const Pair &p, std::mt19937_64 &rng, int32_t vocab) {
  const oracle_modes::Matcher &o = p.model;
  if (o.phase() == Phase::kFailed) return;
  const std::vector<int32_t> draft = random_draft(rng, o, vocab);
  const size_t n = draft.size();
  std::vector<int32_t> parents;
  const bool tree = rng() % 2 == 0;
  for (size_t i = 0; tree && i < n; ++i)
    parents.push_back(static_cast<int32_t>(rng() % (i + 1)) - 1);
  const size_t words = treemask_bitmask_words(vocab) + rng() % 2;
  std::vector<int32_t> rows((n + 1) * words, -5);
  size_t n_valid = 0;
  ASSERT_EQ(
      treemask_matcher_fill_draft_bitmasks(p.real.p, draft.data(), tree ? parents.data() : nullptr,
                                           n, rows.data(), rows.size(), words, &n_valid),
      TREEMASK_OK)
      << modes_util::last_error();
  // Expected: each node's state is its parent's plus its token, step by step.
  std::vector<std::unique_ptr<oracle_modes::Matcher>> states(n + 1);
  states[0] = std::make_unique<oracle_modes::Matcher>(o);
  size_t valid = 1;
  ASSERT_EQ(std::vector<int32_t>(rows.begin(), rows.begin() + long(words)),
            row_for(o.allowed(), words));
  for (size_t i = 0; i < n; ++i) {
    const size_t from = tree ? size_t(parents[i] + 1) : i;
    std::vector<int32_t> want(words, 0);
    if (states[from]) {
      auto next = std::make_unique<oracle_modes::Matcher>(*states[from]);
      bool ok = false;
      next->accept(draft[i], &ok, false);
      if (ok) {
        want = row_for(next->allowed(), words);
        states[i + 1] = std::move(next);
        ++valid;
      }
    }
    ASSERT_EQ(std::vector<int32_t>(rows.begin() + long((i + 1) * words),
                                   rows.begin() + long((i + 2) * words)),
              want)
        << "draft row " << i + 1 << (tree ? " (tree)" : " (chain)");
  }
  EXPECT_EQ(n_valid, valid);
}

void run_walk(const oracle::RandomTrie &rt, treemask_trie *trie, std::mt19937_64 &rng, int steps) {
  const int32_t vocab = rt.vocab;
  std::vector<std::unique_ptr<Pair>> pairs;
  if (!create_pair(trie, rt, random_options(rng, rt), pairs)) return;
  for (int step = 0; step < steps; ++step) {
    Pair &p = *pairs[rng() % pairs.size()];
    ASSERT_NO_FATAL_FAILURE(check_state(p, rng, vocab));
    const int action = std::uniform_int_distribution<int>(0, 99)(rng);
    if (action < 60) {
      const int32_t t = random_token(rng, p.model, vocab);
      bool got = true, want = true;
      ASSERT_EQ(treemask_matcher_accept_token(p.real.p, t, &got), p.model.accept(t, &want))
          << "token " << t;
      ASSERT_EQ(got, want) << "token " << t << ": " << modes_util::last_error();
    } else if (action < 68) {
      const std::vector<int32_t> draft = random_draft(rng, p.model, vocab);
      size_t got = 99;
      const treemask_status s =
          treemask_matcher_accept_tokens(p.real.p, draft.data(), draft.size(), &got);
      size_t want = 0;
      treemask_status ws =
          p.model.phase() == Phase::kFailed ? TREEMASK_ERR_INVALID_STATE : TREEMASK_OK;
      for (int32_t t : draft) {
        if (ws != TREEMASK_OK) break;
        if (p.model.is_terminated()) break;
        bool ok = false;
        ws = p.model.accept(t, &ok, false);
        if (ws != TREEMASK_OK || !ok) break;
        ++want;
      }
      ASSERT_EQ(s, ws);
      ASSERT_EQ(got, want);
    } else if (action < 74) {
      ASSERT_NO_FATAL_FAILURE(check_draft_fill(p, rng, vocab));
    } else if (action < 82) {
      const size_t n = rng() % 4;
      ASSERT_EQ(treemask_matcher_rollback(p.real.p, n), p.model.rollback(n)) << "rollback " << n;
    } else if (action < 88) {
      treemask_matcher *c = nullptr;
      const treemask_status s = treemask_matcher_clone(p.real.p, &c);
      if (p.model.phase() == Phase::kFailed) {
        ASSERT_EQ(s, TREEMASK_ERR_INVALID_STATE);
      } else {
        ASSERT_EQ(s, TREEMASK_OK);
        pairs.push_back(std::unique_ptr<Pair>(new Pair{MatcherHandle(c), p.model}));
        if (pairs.size() > 4) pairs.erase(pairs.begin() + static_cast<long>(rng() % pairs.size()));
      }
    } else if (action < 91) {
      treemask_matcher_reset(p.real.p);
      p.model.reset();
    } else if (action < 95) {
      const int64_t r = rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % 10);
      ASSERT_EQ(treemask_matcher_set_remaining_tokens(p.real.p, r), TREEMASK_OK);
      p.model.set_remaining(r);
    } else {
      const auto chain = p.model.forced_tokens();
      std::vector<int32_t> got(chain.size() + 1, -9);
      size_t n = 0;
      const treemask_status s =
          treemask_matcher_accept_forced_tokens(p.real.p, got.data(), got.size(), &n);
      if (p.model.phase() == Phase::kFailed) {
        ASSERT_EQ(s, TREEMASK_ERR_INVALID_STATE);
        continue;
      }
      ASSERT_EQ(s, TREEMASK_OK) << modes_util::last_error();
      ASSERT_EQ(n, chain.size());
      got.resize(n);
      ASSERT_EQ(got, chain);
      for (int32_t t : chain) {
        bool ok = false;
        p.model.accept(t, &ok);
        ASSERT_TRUE(ok);
      }
    }
  }
  for (auto &p : pairs) ASSERT_NO_FATAL_FAILURE(check_state(*p, rng, vocab));
}

TEST(ModesProperty, RandomTriesAndModesAgreeWithOracle) {
  const int n_tries = testutil::scaled(3000);
  std::mt19937_64 rng(20261123);
  for (int i = 0; i < n_tries; ++i) {
    const int32_t vocab = kVocabs[i % std::size(kVocabs)];
    const uint64_t seed = rng();
    SCOPED_TRACE("trie " + std::to_string(i) + " vocab " + std::to_string(vocab) + " seed " +
                 std::to_string(seed));
    std::mt19937_64 local(seed);
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    TrieHandle trie;
    ASSERT_EQ(modes_util::make_random_trie(rt, trie), TREEMASK_OK) << modes_util::last_error();
    ASSERT_NO_FATAL_FAILURE(run_walk(rt, trie.p, local, 50));
  }
}

// Length budget: a walk that only ever takes allowed tokens is at a complete
// label (or has terminated) whenever the budget runs out.
TEST(ModesProperty, LengthBudgetNeverCutsALabel) {
  const int n_tries = testutil::scaled(1500);
  std::mt19937_64 rng(77);
  int exhausted = 0;
  for (int i = 0; i < n_tries; ++i) {
    const int32_t vocab = kVocabs[i % 4];
    std::mt19937_64 local(rng());
    const oracle::RandomTrie rt = oracle::random_trie(local, vocab);
    TrieHandle trie;
    ASSERT_EQ(modes_util::make_random_trie(rt, trie), TREEMASK_OK) << modes_util::last_error();
    oracle_modes::Options o = random_options(local, rt);
    o.failure_policy = TREEMASK_FAILURE_REJECT;
    o.max_thinking = -1;
    oracle_modes::Matcher model(rt.model, o);
    const int64_t shortest = model.dist({}, {});
    if (shortest >= oracle_modes::kFar) continue;  // the filter leaves nothing: not this test
    // A budget that can hold the shortest way through thinking to a label.
    const int64_t think_cost = o.think_end.empty() ? 0 : int64_t(o.think_end.size()) + 1;
    const int64_t budget = shortest + think_cost + static_cast<int64_t>(local() % 8);
    o.max_new_tokens = budget;
    std::vector<std::unique_ptr<Pair>> pairs;
    ASSERT_TRUE(create_pair(trie.p, rt, o, pairs));
    Pair &p = *pairs[0];
    SCOPED_TRACE("trie " + std::to_string(i) + " budget " + std::to_string(budget));
    for (int64_t used = 0; used < budget; ++used) {
      if (treemask_matcher_is_terminated(p.real.p)) break;
      const auto allowed = modes_util::fill(p.real.p, vocab);
      ASSERT_EQ(allowed, p.model.allowed());
      ASSERT_FALSE(allowed.empty());
      const int32_t tok = allowed[local() % allowed.size()];
      ASSERT_TRUE(modes_util::accept(p.real.p, tok)) << tok;
      bool ok = false;
      p.model.accept(tok, &ok);
      if (used + 1 == budget && !treemask_matcher_is_terminated(p.real.p)) {
        ++exhausted;
        // The budget is spent: the sequence must stand at a complete label.
        EXPECT_TRUE(treemask_matcher_can_terminate(p.real.p)) << modes_util::debug_string(p.real.p);
        EXPECT_FALSE(treemask_matcher_is_thinking(p.real.p));
        EXPECT_EQ(p.model.phase(), Phase::kLabel);
        EXPECT_EQ(treemask_matcher_remaining_tokens(p.real.p), 0);
      }
    }
  }
  EXPECT_GT(exhausted, n_tries / 20) << "too few walks ran out of budget to test anything";
}

}  // namespace
