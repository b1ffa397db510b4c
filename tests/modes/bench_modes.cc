// What the decoding modes cost per step: one full-row fill (V = 151,936)
// and one accept, plain and under each mode, beside a memset of the row.
// A trie shaped like a large recommendation dictionary: 7,835 first tokens
// (the root fanout of RTP-LLM's gir_prefix_dict.txt), 4 x 2 below each.
// Run with `meson test -C build --suite bench --verbose`.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "common/test_util.h"

namespace {

constexpr int32_t kVocab = 151936;
constexpr int32_t kStop = 151645;

double ns_per_call(const std::function<void()> &body) {
  using clock = std::chrono::steady_clock;
  int reps = 1;
  for (;;) {
    const auto start = clock::now();
    for (int i = 0; i < reps; ++i) body();
    const double ns = std::chrono::duration<double, std::nano>(clock::now() - start).count();
    if (ns > 2e8 || reps > (1 << 24)) return ns / reps;
    reps *= 4;
  }
}

}  // namespace

int main() {
  std::vector<std::vector<int32_t>> paths;
  for (int32_t a = 0; a < 7835; ++a) {
    for (int32_t b = 0; b < 4; ++b) {
      for (int32_t c = 0; c < 2; ++c) paths.push_back({64000 + a, 100 + b, 200 + c});
    }
  }
  testutil::TrieHandle trie;
  if (testutil::make_trie(paths, kVocab, {kStop}, trie) != TREEMASK_OK) {
    std::printf("trie build failed: %s\n", treemask_last_error());
    return 1;
  }
  const size_t words = treemask_bitmask_words(kVocab);
  std::vector<int32_t> row(words);
  auto make = [&](const treemask_mode_options &o) {
    treemask_matcher *m = nullptr;
    TM_MUST(treemask_matcher_create(trie.p, &o.matcher, &m));
    return testutil::MatcherHandle(m);
  };
  auto fill_ns = [&](treemask_matcher *m) {
    return ns_per_call([&] {
      TM_MUST(treemask_matcher_fill_next_token_bitmask(m, row.data(), words, nullptr, nullptr));
    });
  };
  auto step_ns = [&](treemask_matcher *m, int32_t token) {
    return ns_per_call([&] {
      bool ok;
      TM_MUST(treemask_matcher_accept_token(m, token, &ok));
      TM_MUST(treemask_matcher_rollback(m, 1));
    });
  };
  treemask_mode_options plain;
  treemask_mode_options_init(&plain);

  std::printf("%-44s %12s %12s\n", "case (V = 151,936)", "fill ns", "accept+rb ns");
  const double memset_ns = ns_per_call([&] { std::memset(row.data(), 0, words * 4); });
  std::printf("%-44s %12.0f %12s\n", "memset of one row (the limit)", memset_ns, "-");
  auto report = [&](const char *name, treemask_matcher *m, int32_t token) {
    std::printf("%-44s %12.0f %12.0f\n", name, fill_ns(m), step_ns(m, token));
  };

  testutil::MatcherHandle p = make(plain);
  report("plain, root (fanout 7,835)", p.p, 64000);
  bool ok;
  TM_MUST(treemask_matcher_accept_token(p.p, 64000, &ok));
  report("plain, depth 1 (fanout 4)", p.p, 100);

  treemask_mode_options budget = plain;
  budget.max_new_tokens = 100;
  testutil::MatcherHandle b = make(budget);
  report("budget 100 (never binds), root", b.p, 64000);
  TM_MUST(treemask_matcher_set_remaining_tokens(b.p, 2));
  report("budget 2 (every child checked), root", b.p, 64000);

  std::vector<int64_t> banned;
  for (int64_t i = 0; i < static_cast<int64_t>(paths.size()); i += 10) banned.push_back(i);
  treemask_exclusion_set *set = nullptr;
  TM_MUST(treemask_exclusion_set_create(trie.p, banned.data(), banned.size(), &set));
  testutil::MatcherHandle e = make(plain);
  const double filter_ns = ns_per_call(
      [&] { TM_MUST(treemask_matcher_set_label_filter(e.p, set, nullptr, 0, nullptr, 0)); });
  report("exclusion set, 10% of 62,680 labels, root", e.p, 64000);
  TM_MUST(treemask_matcher_accept_token(e.p, 64001, &ok));
  report("exclusion set, depth 1", e.p, 100);
  std::printf("%-44s %12.0f\n", "  set_label_filter (shared set, built)", filter_ns);

  const std::vector<int32_t> sep = {151643};
  treemask_mode_options multi = plain;
  multi.label_separator = sep.data();
  multi.n_label_separator = 1;
  testutil::MatcherHandle ml = make(multi);
  for (int32_t a = 0; a < 3; ++a) {
    for (int32_t t : {64000 + a, 100, 200, sep[0]})
      TM_MUST(treemask_matcher_accept_token(ml.p, t, &ok));
  }
  report("multi-label, 3 labels used, root", ml.p, 64000);
  for (int32_t t : {64005, 100, 200}) TM_MUST(treemask_matcher_accept_token(ml.p, t, &ok));
  report("multi-label, at a label end (separator test)", ml.p, sep[0]);

  const std::vector<int32_t> end = {151668, 198};
  treemask_mode_options think = plain;
  think.think_end_tokens = end.data();
  think.n_think_end_tokens = end.size();
  think.start_in_thinking = true;
  testutil::MatcherHandle th = make(think);
  report("think mode, while thinking (all allowed)", th.p, 1234);
  treemask_exclusion_set_free(set);
  return 0;
}
