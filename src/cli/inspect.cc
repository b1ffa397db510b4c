// treemask inspect: what a trie holds and what it costs: counts, depth and
// fanout histograms, bytes per edge, file header and metadata.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <bit>

#include "cli/cli.h"
#include "strings/string_set.h"
#include "trie/annotations.h"

namespace treemask::cli {

namespace {

constexpr const char *kInspectUsage =
    "usage: treemask inspect FILE [--vocab-size N ...] [--trusted]\n";

constexpr const char *kInspectHelp =
    "Describes a trie: nodes, edges, terminals, labels, stop tokens, memory (bytes per\n"
    "edge), metadata, and histograms of nodes per depth and per fanout.\n"
    "FILE is a .tmtrie or anything `treemask compile` reads (with the same options).\n"
    "Exit status: 0 ok, 1 bad input (or a corrupted trie), 2 usage.\n";

constexpr int kBarWidth = 40;

void print_bar_row(const std::string &label, uint64_t n, uint64_t extra, bool show_extra,
                   uint64_t max) {
  const int len = max == 0 || n == 0 ? 0 : std::max<int>(1, static_cast<int>(kBarWidth * n / max));
  std::printf("  %10s %12s", label.c_str(), with_commas(n).c_str());
  if (show_extra) std::printf(" %12s", with_commas(extra).c_str());
  std::printf("  %s\n", std::string(static_cast<size_t>(len), '#').c_str());
}

void print_header(const Loaded &loaded, const Args &args, const TrieArrays &a, const Trie &trie) {
  std::printf("%s\n", printable(loaded.input.path).c_str());
  std::printf("  format        %s%s, %s bytes\n", loaded.input.format.c_str(),
              loaded.input.format == "tmtrie"
                  ? (args.has("trusted") ? " (loaded trusted: checksum not verified)"
                                         : " (checksum verified)")
                  : "",
              with_commas(loaded.input.bytes).c_str());
  std::printf("  vocab size    %s\n", with_commas(static_cast<uint64_t>(a.vocab_size)).c_str());
  std::string stops;
  for (int32_t s : trie.stop_tokens()) stops += cat(stops.empty() ? "" : ", ", s);
  std::printf("  stop tokens   %s\n", stops.c_str());
}

void print_metadata(const Trie &trie) {
  const TrieAnnotations *notes = trie.annotations();
  if (notes && notes->n_warnings() > 0) {
    std::printf("  warnings      %s (treemask check lists them)\n",
                with_commas(notes->n_warnings()).c_str());
  }
  std::printf("  metadata      %s\n", notes && !notes->metadata().empty() ? "" : "(none)");
  if (notes) {
    for (const auto &e : notes->metadata()) {
      const std::string key = printable(e.key);
      const std::string value = printable(e.value.substr(0, 100));
      std::printf("    %-20s %s%s\n", key.c_str(), value.c_str(),
                  e.value.size() > 100 ? "..." : "");
    }
  }
}

// A string set: its byte trie and vocabulary (no token levels to draw).
int inspect_string_set(const Loaded &loaded, const Args &args, const Trie &trie,
                       const StringTrie &s) {
  const TrieArrays &a = trie.arrays();
  print_header(loaded, args, a, trie);
  std::printf("  kind          string set (any tokenization of its strings)\n");
  std::printf("  vocabulary    %s tokens, %s bytes, fingerprint %016llx\n",
              with_commas(static_cast<uint64_t>(s.vocab().n_tokens())).c_str(),
              with_commas(s.vocab().n_bytes()).c_str(),
              static_cast<unsigned long long>(s.vocab().fingerprint()));
  std::printf("  nodes         %s byte-trie nodes (%s string ends, %s branching)\n",
              with_commas(a.n_nodes).c_str(), with_commas(a.n_terminals).c_str(),
              with_commas(a.n_branches).c_str());
  std::printf("  labels        %s%s\n", with_commas(a.n_labels()).c_str(),
              a.has_labels() ? "" : " (a trie without labels)");
  std::printf("  depth         max %u bytes\n", a.max_depth);
  std::printf("  fanout        max %u\n", a.max_fanout);
  std::printf(
      "  memory        %s bytes = %.2f bytes/node (byte trie and labels; the vocabulary "
      "is shared)\n",
      with_commas(a.bytes()).c_str(), double(a.bytes()) / double(a.n_nodes));
  std::printf("  root          %s tokens allowed\n",
              with_commas(s.list_allowed(0, s.stop_tokens(), nullptr, 0)).c_str());
  print_metadata(trie);
  return kExitOk;
}

}  // namespace

int cmd_inspect(int argc, char **argv) {
  Args args;
  if (auto done = parse_command(argc, argv, kInputFlags, kInspectUsage, kInspectHelp, args))
    return *done;
  Diagnostics diag;
  Loaded loaded;
  if (auto done = load_or_exit(args, kInspectUsage, diag, true, loaded)) return *done;
  const Trie &trie = *loaded.trie.value();
  const TrieArrays &a = trie.arrays();
  if (const StringTrie *s = string_set_of(trie)) return inspect_string_set(loaded, args, trie, *s);

  // Nodes per depth: in the BFS layout of the CSR nodes each level is a
  // contiguous id range, and the next level starts at the first child of the
  // current one; a tail's nodes lie one per level below its head's.
  std::vector<uint64_t> depth_nodes, depth_terminals;
  std::vector<uint64_t> fanout_buckets;  // 0, 1, 2-3, 4-7, ...
  uint64_t leaves = 0;
  auto count = [&](size_t depth, uint32_t node) {
    if (depth_nodes.size() <= depth) {
      depth_nodes.resize(depth + 1);
      depth_terminals.resize(depth + 1);
    }
    const Children c = trie.children(node);
    ++depth_nodes[depth];
    depth_terminals[depth] += trie.is_terminal(node);
    leaves += c.count == 0;
    const size_t bucket = c.count == 0 ? 0 : std::bit_width(c.count);
    if (fanout_buckets.size() <= bucket) fanout_buckets.resize(bucket + 1);
    ++fanout_buckets[bucket];
  };
  std::vector<uint64_t> level_ends;  // CSR level d is [level_ends[d - 1], level_ends[d])
  for (uint64_t lo = 0, hi = 1; lo < hi;) {
    for (uint64_t n = lo; n < hi; ++n) count(level_ends.size(), static_cast<uint32_t>(n));
    level_ends.push_back(hi);
    const uint64_t next_lo = uint64_t{a.node_offsets[lo]} + 1;
    const uint64_t next_hi = std::min<uint64_t>(uint64_t{a.node_offsets[hi]} + 1, a.n_explicit);
    lo = next_lo;
    hi = std::max(next_lo, next_hi);
  }
  for (uint64_t k = 0, level = 0, start = 0, w = 0; w < a.head_words(); ++w) {
    for (uint64_t bits = a.head_bits[w]; bits != 0; bits &= bits - 1, ++k) {
      const uint64_t head = w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      while (head >= level_ends[level]) ++level;
      for (uint64_t i = 0; i < a.tail_lengths[k]; ++i) {
        count(level + 1 + i, static_cast<uint32_t>(a.n_explicit + start + i));
      }
      start += a.tail_lengths[k];
    }
  }

  print_header(loaded, args, a, trie);
  std::printf("  nodes         %s (%s terminal, %s leaves)\n", with_commas(a.n_nodes).c_str(),
              with_commas(a.n_terminals).c_str(), with_commas(leaves).c_str());
  std::printf("  edges         %s\n", with_commas(a.n_edges()).c_str());
  std::printf("  tails         %s (%s nodes on unary chains to a leaf, 2 bytes each)\n",
              with_commas(a.n_heads).c_str(), with_commas(a.n_tail_nodes()).c_str());
  std::printf("  labels        %s%s\n", with_commas(a.n_labels()).c_str(),
              a.has_labels() ? "" : " (a trie without labels)");
  std::printf("  depth         max %u\n", a.max_depth);
  std::printf("  fanout        max %u\n", a.max_fanout);
  std::printf("  memory        %s bytes = %.2f bytes/edge (flat arrays, no dense-row cache)\n",
              with_commas(a.bytes()).c_str(),
              a.n_edges() ? double(a.bytes()) / double(a.n_edges()) : 0.0);
  print_metadata(trie);

  std::printf("\n  %10s %12s %12s\n", "depth", "nodes", "terminals");
  const uint64_t max_depth_count = *std::max_element(depth_nodes.begin(), depth_nodes.end());
  for (size_t d = 0; d < depth_nodes.size(); ++d) {
    print_bar_row(std::to_string(d), depth_nodes[d], depth_terminals[d], true, max_depth_count);
  }
  std::printf("\n  %10s %12s\n", "fanout", "nodes");
  const uint64_t max_bucket = *std::max_element(fanout_buckets.begin(), fanout_buckets.end());
  for (size_t b = 0; b < fanout_buckets.size(); ++b) {
    const uint64_t lo = b == 0 ? 0 : uint64_t{1} << (b - 1), hi = b == 0 ? 0 : (lo << 1) - 1;
    const std::string label = lo == hi ? std::to_string(lo) : cat(lo, "-", hi);
    print_bar_row(label, fanout_buckets[b], 0, false, max_bucket);
  }
  return kExitOk;
}

}  // namespace treemask::cli
