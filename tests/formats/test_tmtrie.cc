// The .tmtrie file: save/load round trips are bit for bit, metadata travels,
// and damaged files (truncated, bit-flipped, wrong magic or version) are
// clear errors when verified; loaded trusted (checksum skipped) they either
// fail the structural validation with a clear error or behave exactly like a
// built trie (every view agrees).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/oracle.h"
#include "common/test_util.h"
#include "fuzz/trie_checks.h"
#include "trie/file.h"
#include "trie/trie.h"
#include "trie/xxh64.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

std::string last_error() { return treemask_last_error(); }

// A scratch directory removed at the end of the test.
class TmtrieTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/treemask-tmtrie-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }

  std::string dir_;
};

std::vector<unsigned char> read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string &path, const unsigned char *data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(n));
}

const treemask::Trie &internal(const treemask_trie *t) {
  return *reinterpret_cast<const treemask::Trie *>(t);
}

// Every count and every array of the table (trie/layout.h), so an array
// added there is compared here too.
void expect_same_arrays(const treemask_trie *x, const treemask_trie *y) {
  const treemask::TrieArrays &a = internal(x).arrays(), &b = internal(y).arrays();
#define EXPECT_SAME_COUNT(type, name) ASSERT_EQ(a.name, b.name) << #name;
  TREEMASK_TRIE_COUNTS(EXPECT_SAME_COUNT)
#undef EXPECT_SAME_COUNT
  std::vector<const void *> theirs;
  treemask::for_each_array(
      b, [&](const treemask::ArrayInfo &, const auto *p) { theirs.push_back(p); });
  size_t i = 0;
  treemask::for_each_array(a, [&](const treemask::ArrayInfo &info, const auto *p) {
    const void *q = theirs[i++];
    EXPECT_EQ(p == nullptr, q == nullptr) << info.name;
    if (info.count == 0 || !p || !q) return;
    EXPECT_EQ(std::memcmp(p, q, info.bytes()), 0) << info.name;
  });
}

// Visits every node through the public API (fill, next tokens, labels,
// forced tokens, accept) and returns how many calls failed. On a sound trie
// that is 0; on a corrupted one it may not be, but nothing may crash.
size_t exercise(treemask_trie *t) {
  treemask_matcher *root = nullptr;
  if (treemask_matcher_create(t, nullptr, &root) != TREEMASK_OK) return 1;
  std::vector<MatcherHandle> stack;
  stack.emplace_back(root);
  std::vector<int32_t> row(treemask_bitmask_words(treemask_trie_vocab_size(t)));
  size_t failures = 0, visited = 0;
  int32_t forced[64];
  int64_t labels[64];
  // Corrupted offsets can make nodes share children, turning the walk over
  // paths exponential; a sound trie has one path per node.
  const size_t max_visits = 2 * internal(t).n_nodes() + 16;
  while (!stack.empty() && ++visited <= max_visits) {
    MatcherHandle m = std::move(stack.back());
    stack.pop_back();
    if (treemask_matcher_fill_next_token_bitmask(m.p, row.data(), row.size(), nullptr, nullptr) !=
        TREEMASK_OK) {
      ++failures;
    }
    treemask_matcher_forced_tokens(m.p, forced, 64);
    treemask_matcher_label_ids(m.p, labels, 64);
    for (int32_t tok : testutil::next_tokens(m.p)) {
      treemask_matcher *child = nullptr;
      if (treemask_matcher_clone(m.p, &child) != TREEMASK_OK) continue;
      bool accepted = false;
      if (treemask_matcher_accept_token(child, tok, &accepted) != TREEMASK_OK || !accepted) {
        ++failures;
      }
      if (treemask_matcher_is_terminated(child)) {
        treemask_matcher_free(child);
      } else {
        stack.emplace_back(child);
      }
    }
  }
  return failures;
}

