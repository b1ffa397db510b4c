// libtreemask on a machine without a usable GPU (meson runs this with
// CUDA_VISIBLE_DEVICES="", so it sees none even where one is present; CI
// has no driver at all): treemask_cuda_available() is false, every CUDA
// entry point fails cleanly with TREEMASK_ERR_UNSUPPORTED and a message,
// nothing is printed, nothing aborts. Host-side argument errors are reported
// first, with a message naming the argument, whether or not a device exists.
// Built with and without CUDA (TREEMASK_TEST_CUDA_BUILT says which).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "treemask/treemask_cuda.h"

#ifndef TREEMASK_TEST_CUDA_BUILT
#error "meson passes TREEMASK_TEST_CUDA_BUILT=0 or 1"
#endif

namespace {

int g_failures = 0;

// Reports on stdout: stderr is being checked for silence.
void expect(bool ok, const char *what, int line) {
  if (ok) return;
  ++g_failures;
  std::printf("line %d: expectation failed: %s (last error: %s)\n", line, what,
              treemask_last_error());
}
#define EXPECT(cond) expect((cond), #cond, __LINE__)

bool failed_with(treemask_status got, treemask_status want, const char *needle) {
  return got == want && std::string(treemask_last_error()).find(needle) != std::string::npos;
}

// An argument error when CUDA is built (checked before looking for a
// device); kUnsupported when it is not.
bool argument_error(treemask_status got, treemask_status want, const char *needle) {
  if (!TREEMASK_TEST_CUDA_BUILT) return failed_with(got, TREEMASK_ERR_UNSUPPORTED, "without CUDA");
  return failed_with(got, want, needle);
}

// The message after the "function: " prefix.
std::string message_of_last_error() {
  const std::string e = treemask_last_error();
  const size_t colon = e.find(": ");
  return colon == std::string::npos ? e : e.substr(colon + 2);
}

// One bad-argument table through both twins: the CPU entry and the CUDA one
// (which checks its arguments before looking for a device) answer every row
// with the same status and the same message, and the CPU one writes nothing.
void twins_share_their_argument_checks() {
  if (!TREEMASK_TEST_CUDA_BUILT) return;
  std::vector<float> logits(4 * 64, 0.5f);
  const std::vector<float> before = logits;
  const std::vector<int32_t> mask(4 * 2, -1);
  const std::vector<int32_t> offsets = {0, 1, 2};
  const std::vector<int32_t> candidates = {5, 6};
  const int32_t zero_index = 0;
  struct Bitmask {
    const char *what;
    float *logits;
    int32_t dtype;
    size_t n_rows, stride, width;
    const int32_t *mask;
    size_t words, mask_rows;
    int32_t vocab;
    const int32_t *indices;
    size_t n_indices;
  };
  float *l = logits.data();
  const int32_t *m = mask.data();
  const Bitmask bitmask_rows[] = {
      {"NULL logits", nullptr, 0, 2, 64, 64, m, 2, 2, 64, nullptr, 0},
      {"NULL bitmask", l, 0, 2, 64, 64, nullptr, 2, 2, 64, nullptr, 0},
      {"unknown dtype", l, 7, 2, 64, 64, m, 2, 2, 64, nullptr, 0},
      {"stride < width", l, 0, 2, 63, 64, m, 2, 2, 64, nullptr, 0},
      {"vocab_size 0", l, 0, 2, 64, 64, m, 2, 2, 0, nullptr, 0},
      {"negative vocab_size", l, 0, 2, 64, 64, m, 2, 2, -5, nullptr, 0},
      {"short bitmask rows", l, 0, 2, 64, 64, m, 1, 2, 64, nullptr, 0},
      {"short bitmask rows, vocab past width", l, 0, 2, 64, 40, m, 1, 2, 64, nullptr, 0},
      {"fewer bitmask rows than logits", l, 0, 2, 64, 64, m, 2, 1, 64, nullptr, 0},
      {"NULL indices with a count", l, 0, 2, 64, 64, m, 2, 2, 64, nullptr, 3},
      {"logits too large to address", l, 0, SIZE_MAX / 8, 64, 64, m, 2, SIZE_MAX / 8, 64, nullptr,
       0},
      {"bitmask too large to address", l, 0, 1, 64, 64, m, SIZE_MAX / 2, 4, 64, &zero_index, 1},
  };
  for (const Bitmask &b : bitmask_rows) {
    const treemask_status cpu =
        treemask_cpu_apply_token_bitmask(b.logits, b.dtype, b.n_rows, b.stride, b.width, b.mask,
                                         b.words, b.mask_rows, b.vocab, b.indices, b.n_indices);
    const std::string cpu_message = message_of_last_error();
    const treemask_status gpu = treemask_cuda_apply_token_bitmask(
        b.logits, b.dtype, b.n_rows, b.stride, b.width, b.mask, b.words, b.mask_rows, b.vocab,
        b.indices, b.n_indices, nullptr);
    const std::string gpu_message = message_of_last_error();
    if (cpu == TREEMASK_OK || cpu != gpu || cpu_message != gpu_message) {
      ++g_failures;
      std::printf("bitmask twins differ on %s: cpu %d \"%s\", cuda %d \"%s\"\n", b.what, cpu,
                  cpu_message.c_str(), gpu, gpu_message.c_str());
    }
  }
  struct Candidates {
    const char *what;
    int32_t dtype;
    size_t n_rows;
    const int32_t *offsets, *candidates;
    size_t n_candidates;
    int32_t vocab;
  };
  const int32_t *o = offsets.data(), *c = candidates.data();
  const Candidates candidate_rows[] = {
      {"NULL row_offsets", 0, 2, nullptr, c, 2, 64},
      {"NULL candidates with a count", 0, 2, o, nullptr, 2, 64},
      {"n_candidates past int32", 0, 2, o, c, size_t{1} << 33, 64},
      {"unknown dtype", -1, 2, o, c, 2, 64},
      {"vocab_size 0", 0, 2, o, c, 2, 0},
  };
  for (const Candidates &k : candidate_rows) {
    const treemask_status cpu = treemask_cpu_apply_token_candidates(
        l, k.dtype, k.n_rows, 64, 64, k.offsets, k.candidates, k.n_candidates, k.vocab, nullptr, 0);
    const std::string cpu_message = message_of_last_error();
    const treemask_status gpu =
        treemask_cuda_apply_token_candidates(l, k.dtype, k.n_rows, 64, 64, k.offsets, k.candidates,
                                             k.n_candidates, k.vocab, nullptr, 0, nullptr);
    const std::string gpu_message = message_of_last_error();
    if (cpu == TREEMASK_OK || cpu != gpu || cpu_message != gpu_message) {
      ++g_failures;
      std::printf("candidate twins differ on %s: cpu %d \"%s\", cuda %d \"%s\"\n", k.what, cpu,
                  cpu_message.c_str(), gpu, gpu_message.c_str());
    }
  }
  EXPECT(logits == before);
}

void run_everything() {
  EXPECT(!treemask_cuda_available());
  EXPECT(!treemask_cuda_available());  // and again, once the runtime has looked

  testutil::TrieHandle trie;
  EXPECT(testutil::make_trie({{5, 6}, {5, 7}}, 64, {63}, trie) == TREEMASK_OK);

  // Well-formed calls: no device, so kUnsupported and a message.
  auto *sentinel = reinterpret_cast<treemask_cuda_trie *>(uintptr_t{0x1234});
  treemask_cuda_trie *dev_trie = sentinel;
  EXPECT(failed_with(treemask_cuda_trie_upload(trie.p, nullptr, &dev_trie),
                     TREEMASK_ERR_UNSUPPORTED, "treemask_cuda_trie_upload: "));
  EXPECT(dev_trie == sentinel);
  const char *why = TREEMASK_TEST_CUDA_BUILT ? "CUDA device" : "without CUDA";
  EXPECT(failed_with(treemask_cuda_trie_upload(trie.p, nullptr, &dev_trie),
                     TREEMASK_ERR_UNSUPPORTED, why));

  std::vector<float> logits(2 * 64, 0.5f);
  std::vector<int32_t> bitmask(2 * 2, 0);
  const std::vector<int32_t> offsets = {0, 1, 2};
  const std::vector<int32_t> candidates = {5, 6};
  EXPECT(failed_with(treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 64, 64, bitmask.data(),
                                                       2, 2, 64, nullptr, 0, nullptr),
                     TREEMASK_ERR_UNSUPPORTED, why));
  EXPECT(failed_with(
      treemask_cuda_apply_token_candidates(logits.data(), 2, 2, 64, 64, offsets.data(),
                                           candidates.data(), 2, 64, nullptr, 0, nullptr),
      TREEMASK_ERR_UNSUPPORTED, why));
  // The caller's word on the pointers changes nothing here.
  EXPECT(failed_with(treemask_cuda_apply_token_bitmask_flags(
                         logits.data(), 0, 2, 64, 64, bitmask.data(), 2, 2, 64, nullptr, 0,
                         TREEMASK_CUDA_CALLER_CHECKED_POINTERS, nullptr),
                     TREEMASK_ERR_UNSUPPORTED, why));
  EXPECT(logits[0] == 0.5f && logits[127] == 0.5f);  // nothing was written

