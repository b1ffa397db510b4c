// Benchmark of string sets at the byte level (src/strings), in one run:
//
// Build: GeoNames' 150,634 distinct names with prefix " " and 1M generated
// names: time (best and median of 3) and peak heap beside the strings'
// bytes, of the byte trie alone and of the whole Trie the C API returns
// (labels, validation), with a memcpy of the bytes (the limit) and a
// std::sort of the strings (the cheapest way to order them at all) as
// baselines. Peak heap
// counts every operator new of the build (this program replaces it) minus
// what was live before: the strings' own buffer is the caller's.
//
// Masks (with --vocab FILE, the Qwen2.5 vocabulary written by
// bench_strings.py): p50 / p99 / max of one fill per state over the states
// of random walks through the GeoNames trie (each step of each walk, the
// root once per walk): without a cache, with the dense-row cache cold (first
// visit of each state) and warm; the list form and forced tokens; beside a
// memset and a memcpy of the row (the limit) and the brute force that walks
// every token's bytes (the baseline).
//
// --quick: small inputs only (a smoke run in the unit suite).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "strings/string_set.h"
#include "strings/string_sort.h"
#include "strings/string_trie.h"
#include "strings/vocab.h"

// ---------------------------------------------------------------- heap

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

void note_alloc(void *p) {
  if (!p) return;
  const int64_t now =
      g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed) +
      static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
void note_free(void *p) {
  if (p) g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}
void *counted_alloc(size_t n) {
  void *p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void *counted_aligned_alloc(size_t n, std::align_val_t a) {
  void *p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(a), n ? n : 1) != 0) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
}  // namespace

void *operator new(size_t n) { return counted_alloc(n); }
void *operator new[](size_t n) { return counted_alloc(n); }
void *operator new(size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void *operator new[](size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void operator delete(void *p) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void *p) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete(void *p, size_t) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void *p, size_t) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete(void *p, size_t, std::align_val_t) noexcept {
  note_free(p);
  std::free(p);
}
void operator delete[](void *p, size_t, std::align_val_t) noexcept {
  note_free(p);
  std::free(p);
}

namespace {

using treemask::Ref;
using treemask::StringTrie;

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "bench_strings: %s\n", what.c_str());
  std::exit(1);
}

struct Strings {
  std::string bytes;
  std::vector<uint64_t> offsets{0};
  void add(std::string_view s) {
    bytes.append(s);
    offsets.push_back(bytes.size());
  }
  size_t size() const { return offsets.size() - 1; }
  std::string_view at(size_t i) const {
    return std::string_view(bytes).substr(offsets[i], offsets[i + 1] - offsets[i]);
  }
  treemask::StringList list() const {
    return {{reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()}, offsets};
  }
};

// GeoNames' distinct names (first column of the TSV), sorted away from the
// file's order by nothing: the file order is kept, duplicates dropped.
Strings geonames(const std::string &path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) names.push_back(line.substr(0, line.find('\t')));
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // Keep the first occurrence of each name, in file order.
  std::vector<char> taken(sorted.size(), 0);
  Strings s;
  for (const auto &n : names) {
    const size_t k = std::lower_bound(sorted.begin(), sorted.end(), n) - sorted.begin();
    if (!taken[k]) {
      taken[k] = 1;
      s.add(n);
    }
  }
  return s;
}

// Place-like names from syllables: 2-4 syllables, a second word one time in
// four (about 12 bytes a name, few duplicates).
Strings generated(size_t n, uint64_t seed) {
  static const char *kSyl[] = {
      "ka",  "lo",    "mi",  "ra",  "ten", "bor", "vil", "san", "del",  "mar", "ost", "burg",
      "ton", "ham",   "ber", "dor", "gra", "pur", "aba", "new", "port", "fie", "ley", "wick",
      "ste", "in",    "an",  "el",  "or",  "us",  "ia",  "ov",  "sk",   "na",  "ri",  "go",
      "che", "ville", "sur", "mon", "val", "ro",  "sa",  "ta",  "ko",   "zu",  "shi", "jo",
      "qu",  "ix",    "ba",  "de",  "fu",  "li",  "pe",  "wa",  "yo",   "ze",  "cha", "tre"};
  constexpr size_t kN = sizeof kSyl / sizeof kSyl[0];
  std::mt19937_64 rng(seed);
  Strings s;
  std::string name;
  const auto word = [&] {
    const size_t k = 1 + rng() % 3;
    const size_t start = name.size();
    for (size_t i = 0; i <= k; ++i) name += kSyl[rng() % kN];
    name[start] = static_cast<char>(name[start] - 'a' + 'A');
  };
  for (size_t i = 0; i < n; ++i) {
    name.clear();
    word();
    if (rng() % 4 == 0) {
      name += ' ';
      word();
    }
    s.add(name);
  }
  return s;
}

