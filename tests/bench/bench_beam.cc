// The constrained beam step against the masking pipeline it replaces, on
// semantic-ID catalogues: MiniOneRec's shape (3 codes of 256 above a 151,936
// base vocabulary: V = 152,704; beam 50; 8 requests) and a OneRec-like shape
// (3 codes of 8,192 above 151,936; beam 32; 16 requests), fp32 logits.
//
// - beam step: treemask_beam_step_states (normalizer read + gather + exact
//   top-B + state advance), one thread and two.
// - masking pipeline (C, best kernels of this library for every part): per
//   slot fill its bitmask row from its state, log-softmax into a score row
//   (one read, one write), add the beam score, mask it with the bitmask
//   (treemask_cpu_apply_token_bitmask), then an exact top-B over B x V.
// - limit: one read of the logits the step needs (rows x V x 4 bytes at the
//   read bandwidth measured on the same buffer).
// - flatness: the same step over 1M and 20M items (OneRec-like codes).
//
// A "full" step has every beam live (the second step of a search); the
// first step of a search reads one row per request.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu/beam.h"

namespace {

using treemask::kernels::BeamCandidate;
using treemask::kernels::TopK;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Owns a trie.
class TrieBox {
 public:
  explicit TrieBox(treemask_trie *t) : t_(t) {}
  TrieBox(const TrieBox &) = delete;
  ~TrieBox() { treemask_trie_free(t_); }
  const treemask_trie *get() const { return t_; }

 private:
  treemask_trie *t_;
};

struct Shape {
  const char *name;
  int32_t base;      // token id of the first code
  int32_t codebook;  // codes per level
  int levels;
  size_t items;
  size_t beam;
  size_t requests;
  int32_t vocab() const { return base + codebook * levels; }
};

// A catalogue of distinct random items; level l's code c is token
// base + l * codebook + c (MiniOneRec's layout). Stop token 151,643 (or base - 1).
struct Catalogue {
  std::vector<int32_t> tokens;
  std::vector<size_t> offsets{0};
};

Catalogue generate_catalogue(const Shape &s, std::mt19937_64 &rng) {
  Catalogue c;
  c.tokens.reserve(s.items * static_cast<size_t>(s.levels));
  c.offsets.reserve(s.items + 1);
  std::unordered_set<uint64_t> seen;
  seen.reserve(s.items * 2);
  while (c.offsets.size() <= s.items) {
    // Distinct items: a 64-bit hash of the codes stands for the item (a
    // collision only drops an item that would have been new).
    uint64_t key = 0x9E3779B97F4A7C15ull;
    int32_t codes[8];
    for (int l = 0; l < s.levels; ++l) {
      codes[l] = static_cast<int32_t>(rng() % static_cast<uint64_t>(s.codebook));
      key = (key ^ static_cast<uint64_t>(codes[l])) * 0x100000001B3ull;
      key ^= key >> 29;
    }
    if (!seen.insert(key).second) continue;
    for (int l = 0; l < s.levels; ++l) c.tokens.push_back(s.base + l * s.codebook + codes[l]);
    c.offsets.push_back(c.tokens.size());
  }
  return c;
}

// labels: path i carries label i (the item id); else the paths are the
// items and terminals carry no labels (what a beam search needs).
treemask_trie *build_catalogue(const Shape &s, const Catalogue &c, bool labels) {
  const int32_t stop = std::min(151643, s.base - 1);  // <|endoftext|> in the real shapes
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = s.vocab();
  opts.stop_tokens = &stop;
  opts.n_stop_tokens = 1;
  opts.no_labels = labels ? 0 : 1;
  treemask_trie *t = nullptr;
  if (treemask_trie_from_paths(&opts, c.tokens.data(), c.offsets.data(), s.items, nullptr, &t) !=
      TREEMASK_OK) {
    bench::die("treemask_trie_from_paths");
  }
  return t;
}

treemask_trie *make_catalogue(const Shape &s, std::mt19937_64 &rng) {
  return build_catalogue(s, generate_catalogue(s, rng), false);
}

struct Step {
  std::vector<uint32_t> states;
  std::vector<float> scores;
  std::vector<int32_t> parents, tokens;
};

treemask_beam *new_beam(size_t B, size_t threads) {
  treemask_beam_options o;
  treemask_beam_options_init(&o);
  o.beam_width = B;
  o.n_threads = threads;
  treemask_beam *b = nullptr;
  if (treemask_beam_create(&o, &b) != TREEMASK_OK) bench::die("treemask_beam_create");
  return b;
}

// The states and scores of the second step of a search (every beam live):
// one first step from the root.
Step second_step_input(const treemask_trie *trie, const Shape &s, const treemask_logits &lg) {
  const size_t n = s.beam * s.requests;
  Step st{std::vector<uint32_t>(n, TREEMASK_STATE_ROOT), std::vector<float>(n, kNegInf),
          std::vector<int32_t>(n), std::vector<int32_t>(n)};
  for (size_t r = 0; r < s.requests; ++r) st.scores[r * s.beam] = 0;
  treemask_beam *b = new_beam(s.beam, 1);
  if (treemask_beam_step_states(b, trie, s.requests, &lg, st.states.data(), st.scores.data(),
                                st.parents.data(), st.tokens.data()) != TREEMASK_OK) {
    bench::die("treemask_beam_step_states");
  }
  treemask_beam_free(b);
  return st;
}

// The masking pipeline of one step (see the file comment).
struct Pipeline {
  const Shape &s;
  const treemask_trie *trie;
  size_t words;
  std::vector<int32_t> mask;
  bench::AlignedBuffer<float> rows;  // one request's B log-softmax rows
  std::vector<BeamCandidate> heap;

