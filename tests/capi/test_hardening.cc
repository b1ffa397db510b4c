// Issue 14 (hardening) regressions in the C API: sizes that wrap around,
// inputs that are not regular files, flag messages, bad outputs.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace {

using testutil::MatcherHandle;
using testutil::TrieHandle;

std::string last_error() { return treemask_last_error(); }

struct Fixture {
  TrieHandle trie;
  MatcherHandle m;
  Fixture() {
    EXPECT_EQ(testutil::make_trie({{1, 2}, {1, 3}}, 40, {0}, trie), TREEMASK_OK) << last_error();
    treemask_matcher *raw = nullptr;
    EXPECT_EQ(treemask_matcher_create(trie.p, nullptr, &raw), TREEMASK_OK);
    m.p = raw;
  }
};

// Item 1: n = SIZE_MAX (a caller's k - 1 with k = 0) wrapped the size check
// of fill_draft_bitmasks and crashed.
TEST(WrapAround, FillDraftBitmasksWithSizeMax) {
  Fixture f;
  std::vector<int32_t> rows(8, 0);
  const int32_t tokens[] = {1};
  size_t n_valid = 0;
  EXPECT_EQ(treemask_matcher_fill_draft_bitmasks(f.m.p, tokens, nullptr, SIZE_MAX, rows.data(),
                                                 rows.size(), 2, &n_valid),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("n = 18446744073709551615 is too large"), std::string::npos)
      << last_error();
  // One below the wrap: still too large for the buffer, never read.
  EXPECT_NE(treemask_matcher_fill_draft_bitmasks(f.m.p, tokens, nullptr, SIZE_MAX / 8, rows.data(),
                                                 rows.size(), 2, &n_valid),
            TREEMASK_OK);
  // An honest call still works.
  EXPECT_EQ(treemask_matcher_fill_draft_bitmasks(f.m.p, tokens, nullptr, 1, rows.data(),
                                                 rows.size(), 2, &n_valid),
            TREEMASK_OK)
      << last_error();
}

