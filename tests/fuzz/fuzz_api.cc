// Fuzz target: a differential API-sequence fuzzer. The input builds a random
// trie, then drives a sequence of calls on matchers (create, fill, accept,
// drafts, jump-forward, rollback, clone, reset, queries, free), a batch
// (set, fill, bound incremental fill, accept, reorder, borrowed matchers)
// and state arrays (fill, advance), and compares every result, every mask
// row and every counter with the brute-force oracle of tests/common/oracle.h.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/oracle.h"
#include "common/test_util.h"
#include "fuzz/fuzz_input.h"

namespace {

using oracle::Seq;

// ---- The oracle side ----

// Expected counters, kept beside each oracle matcher.
struct Counts {
  uint64_t fills = 0, accepted = 0, rejected = 0, fail_closed = 0, rolled_back = 0, resets = 0;
  bool operator==(const Counts &) const = default;
};

// A matcher as the oracle sees it.
struct Twin {
  oracle::Matcher o;
  Counts counts;
};

// A state-array entry as the rules of treemask.h section 6 describe it.
struct StateModel {
  enum Kind { kNode, kTerminated, kFailed } kind = kNode;
  Seq prefix;
};

struct World {
  fuzz::Input in;
  int32_t vocab = 0;
  size_t words = 0;  // treemask_bitmask_words(vocab)
  oracle::Trie model;
  testutil::TrieHandle trie;
  uint64_t n_nodes = 0;
  // Node ids seen so far for each prefix: one id per prefix and vice versa.
  std::map<Seq, uint32_t> node_of;
  std::map<uint32_t, Seq> prefix_of;

  std::vector<std::pair<testutil::MatcherHandle, Twin>> matchers;
  treemask_batch *batch = nullptr;
  size_t n_slots = 0;
  std::vector<std::optional<Twin>> slots;
  std::vector<int32_t> bound;  // the bound buffer, empty when none
  size_t bound_words = 0;
  std::vector<std::pair<uint32_t, StateModel>> states;