TEST_F(TmtrieTest, RoundTripIsBitForBit) {
  std::mt19937_64 rng(7);
  const int rounds = testutil::scaled(60);
  for (int round = 0; round < rounds; ++round) {
    const int32_t vocab = std::uniform_int_distribution<int32_t>(1, 5000)(rng);
    oracle::RandomTrie r = oracle::random_trie(rng, vocab);
    treemask_trie_options o;
    treemask_trie_options_init(&o);
    o.vocab_size = vocab;
    o.stop_tokens = r.stops.data();
    o.n_stop_tokens = r.stops.size();
    TrieHandle built;
    ASSERT_EQ(treemask_trie_from_paths(&o, r.tokens.data(), r.offsets.data(), r.offsets.size() - 1,
                                       r.labels.empty() ? nullptr : r.labels.data(), &built.p),
              TREEMASK_OK)
        << last_error();
    const std::string file = path("t.tmtrie");
    ASSERT_EQ(treemask_trie_save(built.p, file.c_str(), nullptr), TREEMASK_OK) << last_error();
    for (uint32_t flags : {0u, uint32_t{TREEMASK_LOAD_TRUSTED}}) {
      TrieHandle loaded;
      ASSERT_EQ(treemask_trie_load(file.c_str(), flags, &loaded.p), TREEMASK_OK) << last_error();
      expect_same_arrays(built.p, loaded.p);
      EXPECT_EQ(exercise(loaded.p), 0u);
    }
  }
}

TEST_F(TmtrieTest, RtpTrieWithoutLabelsRoundTrips) {
  const std::string tsv =
      "1\t4\x02"
      "5\x02"
      "0\n1_4\t6\n";
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 10;
  TrieHandle built, loaded;
  ASSERT_EQ(treemask_trie_from_rtp_tsv(&o, testutil::Rtp(1, 0, nullptr).get(), tsv.data(),
                                       tsv.size(), &built.p),
            TREEMASK_OK)
      << last_error();
  const std::string file = path("rtp.tmtrie");
  ASSERT_EQ(treemask_trie_save(built.p, file.c_str(), nullptr), TREEMASK_OK) << last_error();
  ASSERT_EQ(treemask_trie_load(file.c_str(), 0, &loaded.p), TREEMASK_OK) << last_error();
  EXPECT_FALSE(internal(loaded.p).arrays().has_labels());
  expect_same_arrays(built.p, loaded.p);
}

TEST_F(TmtrieTest, MetadataTravelsAndMerges) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1, 2}, {3}}, 10, {0}, t), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_metadata_count(t.p), 0u);
  const char *keys[] = {"tokenizer", "labels"};
  const char *values[] = {"sha256:abc", "cat\ndog"};
  treemask_save_options so;
  treemask_save_options_init(&so);
  so.metadata_keys = keys;
  so.metadata_values = values;
  so.n_metadata = 2;
  const std::string a = path("a.tmtrie"), b = path("b.tmtrie");
  ASSERT_EQ(treemask_trie_save(t.p, a.c_str(), &so), TREEMASK_OK) << last_error();
  TrieHandle la;
  ASSERT_EQ(treemask_trie_load(a.c_str(), 0, &la.p), TREEMASK_OK) << last_error();
  ASSERT_EQ(treemask_trie_metadata_count(la.p), 2u);
  const char *k = nullptr, *v = nullptr;
  ASSERT_EQ(treemask_trie_metadata_at(la.p, 0, &k, &v), TREEMASK_OK);
  EXPECT_STREQ(k, "labels");  // sorted by key
  EXPECT_STREQ(v, "cat\ndog");
  EXPECT_STREQ(treemask_trie_metadata_get(la.p, "tokenizer"), "sha256:abc");
  EXPECT_EQ(treemask_trie_metadata_get(la.p, "missing"), nullptr);
  EXPECT_EQ(treemask_trie_metadata_at(la.p, 2, &k, &v), TREEMASK_ERR_OUT_OF_RANGE);
  // Saving the loaded trie keeps its metadata; a key given again wins.
  const char *k2[] = {"tokenizer"};
  const char *v2[] = {"sha256:def"};
  so.metadata_keys = k2;
  so.metadata_values = v2;
  so.n_metadata = 1;
  ASSERT_EQ(treemask_trie_save(la.p, b.c_str(), &so), TREEMASK_OK) << last_error();
  TrieHandle lb;
  ASSERT_EQ(treemask_trie_load(b.c_str(), TREEMASK_LOAD_TRUSTED, &lb.p), TREEMASK_OK);
  EXPECT_STREQ(treemask_trie_metadata_get(lb.p, "tokenizer"), "sha256:def");
  EXPECT_STREQ(treemask_trie_metadata_get(lb.p, "labels"), "cat\ndog");
  // Bad metadata is rejected with a name.
  const char *dup[] = {"x", "x"};
  so.metadata_keys = dup;
  so.metadata_values = values;
  so.n_metadata = 2;
  EXPECT_EQ(treemask_trie_save(t.p, b.c_str(), &so), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("duplicate metadata key \"x\""), std::string::npos) << last_error();
  const char *empty[] = {""};
  so.metadata_keys = empty;
  so.n_metadata = 1;
  EXPECT_EQ(treemask_trie_save(t.p, b.c_str(), &so), TREEMASK_ERR_INVALID_ARGUMENT);
  so.metadata_keys = nullptr;
  EXPECT_EQ(treemask_trie_save(t.p, b.c_str(), &so), TREEMASK_ERR_INVALID_ARGUMENT);
}

