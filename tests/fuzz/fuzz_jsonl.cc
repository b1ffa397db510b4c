// Fuzz target: token paths as JSON Lines ([t0, t1, ...] or {"tokens": [...],
// "label": L} per line). The input is the file. A file that loads holds at
// most one sequence per non-blank line, and every sequence carries a label.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <vector>

#include "fuzz/loader_harness.h"
#include "sources/rtp.h"

namespace {

constexpr int32_t kVocab = 1024;
const std::vector<int32_t> kStops{0, 1023};

size_t non_blank_lines(const char *text, size_t size) {
  size_t lines = 0;
  bool blank = true;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || text[i] == '\n') {
      lines += !blank;
      blank = true;
    } else if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') {
      blank = false;
    }
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  const treemask_trie_options o = testutil::trie_options(kVocab, kStops);
  treemask::TrieBuildOptions internal;
  internal.vocab_size = kVocab;
  internal.stop_tokens = kStops;
  const fuzz::LoaderDoors doors{
      "treemask_trie_from_jsonl",
      "treemask_trie_from_jsonl_file",
      {TREEMASK_ERR_PARSE, TREEMASK_ERR_OUT_OF_RANGE, TREEMASK_ERR_INVALID_ARGUMENT}};
  testutil::TrieHandle trie(fuzz::load_through_every_door(
      data, size, doors,
      [&](treemask_trie **out) { return treemask_trie_from_jsonl(&o, text, size, out); },
      [&](const char *path, treemask_trie **out) {
        return treemask_trie_from_jsonl_file(&o, path, out);
      },
      [&](treemask::Diagnostics &diag) {
        return treemask::load_jsonl_paths(internal, {text, size}, diag);
      }));
  if (trie.p) {
    treemask_trie_stats stats;
    stats.struct_size = sizeof(stats);
    FUZZ_CHECK(treemask_trie_get_stats(trie.p, &stats) == TREEMASK_OK);
    FUZZ_CHECK(stats.n_terminals <= non_blank_lines(text, size));
    FUZZ_CHECK(stats.n_labels >= stats.n_terminals);
  }
  return 0;
}