  explicit World(const uint8_t *data, size_t size) : in(data, size) {}
  ~World() { treemask_batch_free(batch); }
};

int32_t pick_token(World &w, const std::vector<int32_t> &allowed) {
  if (!allowed.empty() && w.in.range(0, 3) != 0) {
    return allowed[w.in.range(0, static_cast<int64_t>(allowed.size()) - 1)];
  }
  return static_cast<int32_t>(w.in.range(-2, w.vocab + 1));
}

void note_node(World &w, const Seq &prefix, uint32_t node) {
  const auto [it, inserted] = w.node_of.emplace(prefix, node);
  FUZZ_CHECK(it->second == node);
  const auto [back, fresh] = w.prefix_of.emplace(node, prefix);
  FUZZ_CHECK(back->second == prefix);
  FUZZ_CHECK(inserted == fresh);
  FUZZ_CHECK(node < w.n_nodes);
}

void check_row(const int32_t *row, size_t bitmask_row_words, const std::vector<int32_t> &allowed) {
  const auto want = oracle::expected_row(allowed, bitmask_row_words);
  FUZZ_CHECK(std::equal(want.begin(), want.end(), row));
}

bool want_need_apply(const World &w, const std::vector<int32_t> &allowed) {
  return allowed.size() != static_cast<size_t>(w.vocab);
}

// ---- Building the trie ----

bool build_trie(World &w) {
  static const int32_t kVocabs[] = {1, 2, 31, 32, 33, 63, 64, 65, 100, 1000, 4097};
  w.vocab = w.in.flag() ? kVocabs[w.in.range(0, 10)] : static_cast<int32_t>(w.in.range(1, 300));
  w.words = treemask_bitmask_words(w.vocab);
  std::set<int32_t> stops;
  const int64_t n_stops = w.in.range(1, std::min<int32_t>(3, w.vocab));
  // An exhausted input reads zeros: stepping on keeps the loop finite.
  for (int64_t step = 0; static_cast<int64_t>(stops.size()) < n_stops; ++step) {
    stops.insert(static_cast<int32_t>((w.in.range(0, w.vocab - 1) + step) % w.vocab));
  }
  std::vector<int32_t> others;
  for (int32_t t = 0; t < w.vocab && others.size() < 4096; ++t) {
    if (!stops.count(t)) others.push_back(t);
  }
  std::vector<int32_t> alphabet;
  for (int64_t i = w.in.range(0, 8); i > 0 && !others.empty(); --i) {
    alphabet.push_back(others[w.in.range(0, static_cast<int64_t>(others.size()) - 1)]);
  }
  std::vector<Seq> paths;
  const int64_t n_paths = w.in.range(1, 24);
  for (int64_t i = 0; i < n_paths; ++i) {
    Seq p(alphabet.empty() ? 0 : w.in.range(0, 6));
    for (auto &t : p) t = alphabet[w.in.range(0, static_cast<int64_t>(alphabet.size()) - 1)];
    paths.push_back(p);
  }
  // A wide node (a root with many children) takes the dense-row cache path.
  if (w.in.range(0, 7) == 0) {
    const Seq prefix = paths[0];
    for (size_t i = 0; i < others.size() && i < 200; ++i) {
      paths.push_back(prefix);
      paths.back().push_back(others[i]);
    }
  }
  const bool explicit_labels = w.in.flag();
  std::vector<int64_t> labels;
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  for (size_t i = 0; i < paths.size(); ++i) {
    tokens.insert(tokens.end(), paths[i].begin(), paths[i].end());
    offsets.push_back(tokens.size());
    const int64_t label = explicit_labels ? w.in.range(-3, 9) : static_cast<int64_t>(i);
    labels.push_back(label);
    w.model.seqs.insert(paths[i]);
    w.model.labels[paths[i]].insert(label);
  }
  w.model.stops.assign(stops.begin(), stops.end());
  w.model.vocab = w.vocab;
  std::vector<int32_t> given_stops(stops.begin(), stops.end());
  if (w.in.flag()) given_stops.push_back(given_stops.front());  // duplicates merge

  static const size_t kCacheBytes[] = {0, 64, size_t{1} << 20};
  treemask_trie_options o = testutil::trie_options(w.vocab, given_stops);
  o.dense_row_cache_bytes = kCacheBytes[w.in.range(0, 2)];
  const treemask_status s =
      treemask_trie_from_paths(&o, tokens.data(), offsets.data(), paths.size(),
                               explicit_labels ? labels.data() : nullptr, &w.trie.p);
  if (s != TREEMASK_OK) std::fprintf(stderr, "%s\n", treemask_last_error());
  FUZZ_CHECK(s == TREEMASK_OK);
  treemask_trie_stats stats;
  stats.struct_size = sizeof(stats);
  FUZZ_CHECK(treemask_trie_get_stats(w.trie.p, &stats) == TREEMASK_OK);
  w.n_nodes = stats.n_nodes;
  note_node(w, {}, TREEMASK_STATE_ROOT);
  return true;
}

// ---- Matcher operations, shared by free matchers and batch slots ----

void check_counts(treemask_matcher *m, const Counts &want) {
  treemask_matcher_counters c;
  c.struct_size = sizeof(c);
  FUZZ_CHECK(treemask_matcher_get_counters(m, &c) == TREEMASK_OK);
  const Counts got{c.n_fills,       c.n_accepted_tokens,    c.n_rejected_tokens,
                   c.n_fail_closed, c.n_rolled_back_tokens, c.n_resets};
  FUZZ_CHECK(got == want);
}

// The oracle's accept, with the counters the library must keep.
treemask_status oracle_accept(Twin &t, int32_t token, bool *accepted) {
  const size_t depth = t.o.history.size();
  const auto phase = t.o.phase;
  const treemask_status s = t.o.accept(token, accepted);
  if (s != TREEMASK_OK) return s;
  if (*accepted) {
    t.counts.accepted += t.o.history.size() > depth;
  } else {
    ++t.counts.rejected;
    t.counts.fail_closed += phase == oracle::Phase::kActive && t.o.phase != phase;
  }
  return s;
}

void do_accept(World &w, treemask_matcher *m, Twin &t) {
  const int32_t token = pick_token(w, t.o.next_tokens());
  bool want = false, got = false;
  const treemask_status expected = oracle_accept(t, token, &want);
  const std::string error_before = treemask_last_error();
  FUZZ_CHECK(treemask_matcher_accept_token(m, token, &got) == expected);
  if (expected == TREEMASK_OK) {
    FUZZ_CHECK(got == want);
    // A rejection is not a failure: the last error stays as it was.
    if (!got) FUZZ_CHECK(treemask_last_error() == error_before);
  }
}

void do_fill(World &w, treemask_matcher *m, Twin &t) {
  const bool short_buffer = w.in.range(0, 15) == 0 && w.words > 0;
  const size_t bitmask_row_words = short_buffer ? w.words - 1 : w.words + w.in.range(0, 2);
  std::vector<int32_t> row(bitmask_row_words + 1, -1);
  bool need_apply = !w.in.flag();
  const treemask_status s = treemask_matcher_fill_next_token_bitmask(
      m, row.data(), bitmask_row_words, nullptr, &need_apply);
  if (short_buffer) {
    FUZZ_CHECK(s == TREEMASK_ERR_BUFFER_TOO_SMALL);
    FUZZ_CHECK(std::all_of(row.begin(), row.end(), [](int32_t x) { return x == -1; }));
    return;
  }
  ++t.counts.fills;
  const bool failed = t.o.phase == oracle::Phase::kFailed;
  FUZZ_CHECK(s == (failed ? TREEMASK_ERR_INVALID_STATE : TREEMASK_OK));
  const auto allowed = t.o.allowed();
  check_row(row.data(), bitmask_row_words, allowed);
  FUZZ_CHECK(row[bitmask_row_words] == -1);  // nothing past the row
  if (!failed) FUZZ_CHECK(need_apply == want_need_apply(w, allowed));
}

void do_rollback(World &w, treemask_matcher *m, Twin &t) {
  const size_t n = static_cast<size_t>(w.in.range(0, 4));
  const treemask_status want = t.o.rollback(n);
  FUZZ_CHECK(treemask_matcher_rollback(m, n) == want);
  if (want == TREEMASK_OK) t.counts.rolled_back += n;
}

void do_reset(treemask_matcher *m, Twin &t) {
  treemask_matcher_reset(m);
  t.o.reset();
  ++t.counts.resets;
}

// accept_tokens: a draft, no failure policy.
void do_draft_accept(World &w, treemask_matcher *m, Twin &t) {
  std::vector<int32_t> draft(static_cast<size_t>(w.in.range(0, 4)));
  oracle::Matcher scout = t.o;
  for (auto &tok : draft) {
    tok = pick_token(w, scout.next_tokens());
    bool ok = false;
    if (scout.accept(tok, &ok) != TREEMASK_OK) break;
  }
  size_t n_accepted = 99;
  const treemask_status s =
      treemask_matcher_accept_tokens(m, draft.data(), draft.size(), &n_accepted);
  if (t.o.phase == oracle::Phase::kFailed) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  size_t want = 0;
  for (int32_t tok : draft) {
    if (t.o.is_terminated()) break;
    oracle::Matcher trial = t.o;
    trial.opts.failure_policy = TREEMASK_FAILURE_REJECT;
    bool ok = false;
    trial.accept(tok, &ok);
    if (!ok) break;
    FUZZ_CHECK(oracle_accept(t, tok, &ok) == TREEMASK_OK && ok);
    ++want;
  }
  FUZZ_CHECK(n_accepted == want);
}

// accept_forced_tokens: the jump-forward chain, in one call.
void do_accept_forced(treemask_matcher *m, Twin &t) {
  int32_t out[8];
  size_t n = 99;
  const treemask_status s = treemask_matcher_accept_forced_tokens(m, out, 8, &n);
  if (t.o.phase == oracle::Phase::kFailed) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  const auto chain = t.o.forced_tokens();
  FUZZ_CHECK(n == chain.size());
  for (size_t i = 0; i < chain.size(); ++i) {
    if (i < 8) FUZZ_CHECK(out[i] == chain[i]);
    bool ok = false;
    FUZZ_CHECK(oracle_accept(t, chain[i], &ok) == TREEMASK_OK && ok);
  }
}

// fill_draft_bitmasks: a chain or a tree of draft tokens, filled without
// changing the matcher.
void do_fill_draft(World &w, treemask_matcher *m, Twin &t) {
  const size_t n = static_cast<size_t>(w.in.range(0, 4));
  const bool tree = w.in.flag();
  std::vector<int32_t> tokens(n), parents(n);
  std::vector<std::optional<oracle::Matcher>> node(n + 1);
  node[0] = t.o;
  for (size_t i = 0; i < n; ++i) {
    parents[i] = tree ? static_cast<int32_t>(w.in.range(-1, static_cast<int64_t>(i) - 1))
                      : static_cast<int32_t>(i) - 1;
    const auto &from = node[parents[i] + 1];
    tokens[i] = pick_token(w, from ? from->next_tokens() : std::vector<int32_t>{});
    if (!from) continue;
    oracle::Matcher next = *from;
    next.opts.failure_policy = TREEMASK_FAILURE_REJECT;
    bool ok = false;
    if (next.accept(tokens[i], &ok) == TREEMASK_OK && ok) node[i + 1] = next;
  }
  const size_t wpr = w.words + w.in.range(0, 1);
  std::vector<int32_t> rows((n + 1) * wpr, -1);
  size_t n_valid = 0;
  const treemask_status s =
      treemask_matcher_fill_draft_bitmasks(m, tokens.data(), tree ? parents.data() : nullptr, n,
                                           rows.data(), rows.size(), wpr, &n_valid);
  if (t.o.phase == oracle::Phase::kFailed) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  size_t valid = 0;
  for (size_t i = 0; i <= n; ++i) {
    valid += node[i].has_value();
    check_row(rows.data() + i * wpr, wpr, node[i] ? node[i]->allowed() : std::vector<int32_t>{});
  }
  FUZZ_CHECK(n_valid == valid);
}

// Every query on a const matcher, and the state-array form of its state.
void do_queries(World &w, treemask_matcher *m, const Twin &t) {
  FUZZ_CHECK(testutil::next_tokens(m) == t.o.next_tokens());
  FUZZ_CHECK(testutil::forced_tokens(m) == t.o.forced_tokens());
  FUZZ_CHECK(testutil::label_ids(m) == t.o.label_ids());
  FUZZ_CHECK(treemask_matcher_is_terminated(m) == t.o.is_terminated());
  FUZZ_CHECK(treemask_matcher_can_terminate(m) == t.o.can_terminate());
  FUZZ_CHECK(treemask_matcher_rollback_depth(m) == t.o.rollback_depth());
  check_counts(m, t.counts);
  uint32_t state = 0;
  FUZZ_CHECK(treemask_matcher_get_state(m, &state) == TREEMASK_OK);
  switch (t.o.phase) {
    case oracle::Phase::kActive: note_node(w, t.o.prefix, state); break;
    case oracle::Phase::kTerminated: FUZZ_CHECK(state == TREEMASK_STATE_TERMINATED); break;
    default: FUZZ_CHECK(state == TREEMASK_STATE_FAILED); break;
  }
}

// ---- Free matchers ----

void create_matcher(World &w) {
  treemask_matcher_options opts;
  treemask_matcher_options_init(&opts);
  opts.failure_policy = static_cast<int32_t>(w.in.range(0, 3));
  opts.terminate_without_stop_token = w.in.flag();
  opts.max_rollback_tokens = static_cast<size_t>(w.in.range(0, 3));
  opts.pad_token = w.in.flag() ? -1 : static_cast<int32_t>(w.in.range(-2, w.vocab));
  treemask_matcher *m = nullptr;
  const treemask_status s = treemask_matcher_create(w.trie.p, &opts, &m);
  const bool valid = opts.failure_policy <= 2 && opts.pad_token >= -1 && opts.pad_token < w.vocab;
  if (!valid) {
    FUZZ_CHECK(s != TREEMASK_OK && m == nullptr);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  oracle::Options o;
  o.failure_policy = opts.failure_policy;
  o.terminate_without_stop_token = opts.terminate_without_stop_token;
  o.max_rollback_tokens = opts.max_rollback_tokens;
  o.pad_token = opts.pad_token;
  w.matchers.emplace_back(testutil::MatcherHandle(m), Twin{oracle::Matcher(w.model, o), {}});
}

void clone_matcher(World &w, size_t i) {
  treemask_matcher *copy = nullptr;
  const treemask_status s = treemask_matcher_clone(w.matchers[i].first.p, &copy);
  const Twin &t = w.matchers[i].second;
  if (t.o.phase == oracle::Phase::kFailed) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE && copy == nullptr);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  w.matchers.emplace_back(testutil::MatcherHandle(copy), Twin{t.o, {}});
}

// ---- The batch ----

void create_batch(World &w) {
  treemask_batch_options o;
  treemask_batch_options_init(&o);
  o.n_slots = static_cast<size_t>(w.in.range(1, 4));
  o.n_threads = static_cast<size_t>(w.in.range(0, 1));
  FUZZ_CHECK(treemask_batch_create(&o, &w.batch) == TREEMASK_OK);
  w.n_slots = o.n_slots;
  w.slots.assign(o.n_slots, std::nullopt);
}

void batch_set(World &w) {
  const size_t slot = static_cast<size_t>(w.in.range(0, static_cast<int64_t>(w.n_slots)));
  const bool empty = w.matchers.empty() || w.in.range(0, 4) == 0;
  const size_t i = empty ? 0 : w.in.range(0, static_cast<int64_t>(w.matchers.size()) - 1);
  const treemask_status s =
      treemask_batch_set_matcher(w.batch, slot, empty ? nullptr : w.matchers[i].first.p);
  if (slot >= w.n_slots) {
    FUZZ_CHECK(s == TREEMASK_ERR_OUT_OF_RANGE);
  } else if (!empty && w.matchers[i].second.o.phase == oracle::Phase::kFailed) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE);
  } else {
    FUZZ_CHECK(s == TREEMASK_OK);
    w.slots[slot] = empty ? std::nullopt : std::optional<Twin>(Twin{w.matchers[i].second.o, {}});
  }
}