  Pipeline(const Shape &shape, const treemask_trie *t)
      : s(shape),
        trie(t),
        words(treemask_bitmask_words(shape.vocab())),
        mask(shape.beam * words),
        rows(shape.beam * static_cast<size_t>(shape.vocab())),
        heap(shape.beam) {}

  void run(const float *logits, const uint32_t *states, const float *scores) {
    const auto V = static_cast<size_t>(s.vocab());
    const auto lse = treemask::kernels::logsumexp_best();
    for (size_t r = 0; r < s.requests; ++r) {
      const size_t base = r * s.beam;
      if (treemask_trie_fill_states(trie, states + base, s.beam, mask.data(), words) !=
          TREEMASK_OK) {
        bench::die("fill_states");
      }
      for (size_t b = 0; b < s.beam; ++b) {
        const float *x = logits + (base + b) * V;
        float *out = rows.data + b * V;
        const float add = scores[base + b] - lse(x, treemask::kernels::DType::kF32, V);
        for (size_t c = 0; c < V; ++c) out[c] = x[c] + add;
      }
      if (treemask_cpu_apply_token_bitmask(rows.data, TREEMASK_F32, s.beam, V, V, mask.data(),
                                           words, s.beam, s.vocab(), nullptr, 0) != TREEMASK_OK) {
        bench::die("apply");
      }
      TopK top(heap.data(), s.beam);
      for (size_t b = 0; b < s.beam; ++b) {
        const float *row = rows.data + b * V;
        for (size_t c = 0; c < V; ++c) {
          if (row[c] > kNegInf && top.may_take(row[c])) {
            top.offer({row[c], static_cast<int32_t>(b), static_cast<int32_t>(c), 0});
          }
        }
      }
      top.finish();
      bench::keep(heap.data());
    }
  }
};

// Time of one read of a buffer: eight independent 64-bit sums (the loop
// vectorizes at -O2 and is bound by memory, not by the adds), over `threads`
// threads splitting the buffer.
double read_ns(const float *data, size_t n, size_t threads) {
  const auto *u = reinterpret_cast<const uint64_t *>(data);
  const size_t words = n / 2;
  auto part = [&](size_t begin, size_t end) {
    uint64_t acc[8] = {};
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += u[i + static_cast<size_t>(k)];
    }
    for (; i < end; ++i) acc[0] += u[i];
    bench::keep(acc);
  };
  return bench::ns_per_call(
      [&] {
        std::vector<std::thread> pool;
        const size_t chunk = words / threads;
        for (size_t t = 1; t < threads; ++t) {
          pool.emplace_back(part, t * chunk, t + 1 == threads ? words : (t + 1) * chunk);
        }
        part(0, threads == 1 ? words : chunk);
        for (auto &th : pool) th.join();
      },
      1, 7);
}

// Prints the shape's table; returns the 1-thread step time (ns).
double run_shape(const Shape &s, std::mt19937_64 &rng) {
  const auto V = static_cast<size_t>(s.vocab());
  const size_t n = s.beam * s.requests;
  const double t0 = bench::now_ns();
  const TrieBox trie(make_catalogue(s, rng));
  const double build_s = (bench::now_ns() - t0) / 1e9;
  bench::AlignedBuffer<float> logits(n * V);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (size_t i = 0; i < n * V; ++i) logits.data[i] = dist(rng);
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = logits.data;
  const Step in = second_step_input(trie.get(), s, lg);

  auto beam_ns = [&](size_t threads) {
    treemask_beam *b = new_beam(s.beam, threads);
    Step st = in;
    const double ns = bench::ns_per_call(
        [&] {
          st.states = in.states;
          st.scores = in.scores;
          if (treemask_beam_step_states(b, trie.get(), s.requests, &lg, st.states.data(),
                                        st.scores.data(), st.parents.data(),
                                        st.tokens.data()) != TREEMASK_OK) {
            bench::die("beam step");
          }
        },
        1, 7);
    treemask_beam_free(b);
    return ns;
  };
  const double beam1 = beam_ns(1), beam2 = beam_ns(2);
  Pipeline pipe(s, trie.get());
  const double pipeline =
      bench::ns_per_call([&] { pipe.run(logits.data, in.states.data(), in.scores.data()); }, 1, 5);
  const double floor = read_ns(logits.data, n * V, 1);
  const double floor2 = read_ns(logits.data, n * V, 2);
  std::printf("%-28s items %9zu  V %7zu  B %3zu x %2zu requests (built in %.1f s)\n", s.name,
              s.items, V, s.beam, s.requests, build_s);
  std::printf("  %-44s %9.1f us\n", "limit: one read of the logits, 1 thread", floor / 1e3);
  std::printf("  %-44s %9.1f us\n", "limit: one read of the logits, 2 threads", floor2 / 1e3);
  std::printf("  %-44s %9.1f us  (%.2fx the limit's speed)\n", "beam step, 1 thread", beam1 / 1e3,
              floor / beam1);
  std::printf("  %-44s %9.1f us  (%.2fx the limit's speed)\n", "beam step, 2 threads", beam2 / 1e3,
              floor2 / beam2);
  std::printf("  %-44s %9.1f us  -> beam step %.1fx faster\n",
              "masking pipeline (fill+log-softmax+apply+top-k)", pipeline / 1e3, pipeline / beam1);
  return beam1;
}

}  // namespace

