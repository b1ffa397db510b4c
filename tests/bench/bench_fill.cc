// Filling one bitmask row, V = 151,936, at nodes of fanout 1, 16, 256 and
// 7,835 (the real root of RTP-LLM's gir_prefix_dict.txt), full-row and
// incremental, against (a) a memset of the row plus setting the bits and (b)
// an RTP-LLM-style fill (string key -> unordered_set, dense uint8 mask of V
// bytes). The memset of the row alone is the physical limit of a full fill.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_util.h"

namespace {

struct Case {
  const char *name;
  bench::PrefixDict dict;
};

void run(const Case &c) {
  const size_t words = treemask_bitmask_words(bench::kVocab);
  // 64-byte aligned as a torch tensor's storage: memset and memcpy of a row
  // vary by up to 40% with where malloc happens to put a vector.
  bench::AlignedBuffer<int32_t> row_buffer(words);
  int32_t *row = row_buffer.data;
  std::vector<uint8_t> dense(bench::kVocab);
  treemask_trie *trie = c.dict.build_trie();
  treemask_matcher *m = bench::new_matcher(trie);
  const std::vector<int32_t> allowed = testutil::next_tokens(m);

  const double memset_ns = bench::ns_per_call([&] {
    std::memset(row, 0, words * 4);
    bench::keep(row);
  });
  const double a_ns = bench::ns_per_call([&] {
    std::memset(row, 0, words * 4);
    for (int32_t t : allowed) row[t >> 5] |= int32_t(uint32_t{1} << (t & 31));
    bench::keep(row);
  });
  const double full_ns = bench::ns_per_call([&] {
    TM_MUST(treemask_matcher_fill_next_token_bitmask(m, row, words, nullptr, nullptr));
    bench::keep(row);
  });

  treemask_batch *batch = bench::new_batch(1, 0);
  TM_MUST(treemask_batch_set_matcher(batch, 0, m));
  TM_MUST(treemask_batch_bind_bitmask(batch, row, words));
  if (treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_FULL, nullptr) != TREEMASK_OK) {
    bench::die("fill");
  }
  const double incremental_ns = bench::ns_per_call([&] {
    TM_MUST(treemask_batch_fill_bound(batch, nullptr, 0, TREEMASK_FILL_INCREMENTAL, nullptr));
    bench::keep(row);
  });
  // Correctness of what was timed: the incremental row is the full row.
  std::vector<int32_t> want(words);
  TM_MUST(treemask_matcher_fill_next_token_bitmask(m, want.data(), words, nullptr, nullptr));
  if (!std::equal(want.begin(), want.end(), row)) {
    bench::die("incremental row differs from the full row");
  }

  // The same two fills on row r of a 256-row buffer (4.9 MB, more than L2),
  // r rotating: a decode step fills every row of its batch once, so a row is
  // rarely still in L1 when its next fill comes.
  const size_t rows = 256;
  std::vector<int32_t> buffer(rows * words);
  size_t r = 0;
  const double a_rot_ns = bench::ns_per_call([&] {
    r = r + 1 == rows ? 0 : r + 1;
    int32_t *row_r = buffer.data() + r * words;
    std::memset(row_r, 0, words * 4);
    for (int32_t t : allowed) row_r[t >> 5] |= int32_t(uint32_t{1} << (t & 31));
    bench::keep(row_r);
  });
  treemask_batch *many = bench::new_batch(rows, 0);
  for (size_t s = 0; s < rows; ++s) TM_MUST(treemask_batch_set_matcher(many, s, m));
  TM_MUST(treemask_batch_bind_bitmask(many, buffer.data(), words));
  TM_MUST(treemask_batch_fill_bound(many, nullptr, 0, TREEMASK_FILL_FULL, nullptr));
  int32_t slot = 0;
  const double incremental_rot_ns = bench::ns_per_call([&] {
    slot = slot + 1 == int32_t(rows) ? 0 : slot + 1;
    TM_MUST(treemask_batch_fill_bound(many, &slot, 1, TREEMASK_FILL_INCREMENTAL, nullptr));
    bench::keep(buffer.data());
  });
  treemask_batch_free(many);

  bench::RtpDict rtp;
  c.dict.fill(rtp);
  bench::RtpSequence seq(&rtp);
  const double rtp_ns = bench::ns_per_call([&] {
    seq.fill(dense.data());
    bench::keep(dense.data());
  });

  std::printf(
      "%-22s %6zu %6.0f %6.0f %6.0f %6.0f %7.0f | %5.2fx %6.1fx | %6.0f %6.0f %6.1fx | %6.1fx "
      "%7.1fx\n",
      c.name, allowed.size(), memset_ns, a_ns, full_ns, incremental_ns, rtp_ns, full_ns / a_ns,
      a_ns / incremental_ns, a_rot_ns, incremental_rot_ns, a_rot_ns / incremental_rot_ns,
      rtp_ns / full_ns, rtp_ns / incremental_ns);
  treemask_batch_free(batch);
  treemask_matcher_free(m);
  treemask_trie_free(trie);
}

}  // namespace

int main() {
  std::printf(
      "fill one bitmask row, V = 151,936 (%zu int32 words); ns per row, best of 21 runs\n"
      "  memset = memset of the row (the limit of a full fill)\n"
      "  (a)    = memset of the row + setting each allowed bit\n"
      "  full   = treemask_matcher_fill_next_token_bitmask\n"
      "  incr   = treemask_batch_fill_bound(TREEMASK_FILL_INCREMENTAL), same node refilled\n"
      "  (b)    = RTP-LLM style: string key -> unordered_set, dense uint8 mask of V bytes\n"
      "  a256, incr256 = (a) and incr on row r of a 256-row buffer (4.9 MB), r rotating\n"
      "  targets: full/(a) <= 1.5; (a)/incr >= 20 for fanout <= 64\n\n",
      treemask_bitmask_words(bench::kVocab));
  std::printf("%-22s %6s %6s %6s %6s %6s %7s | %6s %6s | %6s %6s %6s | %6s %7s\n", "node", "fanout",
              "memset", "(a)", "full", "incr", "(b)", "full/a", "a/incr", "a256", "incr256",
              "ratio", "b/full", "b/incr");
  std::mt19937_64 rng(1);
  for (size_t fanout : {size_t{1}, size_t{16}, size_t{256}}) {
    const std::string name = "synthetic, fanout " + std::to_string(fanout);
    run({name.c_str(), bench::synthetic_dict(fanout, rng)});
  }
  if (auto gir = bench::load_gir_prefix_dict()) {
    run({"gir_prefix_dict root", *gir});
  } else {
    std::printf("%-22s skipped: ../shared/data/rtp-llm/gir_prefix_dict.txt is absent\n",
                "gir_prefix_dict root");
  }
  std::printf("\nkernel ISA: %s\n", treemask_cpu_kernel_isa());
  return 0;
}
