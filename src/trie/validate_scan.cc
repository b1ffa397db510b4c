// The pass/fail scan of nodes and edges of validate_trie_arrays
// (trie_structure_holds, trie.h), with AVX2 twins of its scalar words.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <bit>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/cpu.h"
#include "trie/trie.h"

namespace treemask {

namespace {

// The structural checks of nodes and edges, as two passes that only decide
// "all hold" (validate_trie_arrays then locates the first failure with the
// slower, naming loop of locate_structure_error). Each pass works on 64
// nodes or 64 edges at a time, reducing them to one bit word, so that the
// AVX2 twins below can do 8 at a time with no branch per node or edge.
//
// Nodes, per word of 64 (one terminal word): begin <= end, begin >= node
// id, end <= n_edges (so the offsets ascend), the fanout, and "a node
// without children is terminal" (the word of leaves & ~terminal == 0).
//
// Edges, per word of 64: token < vocab_size, near a stop token (checked
// exactly afterwards, rarely), and children ascending: an edge whose token
// is <= its predecessor's must be the first edge of its node, i.e. one of
// the node_offsets values (merged in, in order, from the offsets: they
// ascend once the node pass has passed).
struct Scan {
  bool bad = false;
  uint32_t max_fanout = 0;
  bool near_stop = false;
};

struct ScanArgs {
  const uint32_t *off;
  const int32_t *tok;
  const uint64_t *terminal;
  const uint64_t *head;  // CSR leaves that head a tail (not terminal by need)
  uint64_t n_nodes, n_edges;
  uint32_t vocab, stop_lo, stop_span;
};

// Nodes [64 w, min(64 w + 64, n)): the leaves word, with range and fanout.
inline uint64_t node_word_scalar(const ScanArgs &a, uint64_t w, Scan &s) {
  const uint64_t base = w * 64;
  const uint64_t count = std::min<uint64_t>(64, a.n_nodes - base);
  uint64_t leaves = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t node = base + i;
    const uint32_t b = a.off[node], e = a.off[node + 1];
    s.bad |= (e < b) | (b < node) | (e > a.n_edges);
    s.max_fanout = std::max(s.max_fanout, e - b);
    leaves |= uint64_t{b == e} << i;
  }
  return leaves;
}

// Edges [64 w, min(64 w + 64, n_edges)): the word of descents (bit i: edge
// 64 w + i >= 1 has a token <= its predecessor's), with range and stops.
inline uint64_t edge_word_scalar(const ScanArgs &a, uint64_t w, Scan &s) {
  const uint64_t base = w * 64;
  const uint64_t count = std::min<uint64_t>(64, a.n_edges - base);
  const auto *utok = reinterpret_cast<const uint32_t *>(a.tok);
  uint64_t down = 0;
  bool out = false, close = false;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t k = base + i;
    out |= utok[k] >= a.vocab;
    close |= utok[k] - a.stop_lo <= a.stop_span;
    if (k > 0) down |= uint64_t{a.tok[k] <= a.tok[k - 1]} << i;
  }
  s.bad |= out;
  s.near_stop |= close;
  return down;
}

// The loop over the words of both passes; Words supplies one word at a time
// (node(w) / edge(w), for every whole or partial word) and the finish steps.
template <class Words>
[[gnu::always_inline]] inline Scan scan_with(const ScanArgs &a, Words &words) {
  Scan s;
  const uint64_t node_words = (a.n_nodes + 63) / 64;
  const uint64_t edge_words = (a.n_edges + 63) / 64;
  for (uint64_t w = 0; w < node_words; ++w) {
    const uint64_t heads = a.head ? a.head[w] : 0;
    const uint64_t leaves = words.node(a, w, s);
    s.bad |= ((leaves & ~a.terminal[w] & ~heads) | (heads & ~leaves)) != 0;
  }
  words.finish_nodes(s);
  if (s.bad) return s;  // the offsets may not ascend: no merge below

  uint64_t j = 0;  // the next node offset to merge
  for (uint64_t w = 0; w < edge_words; ++w) {
    const uint64_t down = words.edge(a, w, s);
    const uint64_t end = w * 64 + 64;
    uint64_t starts = 0;
    for (; j <= a.n_nodes && a.off[j] < end; ++j) starts |= uint64_t{1} << (a.off[j] - w * 64);
    s.bad |= (down & ~starts) != 0;
  }
  words.finish_edges(s);
  return s;
}

struct ScalarWords {
  uint64_t node(const ScanArgs &a, uint64_t w, Scan &s) { return node_word_scalar(a, w, s); }
  uint64_t edge(const ScanArgs &a, uint64_t w, Scan &s) { return edge_word_scalar(a, w, s); }
  void finish_nodes(Scan &) {}
  void finish_edges(Scan &) {}
};

Scan scan_scalar(const ScanArgs &a) {
  ScalarWords words;
  return scan_with(a, words);
}

#if defined(__x86_64__)
#define TREEMASK_VALIDATE_AVX2 1
// Eight nodes or edges per step for every whole word; the partial words at
// either end (and the first edge word, whose first edge has no predecessor)
// take the scalar ones.
struct Avx2Words {
  __m256i good, fmax, in_range, near;