// The slots to fill: every occupied one (a NULL list), or a random list,
// possibly empty (a non-NULL pointer with n = 0 fills nothing).
struct SlotList {
  bool all = false;
  std::vector<int32_t> listed{-1};  // listed[0] is a placeholder
  std::vector<size_t> targets;
  const int32_t *ptr() const { return all ? nullptr : listed.data() + 1; }
  size_t size() const { return all ? 0 : listed.size() - 1; }
};

SlotList pick_slots(World &w) {
  SlotList l;
  l.all = w.in.flag();
  for (size_t s = 0; s < w.n_slots; ++s) {
    if (!w.slots[s] || (!l.all && w.in.flag())) continue;
    l.listed.push_back(static_cast<int32_t>(s));
    l.targets.push_back(s);
  }
  return l;
}

// Checks filled rows against the oracle and returns the status the call
// must have returned.
treemask_status expect_batch_rows(World &w, const int32_t *buffer, size_t wpr,
                                  const std::vector<size_t> &targets, const bool *need_apply) {
  treemask_status want = TREEMASK_OK;
  for (size_t s : targets) {
    Twin &t = *w.slots[s];
    ++t.counts.fills;
    const auto allowed = t.o.allowed();
    check_row(buffer + s * wpr, wpr, allowed);
    if (t.o.phase == oracle::Phase::kFailed) {
      want = TREEMASK_ERR_INVALID_STATE;
    } else {
      FUZZ_CHECK(need_apply[s] == want_need_apply(w, allowed));
    }
  }
  return want;
}

