// One decode step of one sequence, V = 151,936: accepting a token, and the
// whole step (fill the row + accept the sampled token), ours against an
// RTP-LLM-style implementation (string key grown by concatenation per accept,
// unordered_map<string, unordered_set<int32_t>> lookups, dense uint8 mask of
// V bytes). Both replay the same random walks, resets included.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_util.h"

namespace {

// ns per real token of replaying the whole walk (a -1 entry resets), best of
// 21 replays. Whole replays, not windows of one: the cost per step varies a
// lot along a walk (the root of a big dictionary), and a best-of over short
// windows would pick the windows without it.
template <class Reset, class Step>
double ns_per_step(const std::vector<int32_t> &walk, Reset &&reset, Step &&step) {
  const auto tokens = static_cast<double>(
      std::count_if(walk.begin(), walk.end(), [](int32_t t) { return t >= 0; }));
  return bench::ns_per_call(
             [&] {
               for (int32_t t : walk) {
                 if (t < 0) {
                   reset();
                 } else {
                   step(t);
                 }
               }
             },
             0, 21) /
         tokens;
}

void run(const char *name, const bench::PrefixDict &dict, size_t walk_steps, std::mt19937_64 &rng) {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  // 64-byte aligned as a torch tensor's storage: memset and memcpy of a row
  // vary by up to 40% with where malloc happens to put a vector.
  bench::AlignedBuffer<int32_t> row_buffer(words);
  int32_t *row = row_buffer.data;
  std::vector<uint8_t> dense(bench::kVocab);
  treemask_trie *trie = dict.build_trie();
  const std::vector<int32_t> walk = bench::random_walk(trie, walk_steps, rng);
  bench::RtpDict rtp;
  dict.fill(rtp);
  bool ok = false;

  treemask_matcher *m = bench::new_matcher(trie);
  auto reset_matcher = [&] { treemask_matcher_reset(m); };
  const double accept_ns = ns_per_step(
      walk, reset_matcher, [&](int32_t t) { TM_MUST(treemask_matcher_accept_token(m, t, &ok)); });
  bench::RtpSequence seq(&rtp);
  auto reset_seq = [&] { seq.reset(); };
  const double rtp_accept_ns = ns_per_step(walk, reset_seq, [&](int32_t t) {
    if (!seq.accept(t)) bench::die("RTP-style walk rejected a token");
  });
  const double full_ns = ns_per_step(walk, reset_matcher, [&](int32_t t) {
    TM_MUST(treemask_matcher_fill_next_token_bitmask(m, row, words, nullptr, nullptr));
    bench::keep(row);
    TM_MUST(treemask_matcher_accept_token(m, t, &ok));
  });

  treemask_batch *batch = bench::new_batch(1, 0);
  TM_MUST(treemask_batch_set_matcher(batch, 0, m));
  TM_MUST(treemask_batch_bind_bitmask(batch, row, words));
  treemask_matcher *slot = treemask_batch_get_matcher(batch, 0);
  const double incremental_ns = ns_per_step(
      walk, [&] { treemask_matcher_reset(slot); },
      [&](int32_t t) {
        TM_MUST(treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr));
        bench::keep(row);
        TM_MUST(treemask_batch_accept_tokens(batch, &t, 1, nullptr));
      });
  const double rtp_step_ns = ns_per_step(walk, reset_seq, [&](int32_t t) {
    seq.fill(dense.data());
    bench::keep(dense.data());
    seq.accept(t);
  });

  std::printf("%-22s %7.1f %7.1f %6.1fx | %7.0f %7.0f %9.0f | %8.1fx %8.1fx\n", name, accept_ns,
              rtp_accept_ns, rtp_accept_ns / accept_ns, full_ns, incremental_ns, rtp_step_ns,
              rtp_step_ns / full_ns, rtp_step_ns / incremental_ns);
  treemask_batch_free(batch);
  treemask_matcher_free(m);
  treemask_trie_free(trie);
}

}  // namespace

int main() {
  std::printf(
      "one decode step of one sequence, V = 151,936; ns per token, best of 21 replays of the "
      "same random walks (root to end token, then reset) by every implementation\n"
      "  accept   = treemask_matcher_accept_token; rtp acc = key += \"_\" + to_string(t), then "
      "a locked unordered_map lookup\n"
      "  full     = matcher fill of the row + accept; incr = batch fill_bound (INCREMENTAL) + "
      "batch accept\n"
      "  rtp step = locked lookup + copy of the unordered_set, memset + marks of a V-byte mask "
      "(reused; RTP-LLM allocates a fresh one per step, which measured no slower), accept\n"
      "  targets: rtp/full >= 10, rtp/incr >= 100\n\n");
  std::printf("%-22s %7s %7s %7s | %7s %7s %9s | %9s %9s\n", "dictionary", "accept", "rtp acc",
              "ratio", "full", "incr", "rtp step", "rtp/full", "rtp/incr");
  std::mt19937_64 rng(2);
  for (size_t fanout : {size_t{1}, size_t{16}, size_t{256}}) {
    const std::string name = "synthetic, fanout " + std::to_string(fanout);
    run(name.c_str(), bench::synthetic_dict(fanout, rng), 4096, rng);
  }
  if (auto gir = bench::load_gir_prefix_dict()) {
    run("gir_prefix_dict", *gir, 512, rng);
  } else {
    std::printf("%-22s skipped: ../shared/data/rtp-llm/gir_prefix_dict.txt is absent\n",
                "gir_prefix_dict");
  }
  return 0;
}