// A trie with labels and multi-label terminals, so every section is non-empty.
std::string saved_sample(const std::string &file) {
  TrieHandle t;
  const std::vector<int64_t> labels{5, 6, 7, 8, 9, 10};
  EXPECT_EQ(testutil::make_trie({{1, 2, 3}, {1, 2, 3}, {1, 4}, {5}, {5, 6, 7, 8}, {}}, 40, {0, 39},
                                t, &labels),
            TREEMASK_OK);
  const char *keys[] = {"tokenizer"};
  const char *values[] = {"qwen2.5"};
  treemask_save_options so;
  treemask_save_options_init(&so);
  so.metadata_keys = keys;
  so.metadata_values = values;
  so.n_metadata = 1;
  EXPECT_EQ(treemask_trie_save(t.p, file.c_str(), &so), TREEMASK_OK);
  return file;
}

TEST_F(TmtrieTest, TruncationAtAnyOffsetIsAnError) {
  const auto bytes = read_bytes(saved_sample(path("s.tmtrie")));
  ASSERT_GT(bytes.size(), 400u);
  const std::string cut = path("cut.tmtrie");
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut, bytes.data(), n);
    for (uint32_t flags : {0u, uint32_t{TREEMASK_LOAD_TRUSTED}}) {
      TrieHandle t;
      const treemask_status s = treemask_trie_load(cut.c_str(), flags, &t.p);
      EXPECT_EQ(s, TREEMASK_ERR_CORRUPT_FILE) << "cut at " << n << ": " << last_error();
      EXPECT_EQ(t.p, nullptr);
    }
  }
  // Appended bytes are caught too.
  auto longer = bytes;
  longer.push_back(0);
  write_bytes(cut, longer.data(), longer.size());
  TrieHandle t;
  EXPECT_EQ(treemask_trie_load(cut.c_str(), TREEMASK_LOAD_TRUSTED, &t.p),
            TREEMASK_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("header says"), std::string::npos) << last_error();
}

// Keeps a damaged image alive behind a Trie made from it.
struct ImageStorage final : treemask::TrieStorage {
  std::vector<uint64_t> words;
};

