// Scale of the trie sources: an RTP-LLM tree-decode JSON for a semantic-ID
// catalogue of 1M items (4 levels x 256 codes, like RQ-VAE IDs) and a 10M-path
// trie. Prints, in one run:
//   - JSON parse + compile throughput (MB/s);
//   - .tmtrie load time, verified (checksum + structural validation) and
//     trusted (structural validation only), for 1M and 10M paths, next to the
//     physical limits (memcpy, and a plain read, of a buffer of the file's
//     size): the validation's bandwidth against the memory-read limit;
//   - bytes per edge;
//   - memory of the same dictionary held RTP-LLM's way
//     (unordered_map<string, unordered_set<int>>, allocator bytes only, so
//     malloc overhead flatters it) against ours.
// TREEMASK_TEST_SCALE scales the item counts.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/test_util.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int32_t kVocab = 151936;
constexpr int32_t kCodeBase = 100000;  // level l, code c -> kCodeBase + 256 * l + c
constexpr int32_t kStart = 225, kEnd = 2;
constexpr int kLevels = 4;

int32_t code_token(uint32_t item, int level) {
  return kCodeBase + 256 * level +
         static_cast<int32_t>((item >> (8 * (kLevels - 1 - level))) & 255);
}

// n distinct random items; an item is its 4 codes packed into 32 bits.
std::vector<uint32_t> make_items(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> items;
  items.reserve(n + n / 8);
  while (items.size() < n) {
    while (items.size() < n + n / 16) items.push_back(static_cast<uint32_t>(rng()));
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
  }
  items.resize(n);
  std::sort(items.begin(), items.end());
  return items;
}

// Calls visit(key_text, ids) for every key of the RTP-LLM dictionary of the
// items: each internal node lists its children, each item's key lists [end].
template <class Visit>
void for_each_entry(const std::vector<uint32_t> &items, Visit &&visit) {
  std::string key;
  std::vector<int32_t> ids;
  for (int depth = 0; depth <= kLevels; ++depth) {
    const int shift = 8 * (kLevels - depth);
    for (size_t i = 0; i < items.size();) {
      const uint64_t prefix = shift == 32 ? 0 : items[i] >> shift;
      size_t j = i;
      ids.clear();
      for (; j < items.size() && (shift == 32 ? 0 : items[j] >> shift) == prefix; ++j) {
        if (depth == kLevels) continue;
        const int32_t t = code_token(items[j], depth);
        if (ids.empty() || ids.back() != t) ids.push_back(t);
      }
      if (depth == kLevels) ids.push_back(kEnd);
      key = std::to_string(kStart);
      for (int l = 0; l < depth; ++l) {
        key += '_';
        key += std::to_string(code_token(items[i], l));
      }
      visit(key, ids);
      i = j;
    }
  }
}

std::string write_rtp_json(const std::vector<uint32_t> &items, const std::string &path) {
  std::string out = "{\"start_token_id\": 225, \"end_token_id\": 2, \"prefix_dict\": {";
  bool first = true;
  for_each_entry(items, [&](const std::string &key, const std::vector<int32_t> &ids) {
    out += first ? "\"" : ", \"";
    first = false;
    out += key;
    out += "\": [";
    for (size_t k = 0; k < ids.size(); ++k) {
      if (k) out += ", ";
      out += std::to_string(ids[k]);
    }
    out += "]";
  });
  out += "}}";
  std::ofstream(path, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

// RTP-LLM's representation, with every allocated byte counted.
size_t g_allocated = 0;
template <class T>
struct CountingAllocator {
  using value_type = T;
  CountingAllocator() = default;
  template <class U>
  CountingAllocator(const CountingAllocator<U> &) {}
  T *allocate(size_t n) {
    g_allocated += n * sizeof(T);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T *p, size_t n) {
    g_allocated -= n * sizeof(T);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const CountingAllocator<U> &) const {
    return true;
  }
};
using RtpString = std::basic_string<char, std::char_traits<char>, CountingAllocator<char>>;
struct RtpStringHash {
  size_t operator()(const RtpString &s) const {
    return std::hash<std::string_view>()({s.data(), s.size()});
  }
};
using RtpSet = std::unordered_set<int, std::hash<int>, std::equal_to<int>, CountingAllocator<int>>;
using RtpMap = std::unordered_map<RtpString, RtpSet, RtpStringHash, std::equal_to<RtpString>,
                                  CountingAllocator<std::pair<const RtpString, RtpSet>>>;

treemask_trie_stats stats(const treemask_trie *t) {
  treemask_trie_stats s;
  s.struct_size = sizeof(s);
  TM_MUST(treemask_trie_get_stats(t, &s));
  return s;
}

void die(const char *what) {
  std::fprintf(stderr, "%s failed: %s\n", what, treemask_last_error());
  std::exit(1);
}

size_t file_size(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return static_cast<size_t>(in.tellg());
}

// Median load time over a few runs (the page cache is warm after save).
double load_seconds(const std::string &path, uint32_t flags) {
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = Clock::now();
    treemask_trie *t = nullptr;
    if (treemask_trie_load(path.c_str(), flags, &t) != TREEMASK_OK) die("load");
    runs.push_back(seconds_since(t0));
    treemask_trie_free(t);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

double memcpy_gbps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  std::memcpy(b.data(), a.data(), bytes);  // fault the pages in first
  const auto t0 = Clock::now();
  std::memcpy(b.data(), a.data(), bytes);
  const double s = seconds_since(t0);
  return bytes / s / 1e9 + (b[bytes / 2] == 2 ? 1 : 0);  // keep the copy observable
}

// A read-only pass (the structural validation reads and compares): the
// memory-read limit. Best of 3.
double read_gbps(size_t bytes) {
  std::vector<uint64_t> a(bytes / 8, 1);
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    uint64_t sum = 0;
    for (uint64_t v : a) sum += v;
    const double s = seconds_since(t0);
    asm volatile("" : : "g"(&sum) : "memory");
    best = std::max(best, bytes / s / 1e9);
  }
  return best;
}

struct LoadResult {
  size_t bytes;
  double verified_s, trusted_s;
};

LoadResult report_load(const char *name, treemask_trie *t, const std::string &path) {
  if (treemask_trie_save(t, path.c_str(), nullptr) != TREEMASK_OK) die("save");
  LoadResult r{file_size(path), load_seconds(path, 0), load_seconds(path, TREEMASK_LOAD_TRUSTED)};
  std::printf(
      "%-22s file %8.1f MiB  load verified %8.2f ms (%5.2f GB/s)  trusted %8.2f ms (%5.2f GB/s)\n",
      name, r.bytes / 1048576.0, r.verified_s * 1e3, r.bytes / r.verified_s / 1e9,
      r.trusted_s * 1e3, r.bytes / r.trusted_s / 1e9);
  return r;
}

}  // namespace