Ref<treemask::Vocab> letters_vocab() {
  // Every byte as a token: enough for a build benchmark without a tokenizer.
  std::string bytes;
  std::vector<uint64_t> offsets{0};
  for (int b = 0; b < 256; ++b) {
    bytes.push_back(static_cast<char>(b));
    offsets.push_back(bytes.size());
  }
  offsets.push_back(bytes.size());  // token 256: the stop token, no bytes
  std::vector<uint8_t> flags(257, 0);
  flags[256] = treemask::kTokenSpecial;
  treemask::VocabSpec spec{
      {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()}, offsets, flags, 257};
  auto r = treemask::build_vocab(spec);
  if (!r.ok()) fail(r.status().message());
  return r.take_value();
}

// A string-set trie as the C API builds one, seen through its byte trie.
struct Built {
  Ref<treemask::Trie> trie;
  const StringTrie *operator->() const { return treemask::string_set_of(*trie); }
  const StringTrie &operator*() const { return *operator->(); }
};

Built build(const Ref<treemask::Vocab> &vocab, const Strings &s, const std::string &prefix,
            std::vector<int32_t> stops, size_t cache_bytes = size_t{64} << 20) {
  treemask::StringSetOptions o;
  o.trie.stop_tokens = std::move(stops);
  o.trie.dense_row_cache_bytes = cache_bytes;
  o.trie.no_labels = true;
  o.prefix = prefix;
  auto r = treemask::build_trie_from_strings(o, vocab, s.list(), nullptr);
  if (!r.ok()) fail(r.status().message());
  return Built{r.take_value()};
}