  [[gnu::target("avx2")]] Avx2Words()
      : good(_mm256_set1_epi32(-1)),
        fmax(_mm256_setzero_si256()),
        in_range(_mm256_set1_epi32(-1)),
        near(_mm256_setzero_si256()) {}

  [[gnu::target("avx2")]] uint64_t node(const ScanArgs &a, uint64_t w, Scan &s) {
    const uint64_t base = w * 64;
    if (base + 64 > a.n_nodes) return node_word_scalar(a, w, s);
    const __m256i edges = _mm256_set1_epi32(static_cast<int>(a.n_edges));
    __m256i id = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    uint64_t leaves = 0;
    for (int g = 0; g < 8; ++g) {
      const uint32_t *p = a.off + base + 8 * g;
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
      const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 1));
      // Unsigned comparisons by max / min: e >= b, b >= id, e <= n_edges.
      const __m256i ok =
          _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(e, b), e),
                                            _mm256_cmpeq_epi32(_mm256_max_epu32(b, id), b)),
                           _mm256_cmpeq_epi32(_mm256_min_epu32(e, edges), e));
      good = _mm256_and_si256(good, ok);
      fmax = _mm256_max_epu32(fmax, _mm256_sub_epi32(e, b));
      const __m256 leaf = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, e));
      leaves |= uint64_t{static_cast<uint32_t>(_mm256_movemask_ps(leaf))} << (8 * g);
      id = _mm256_add_epi32(id, _mm256_set1_epi32(8));
    }
    return leaves;
  }

  [[gnu::target("avx2")]] uint64_t edge(const ScanArgs &a, uint64_t w, Scan &s) {
    const uint64_t base = w * 64;
    if (w == 0 || base + 64 > a.n_edges) return edge_word_scalar(a, w, s);
    const __m256i last = _mm256_set1_epi32(static_cast<int>(a.vocab - 1));
    const __m256i lo = _mm256_set1_epi32(static_cast<int>(a.stop_lo));
    const __m256i span = _mm256_set1_epi32(static_cast<int>(a.stop_span));
    uint64_t down = 0;
    for (int g = 0; g < 8; ++g) {
      const int32_t *p = a.tok + base + 8 * g;
      const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
      const __m256i prev = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p - 1));
      in_range = _mm256_and_si256(in_range, _mm256_cmpeq_epi32(_mm256_max_epu32(t, last), last));
      const __m256i d = _mm256_sub_epi32(t, lo);
      near = _mm256_or_si256(near, _mm256_cmpeq_epi32(_mm256_min_epu32(d, span), d));
      const __m256 up = _mm256_castsi256_ps(_mm256_cmpgt_epi32(t, prev));
      down |= uint64_t{~static_cast<uint32_t>(_mm256_movemask_ps(up)) & 0xFFu} << (8 * g);
    }
    return down;
  }

  [[gnu::target("avx2")]] void finish_nodes(Scan &s) {
    s.bad |= _mm256_movemask_epi8(good) != -1;
    alignas(32) uint32_t f[8];
    _mm256_store_si256(reinterpret_cast<__m256i *>(f), fmax);
    for (uint32_t v : f) s.max_fanout = std::max(s.max_fanout, v);
  }
  [[gnu::target("avx2")]] void finish_edges(Scan &s) {
    s.bad |= _mm256_movemask_epi8(in_range) != -1;
    s.near_stop |= _mm256_movemask_epi8(near) != 0;
  }
};

[[gnu::target("avx2")]] Scan scan_avx2(const ScanArgs &a) {
  Avx2Words words;
  return scan_with(a, words);
}
#endif

// True when the nodes and edges are sound; max_fanout and near_stop are then
// set. `vector` chooses the AVX2 words where the CPU has them (tests compare
// both).
bool structure_holds(const TrieArrays &a, uint32_t &max_fanout, bool &near_stop,
                     bool vector = true) {
  const uint64_t n = a.n_explicit;
  if (a.node_offsets[0] != 0 || a.node_offsets[n] != n - 1) return false;
  ScanArgs args{a.node_offsets,
                a.edge_tokens,
                a.terminal_bits,
                a.head_bits,
                n,
                n - 1,
                static_cast<uint32_t>(a.vocab_size),
                static_cast<uint32_t>(a.stop_tokens[0]),
                static_cast<uint32_t>(a.stop_tokens[a.n_stop_tokens - 1]) -
                    static_cast<uint32_t>(a.stop_tokens[0])};
  const bool avx2 = cpu_features().avx2;
#ifdef TREEMASK_VALIDATE_AVX2
  const Scan s = vector && avx2 ? scan_avx2(args) : scan_scalar(args);
#else
  (void)vector;
  (void)avx2;
  const Scan s = scan_scalar(args);
#endif
  max_fanout = s.max_fanout;
  near_stop = s.near_stop;
  return !s.bad;
}

}  // namespace

bool trie_structure_holds(const TrieArrays &a, bool vector, uint32_t *max_fanout, bool *near_stop) {
  return structure_holds(a, *max_fanout, *near_stop, vector);
}

}  // namespace treemask