int main() {
  const double scale = testutil::scale();
  const size_t n_small = static_cast<size_t>(1000000 * scale);
  const size_t n_large = static_cast<size_t>(10000000 * scale);
  const char *tmp_env = std::getenv("TMPDIR");
  std::string dir = std::string(tmp_env ? tmp_env : "/tmp") + "/treemask-bench-XXXXXX";
  if (!mkdtemp(dir.data())) {
    std::perror("mkdtemp");
    return 1;
  }

  // 1. RTP-LLM JSON of 1M semantic-ID items: parse + compile.
  const auto items = make_items(n_small, 1);
  const std::string json_path = dir + "/sid.json";
  const std::string json = write_rtp_json(items, json_path);
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = kVocab;
  treemask_trie *rtp = nullptr;
  const auto t0 = Clock::now();
  if (treemask_trie_from_rtp_json_file(&o, nullptr, json_path.c_str(), &rtp) != TREEMASK_OK)
    die("rtp json");
  const double parse_s = seconds_since(t0);
  const auto rs = stats(rtp);
  std::printf("RTP-LLM JSON, %zu items x %d levels: %.1f MiB, %llu nodes\n", items.size(), kLevels,
              json.size() / 1048576.0, (unsigned long long)rs.n_nodes);
  std::printf("  parse + compile %.3f s = %.0f MB/s (file read included)\n", parse_s,
              json.size() / parse_s / 1e6);
  std::printf("  trie %.1f MiB = %.2f bytes/edge (no labels; target <= 12)\n", rs.bytes / 1048576.0,
              double(rs.bytes) / double(rs.n_edges));

  // 2. The same dictionary RTP-LLM's way.
  {
    g_allocated = 0;
    const auto t1 = Clock::now();
    RtpMap map;
    for_each_entry(items, [&](const std::string &key, const std::vector<int32_t> &ids) {
      RtpSet &set = map[RtpString(key.data(), key.size())];
      set.insert(ids.begin(), ids.end());
    });
    const double build_s = seconds_since(t1);
    std::printf(
        "  RTP-LLM style unordered_map<string, unordered_set<int>>: %zu keys, %.1f MiB "
        "(built in %.2f s)\n",
        map.size(), g_allocated / 1048576.0, build_s);
    std::printf("  ours is %.1fx smaller (target >= 20x)\n",
                double(g_allocated) / double(rs.bytes));
  }

  // 3. A 10M-path trie (semantic IDs with item labels).
  treemask_trie *large = nullptr;
  {
    const auto big = make_items(n_large, 2);
    std::vector<int32_t> tokens;
    std::vector<size_t> offsets{0};
    tokens.reserve(big.size() * kLevels);
    offsets.reserve(big.size() + 1);
    for (uint32_t item : big) {
      for (int l = 0; l < kLevels; ++l) tokens.push_back(code_token(item, l));
      offsets.push_back(tokens.size());
    }
    const int32_t stop = kEnd;
    o.stop_tokens = &stop;
    o.n_stop_tokens = 1;
    const auto t2 = Clock::now();
    if (treemask_trie_from_paths(&o, tokens.data(), offsets.data(), big.size(), nullptr, &large) !=
        TREEMASK_OK) {
      die("paths");
    }
    const auto ls = stats(large);
    std::printf(
        "\n%zu-path trie: %llu nodes, built in %.2f s, %.1f MiB = %.2f bytes/edge "
        "(labels included)\n",
        big.size(), (unsigned long long)ls.n_nodes, seconds_since(t2), ls.bytes / 1048576.0,
        double(ls.bytes) / double(ls.n_edges));
  }

  // 4. .tmtrie load times.
  std::printf("\n.tmtrie load (median of 7, page cache warm)\n");
  const LoadResult small = report_load("1M paths (RTP JSON)", rtp, dir + "/small.tmtrie");
  const LoadResult big = report_load("10M paths", large, dir + "/large.tmtrie");
  (void)small;
  std::printf(
      "  structural validation (trusted load, mapping included) %.2f GB/s (target >= 5); "
      "memory-read limit (sum of a buffer that size) %.2f GB/s\n",
      big.bytes / big.trusted_s / 1e9, read_gbps(big.bytes));
  std::printf("  verified load %.2f GB/s (target >= 1); memcpy of a buffer that size: %.2f GB/s\n",
              big.bytes / big.verified_s / 1e9, memcpy_gbps(big.bytes));
  treemask_trie_free(rtp);
  treemask_trie_free(large);
  if (!std::getenv("TREEMASK_BENCH_KEEP")) std::system(("rm -rf '" + dir + "'").c_str());
  return 0;
}