void bench_build(const char *name, const Strings &s, const std::string &prefix) {
  const auto vocab = letters_vocab();
  const double mb = 1e-6 * static_cast<double>(s.bytes.size());
  // The limit: copying the bytes once; the baseline: sorting the strings.
  std::vector<char> copy(s.bytes.size());
  double t0 = now_ns();
  std::memcpy(copy.data(), s.bytes.data(), s.bytes.size());
  const double memcpy_ms = (now_ns() - t0) * 1e-6;
  std::vector<std::string_view> views(s.size());
  for (size_t i = 0; i < s.size(); ++i) views[i] = s.at(i);
  t0 = now_ns();
  std::sort(views.begin(), views.end());
  const double std_sort_ms = (now_ns() - t0) * 1e-6;
  t0 = now_ns();
  const auto sorted = treemask::sort_strings(reinterpret_cast<const uint8_t *>(s.bytes.data()),
                                             s.offsets.data(), s.size());
  const double radix_ms = (now_ns() - t0) * 1e-6;

  double times[3];
  int64_t peak = 0;
  uint64_t trie_bytes = 0, nodes = 0, branches = 0;
  for (double &t : times) {
    const int64_t before = g_live.load();
    g_peak.store(before);
    t0 = now_ns();
    auto built = treemask::build_byte_trie(s.list(), prefix);
    t = (now_ns() - t0) * 1e-6;
    if (!built.ok()) fail(built.status().message());
    peak = g_peak.load() - before;
  }
  {
    // The arrays of the same byte trie as a trie without labels (what a
    // .tmtrie saves besides the vocabulary).
    const Built trie = build(vocab, s, prefix, {256});
    trie_bytes = trie.trie->arrays().bytes();
    nodes = trie->n_nodes();
    branches = trie->arrays().n_branches;
  }
  std::sort(times, times + 3);
  // The same strings as a Trie of the C API (treemask_trie_from_strings):
  // the byte trie plus each string's label and the validation every trie
  // passes.
  double trie_times[3];
  int64_t trie_peak = 0;
  for (double &t : trie_times) {
    const int64_t before = g_live.load();
    g_peak.store(before);
    treemask::StringSetOptions so;
    so.trie.stop_tokens = {256};
    so.prefix = prefix;
    t0 = now_ns();
    auto r = treemask::build_trie_from_strings(so, vocab, s.list(), nullptr);
    t = (now_ns() - t0) * 1e-6;
    if (!r.ok()) fail(r.status().message());
    trie_peak = g_peak.load() - before;
  }
  std::sort(trie_times, trie_times + 3);
  const double bytes = static_cast<double>(s.bytes.size());
  std::printf("%s: %zu strings, %.2f MB of bytes (prefix \"%s\"), %llu nodes, %llu branching\n",
              name, s.size(), mb, prefix.c_str(), static_cast<unsigned long long>(nodes),
              static_cast<unsigned long long>(branches));
  std::printf(
      "  build             %8.1f ms best, %8.1f ms median of 3   (target for 1M: <= 1000 ms)\n",
      times[0], times[1]);
  std::printf("  peak heap         %8.2f MB = %.2fx the strings' bytes    (target: <= 4x)\n",
              1e-6 * static_cast<double>(peak), static_cast<double>(peak) / bytes);
  std::printf("  trie arrays       %8.2f MB = %.2fx the strings' bytes, %.2f bytes/node\n",
              1e-6 * static_cast<double>(trie_bytes), static_cast<double>(trie_bytes) / bytes,
              static_cast<double>(trie_bytes) / static_cast<double>(nodes));
  std::printf(
      "  as a Trie         %8.1f ms best, %8.1f ms median of 3, peak heap %.2fx the bytes"
      " (labels by string, validation)\n",
      trie_times[0], trie_times[1], static_cast<double>(trie_peak) / bytes);
  std::printf("  of which sorting  %8.1f ms (radix sort + lcp)\n", radix_ms);
  std::printf("  baseline          %8.1f ms std::sort of string_views   (%.1fx the build)\n",
              std_sort_ms, std_sort_ms / times[0]);
  std::printf("  limit             %8.2f ms memcpy of the bytes\n", memcpy_ms);
  (void)sorted;
}

// ---------------------------------------------------------------- masks

Ref<treemask::Vocab> read_vocab_dump(const std::string &path) {
  // bench_strings.py's format: "TMVOCAB1", vocab_size u32, n u32, flags[n],
  // offsets[n + 1] u64, bytes (little-endian).
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  char magic[8];
  uint32_t vocab_size = 0, n = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char *>(&vocab_size), 4);
  in.read(reinterpret_cast<char *>(&n), 4);
  if (!in || std::memcmp(magic, "TMVOCAB1", 8) != 0) fail(path + ": not a vocabulary dump");
  std::vector<uint8_t> flags(n);
  std::vector<uint64_t> offsets(n + size_t{1});
  in.read(reinterpret_cast<char *>(flags.data()), n);
  in.read(reinterpret_cast<char *>(offsets.data()), static_cast<std::streamsize>(8 * (n + 1)));
  if (!in) fail(path + ": truncated");
  std::vector<uint8_t> bytes(offsets.back());
  in.read(reinterpret_cast<char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail(path + ": truncated");
  const double t0 = now_ns();
  treemask::VocabSpec spec{bytes, offsets, flags, static_cast<int32_t>(vocab_size)};
  auto r = treemask::build_vocab(spec);
  if (!r.ok()) fail(r.status().message());
  const auto v = r.take_value();
  std::printf(
      "vocabulary: %d tokens (%d wide), vocabulary trie of %zu nodes (%.2f MB), longest token "
      "%zu bytes, built in %.1f ms\n",
      v->n_tokens(), v->vocab_size(), v->vocab_trie().n_nodes(),
      1e-6 * static_cast<double>(v->vocab_trie().memory_bytes()), v->vocab_trie().max_depth(),
      (now_ns() - t0) * 1e-6);
  return v;
}