// Every byte flipped three ways, through the pure image parser (fast, the
// same checks as a load), and a sample of them through real files.
TEST_F(TmtrieTest, EveryFlippedByteFailsVerificationAndNeverCrashesTrusted) {
  const auto bytes = read_bytes(saved_sample(path("s.tmtrie")));
  std::vector<uint64_t> image((bytes.size() + 7) / 8);
  std::memcpy(image.data(), bytes.data(), bytes.size());
  auto *data = reinterpret_cast<unsigned char *>(image.data());
  const std::string bad = path("bad.tmtrie");
  size_t trusted_loads = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const unsigned char flip : {0x01, 0x80, 0xFF}) {
      data[i] ^= flip;
      const auto verified = treemask::parse_trie_image(data, bytes.size(), 0);
      EXPECT_TRUE(verified.status().code() == treemask::Code::kCorruptFile ||
                  verified.status().code() == treemask::Code::kVersionMismatch)
          << "byte " << i << " ^ " << int(flip) << ": " << verified.status().message();
      auto trusted = treemask::parse_trie_image(data, bytes.size(), treemask::kLoadTrusted);
      if (trusted.ok()) {
        ++trusted_loads;
        auto storage = std::make_unique<ImageStorage>();
        storage->words = image;
        const auto *base = reinterpret_cast<const unsigned char *>(image.data());
        const auto *copy = reinterpret_cast<const unsigned char *>(storage->words.data());
        // Re-point the views at the copy the trie owns.
        treemask::TrieArrays a = trusted.value().arrays;
        treemask::for_each_array(a, [&](const treemask::ArrayInfo &, auto *&p) {
          if (p)
            p = reinterpret_cast<std::remove_reference_t<decltype(p)>>(
                copy + (reinterpret_cast<const unsigned char *>(p) - base));
        });
        auto *trie = new treemask::Trie(std::move(storage), a, size_t{1} << 20);
        TrieHandle t(reinterpret_cast<treemask_trie *>(trie));
        // Whatever passes the structural validation is sound.
        EXPECT_EQ(exercise(t.p), 0u) << "byte " << i << " ^ " << int(flip);
      }
      if (i % 97 == 0) {  // the same through the file API
        write_bytes(bad, data, bytes.size());
        TrieHandle v, t;
        const treemask_status s = treemask_trie_load(bad.c_str(), 0, &v.p);
        EXPECT_TRUE(s == TREEMASK_ERR_CORRUPT_FILE || s == TREEMASK_ERR_VERSION_MISMATCH) << s;
        if (treemask_trie_load(bad.c_str(), TREEMASK_LOAD_TRUSTED, &t.p) == TREEMASK_OK) {
          EXPECT_EQ(exercise(t.p), 0u) << "byte " << i << " ^ " << int(flip);
        }
      }
      data[i] ^= flip;
    }
  }
  // Flips in the payload pass a trusted load (that is its point).
  EXPECT_GT(trusted_loads, 0u);
}

// Recomputes both checksums, so that a mutation reaches the structural
// validation even without TREEMASK_LOAD_TRUSTED.
void fix_checksums(unsigned char *image, size_t size) {
  treemask::FileHeader h;
  std::memcpy(&h, image, sizeof(h));
  if (h.header_bytes == sizeof(h) && h.file_bytes == size) {
    h.payload_checksum = treemask::xxh64(image + sizeof(h), size - sizeof(h));
  }
  h.header_checksum = treemask::xxh64(&h, offsetof(treemask::FileHeader, header_checksum));
  std::memcpy(image, &h, sizeof(h));
}

// Parses an image; if it loads, checks through the C API that fill, accept,
// next_tokens, forced_tokens, accept_forced_tokens, can_terminate,
// fill_states and advance_states agree on every node (fuzz/trie_checks.h
// aborts on a disagreement). Returns whether it loaded.
bool loads_and_agrees(std::vector<uint64_t> image, size_t size, uint32_t flags, const char *what) {
  auto *data = reinterpret_cast<const unsigned char *>(image.data());
  auto parsed = treemask::parse_trie_image(data, size, flags);
  if (!parsed.ok()) {
    const auto code = parsed.status().code();
    EXPECT_TRUE(code == treemask::Code::kCorruptFile || code == treemask::Code::kVersionMismatch)
        << what << ": " << parsed.status().message();
    EXPECT_FALSE(parsed.status().message().empty()) << what;
    return false;
  }
  auto storage = std::make_unique<ImageStorage>();
  storage->words = std::move(image);  // a vector's move keeps its buffer
  const treemask::TrieArrays a = parsed.value().arrays;
  TrieHandle t(reinterpret_cast<treemask_trie *>(
      new treemask::Trie(std::move(storage), a, size_t{1} << 20)));
  fuzz::exercise_trie(t.p, true);
  EXPECT_EQ(exercise(t.p), 0u) << what;
  return true;
}