void batch_fill(World &w) {
  const SlotList slots = pick_slots(w);
  const bool into_bound = !w.bound.empty() && w.in.flag();
  const size_t wpr = into_bound ? w.bound_words : w.words + w.in.range(0, 1);
  std::vector<int32_t> own(w.n_slots * wpr, -1);
  int32_t *buffer = into_bound ? w.bound.data() : own.data();
  bool need_apply[4] = {};
  const treemask_status s = treemask_batch_fill_next_token_bitmask(
      w.batch, buffer, wpr, slots.ptr(), slots.size(), need_apply);
  FUZZ_CHECK(s == expect_batch_rows(w, buffer, wpr, slots.targets, need_apply));
  if (into_bound) return;
  for (size_t row = 0; row < w.n_slots; ++row) {  // rows not listed are not touched
    if (std::find(slots.targets.begin(), slots.targets.end(), row) != slots.targets.end()) continue;
    FUZZ_CHECK(std::all_of(own.begin() + row * wpr, own.begin() + (row + 1) * wpr,
                           [](int32_t x) { return x == -1; }));
  }
}

void batch_fill_bound(World &w) {
  if (w.bound.empty() || w.in.range(0, 7) == 0) {
    w.bound_words = w.words + w.in.range(0, 1);
    w.bound.assign(w.n_slots * w.bound_words, -1);
    FUZZ_CHECK(treemask_batch_bind_bitmask(w.batch, w.bound.data(), w.bound_words) == TREEMASK_OK);
  }
  if (w.in.range(0, 7) == 0) {  // someone else wrote a row, and says so
    const int32_t row = static_cast<int32_t>(w.in.range(0, static_cast<int64_t>(w.n_slots) - 1));
    std::fill_n(w.bound.begin() + row * w.bound_words, w.bound_words, -1);
    FUZZ_CHECK(treemask_batch_invalidate(w.batch, &row, 1) == TREEMASK_OK);
  }
  const SlotList slots = pick_slots(w);
  const int32_t mode = w.in.flag() ? TREEMASK_FILL_INCREMENTAL : TREEMASK_FILL_FULL;
  bool need_apply[4] = {};
  const treemask_status s =
      treemask_batch_fill_bound(w.batch, slots.ptr(), slots.size(), mode, need_apply);
  FUZZ_CHECK(s == expect_batch_rows(w, w.bound.data(), w.bound_words, slots.targets, need_apply));
}

