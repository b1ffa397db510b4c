// Instruction counts of the hot operations, for callgrind: `count_ops OP N`
// sets up OP's inputs (deterministic, synthetic: V = 151,936) and then runs
// it N times. callgrind_ops.sh runs it twice (N and 2N) under callgrind and
// prints (Ir(2N) - Ir(N)) / N, the instructions of one operation without
// the set-up. Only the public C API is used, so the same file builds
// against any release's libtreemask and before / after figures of a change
// compare the same work (tests/bench/README.md, "Instruction counts").
//
// OPs:
//   fill1, fill16, fill256    one full fill of a matcher's row at a node of
//                             that fanout (the bench_fill shapes)
//   fillroot                  the same at a root of 7,835 children (a cached
//                             dense row)
//   accept                    one accept along random walks (reset at each
//                             leaf: one in four accepts) through a tree of
//                             fanout 16
//   beam                      one state-array beam step, 4 requests x 8
//                             beams over the fanout-16 tree, log-probability
//                             rows (no normalizer: the trie's share)
//   beamlse                   the same with logits (the normalizer included)
//   strings_fill              one fill of a string-set matcher's row, and the
//                             accept that moves it on, along random walks
//                             through 2,000 strings over a 32,000-token
//                             byte-level vocabulary (dense-row cache off:
//                             every fill walks)
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#define TREEMASK_EXPERIMENTAL
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "treemask/treemask.h"

namespace {

constexpr int32_t kVocab = 151936;
constexpr int32_t kStop = 151643;

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "count_ops: %s failed: %s\n", what, treemask_last_error());
  std::exit(1);
}
#define MUST(call) \
  if ((call) != TREEMASK_OK) die(#call)

// Paths of a complete tree: `fanout` children per node, `depth` levels,
// tokens drawn once per node from [0, kStop).
treemask_trie *tree(uint32_t fanout, uint32_t depth, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
  std::vector<int32_t> path;
  // Depth-first over the tree; each node's children are distinct tokens.
  auto children = [&] {
    std::vector<int32_t> c;
    while (c.size() < fanout) {
      const auto t = static_cast<int32_t>(rng() % kStop);
      bool seen = false;
      for (int32_t x : c) seen |= x == t;
      if (!seen) c.push_back(t);
    }
    return c;
  };
  auto walk = [&](auto &self, uint32_t level) -> void {
    if (level == depth) {
      tokens.insert(tokens.end(), path.begin(), path.end());
      offsets.push_back(tokens.size());
      return;
    }
    for (int32_t t : children()) {
      path.push_back(t);
      self(self, level + 1);
      path.pop_back();
    }
  };
  walk(walk, 0);
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = kVocab;
  o.stop_tokens = &kStop;
  o.n_stop_tokens = 1;
  treemask_trie *trie = nullptr;
  MUST(treemask_trie_from_paths(&o, tokens.data(), offsets.data(), offsets.size() - 1, nullptr,
                                &trie));
  return trie;
}

treemask_matcher *matcher(treemask_trie *trie) {
  treemask_matcher *m = nullptr;
  MUST(treemask_matcher_create(trie, nullptr, &m));
  return m;
}

std::vector<int32_t> allowed(treemask_matcher *m) {
  std::vector<int32_t> out(treemask_matcher_next_tokens(m, nullptr, 0));
  treemask_matcher_next_tokens(m, out.data(), out.size());
  return out;
}

void fill(treemask_trie *trie, long n) {
  treemask_matcher *m = matcher(trie);
  const size_t words = treemask_bitmask_words(kVocab);
  auto *row = static_cast<int32_t *>(std::aligned_alloc(64, (words * 4 + 63) / 64 * 64));
  for (long i = 0; i < n; ++i) {
    MUST(treemask_matcher_fill_next_token_bitmask(m, row, words, nullptr, nullptr));
  }
  std::printf("%d\n", row[0] & 1);
  std::free(row);
  treemask_matcher_free(m);
}

// The choices of random walks (kPlan accepts, resetting at each leaf),
// chosen before the loop, which replays them as often as n asks: the set-up
// costs the same for every n.
constexpr long kPlan = 1024;

void accept(long n) {
  treemask_trie *trie = tree(16, 4, 7);
  treemask_matcher *m = matcher(trie);
  std::mt19937 rng(11);
  std::vector<int32_t> plan;
  std::vector<char> reset_after;
  while (static_cast<long>(plan.size()) < kPlan) {
    const std::vector<int32_t> a = allowed(m);
    if (a.size() == 1 && a[0] == kStop) {
      reset_after.back() = 1;
      treemask_matcher_reset(m);
      continue;
    }
    const int32_t t = a[rng() % a.size()];
    if (t == kStop) continue;
    bool ok = false;
    MUST(treemask_matcher_accept_token(m, t, &ok));
    plan.push_back(t);
    reset_after.push_back(0);
  }
  reset_after.back() = 1;
  treemask_matcher_reset(m);
  long accepted = 0;
  for (long i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i % kPlan);
    bool ok = false;
    MUST(treemask_matcher_accept_token(m, plan[k], &ok));
    accepted += ok;
    if (reset_after[k]) treemask_matcher_reset(m);
  }
  std::printf("%ld\n", accepted);
  treemask_matcher_free(m);
  treemask_trie_free(trie);
}