// Every bit of a small labelled trie's file flipped, loaded trusted (the
// checksum skipped) and with both checksums recomputed: either the load
// fails with a clear error or every view of the trie agrees.
TEST_F(TmtrieTest, EveryFlippedBitFailsToLoadOrAgreesEverywhere) {
  const auto bytes = read_bytes(saved_sample(path("s.tmtrie")));
  std::vector<uint64_t> image((bytes.size() + 7) / 8);
  std::memcpy(image.data(), bytes.data(), bytes.size());
  auto *data = reinterpret_cast<unsigned char *>(image.data());
  size_t loaded = 0, refused = 0;
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    const std::string what = "bit " + std::to_string(bit);
    (loads_and_agrees(image, bytes.size(), treemask::kLoadTrusted, what.c_str()) ? loaded
                                                                                 : refused)++;
    std::vector<uint64_t> fixed = image;
    fix_checksums(reinterpret_cast<unsigned char *>(fixed.data()), bytes.size());
    (loads_and_agrees(std::move(fixed), bytes.size(), 0, (what + ", checksums fixed").c_str())
         ? loaded
         : refused)++;
    data[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
  }
  // Both outcomes occur: padding and label values load, structure does not.
  EXPECT_GT(loaded, 0u);
  EXPECT_GT(refused, 0u);
}

// The corruptions of the hardening issue (item 5), each written with valid
// checksums: an edge token >= vocab_size (next_tokens / forced_tokens
// returned it), the same inside a forced chain (accept_forced_tokens failed
// with TREEMASK_ERR_INTERNAL after a partial accept), and one flipped bit of
// node_offsets that made a node's children unsorted (fill set bits that
// accept then rejected). Each is refused at load, trusted or not, naming the
// problem. With TREEMASK_WRITE_SEEDS=DIR the files are also written there
// (the fuzz regression inputs tests/fuzz/inputs/tmtrie/regression-* are).
TEST_F(TmtrieTest, CorruptionsOfTheHardeningIssueAreRefusedAtLoad) {
  // Paths 1 t for t in 10..29 (node 1 has fanout 20, above the 16 where
  // find_child switches to a binary search), 2 5 6 and 2 7. BFS: edges 0, 1
  // (tokens 1, 2) lead to nodes 1, 2; node 1 owns edges 2..21 (tokens
  // 10..29), node 2 edges 22, 23 (tokens 5, 7) to nodes 23, 24. Node 23
  // heads a tail: node 25, token 6, stored as 6 - 1 (the smallest token).
  std::vector<std::vector<int32_t>> paths{{2, 5, 6}, {2, 7}};
  for (int32_t tok = 10; tok < 30; ++tok) paths.push_back({1, tok});
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie(paths, 40, {0}, t), TREEMASK_OK);
  ASSERT_EQ(internal(t.p).n_nodes(), 26u);
  ASSERT_EQ(internal(t.p).arrays().n_explicit, 25u);
  const std::string file = path("c.tmtrie");
  ASSERT_EQ(treemask_trie_save(t.p, file.c_str(), nullptr), TREEMASK_OK);
  const auto bytes = read_bytes(file);
  treemask::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  const uint64_t edges = h.section(treemask::FileSection::edge_tokens).offset;
  const uint64_t offsets = h.section(treemask::FileSection::node_offsets).offset;
  const uint64_t tails = h.section(treemask::FileSection::tail_tokens).offset;
  struct Case {
    const char *name;
    uint64_t at;
    uint32_t value;  // written little-endian at `at`
    size_t bytes;    // of value
    const char *message;
  };
  const Case cases[] = {
      {"edge-token-past-vocab", edges + 4 * 5, 47, 4, "out of range"},
      // The forced chain after 2 5 is the tail: its token 6 becomes 1000.
      {"forced-chain-token-past-vocab", tails, 999, 2, "out of range"},
      // node_offsets[2] = 22 -> 23 (bit 0): node 1 owns edges 2..22, tokens
      // 10..29 then 5, so a binary search misses 5 that a fill sets.
      {"node-offsets-bit-flip", offsets + 4 * 2, 23, 4, "not strictly ascending"},
  };
  const char *seed_dir = std::getenv("TREEMASK_WRITE_SEEDS");
  for (const Case &c : cases) {
    std::vector<uint64_t> image((bytes.size() + 7) / 8);
    auto *data = reinterpret_cast<unsigned char *>(image.data());
    std::memcpy(data, bytes.data(), bytes.size());
    std::memcpy(data + c.at, &c.value, c.bytes);
    fix_checksums(data, bytes.size());
    const std::string bad = path(std::string(c.name) + ".tmtrie");
    write_bytes(bad, data, bytes.size());
    if (seed_dir)
      write_bytes(std::string(seed_dir) + "/regression-" + c.name + ".tmtrie", data, bytes.size());
    for (uint32_t flags : {0u, uint32_t{TREEMASK_LOAD_TRUSTED}}) {
      TrieHandle loaded;
      EXPECT_EQ(treemask_trie_load(bad.c_str(), flags, &loaded.p), TREEMASK_ERR_CORRUPT_FILE)
          << c.name;
      EXPECT_NE(last_error().find(c.message), std::string::npos) << c.name << ": " << last_error();
      EXPECT_NE(last_error().find(bad), std::string::npos) << last_error();
    }
  }
}