// The process's resident set now and its peak since the last reset_peak(),
// in bytes (Linux: /proc/self/status; 0 where it cannot be read).
uint64_t status_kb(const char *field) {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, n) == 0) kb = std::strtoull(line + n + 1, nullptr, 10);
  }
  std::fclose(f);
  return kb * 1024;
}
void reset_peak() {
  if (FILE *f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);  // resets VmHWM to the current RSS
    std::fclose(f);
  }
}

// Catalogue scale: bytes per item, build time and the build's peak memory
// for a catalogue of `items` items of `levels` codes, without labels (a
// beam search's catalogue: the paths are the items) and with item labels.
void catalogue_scale(const Shape &s, std::mt19937_64 &rng) {
  double t0 = bench::now_ns();
  const Catalogue c = generate_catalogue(s, rng);
  const double generated = (bench::now_ns() - t0) / 1e9;
  const double paths_bytes =
      static_cast<double>(c.tokens.size() * 4 + c.offsets.size() * sizeof(size_t));
  std::printf(
      "%-28s items %9zu x %d codes of %d (generated in %.1f s; the input paths: %.1f "
      "bytes/item)\n",
      s.name, s.items, s.levels, s.codebook, generated, paths_bytes / double(s.items));
  for (const bool labels : {false, true}) {
    reset_peak();
    const uint64_t before = status_kb("VmRSS:");
    t0 = bench::now_ns();
    const TrieBox trie(build_catalogue(s, c, labels));
    const double took = (bench::now_ns() - t0) / 1e9;
    const uint64_t peak = status_kb("VmHWM:");
    treemask_trie_stats st;
    st.struct_size = sizeof st;
    if (treemask_trie_get_stats(trie.get(), &st) != TREEMASK_OK) bench::die("stats");
    std::printf(
        "  %-18s %llu nodes: %5.1f bytes/item (%.1f MB; target <= 24), built in %.1f s, "
        "peak memory of the build %.2f GB (RSS growth)\n",
        labels ? "with item labels" : "without labels", static_cast<unsigned long long>(st.n_nodes),
        static_cast<double>(st.bytes) / static_cast<double>(s.items),
        static_cast<double>(st.bytes) / 1e6, took,
        peak > before ? static_cast<double>(peak - before) / 1e9 : 0.0);
  }
}

int main(int argc, char **argv) {
  // --quick: the small shapes only (a smoke run in tests).
  // --catalogue: the catalogue-scale line only.
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const bool catalogue_only = argc > 1 && std::string(argv[1]) == "--catalogue";
  std::mt19937_64 rng(1);
  std::printf("treemask beam step, normalizer kernel: %s\n\n", treemask_beam_kernel_isa());
  if (catalogue_only) {
    catalogue_scale({"catalogue scale (8 levels)", 151936, 256, 8, 20000000, 1, 1}, rng);
    return 0;
  }
  if (quick) {
    run_shape({"smoke (3 x 64 codes)", 1000, 64, 3, 20000, 8, 2}, rng);
    catalogue_scale({"smoke (8 levels)", 1000, 16, 8, 20000, 1, 1}, rng);
    return 0;
  }
  run_shape({"MiniOneRec (3 x 256 codes)", 151936, 256, 3, 1000000, 50, 8}, rng);
  const double small =
      run_shape({"OneRec-like (3 x 8192 codes)", 151936, 8192, 3, 1000000, 32, 16}, rng);
  const double large =
      run_shape({"OneRec-like (3 x 8192 codes)", 151936, 8192, 3, 20000000, 32, 16}, rng);
  std::printf("\nflatness: step at 20M items / at 1M items = %.3f (target <= 1.15)\n\n",
              large / small);
  catalogue_scale({"catalogue scale (8 levels)", 151936, 256, 8, 20000000, 1, 1}, rng);
  return 0;
}