void batch_accept(World &w) {
  std::vector<int32_t> tokens(w.n_slots, -1);
  bool empty_slot_token = false;
  for (size_t s = 0; s < w.n_slots; ++s) {
    if (w.in.range(0, 3) == 0) continue;
    tokens[s] = pick_token(w, w.slots[s] ? w.slots[s]->o.next_tokens() : std::vector<int32_t>{});
    empty_slot_token |= tokens[s] >= 0 && !w.slots[s];
  }
  bool accepted[4] = {};
  const treemask_status s =
      treemask_batch_accept_tokens(w.batch, tokens.data(), w.n_slots, accepted);
  if (empty_slot_token) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_ARGUMENT);
    return;
  }
  treemask_status want = TREEMASK_OK;
  for (size_t i = 0; i < w.n_slots; ++i) {
    bool ok = true;
    if (tokens[i] >= 0 && oracle_accept(*w.slots[i], tokens[i], &ok) != TREEMASK_OK) {
      want = TREEMASK_ERR_INVALID_STATE;
      ok = false;
    }
    FUZZ_CHECK(accepted[i] == ok);
  }
  FUZZ_CHECK(s == want);
}

void batch_reorder(World &w) {
  std::vector<int32_t> src(w.n_slots);
  for (auto &x : src) x = static_cast<int32_t>(w.in.range(-1, static_cast<int64_t>(w.n_slots)));
  std::vector<int> taken(w.n_slots + 1, 0);
  bool out_of_range = false, failed_twice = false;
  for (int32_t x : src) {
    if (x >= static_cast<int32_t>(w.n_slots)) out_of_range = true;
    if (x >= 0 && x < static_cast<int32_t>(w.n_slots)) ++taken[x];
  }
  for (size_t s = 0; s < w.n_slots; ++s) {
    failed_twice |= taken[s] > 1 && w.slots[s] && w.slots[s]->o.phase == oracle::Phase::kFailed;
  }
  const treemask_status s = treemask_batch_reorder(w.batch, src.data(), src.size());
  if (out_of_range) {
    FUZZ_CHECK(s == TREEMASK_ERR_OUT_OF_RANGE);
    return;
  }
  if (failed_twice) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_STATE);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  std::vector<std::optional<Twin>> next(w.n_slots);
  std::vector<bool> moved(w.n_slots, false);
  for (size_t i = 0; i < w.n_slots; ++i) {
    if (src[i] < 0 || !w.slots[src[i]]) continue;
    next[i] = w.slots[src[i]];
    if (moved[src[i]]) next[i]->counts = {};  // a second taker gets a clone
    moved[src[i]] = true;
  }
  w.slots = std::move(next);
}