// The header's tail token range sizes the table a loaded trie allocates
// (4 bytes per entry): a file claiming 2^32 entries without any tail made a
// 1 KB file take 16 GB (found by the fuzzer). It is refused, with or without
// tails, before anything is allocated.
TEST_F(TmtrieTest, TailRangeInTheHeaderIsBoundedBeforeItIsAllocated) {
  struct Case {
    std::vector<std::vector<int32_t>> paths;
    uint32_t tail_range;
    int32_t tail_base;
    const char *message;
  };
  const Case cases[] = {
      {{{1}, {2}}, 0xFFFE0000u, 0, "a trie without tails has tail tokens"},
      {{{1}, {2}}, 0, 3, "a trie without tails has tail tokens"},
      {{{1, 5, 6}, {2}}, 70000, 1, "span more than 65536"},
      {{{1, 5, 6}, {2}}, 3, -1, "are not inside [0, vocab_size=40)"},
  };
  for (const Case &c : cases) {
    TrieHandle t;
    ASSERT_EQ(testutil::make_trie(c.paths, 40, {0}, t), TREEMASK_OK);
    ASSERT_EQ(internal(t.p).arrays().n_heads > 0, c.paths[0].size() > 1);
    const std::string file = path("range.tmtrie");
    ASSERT_EQ(treemask_trie_save(t.p, file.c_str(), nullptr), TREEMASK_OK);
    auto bytes = read_bytes(file);
    std::vector<uint64_t> image((bytes.size() + 7) / 8);
    auto *data = reinterpret_cast<unsigned char *>(image.data());
    std::memcpy(data, bytes.data(), bytes.size());
    treemask::FileHeader h;
    std::memcpy(&h, data, sizeof(h));
    h.counts.tail_range = c.tail_range;
    h.counts.tail_base = static_cast<uint64_t>(int64_t{c.tail_base});
    std::memcpy(data, &h, sizeof(h));
    fix_checksums(data, bytes.size());
    write_bytes(file, data, bytes.size());
    for (uint32_t flags : {0u, uint32_t{TREEMASK_LOAD_TRUSTED}}) {
      TrieHandle loaded;
      EXPECT_EQ(treemask_trie_load(file.c_str(), flags, &loaded.p), TREEMASK_ERR_CORRUPT_FILE);
      EXPECT_NE(last_error().find(c.message), std::string::npos) << last_error();
    }
  }
}