struct Percentiles {
  double p50, p99, max, mean;
};

Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  };
  return {at(0.5), at(0.99), v.back(), sum / static_cast<double>(v.size())};
}

void print_row(const char *what, const std::vector<double> &ns, const char *note = "") {
  const Percentiles p = percentiles(ns);
  std::printf("  %-30s %9.2f %9.2f %9.2f %9.2f  %s\n", what, p.p50 * 1e-3, p.p99 * 1e-3,
              p.max * 1e-3, p.mean * 1e-3, note);
}

// Steps of random walks: each walk starts at the root and takes random
// allowed tokens (mostly not the canonical tokenization) until a stop token.
std::vector<uint32_t> walk_states(const StringTrie &t, size_t walks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> states;
  std::vector<int32_t> allowed(static_cast<size_t>(t.vocab_size()));
  for (size_t w = 0; w < walks; ++w) {
    uint32_t node = 0;
    for (;;) {
      states.push_back(node);
      const size_t n = t.list_allowed(node, t.stop_tokens(), allowed.data(), allowed.size());
      if (n == 0) break;
      const int32_t tok = allowed[rng() % n];
      const treemask::NodeStep s = t.step_token(node, tok);
      if (s.kind != treemask::NodeStep::kAdvanced) break;
      node = s.node;
    }
  }
  return states;
}

template <class F>
double time_once(F &&f) {
  const double t0 = now_ns();
  f();
  return now_ns() - t0;
}