  // Host-side argument errors, named.
  EXPECT(argument_error(treemask_cuda_apply_token_bitmask(nullptr, 0, 2, 64, 64, bitmask.data(), 2,
                                                          2, 64, nullptr, 0, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "logits is NULL"));
  EXPECT(argument_error(treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 64, 64, nullptr, 2,
                                                          2, 64, nullptr, 0, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "bitmask is NULL"));
  EXPECT(
      argument_error(treemask_cuda_apply_token_bitmask(logits.data(), 3, 2, 64, 64, bitmask.data(),
                                                       2, 2, 64, nullptr, 0, nullptr),
                     TREEMASK_ERR_INVALID_ARGUMENT, "unknown dtype 3"));
  EXPECT(argument_error(
      treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 63, 64, bitmask.data(), 2, 2, 64,
                                        nullptr, 0, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "logits_row_stride 63 is smaller than logits_width 64"));
  // vocab_size past the width is allowed (every column is decided by the
  // bitmask), as for the CPU twin: no argument error, so no device.
  EXPECT(failed_with(treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 64, 64, bitmask.data(),
                                                       2, 2, 65, nullptr, 0, nullptr),
                     TREEMASK_ERR_UNSUPPORTED, why));
  EXPECT(
      argument_error(treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 64, 64, bitmask.data(),
                                                       2, 2, 0, nullptr, 0, nullptr),
                     TREEMASK_ERR_INVALID_ARGUMENT, "vocab_size must be positive, got 0"));
  EXPECT(
      argument_error(treemask_cuda_apply_token_bitmask(logits.data(), 0, 2, 64, 64, bitmask.data(),
                                                       1, 2, 64, nullptr, 0, nullptr),
                     TREEMASK_ERR_BUFFER_TOO_SMALL, "bitmask_row_words 1 < 2, the words covering"));
  EXPECT(argument_error(
      treemask_cuda_apply_token_bitmask(logits.data(), 0, SIZE_MAX / 8, 64, 64, bitmask.data(), 2,
                                        SIZE_MAX / 8, 64, nullptr, 0, nullptr),
      TREEMASK_ERR_OUT_OF_RANGE, "too large to address"));
  EXPECT(argument_error(
      treemask_cuda_apply_token_candidates(logits.data(), 0, 2, 64, 64, nullptr, candidates.data(),
                                           2, 64, nullptr, 0, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "row_offsets is NULL"));
  EXPECT(argument_error(
      treemask_cuda_apply_token_candidates(logits.data(), 0, 2, 64, 64, offsets.data(), nullptr, 2,
                                           64, nullptr, 0, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "candidates is NULL but n_candidates is 2"));
  EXPECT(argument_error(treemask_cuda_trie_upload(nullptr, nullptr, &dev_trie),
                        TREEMASK_ERR_INVALID_ARGUMENT, "trie is NULL"));
  uint32_t states[2] = {0, 0};
  EXPECT(argument_error(treemask_cuda_trie_advance_fill_bitmask(
                            nullptr, states, nullptr, 2, 0, nullptr, bitmask.data(), 2, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  EXPECT(
      argument_error(treemask_cuda_trie_advance_mask_logits(nullptr, states, nullptr, 2, 0, nullptr,
                                                            logits.data(), 0, 64, 64, nullptr),
                     TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));

  // The device beam step and top-k: the workspace size needs no device.
  size_t ws_bytes = 0;
  const treemask_status ws = treemask_cuda_beam_workspace_size(2, 3, &ws_bytes);
  EXPECT(TREEMASK_TEST_CUDA_BUILT ? ws == TREEMASK_OK && ws_bytes == 2 * 3 * (3 * 12) + 2 * 4
                                  : ws == TREEMASK_ERR_UNSUPPORTED);
  EXPECT(argument_error(treemask_cuda_beam_workspace_size(2, 0, &ws_bytes),
                        TREEMASK_ERR_INVALID_ARGUMENT, "beam_width 0 is outside"));
  treemask_logits lg;
  treemask_logits_init(&lg);
  lg.data = logits.data();
  float scores[2] = {0, 0};
  int32_t parents[2], tokens[2];
  size_t counts[2];
  EXPECT(argument_error(treemask_cuda_beam_step(nullptr, 1, 2, &lg, states, scores, parents, tokens,
                                                nullptr, 0, nullptr, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  EXPECT(argument_error(
      treemask_cuda_beam_step_flags(nullptr, 1, 2, &lg, states, scores, parents, tokens, nullptr, 0,
                                    nullptr, TREEMASK_CUDA_CALLER_CHECKED_POINTERS, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  EXPECT(argument_error(treemask_cuda_trie_topk_states(nullptr, states, 2, &lg, 1, tokens, scores,
                                                       counts, nullptr, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));

  // The advance alone and the growing token rows.
  const int32_t step_tokens[2] = {1, 2};
  EXPECT(argument_error(
      treemask_cuda_trie_advance_states(nullptr, states, step_tokens, 2, 0, nullptr, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  treemask_cuda_token_rows rows;
  treemask_cuda_token_rows_init(&rows);
  EXPECT(rows.struct_size == sizeof rows && rows.tokens == nullptr && rows.n_rows == 0);
  EXPECT(argument_error(treemask_cuda_trie_follow_rows(nullptr, nullptr, &rows, 0, nullptr),
                        TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  EXPECT(rows.copy_to == nullptr && rows.copy_stride == 0);
  EXPECT(argument_error(
      treemask_cuda_trie_follow_rows_mask_logits(nullptr, nullptr, &rows, 0, nullptr, 0,
                                                 logits.data(), 0, 64, 64, -1, 0, nullptr),
      TREEMASK_ERR_INVALID_ARGUMENT, "dev_trie is NULL"));
  treemask_cuda_token_rows_init(nullptr);  // a no-op

  // Nothing to do needs no device.
  const treemask_status empty = treemask_cuda_apply_token_bitmask(
      logits.data(), 0, 0, 64, 64, bitmask.data(), 2, 0, 64, nullptr, 0, nullptr);
  EXPECT(TREEMASK_TEST_CUDA_BUILT ? empty == TREEMASK_OK : empty == TREEMASK_ERR_UNSUPPORTED);

  treemask_cuda_trie_free(nullptr);
}

}  // namespace

int main() {
  // Everything above must stay silent on stderr: send it to a file and
  // look at it afterwards.
  std::fflush(stderr);
  const int saved_stderr = dup(2);
  std::FILE *captured = std::tmpfile();
  if (saved_stderr < 0 || !captured || dup2(fileno(captured), 2) < 0) {
    std::printf("cannot redirect stderr\n");
    return 1;
  }
  run_everything();
  twins_share_their_argument_checks();
  std::fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  std::string noise;
  std::rewind(captured);
  for (int c; (c = std::fgetc(captured)) != EOF;) noise.push_back(static_cast<char>(c));
  std::fclose(captured);
  if (!noise.empty()) {
    ++g_failures;
    std::printf("the CUDA entry points wrote to stderr:\n%s\n", noise.c_str());
  }
  if (g_failures > 0) {
    std::printf("%d expectation(s) failed\n", g_failures);
    return 1;
  }
  std::printf("CUDA entry points without a device: all expectations hold (CUDA built: %s)\n",
              TREEMASK_TEST_CUDA_BUILT ? "yes" : "no");
  return 0;
}