// A matcher borrowed from a slot, driven between batch calls.
void batch_borrowed(World &w) {
  const size_t slot = static_cast<size_t>(w.in.range(0, static_cast<int64_t>(w.n_slots) - 1));
  treemask_matcher *m = treemask_batch_get_matcher(w.batch, slot);
  FUZZ_CHECK((m != nullptr) == w.slots[slot].has_value());
  if (!m) return;
  Twin &t = *w.slots[slot];
  switch (w.in.range(0, 3)) {
    case 0: do_accept(w, m, t); break;
    case 1: do_rollback(w, m, t); break;
    case 2: do_fill(w, m, t); break;
    default: do_queries(w, m, t); break;
  }
}

// ---- State arrays ----

StateModel state_of(const Twin &t) {
  switch (t.o.phase) {
    case oracle::Phase::kActive: return {StateModel::kNode, t.o.prefix};
    case oracle::Phase::kTerminated: return {StateModel::kTerminated, {}};
    default: return {StateModel::kFailed, {}};
  }
}

std::vector<int32_t> state_allowed(const World &w, const StateModel &s) {
  if (s.kind != StateModel::kNode) return w.model.stops;
  std::vector<int32_t> out = w.model.children(s.prefix);
  if (w.model.terminal(s.prefix)) out.insert(out.end(), w.model.stops.begin(), w.model.stops.end());
  std::sort(out.begin(), out.end());
  return out;
}