// Every other (pointer, count) and rows x words entry point refuses counts
// that cannot describe memory instead of computing a wrapped size.
TEST(WrapAround, EveryCountIsChecked) {
  Fixture f;
  int32_t one = 1;
  uint32_t state = 0;
  size_t offsets[2] = {0, 1};
  const int32_t offsets32[2] = {0, 1};
  const std::vector<int32_t> stops = {0};
  treemask_trie_options o = testutil::trie_options(40, stops);
  treemask_trie *t = nullptr;
  EXPECT_EQ(treemask_trie_from_paths(&o, &one, offsets, SIZE_MAX, nullptr, &t),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("n_paths"), std::string::npos) << last_error();
  o.n_stop_tokens = SIZE_MAX;
  EXPECT_EQ(treemask_trie_from_paths(&o, &one, offsets, 1, nullptr, &t), TREEMASK_ERR_OUT_OF_RANGE);

  int32_t row[2] = {0, 0};
  EXPECT_EQ(treemask_trie_fill_states(f.trie.p, &state, SIZE_MAX, row, 2),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_trie_fill_states(f.trie.p, &state, SIZE_MAX / 8, row, 2),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_trie_advance_states(f.trie.p, &state, &one, SIZE_MAX, 0, nullptr),
            TREEMASK_ERR_OUT_OF_RANGE);
  size_t n_accepted = 0;
  EXPECT_EQ(treemask_matcher_accept_tokens(f.m.p, &one, SIZE_MAX, &n_accepted),
            TREEMASK_ERR_OUT_OF_RANGE);
  treemask_exclusion_set *set = nullptr;
  const int64_t label = 0;
  EXPECT_EQ(treemask_exclusion_set_create(f.trie.p, &label, SIZE_MAX, &set),
            TREEMASK_ERR_OUT_OF_RANGE);

  float logits[40] = {};
  EXPECT_EQ(treemask_cpu_apply_token_bitmask(logits, TREEMASK_F32, 1, 40, 40, row, 2, SIZE_MAX / 4,
                                             40, &one, 1),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_cpu_apply_token_bitmask(logits, TREEMASK_F32, 1, 40, 40, row, 2, 1, 40, &one,
                                             SIZE_MAX),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_cpu_apply_token_candidates(logits, TREEMASK_F32, SIZE_MAX, 40, 40, offsets32,
                                                &one, 1, 40, nullptr, 0),
            TREEMASK_ERR_OUT_OF_RANGE);

  // In-memory loaders copy len bytes plus padding: len near SIZE_MAX wrapped.
  o.n_stop_tokens = 1;
  EXPECT_EQ(treemask_trie_from_rtp_json(&o, nullptr, "{}", SIZE_MAX - 8, &t),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_trie_from_rtp_tsv(&o, testutil::Rtp(1, 0).get(), "x", SIZE_MAX, &t),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_trie_from_jsonl(&o, "[1]", SIZE_MAX - 1, &t), TREEMASK_ERR_OUT_OF_RANGE);

  treemask_batch_options bo;
  treemask_batch_options_init(&bo);
  bo.n_slots = 4;
  treemask_batch *batch = nullptr;
  ASSERT_EQ(treemask_batch_create(&bo, &batch), TREEMASK_OK);
  EXPECT_EQ(treemask_batch_fill_next_token_bitmask(batch, row, SIZE_MAX / 2, nullptr, 0, nullptr),
            TREEMASK_ERR_OUT_OF_RANGE);
  bool accepted = false;
  EXPECT_EQ(treemask_batch_accept_tokens(batch, &one, SIZE_MAX, &accepted),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_EQ(treemask_batch_reorder(batch, &one, SIZE_MAX), TREEMASK_ERR_OUT_OF_RANGE);
  treemask_batch_free(batch);
}

std::string temp_path(const char *name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/treemask_hardening_" +
         std::to_string(getpid()) + "_" + name;
}

// Item 2: a FIFO blocked open() forever in every _file loader.
TEST(NonRegularFiles, FifoSocketAndDirectoryAreIoErrorsWithoutBlocking) {
  const std::string fifo = temp_path("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string sock = temp_path("sock");
  ::unlink(sock.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  const bool have_socket = bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0;

  const std::vector<int32_t> stops = {0};
  treemask_trie_options o = testutil::trie_options(40, stops);
  treemask_rtp_options rtp;
  treemask_rtp_options_init(&rtp);
  rtp.rtp_llm_defaults = true;
  treemask_trie *probe = nullptr;
  const bool json =
      treemask_trie_from_rtp_json(&o, &rtp, "{}", 2, &probe) != TREEMASK_ERR_UNSUPPORTED;
  treemask_trie_free(probe);
  std::vector<std::string> paths = {fifo, "/dev/null", "."};
  if (have_socket) paths.push_back(sock);
  for (const std::string &p : paths) {
    treemask_trie *t = nullptr;
    EXPECT_EQ(treemask_trie_load(p.c_str(), 0, &t), TREEMASK_ERR_IO) << p;
    EXPECT_NE(last_error().find("not a regular file"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find(p), std::string::npos) << last_error();
    EXPECT_EQ(treemask_trie_from_jsonl_file(&o, p.c_str(), &t), TREEMASK_ERR_IO) << p;
    // Built without simdjson (-Djson=disabled) the RTP JSON loader is
    // TREEMASK_ERR_UNSUPPORTED before it opens anything.
    EXPECT_EQ(treemask_trie_from_rtp_json_file(&o, &rtp, p.c_str(), &t),
              json ? TREEMASK_ERR_IO : TREEMASK_ERR_UNSUPPORTED)
        << p;
    EXPECT_EQ(treemask_trie_from_rtp_tsv_file(&o, &rtp, p.c_str(), &t), TREEMASK_ERR_IO) << p;
  }
  close(fd);
  ::unlink(sock.c_str());
  ::unlink(fifo.c_str());
}

// Item 3 (library side): saving over a device or into a directory is refused.
TEST(SaveOutput, RefusesDevicesDirectoriesAndEmptyPaths) {
  Fixture f;
  EXPECT_EQ(treemask_trie_save(f.trie.p, "", nullptr), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(treemask_trie_save(f.trie.p, ".", nullptr), TREEMASK_ERR_IO);
  EXPECT_NE(last_error().find("is a directory"), std::string::npos) << last_error();
  const std::string fifo = temp_path("out_fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(treemask_trie_save(f.trie.p, fifo.c_str(), nullptr), TREEMASK_ERR_IO);
  EXPECT_NE(last_error().find("not a regular file"), std::string::npos) << last_error();
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ::unlink(fifo.c_str());
}

// Item 6: flags were printed as decimal after "0x".
TEST(Messages, LoadFlagsAreHex) {
  treemask_trie *t = nullptr;
  EXPECT_EQ(treemask_trie_load("/nonexistent.tmtrie", 0x10, &t), TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown load flags 0x10"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_trie_load("/nonexistent.tmtrie", 0x80000000u, &t),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown load flags 0x80000000"), std::string::npos) << last_error();
}

// Item 14: with indices, logits and bitmask may have different row counts.
TEST(Apply, IndicesAddressArraysOfDifferentRowCounts) {
  std::vector<float> logits(4 * 32, 1.0f);
  const int32_t mask[2] = {0b10, 0b01};
  const int32_t index = 1;
  ASSERT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 4, 32, 32, mask, 1, 2, 32,
                                             &index, 1),
            TREEMASK_OK)
      << last_error();
  for (size_t c = 0; c < 4 * 32; ++c) EXPECT_EQ(logits[c] == 1.0f, c / 32 != 1 || c == 32) << c;
  const int32_t past = 3;
  EXPECT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 4, 32, 32, mask, 1, 2, 32,
                                             &past, 1),
            TREEMASK_ERR_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("n_bitmask_rows=2"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_cpu_apply_token_bitmask(logits.data(), TREEMASK_F32, 4, 32, 32, mask, 1, 2, 32,
                                             nullptr, 0),
            TREEMASK_ERR_BUFFER_TOO_SMALL);
}

// Item 13: the fused out-of-place apply equals copy + in-place apply, for
// every dtype, with and without indices, and never writes its input.
TEST(Apply, OutOfPlaceEqualsInPlaceAndLeavesTheInput) {
  std::mt19937 rng(13);
  for (int dtype = 0; dtype < 3; ++dtype) {
    const size_t bytes = dtype == 0 ? 4 : 2;
    for (size_t width : {1, 31, 33, 100}) {
      const size_t rows = 3, stride = width + 3, words = (width + 31) / 32;
      std::vector<uint8_t> in(rows * stride * bytes);
      for (auto &b : in) b = static_cast<uint8_t>(rng());
      std::vector<int32_t> mask(rows * words);
      for (auto &w : mask) w = static_cast<int32_t>(rng() & rng());
      mask[0] = 0;
      if (words > 1) mask[1] = -1;
      const int32_t vocab = static_cast<int32_t>(width > 1 ? width - 1 : 1);
      for (bool use_indices : {false, true}) {
        const int32_t indices[2] = {2, 0};
        const int32_t *idx = use_indices ? indices : nullptr;
        const size_t n_idx = use_indices ? 2 : 0;
        std::vector<uint8_t> want = in;
        ASSERT_EQ(
            treemask_cpu_apply_token_bitmask(want.data(), treemask_dtype(dtype), rows, stride,
                                             width, mask.data(), words, rows, vocab, idx, n_idx),
            TREEMASK_OK)
            << last_error();
        const std::vector<uint8_t> before = in;
        std::vector<uint8_t> got(rows * width * bytes, 0xAB);
        ASSERT_EQ(treemask_cpu_apply_token_bitmask_out(in.data(), got.data(), treemask_dtype(dtype),
                                                       rows, stride, width, width, mask.data(),
                                                       words, rows, vocab, idx, n_idx),
                  TREEMASK_OK)
            << last_error();
        EXPECT_EQ(in, before);
        for (size_t r = 0; r < rows; ++r) {
          EXPECT_EQ(0, std::memcmp(got.data() + r * width * bytes, want.data() + r * stride * bytes,
                                   width * bytes))
              << "dtype " << dtype << " width " << width << " row " << r;
        }
      }
    }
  }
  std::vector<float> buf(64, 1.0f);
  const int32_t mask[2] = {0, 0};
  EXPECT_EQ(treemask_cpu_apply_token_bitmask_out(buf.data(), buf.data() + 16, TREEMASK_F32, 1, 32,
                                                 32, 32, mask, 1, 1, 32, nullptr, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("overlap"), std::string::npos) << last_error();
  EXPECT_EQ(treemask_cpu_apply_token_bitmask_out(buf.data(), nullptr, TREEMASK_F32, 1, 32, 32, 32,
                                                 mask, 1, 1, 32, nullptr, 0),
            TREEMASK_ERR_INVALID_ARGUMENT);
}

}  // namespace
