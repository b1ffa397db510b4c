// What the benchmarks share: timing, a compiler barrier, the RTP-LLM-style
// baseline and its prefix dictionary, and tries built through the public API.
//
// Timing: every number is the best of 21 runs of a calibrated loop of about
// 2 ms (ns per call). The machine is shared, so the best run is the one least
// disturbed by others; every baseline is measured the same way in the same
// process, so ratios compare like with like.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/test_util.h"

namespace bench {

constexpr int32_t kVocab = 151936;  // Qwen2.5's padded vocab
constexpr int32_t kRtpStart = 225, kRtpEnd = 2;

// Keeps the compiler from dropping or reordering stores to p.
inline void keep(const void *p) { asm volatile("" : : "g"(p) : "memory"); }

inline double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Best time per call of f over `runs` loops, each sized to about target_ms
// (short loops: on a shared machine some of them run undisturbed).
template <class F>
double ns_per_call(F &&f, double target_ms = 2, int runs = 21) {
  size_t iters = 1;
  for (;;) {  // calibrate
    const double t0 = now_ns();
    for (size_t i = 0; i < iters; ++i) f();
    const double took = now_ns() - t0;
    if (took >= target_ms * 1e6 / 8 || iters > (size_t{1} << 30)) {
      iters =
          std::max<size_t>(1, static_cast<size_t>(iters * target_ms * 1e6 / std::max(took, 1.0)));
      break;
    }
    iters *= 4;
  }
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    const double t0 = now_ns();
    for (size_t i = 0; i < iters; ++i) f();
    best = std::min(best, (now_ns() - t0) / static_cast<double>(iters));
  }
  return best;
}

// A buffer aligned like a torch tensor's storage (64 bytes).
template <class T>
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n)
      : data(static_cast<T *>(::operator new (n * sizeof(T), std::align_val_t{64}))), size(n) {
    std::memset(static_cast<void *>(data), 0, n * sizeof(T));
  }
  AlignedBuffer(const AlignedBuffer &) = delete;
  ~AlignedBuffer() { ::operator delete (data, std::align_val_t{64}); }
  T *data;
  size_t size;
};

[[noreturn]] inline void die(const char *what) {
  std::fprintf(stderr, "%s: %s\n", what, treemask_last_error());
  std::exit(1);
}

// Where ../shared/data lives: beside the source tree, as the project's README
// says; empty when it is absent.
inline std::string shared_data(const std::string &relative) {
  const char *root = std::getenv("TREEMASK_SOURCE_ROOT");
  const std::string path = std::string(root ? root : ".") + "/../shared/data/" + relative;
  return std::ifstream(path).good() ? path : std::string();
}

// An RTP-LLM-style prefix dictionary, written from RTP-LLM's documented
// design (PrefixToCandidateTokens + TreeDFA): the state is a string key, the
// start id followed by each generated id joined with "_"; the allowed tokens
// are an unordered_set looked up by that key under a mutex; a missing key
// allows only the end token.
struct RtpDict {
  std::unordered_map<std::string, std::unordered_set<int32_t>> prefix_to_candidates;
  std::mutex mutex;

  void add(const std::string &key, const std::vector<int32_t> &ids) {
    prefix_to_candidates[key].insert(ids.begin(), ids.end());
  }
  bool valid(const std::string &key) {
    std::lock_guard<std::mutex> lock(mutex);
    return prefix_to_candidates.count(key) > 0;
  }
  std::vector<size_t> candidates(const std::string &key) {
    std::vector<size_t> out;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = prefix_to_candidates.find(key);
      if (it != prefix_to_candidates.end()) out.assign(it->second.begin(), it->second.end());
    }
    if (out.empty()) out.push_back(kRtpEnd);
    return out;
  }
};

// One sequence in the RTP-LLM style.
class RtpSequence {
 public:
  explicit RtpSequence(RtpDict *d) : dict(d) {}

  // The dense uint8 mask of one row into a reused buffer: 1 = masked.
  void fill(uint8_t *mask_row) const {
    const std::vector<size_t> ids = dict->candidates(key);
    std::memset(mask_row, 1, kVocab);
    for (size_t t : ids) {
      if (t < static_cast<size_t>(kVocab)) mask_row[t] = 0;
    }
  }
  // generateNextKey + isValidStatus: a string concatenation and a lookup.
  bool accept(int32_t token) {
    if (!generated.empty() && generated.back() == kRtpEnd) return true;
    std::string next = key + "_" + std::to_string(token);
    if (!dict->valid(next) && token != kRtpEnd) return false;
    generated.push_back(token);
    key = std::move(next);
    return true;
  }
  void reset() {
    key = std::to_string(kRtpStart);
    generated.clear();
  }

 private:
  RtpDict *dict;
  std::string key = std::to_string(kRtpStart);
  std::vector<int32_t> generated;
};

// A prefix dictionary as keys and lists, convertible to both an RtpDict and
// treemask paths.
struct PrefixDict {
  std::vector<std::pair<std::string, std::vector<int32_t>>> entries;