TEST_F(TmtrieTest, WrongMagicVersionAndFilesThatAreNotTries) {
  auto bytes = read_bytes(saved_sample(path("s.tmtrie")));
  const std::string f = path("x.tmtrie");
  TrieHandle t;
  auto v5 = bytes;
  v5[8] = 5;  // format_version, little-endian
  write_bytes(f, v5.data(), v5.size());
  EXPECT_EQ(treemask_trie_load(f.c_str(), TREEMASK_LOAD_TRUSTED, &t.p),
            TREEMASK_ERR_VERSION_MISMATCH);
  EXPECT_NE(last_error().find("format version 5; this library reads version 4"), std::string::npos)
      << last_error();
  for (unsigned char older : {1, 2, 3}) {  // the formats of earlier releases
    auto old = bytes;
    old[8] = older;
    write_bytes(f, old.data(), old.size());
    EXPECT_EQ(treemask_trie_load(f.c_str(), 0, &t.p), TREEMASK_ERR_VERSION_MISMATCH);
  }
  auto magic = bytes;
  magic[1] = 'X';
  write_bytes(f, magic.data(), magic.size());
  EXPECT_EQ(treemask_trie_load(f.c_str(), 0, &t.p), TREEMASK_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("not a .tmtrie file"), std::string::npos) << last_error();
  const std::string json = "{\"start_token_id\": 1}";
  write_bytes(f, reinterpret_cast<const unsigned char *>(json.data()), json.size());
  EXPECT_EQ(treemask_trie_load(f.c_str(), 0, &t.p), TREEMASK_ERR_CORRUPT_FILE);
  write_bytes(f, nullptr, 0);
  EXPECT_EQ(treemask_trie_load(f.c_str(), 0, &t.p), TREEMASK_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("empty file"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_load(path("missing.tmtrie").c_str(), 0, &t.p), TREEMASK_ERR_IO);
  EXPECT_NE(last_error().find("missing.tmtrie"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_load(dir_.c_str(), 0, &t.p), TREEMASK_ERR_IO);
  EXPECT_EQ(treemask_trie_load(f.c_str(), 0x10, &t.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_load(nullptr, 0, &t.p), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.p, nullptr);
}

// Issue 21 item 3: a large file that is no .tmtrie is refused from its first
// bytes, without being mapped and pre-faulted whole (a 2 GB sparse file took
// 4.7 s and its size in memory to be told "bad magic").
TEST_F(TmtrieTest, AFileThatIsNoTrieIsRefusedWithoutBeingMapped) {
  const std::string f = path("sparse.tmtrie");
  write_bytes(f, nullptr, 0);
  ASSERT_EQ(truncate(f.c_str(), 512 << 20), 0);
  struct rusage before, after;
  ASSERT_EQ(getrusage(RUSAGE_SELF, &before), 0);
  TrieHandle t;
  EXPECT_EQ(treemask_trie_load(f.c_str(), 0, &t.p), TREEMASK_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("bad magic"), std::string::npos) << last_error();
  ASSERT_EQ(getrusage(RUSAGE_SELF, &after), 0);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak memory grown";
}

TEST_F(TmtrieTest, SavingOverALoadedFileKeepsItsMappingValid) {
  const std::string f = path("live.tmtrie");
  TrieHandle first, second, old_loaded, new_loaded;
  ASSERT_EQ(testutil::make_trie({{1, 2}}, 10, {0}, first), TREEMASK_OK);
  ASSERT_EQ(testutil::make_trie({{3}, {4, 5}}, 10, {0}, second), TREEMASK_OK);
  ASSERT_EQ(treemask_trie_save(first.p, f.c_str(), nullptr), TREEMASK_OK);
  ASSERT_EQ(treemask_trie_load(f.c_str(), TREEMASK_LOAD_TRUSTED, &old_loaded.p), TREEMASK_OK);
  ASSERT_EQ(treemask_trie_save(second.p, f.c_str(), nullptr), TREEMASK_OK);
  ASSERT_EQ(treemask_trie_load(f.c_str(), 0, &new_loaded.p), TREEMASK_OK);
  expect_same_arrays(first.p, old_loaded.p);
  expect_same_arrays(second.p, new_loaded.p);
  // No temporary file is left behind.
  EXPECT_EQ(std::system(("test $(ls '" + dir_ + "' | wc -l) -eq 1").c_str()), 0);
}

TEST_F(TmtrieTest, SaveErrorsNameThePath) {
  TrieHandle t;
  ASSERT_EQ(testutil::make_trie({{1}}, 10, {0}, t), TREEMASK_OK);
  EXPECT_EQ(treemask_trie_save(t.p, "/nonexistent-dir/x.tmtrie", nullptr), TREEMASK_ERR_IO);
  EXPECT_NE(last_error().find("/nonexistent-dir/x.tmtrie"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_save(t.p, dir_.c_str(), nullptr), TREEMASK_ERR_IO);
  EXPECT_EQ(treemask_trie_save(nullptr, "x", nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_save(t.p, nullptr, nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
}

TEST(TrieImage, ParsesOnlyAlignedImages) {
  alignas(8) unsigned char buf[16] = {};
  auto r = treemask::parse_trie_image(buf + 1, 8, 0);
  EXPECT_EQ(r.status().code(), treemask::Code::kInvalidArgument);
  r = treemask::parse_trie_image(buf, 16, 0);
  EXPECT_EQ(r.status().code(), treemask::Code::kCorruptFile);
}

}  // namespace