void bench_masks(const Ref<treemask::Vocab> &vocab, const Strings &names, size_t walks) {
  const std::vector<int32_t> stops = {151643, 151645};  // <|endoftext|>, <|im_end|>
  const auto no_cache = build(vocab, names, " ", stops, 0);
  const std::vector<uint32_t> states = walk_states(*no_cache, walks, 42);
  const size_t words = no_cache->row_words();
  std::vector<uint32_t> row(words), other(words);
  std::printf(
      "GeoNames names with prefix \" \" over this vocabulary: %llu nodes; %zu walks, "
      "%zu states (root once per walk), row of %zu words (%.1f KB)\n",
      static_cast<unsigned long long>(no_cache->n_nodes()), walks, states.size(), words,
      static_cast<double>(words * 4) / 1024.0);
  std::printf("  %-30s %9s %9s %9s %9s  (us per state; best of 3 runs)\n", "", "p50", "p99", "max",
              "mean");

  const auto fill = [&](const StringTrie &t, uint32_t s) {
    t.write_allowed_row(s, t.stop_tokens(), row.data(), words);
    asm volatile("" : : "g"(row.data()) : "memory");
  };
  // Each state's time is the best of 3 runs (the machine is shared; the
  // slowest runs measure the neighbours). A cold cache is a fresh trie.
  std::vector<double> no_cache_ns(states.size(), 1e300), cold(states.size(), 1e300),
      warm(states.size(), 1e300);
  Built cached;
  for (int run = 0; run < 3; ++run) {
    cached = build(vocab, names, " ", stops);
    for (size_t i = 0; i < states.size(); ++i) {
      no_cache_ns[i] = std::min(no_cache_ns[i], time_once([&] { fill(*no_cache, states[i]); }));
    }
    for (size_t i = 0; i < states.size(); ++i) {
      cold[i] = std::min(cold[i], time_once([&] { fill(*cached, states[i]); }));
    }
    for (size_t i = 0; i < states.size(); ++i) {
      warm[i] = std::min(warm[i], time_once([&] { fill(*cached, states[i]); }));
    }
  }
  print_row("fill, no cache", no_cache_ns, "<- the walk itself");
  print_row("fill, cache cold (1st visit)", cold);
  print_row("fill, cache warm", warm, "targets: p50 <= 10, p99 <= 300");
  std::vector<double> visits;
  for (uint32_t s : states) visits.push_back(1e3 * static_cast<double>(no_cache->walk_visits(s)));
  print_row("vocabulary-trie nodes visited (x1000)", visits);
  double root_ns = 1e300;
  for (int r = 0; r < 3; ++r) root_ns = std::min(root_ns, time_once([&] { fill(*no_cache, 0); }));
  const uint64_t root_allowed = no_cache->write_allowed_row(0, stops, row.data(), words);
  std::printf(
      "  root: %.1f us without a cache, %llu tokens allowed, %llu nodes visited; cache: "
      "%llu rows, %.1f MB\n",
      root_ns * 1e-3, static_cast<unsigned long long>(root_allowed),
      static_cast<unsigned long long>(no_cache->walk_visits(0)),
      static_cast<unsigned long long>(cached->dense_cache_rows()),
      1e-6 * static_cast<double>(cached->dense_cache_bytes()));

  const auto best_of_3 = [&](auto &&f) {
    std::vector<double> ns;
    for (uint32_t s : states) {
      double best = 1e300;
      for (int r = 0; r < 3; ++r) best = std::min(best, time_once([&] { f(s); }));
      ns.push_back(best);
    }
    return ns;
  };
  std::vector<int32_t> list(static_cast<size_t>(vocab->vocab_size()));
  print_row("list, cache warm", best_of_3([&](uint32_t s) {
              cached->list_allowed(s, cached->stop_tokens(), list.data(), list.size());
              asm volatile("" : : "g"(list.data()) : "memory");
            }));
  std::vector<int32_t> forced(64);
  print_row("forced tokens", best_of_3([&](uint32_t s) {
              cached->forced_tokens(s, forced.data(), forced.size());
              asm volatile("" : : "g"(forced.data()) : "memory");
            }));
  std::vector<double> ns;

  // The limit and the baseline, on the same row.
  ns.clear();
  for (int r = 0; r < 2000; ++r) {
    ns.push_back(time_once([&] {
      std::memset(row.data(), 0, words * 4);
      asm volatile("" : : "g"(row.data()) : "memory");
    }));
  }
  print_row("limit: memset of the row", ns);
  ns.clear();
  for (int r = 0; r < 2000; ++r) {
    ns.push_back(time_once([&] {
      std::memcpy(row.data(), other.data(), words * 4);
      asm volatile("" : : "g"(row.data()) : "memory");
    }));
  }
  print_row("limit: memcpy of the row", ns);
  ns.clear();
  const size_t sample = std::min<size_t>(states.size(), 200);
  for (size_t i = 0; i < sample; ++i) {
    const uint32_t s = states[i * states.size() / sample];
    ns.push_back(time_once([&] {
      std::memset(row.data(), 0, words * 4);
      for (int32_t t = 0; t < vocab->vocab_size(); ++t) {
        if (no_cache->step_token(s, t).kind != treemask::NodeStep::kRejected) {
          row[static_cast<uint32_t>(t) >> 5] |= uint32_t{1} << (t & 31);
        }
      }
      asm volatile("" : : "g"(row.data()) : "memory");
    }));
  }
  print_row("baseline: every token's bytes", ns, "(200 of the states)");
}

}  // namespace

int main(int argc, char **argv) {
  bool quick = false;
  std::string vocab_path, geonames_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--vocab" && i + 1 < argc) {
      vocab_path = argv[++i];
    } else if (a == "--geonames" && i + 1 < argc) {
      geonames_path = argv[++i];
    } else {
      fail("usage: bench_strings [--quick] [--geonames TSV] [--vocab DUMP]");
    }
  }
  std::printf(
      "String sets at the byte level (machine shared: times are noisy; ratios are in-run)\n");
  if (quick) {
    bench_build("generated names (quick)", generated(20000, 1), "");
    return 0;
  }
  Strings names;
  if (!geonames_path.empty()) {
    names = geonames(geonames_path);
    bench_build("GeoNames", names, " ");
  } else {
    std::printf("GeoNames: skipped (no --geonames)\n");
  }
  bench_build("generated names", generated(1000000, 1), "");
  if (vocab_path.empty() || names.size() == 0) {
    std::printf("masks: skipped (needs --vocab and --geonames)\n");
    return 0;
  }
  bench_masks(read_vocab_dump(vocab_path), names, 2000);
  return 0;
}