  // RTP-LLM's TreeDFA refuses a token whose key is missing (unless it is the
  // end token), while a missing key's candidates fall back to the end token.
  // Spelling that fallback out as a key with [end] lets both implementations
  // walk every listed candidate.
  void complete() {
    std::unordered_set<std::string> keys;
    for (auto &e : entries) {
      keys.insert(e.first);
      if (e.second.empty()) e.second.push_back(kRtpEnd);
    }
    const size_t n = entries.size();
    for (size_t i = 0; i < n; ++i) {
      for (int32_t id : entries[i].second) {
        if (id == kRtpEnd) continue;
        std::string child = entries[i].first + "_" + std::to_string(id);
        if (keys.insert(child).second) entries.emplace_back(std::move(child), std::vector{kRtpEnd});
      }
    }
  }

  void fill(RtpDict &d) const {
    for (const auto &[k, ids] : entries) d.add(k, ids);
  }

  // After complete(): a key whose list holds the end token is a terminal
  // node, the path spelled by the key after the start id.
  treemask_trie *build_trie() const {
    std::vector<int32_t> tokens;
    std::vector<size_t> offsets{0};
    for (const auto &[key, ids] : entries) {
      if (std::find(ids.begin(), ids.end(), kRtpEnd) == ids.end()) continue;
      std::stringstream parts(key);
      std::string part;
      std::getline(parts, part, '_');  // the start id
      while (std::getline(parts, part, '_')) tokens.push_back(std::stoi(part));
      offsets.push_back(tokens.size());
    }
    treemask_trie_options opts;
    treemask_trie_options_init(&opts);
    opts.vocab_size = kVocab;
    const int32_t end = kRtpEnd;
    opts.stop_tokens = &end;
    opts.n_stop_tokens = 1;
    treemask_trie *t = nullptr;
    if (treemask_trie_from_paths(&opts, tokens.data(), offsets.data(), offsets.size() - 1, nullptr,
                                 &t) != TREEMASK_OK) {
      die("trie from prefix dict");
    }
    return t;
  }
};

// ../shared/data/rtp-llm/gir_prefix_dict.txt: lines "key<TAB>id\x02id...".
inline std::optional<PrefixDict> load_gir_prefix_dict() {
  const std::string path = shared_data("rtp-llm/gir_prefix_dict.txt");
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  PrefixDict d;
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::vector<int32_t> ids;
    std::stringstream list(line.substr(tab + 1));
    std::string id;
    while (std::getline(list, id, '\x02')) ids.push_back(std::stoi(id));
    d.entries.emplace_back(line.substr(0, tab), std::move(ids));
  }
  d.complete();
  return d;
}

// A synthetic dictionary: the root has `fanout` children, each of those
// `fanout` children, and every depth-2 node ends (only the end token).
inline PrefixDict synthetic_dict(size_t fanout, std::mt19937_64 &rng) {
  auto distinct = [&](size_t n) {
    std::vector<int32_t> ids;
    std::unordered_set<int32_t> seen;
    while (ids.size() < n) {
      const auto t = static_cast<int32_t>(1000 + rng() % 150000);
      if (seen.insert(t).second) ids.push_back(t);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  PrefixDict d;
  const std::string root = std::to_string(kRtpStart);
  const auto first = distinct(fanout);
  d.entries.emplace_back(root, first);
  for (int32_t a : first) {
    const std::string key = root + "_" + std::to_string(a);
    const auto second = distinct(fanout);
    d.entries.emplace_back(key, second);
    for (int32_t b : second)
      d.entries.emplace_back(key + "_" + std::to_string(b), std::vector{kRtpEnd});
  }
  return d;
}

inline treemask_matcher *new_matcher(treemask_trie *t) {
  treemask_matcher *m = nullptr;
  if (treemask_matcher_create(t, nullptr, &m) != TREEMASK_OK) die("matcher");
  return m;
}

inline treemask_batch *new_batch(size_t n_slots, size_t n_threads) {
  treemask_batch_options o;
  treemask_batch_options_init(&o);
  o.n_slots = n_slots;
  o.n_threads = n_threads;
  treemask_batch *b = nullptr;
  if (treemask_batch_create(&o, &b) != TREEMASK_OK) die("batch");
  return b;
}

// A random decode: the tokens a walk from the root takes (always allowed,
// the end token where the path ends), with -1 marking a reset after the end.
// At least `steps` entries.
inline std::vector<int32_t> random_walk(treemask_trie *t, size_t steps, std::mt19937_64 &rng) {
  treemask_matcher *m = new_matcher(t);
  std::vector<int32_t> walk;
  // Ends with a reset, so a benchmark may replay the walk in a loop.
  while (walk.size() < steps || walk.back() != -1) {
    if (treemask_matcher_is_terminated(m)) {
      walk.push_back(-1);
      treemask_matcher_reset(m);
      continue;
    }
    const auto allowed = testutil::next_tokens(m);
    const int32_t token = allowed[rng() % allowed.size()];
    bool ok = false;
    TM_MUST(treemask_matcher_accept_token(m, token, &ok));
    walk.push_back(token);
  }
  treemask_matcher_free(m);
  return walk;
}

}  // namespace bench