void beam(long n, bool log_probs) {
  treemask_trie *trie = tree(16, 4, 7);
  constexpr size_t kRequests = 4, kBeams = 8, kSlots = kRequests * kBeams;
  treemask_beam_options bo;
  treemask_beam_options_init(&bo);
  bo.beam_width = kBeams;
  treemask_beam *b = nullptr;
  MUST(treemask_beam_create(&bo, &b));
  std::mt19937 rng(5);
  std::vector<float> logits(kSlots * static_cast<size_t>(kVocab));
  std::normal_distribution<float> normal(-12.0f, 3.0f);
  for (float &x : logits) x = normal(rng);
  treemask_logits l;
  treemask_logits_init(&l);
  l.data = logits.data();
  l.dtype = TREEMASK_F32;
  l.log_probs = log_probs;
  std::vector<uint32_t> states(kSlots);
  std::vector<float> scores(kSlots);
  std::vector<int32_t> parents(kSlots), tokens(kSlots);
  double total = 0;
  for (long i = 0; i < n; ++i) {
    // Every fourth step restarts the search (the tree is 4 deep).
    if (i % 4 == 0) {
      for (size_t s = 0; s < kSlots; ++s) {
        states[s] = 0;
        scores[s] = s % kBeams == 0 ? 0.0f : -INFINITY;
      }
    }
    MUST(treemask_beam_step_states(b, trie, kRequests, &l, states.data(), scores.data(),
                                   parents.data(), tokens.data()));
    total += scores[0];
  }
  std::printf("%g\n", total);
  treemask_beam_free(b);
  treemask_trie_free(trie);
}

// A byte-level vocabulary: the 256 bytes, then 31,744 tokens of 2 to 6
// lowercase letters (with a leading space half the time).
treemask_vocab *vocab() {
  std::mt19937 rng(3);
  std::string bytes;
  std::vector<uint64_t> offsets{0};
  for (int b = 0; b < 256; ++b) {
    bytes.push_back(static_cast<char>(b));
    offsets.push_back(bytes.size());
  }
  while (offsets.size() <= 32000) {
    if (rng() % 2) bytes.push_back(' ');
    const int len = 2 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) bytes.push_back(static_cast<char>('a' + rng() % 26));
    offsets.push_back(bytes.size());
  }
  treemask_vocab *v = nullptr;
  MUST(treemask_vocab_create(reinterpret_cast<const uint8_t *>(bytes.data()), offsets.data(),
                             offsets.size() - 1, nullptr, kVocab, &v));
  return v;
}

void strings_fill(long n) {
  treemask_vocab *v = vocab();
  std::mt19937 rng(9);
  std::string bytes;
  std::vector<size_t> offsets{0};
  for (int i = 0; i < 2000; ++i) {
    const int words = 1 + static_cast<int>(rng() % 3);
    for (int w = 0; w < words; ++w) {
      if (w) bytes.push_back(' ');
      const int len = 3 + static_cast<int>(rng() % 8);
      for (int k = 0; k < len; ++k) bytes.push_back(static_cast<char>('a' + rng() % 26));
    }
    offsets.push_back(bytes.size());
  }
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = kVocab;
  o.stop_tokens = &kStop;
  o.n_stop_tokens = 1;
  o.dense_row_cache_bytes = 0;
  treemask_trie *trie = nullptr;
  MUST(treemask_trie_from_strings(&o, v, bytes.data(), offsets.data(), offsets.size() - 1, nullptr,
                                  &trie));
  treemask_matcher *m = matcher(trie);
  const size_t words = treemask_bitmask_words(kVocab);
  auto *row = static_cast<int32_t *>(std::aligned_alloc(64, (words * 4 + 63) / 64 * 64));
  // The walk (kPlan steps, chosen before the loop): a random allowed token
  // after each fill, a reset at a stop token and at the end of the plan.
  std::vector<int32_t> plan;
  while (static_cast<long>(plan.size()) < kPlan) {
    const std::vector<int32_t> a = allowed(m);
    const int32_t t = a[rng() % a.size()];
    plan.push_back(t == kStop ? -1 : t);
    bool ok = false;
    if (t == kStop) {
      treemask_matcher_reset(m);
    } else {
      MUST(treemask_matcher_accept_token(m, t, &ok));
    }
  }
  plan.back() = -1;
  treemask_matcher_reset(m);
  long set = 0;
  for (long i = 0; i < n; ++i) {
    MUST(treemask_matcher_fill_next_token_bitmask(m, row, words, nullptr, nullptr));
    set += row[0] & 1;
    bool ok = false;
    const int32_t t = plan[static_cast<size_t>(i % kPlan)];
    if (t < 0) {
      treemask_matcher_reset(m);
    } else {
      MUST(treemask_matcher_accept_token(m, t, &ok));
    }
  }
  std::printf("%ld\n", set);
  std::free(row);
  treemask_matcher_free(m);
  treemask_trie_free(trie);
  treemask_vocab_free(v);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: count_ops OP N (OP: fill1 fill16 fill256 fillroot accept beam beamlse "
                 "strings_fill)\n");
    return 2;
  }
  const std::string op = argv[1];
  const long n = std::atol(argv[2]);
  if (op == "fill1" || op == "fill16" || op == "fill256") {
    const uint32_t fanout = static_cast<uint32_t>(std::atoi(op.c_str() + 4));
    treemask_trie *trie = tree(fanout, fanout == 256 ? 2 : 3, 1);
    fill(trie, n);
    treemask_trie_free(trie);
  } else if (op == "fillroot") {
    treemask_trie *trie = tree(7835, 1, 2);
    fill(trie, n);
    treemask_trie_free(trie);
  } else if (op == "accept") {
    accept(n);
  } else if (op == "beam" || op == "beamlse") {
    beam(n, op == "beam");
  } else if (op == "strings_fill") {
    strings_fill(n);
  } else {
    std::fprintf(stderr, "count_ops: unknown OP %s\n", op.c_str());
    return 2;
  }
  return 0;
}