// The advance rule of treemask.h section 6; returns whether t is accepted.
bool state_advance(const World &w, StateModel &s, int32_t t, int32_t policy) {
  if (t < 0) return true;
  const bool stop = w.model.is_stop(t);
  switch (s.kind) {
    case StateModel::kTerminated: return stop;
    case StateModel::kFailed:
      if (stop && policy != TREEMASK_FAILURE_STICKY_ERROR) s.kind = StateModel::kTerminated;
      return s.kind == StateModel::kTerminated;
    case StateModel::kNode: break;
  }
  const auto kids = w.model.children(s.prefix);
  if (std::binary_search(kids.begin(), kids.end(), t)) {
    s.prefix.push_back(t);
    return true;
  }
  if (stop && w.model.terminal(s.prefix)) {
    s.kind = StateModel::kTerminated;
    return true;
  }
  if (policy != TREEMASK_FAILURE_REJECT) s.kind = StateModel::kFailed;
  return false;
}

void check_state_value(World &w, uint32_t value, const StateModel &s) {
  switch (s.kind) {
    case StateModel::kNode: note_node(w, s.prefix, value); break;
    case StateModel::kTerminated: FUZZ_CHECK(value == TREEMASK_STATE_TERMINATED); break;
    case StateModel::kFailed: FUZZ_CHECK(value == TREEMASK_STATE_FAILED); break;
  }
}

void states_add(World &w) {
  if (w.states.size() >= 6) w.states.erase(w.states.begin());
  if (!w.matchers.empty() && w.in.flag()) {
    const auto &[h, t] = w.matchers[w.in.range(0, static_cast<int64_t>(w.matchers.size()) - 1)];
    uint32_t value = 0;
    FUZZ_CHECK(treemask_matcher_get_state(h.p, &value) == TREEMASK_OK);
    w.states.emplace_back(value, state_of(t));
  } else {
    w.states.emplace_back(TREEMASK_STATE_ROOT, StateModel{});
  }
}

void states_fill(World &w) {
  std::vector<uint32_t> values;
  for (const auto &[v, s] : w.states) values.push_back(v);
  const bool bad = !values.empty() && w.in.range(0, 7) == 0;
  if (bad)
    values[w.in.range(0, static_cast<int64_t>(values.size()) - 1)] =
        static_cast<uint32_t>(w.n_nodes + w.in.range(0, 3));
  const size_t wpr = w.words + w.in.range(0, 1);
  std::vector<int32_t> rows(values.size() * wpr + 1, -1);
  const treemask_status s =
      treemask_trie_fill_states(w.trie.p, values.data(), values.size(), rows.data(), wpr);
  if (bad) {
    FUZZ_CHECK(s == TREEMASK_ERR_OUT_OF_RANGE);
    FUZZ_CHECK(std::all_of(rows.begin(), rows.end(), [](int32_t x) { return x == -1; }));
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  for (size_t i = 0; i < w.states.size(); ++i) {
    check_row(rows.data() + i * wpr, wpr, state_allowed(w, w.states[i].second));
  }
  FUZZ_CHECK(rows.back() == -1);
}

void states_advance(World &w) {
  std::vector<uint32_t> values;
  std::vector<int32_t> tokens;
  for (const auto &[v, s] : w.states) {
    values.push_back(v);
    tokens.push_back(w.in.range(0, 4) == 0 ? -1 : pick_token(w, state_allowed(w, s)));
  }
  const int32_t policy = static_cast<int32_t>(w.in.range(0, 3));
  std::vector<uint8_t> accepted(values.size() + 1, 2);
  const treemask_status s =
      treemask_trie_advance_states(w.trie.p, values.data(), tokens.data(), values.size(), policy,
                                   reinterpret_cast<bool *>(accepted.data()));
  if (policy > 2) {
    FUZZ_CHECK(s == TREEMASK_ERR_INVALID_ARGUMENT);
    return;
  }
  FUZZ_CHECK(s == TREEMASK_OK);
  for (size_t i = 0; i < w.states.size(); ++i) {
    StateModel &model = w.states[i].second;
    FUZZ_CHECK(accepted[i] == state_advance(w, model, tokens[i], policy));
    check_state_value(w, values[i], model);
    w.states[i].first = values[i];
  }
  FUZZ_CHECK(accepted.back() == 2);
}

// ---- The call sequence ----

void run(World &w) {
  create_batch(w);
  for (int op = 0; op < 256 && !w.in.empty(); ++op) {
    const int64_t kind = w.in.range(0, 19);
    if (kind == 0 || w.matchers.empty()) {
      if (w.matchers.size() < 8) create_matcher(w);
      continue;
    }
    const size_t i =
        static_cast<size_t>(w.in.range(0, static_cast<int64_t>(w.matchers.size()) - 1));
    treemask_matcher *m = w.matchers[i].first.p;
    Twin &t = w.matchers[i].second;
    switch (kind) {
      case 1:
      case 2: do_fill(w, m, t); break;
      case 3:
      case 4:
      case 5: do_accept(w, m, t); break;
      case 6: do_rollback(w, m, t); break;
      case 7:
        if (w.matchers.size() < 8) clone_matcher(w, i);
        break;
      case 8: do_reset(m, t); break;
      case 9: do_queries(w, m, t); break;
      case 10: w.matchers.erase(w.matchers.begin() + static_cast<ptrdiff_t>(i)); break;
      case 11: do_draft_accept(w, m, t); break;
      case 12: do_accept_forced(m, t); break;
      case 13: do_fill_draft(w, m, t); break;
      case 14: batch_set(w); break;
      case 15: batch_fill(w); break;
      case 16: batch_fill_bound(w); break;
      case 17: w.in.flag() ? batch_accept(w) : batch_reorder(w); break;
      case 18: batch_borrowed(w); break;
      default:
        switch (w.in.range(0, 2)) {
          case 0: states_add(w); break;
          case 1: states_fill(w); break;
          default: states_advance(w); break;
        }
    }
  }
  for (auto &[h, t] : w.matchers) do_queries(w, h.p, t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  World w(data, size);
  if (!build_trie(w)) return 0;
  run(w);
  return 0;
}
