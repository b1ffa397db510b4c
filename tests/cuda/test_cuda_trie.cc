// The device trie's fused step against the CPU matcher: random tries (small
// vocabularies and a 151,936-token one with a 3,000-way root), random walks
// with every failure policy, tokens that are allowed, rejected, out of range
// or absent (-1), host-side resets and beam reorders (gathers of the state
// array). At every step both step variants (bitmask rows and -inf into
// logits) and the fill-only form must equal what per-row matchers say, bit
// for bit. Also: invalid and reserved states, argument errors, and a CUDA
// graph capture replayed step after step. Exits 77 without a usable GPU.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/oracle.h"
#include "common/test_util.h"
#include "cuda/cuda_test_util.h"

namespace {

using cudatest::DeviceArray;
using cudatest::HostLogits;
using cudatest::random_flags;
using testutil::MatcherHandle;
using testutil::TrieHandle;

constexpr uint32_t kTerminated = 0xFFFFFFFEu;
constexpr uint32_t kFailed = 0xFFFFFFFFu;

struct TrieUnderTest {
  std::string name;
  TrieHandle trie;
  int32_t vocab = 0;
  std::vector<int32_t> stops;
  uint64_t n_nodes = 0;
};

void describe_trie(TrieUnderTest &t) {
  t.vocab = treemask_trie_vocab_size(t.trie.p);
  t.stops.resize(treemask_trie_stop_tokens(t.trie.p, nullptr, 0));
  treemask_trie_stop_tokens(t.trie.p, t.stops.data(), t.stops.size());
  treemask_trie_stats stats;
  stats.struct_size = sizeof stats;
  CHECK_TM(treemask_trie_get_stats(t.trie.p, &stats));
  t.n_nodes = stats.n_nodes;
}

void random_small_trie(std::mt19937_64 &rng, int32_t vocab, TrieUnderTest &out) {
  const oracle::RandomTrie r = oracle::random_trie(rng, vocab);
  treemask_trie_options opts;
  treemask_trie_options_init(&opts);
  opts.vocab_size = vocab;
  opts.stop_tokens = r.stops.data();
  opts.n_stop_tokens = r.stops.size();
  CHECK_TM(treemask_trie_from_paths(&opts, r.tokens.data(), r.offsets.data(), r.offsets.size() - 1,
                                    nullptr, &out.trie.p));
  out.name = "random trie, V=" + std::to_string(vocab);
  describe_trie(out);
}

// A Qwen-sized vocabulary: a 3,000-way root, semantic-ID-like levels below,
// labels that are prefixes of others, two stop tokens.
void big_trie(std::mt19937_64 &rng, TrieUnderTest &out) {
  constexpr int32_t kVocab = 151936;
  const std::vector<int32_t> stops = {151643, 151645};
  std::vector<std::vector<int32_t>> paths;
  for (int i = 0; i < 3000; ++i) {
    std::vector<int32_t> p = {static_cast<int32_t>(rng() % 151000)};
    const int depth = static_cast<int>(rng() % 4);
    for (int d = 0; d < depth; ++d) p.push_back(static_cast<int32_t>(rng() % 64) + d * 64);
    paths.push_back(p);
    if (i % 10 == 0) paths.push_back({p.begin(), p.begin() + 1 + rng() % p.size()});
  }
  // One node with a wide, dense fanout that spans several bitmask words.
  for (int32_t t = 0; t < 2000; ++t) paths.push_back({paths[0][0], 150000 - 3 * t});
  CHECK_TM(testutil::make_trie(paths, kVocab, stops, out.trie));
  out.name = "151,936-token trie";
  describe_trie(out);
}

// Three levels where every node allows every token but the stop, so that
// whole 16-byte chunks of a row are kept (a masked copy must copy them).
void dense_trie(TrieUnderTest &out) {
  constexpr int32_t kVocab = 41;
  std::vector<std::vector<int32_t>> paths;
  for (int32_t a = 0; a + 1 < kVocab; ++a) {
    for (int32_t b = 0; b + 1 < kVocab; ++b) {
      for (int32_t c = 0; c + 1 < kVocab; ++c) paths.push_back({a, b, c});
    }
  }
  CHECK_TM(testutil::make_trie(paths, kVocab, {kVocab - 1}, out.trie));
  out.name = "dense 41-token trie";
  describe_trie(out);
}

bool is_stop(const TrieUnderTest &t, int32_t token) {
  return std::binary_search(t.stops.begin(), t.stops.end(), token);
}

// A token for this row: mostly allowed ones, also stops, random ids, ids
// past the vocabulary, and -1 (no token this step).
int32_t pick_token(std::mt19937_64 &rng, const TrieUnderTest &t, const treemask_matcher *m) {
  const auto allowed = testutil::next_tokens(m);
  const int kind = static_cast<int>(rng() % 20);
  if (kind < 11 && !allowed.empty()) return allowed[rng() % allowed.size()];
  if (kind < 13) return -1;
  if (kind < 15) return t.stops[rng() % t.stops.size()];
  if (kind < 18) return static_cast<int32_t>(rng() % static_cast<uint64_t>(t.vocab));
  return t.vocab + static_cast<int32_t>(rng() % 5);
}

// Per-row matchers plus the one fact the public matcher API does not expose:
// whether a FAIL_CLOSED / STICKY_ERROR rejection put the row in FAILED.
struct Reference {
  const TrieUnderTest *trie = nullptr;
  int32_t policy = TREEMASK_FAILURE_REJECT;
  std::vector<MatcherHandle> rows;
  std::vector<char> failed;

  Reference(const TrieUnderTest &t, int32_t failure_policy, size_t n_rows)
      : trie(&t), policy(failure_policy), failed(n_rows, 0) {
    treemask_matcher_options opts;
    treemask_matcher_options_init(&opts);
    opts.failure_policy = failure_policy;
    for (size_t r = 0; r < n_rows; ++r) {
      treemask_matcher *m = nullptr;
      CHECK_TM(treemask_matcher_create(t.trie.p, &opts, &m));
      rows.emplace_back(m);
    }
  }

  // Returns whether the token was accepted (true for token < 0).
  bool advance(size_t r, int32_t token) {
    if (token < 0) return true;
    treemask_matcher *m = rows[r].p;
    const bool was_terminated = treemask_matcher_is_terminated(m);
    bool accepted = false;
    const treemask_status s = treemask_matcher_accept_token(m, token, &accepted);
    CHECK_MSG(s == TREEMASK_OK || (s == TREEMASK_ERR_INVALID_STATE && failed[r]),
              treemask_last_error());
    if (!accepted && !was_terminated && policy != TREEMASK_FAILURE_REJECT) failed[r] = 1;
    if (treemask_matcher_is_terminated(m)) failed[r] = 0;
    return accepted;
  }

  std::vector<int32_t> fill(size_t r, size_t words) const {
    std::vector<int32_t> row(words, -1);
    // A STICKY_ERROR failed matcher writes the row and reports INVALID_STATE.
    const treemask_status s =
        treemask_matcher_fill_next_token_bitmask(rows[r].p, row.data(), words, nullptr, nullptr);
    if (s != TREEMASK_OK && s != TREEMASK_ERR_INVALID_STATE) {
      std::fprintf(stderr, "fill failed: %s\n", treemask_last_error());
      std::abort();
    }
    return row;
  }

  // What the device state must be, or kExpectNode for "some node id".
  static constexpr uint64_t kExpectNode = ~uint64_t{0};
  uint64_t expected_state(size_t r) const {
    if (treemask_matcher_is_terminated(rows[r].p)) return kTerminated;
    if (failed[r]) return kFailed;
    return kExpectNode;
  }
  bool state_matches(size_t r, uint32_t state) const {
    const uint64_t want = expected_state(r);
    return want == kExpectNode ? state < trie->n_nodes : state == want;
  }
};

std::string row_context(const std::string &what, size_t step, size_t r) {
  return what + ", step " + std::to_string(step) + ", row " + std::to_string(r);
}

void walk(const TrieUnderTest &t, int32_t policy, size_t n_rows, int steps, std::mt19937_64 &rng,
          cudaStream_t stream) {
  const std::string name = t.name + ", policy " + std::to_string(policy);
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  if (!dt) return;
  Reference ref(t, policy, n_rows);
  const size_t words = treemask_bitmask_words(t.vocab) + 2;  // extra words must become 0
  std::vector<uint32_t> states(n_rows, 0);
  DeviceArray<uint32_t> d_states_a(states), d_states_b(states);
  DeviceArray<int32_t> d_tokens(n_rows), d_bitmask_a(n_rows * words), d_bitmask_c(n_rows * words);
  DeviceArray<uint8_t> d_accepted_a(n_rows), d_accepted_b(n_rows);
  const size_t width = static_cast<size_t>(t.vocab) + 5;  // padded vocabulary

  for (int step = 0; step < steps; ++step) {
    // Engine-side edits of the state array: a beam reorder (a gather) and a
    // row reset (writing the root).
    states = d_states_a.download(stream);
    if (rng() % 6 == 0 && policy != TREEMASK_FAILURE_STICKY_ERROR) {
      std::vector<uint32_t> gathered(n_rows);
      std::vector<MatcherHandle> clones;
      std::vector<char> failed(n_rows);
      for (size_t i = 0; i < n_rows; ++i) {
        const size_t src = rng() % n_rows;
        gathered[i] = states[src];
        failed[i] = ref.failed[src];
        treemask_matcher *copy = nullptr;
        CHECK_TM(treemask_matcher_clone(ref.rows[src].p, &copy));
        clones.emplace_back(copy);
      }
      states = gathered;
      ref.rows = std::move(clones);
      ref.failed = failed;
    }
    if (rng() % 4 == 0) {
      const size_t r = rng() % n_rows;
      states[r] = 0;
      treemask_matcher_reset(ref.rows[r].p);
      ref.failed[r] = 0;
    }
    d_states_a.upload(states, stream);
    d_states_b.upload(states, stream);

    std::vector<int32_t> tokens(n_rows);
    for (size_t r = 0; r < n_rows; ++r) tokens[r] = pick_token(rng, t, ref.rows[r].p);
    d_tokens.upload(tokens, stream);
    const int32_t dtype = step % 3;
    const size_t stride = step % 2 ? width + 1 : (width + 7) / 8 * 8;
    HostLogits logits(dtype, n_rows, stride, width, rng);
    DeviceArray<uint8_t> d_logits(logits.bytes);

    CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, d_states_a.get(), d_tokens.get(), n_rows,
                                                     policy, d_accepted_a.get(), d_bitmask_a.get(),
                                                     words, stream));
    CHECK_TM(treemask_cuda_trie_advance_mask_logits(dt, d_states_b.get(), d_tokens.get(), n_rows,
                                                    policy, d_accepted_b.get(), d_logits.get(),
                                                    dtype, stride, width, stream));
    CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, d_states_a.get(), nullptr, n_rows, policy,
                                                     nullptr, d_bitmask_c.get(), words, stream));

    std::vector<int32_t> want_bitmask(n_rows * words);
    std::vector<uint8_t> want_accepted(n_rows);
    for (size_t r = 0; r < n_rows; ++r) {
      want_accepted[r] = ref.advance(r, tokens[r]) ? 1 : 0;
      const auto row = ref.fill(r, words);
      std::copy(row.begin(), row.end(), want_bitmask.begin() + r * words);
    }
    const auto got_a = d_bitmask_a.download(stream);
    const auto got_c = d_bitmask_c.download(stream);
    const auto states_a = d_states_a.download(stream);
    const auto states_b = d_states_b.download(stream);
    const auto accepted_a = d_accepted_a.download(stream);
    const auto accepted_b = d_accepted_b.download(stream);
    for (size_t r = 0; r < n_rows; ++r) {
      const std::string where = row_context(name, step, r) + ", token " + std::to_string(tokens[r]);
      CHECK_MSG(std::equal(want_bitmask.begin() + r * words, want_bitmask.begin() + (r + 1) * words,
                           got_a.begin() + r * words),
                "advance_fill_bitmask row differs from the matcher's: " + where);
      CHECK_MSG(std::equal(want_bitmask.begin() + r * words, want_bitmask.begin() + (r + 1) * words,
                           got_c.begin() + r * words),
                "fill-only row differs from the matcher's: " + where);
      CHECK_MSG(accepted_a[r] == want_accepted[r] && accepted_b[r] == want_accepted[r],
                "accepted flag: " + where);
      CHECK_MSG(states_a[r] == states_b[r],
                "the two step variants disagree on the state: " + where);
      CHECK_MSG(
          ref.state_matches(r, states_a[r]),
          "state " + std::to_string(states_a[r]) + " is not what the matcher implies: " + where);
    }
    cudatest::reference_apply(logits, want_bitmask, words, t.vocab, nullptr);
    const std::string diff = cudatest::first_difference(logits, d_logits.download(stream));
    CHECK_MSG(diff.empty(), "advance_mask_logits, " + name + ", step " + std::to_string(step) +
                                ", " + cudatest::dtype_name(dtype) + ": " + diff);
  }
  treemask_cuda_trie_free(dt);
}

// States that are not node ids behave as FAILED; reserved states follow the
// header's table under each policy.
void test_reserved_and_invalid_states(const TrieUnderTest &t, cudaStream_t stream) {
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  if (!dt) return;
  const auto n = static_cast<uint32_t>(t.n_nodes);
  int32_t non_stop = 0;
  while (is_stop(t, non_stop)) ++non_stop;
  const int32_t stop = t.stops[0];
  const std::vector<uint32_t> start = {
      n, n + 7, 0xFFFFFFFDu, kTerminated, kTerminated, kFailed, kFailed, kFailed, n};
  const std::vector<int32_t> tokens = {stop, non_stop, -1, stop, non_stop, stop, non_stop, -1, -1};
  const size_t words = treemask_bitmask_words(t.vocab);
  const auto stops_only = oracle::expected_row(t.stops, words);
  for (int32_t policy = 0; policy <= 2; ++policy) {
    const bool sticky = policy == TREEMASK_FAILURE_STICKY_ERROR;
    const uint32_t after_stop = sticky ? kFailed : kTerminated;
    const std::vector<uint32_t> want_states = {after_stop,  kFailed,     0xFFFFFFFDu,
                                               kTerminated, kTerminated, after_stop,
                                               kFailed,     kFailed,     n};
    const std::vector<uint8_t> want_accepted = {!sticky, 0, 1, 1, 0, !sticky, 0, 1, 1};
    DeviceArray<uint32_t> d_states(start);
    DeviceArray<int32_t> d_tokens(tokens), d_bitmask(start.size() * words);
    DeviceArray<uint8_t> d_accepted(start.size());
    CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, d_states.get(), d_tokens.get(),
                                                     start.size(), policy, d_accepted.get(),
                                                     d_bitmask.get(), words, stream));
    const auto states = d_states.download(stream);
    const auto accepted = d_accepted.download(stream);
    const auto bitmask = d_bitmask.download(stream);
    for (size_t r = 0; r < start.size(); ++r) {
      const std::string where = "policy " + std::to_string(policy) + ", row " + std::to_string(r);
      CHECK_MSG(states[r] == want_states[r], where + ": state " + std::to_string(states[r]));
      CHECK_MSG(accepted[r] == want_accepted[r], where + ": accepted");
      CHECK_MSG(std::equal(stops_only.begin(), stops_only.end(), bitmask.begin() + r * words),
                where + ": a non-node state must allow only the stop tokens");
    }
  }
  treemask_cuda_trie_free(dt);
}

bool error_mentions(treemask_status got, treemask_status want, const char *needle) {
  return got == want && std::string(treemask_last_error()).find(needle) != std::string::npos;
}

void test_step_errors(const TrieUnderTest &t, cudaStream_t stream) {
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  if (!dt) return;
  const size_t words = treemask_bitmask_words(t.vocab);
  DeviceArray<uint32_t> d_states(std::vector<uint32_t>(2, 0));
  DeviceArray<int32_t> d_bitmask(2 * words);
  DeviceArray<float> d_logits(2 * static_cast<size_t>(t.vocab));
  treemask_status s = treemask_cuda_trie_advance_fill_bitmask(
      dt, d_states.get(), nullptr, 2, 7, nullptr, d_bitmask.get(), words, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "unknown failure_policy 7"),
            treemask_last_error());
  s = treemask_cuda_trie_advance_fill_bitmask(dt, d_states.get(), nullptr, 2, 0, nullptr,
                                              d_bitmask.get(), words - 1, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_BUFFER_TOO_SMALL, "bitmask_row_words"),
            treemask_last_error());
  uint32_t host_states[2] = {0, 0};
  s = treemask_cuda_trie_advance_fill_bitmask(dt, host_states, nullptr, 2, 0, nullptr,
                                              d_bitmask.get(), words, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "states is host memory"),
            treemask_last_error());
  const int32_t host_tokens[2] = {0, 0};
  s = treemask_cuda_trie_advance_fill_bitmask(dt, d_states.get(), host_tokens, 2, 0, nullptr,
                                              d_bitmask.get(), words, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "tokens is host memory"),
            treemask_last_error());
  s = treemask_cuda_trie_advance_mask_logits(dt, d_states.get(), nullptr, 2, 0, nullptr,
                                             d_logits.get(), cudatest::kF32, t.vocab - 1,
                                             t.vocab - 1, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "smaller than the trie's vocab_size"),
            treemask_last_error());
  s = treemask_cuda_trie_advance_mask_logits(dt, d_states.get(), nullptr, 2, 0, nullptr,
                                             d_logits.get(), 9, t.vocab, t.vocab, stream);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "unknown dtype 9"),
            treemask_last_error());
  CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, host_states, nullptr, 0, 0, nullptr,
                                                   d_bitmask.get(), words, stream));
  s = treemask_cuda_trie_upload(t.trie.p, stream, nullptr);
  CHECK_MSG(error_mentions(s, TREEMASK_ERR_INVALID_ARGUMENT, "out is NULL"), treemask_last_error());
  treemask_cuda_trie_free(dt);
  treemask_cuda_trie_free(nullptr);
}

// Captures one decode step (advance + fill, apply; and the logits variant)
// in a CUDA graph under the strictest capture mode, then replays it with new
// tokens each step. Runs first in the program, so kernels load during capture.
void test_graph(const TrieUnderTest &t, std::mt19937_64 &rng) {
  constexpr size_t kRows = 16;
  const int32_t policy = TREEMASK_FAILURE_FAIL_CLOSED;
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  if (!dt) return;
  const size_t words = treemask_bitmask_words(t.vocab);
  const size_t width = static_cast<size_t>(t.vocab);
  DeviceArray<uint32_t> d_states_a(std::vector<uint32_t>(kRows, 0));
  DeviceArray<uint32_t> d_states_b(std::vector<uint32_t>(kRows, 0));
  DeviceArray<int32_t> d_tokens(std::vector<int32_t>(kRows, -1)), d_bitmask(kRows * words);
  DeviceArray<uint8_t> d_pristine(kRows * width * 4), d_logits_a(kRows * width * 4),
      d_logits_b(kRows * width * 4);

  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CHECK_TM(treemask_cuda_trie_advance_fill_bitmask(dt, d_states_a.get(), d_tokens.get(), kRows,
                                                   policy, nullptr, d_bitmask.get(), words,
                                                   stream));
  CHECK_TM(treemask_cuda_apply_token_bitmask(d_logits_a.get(), cudatest::kF32, kRows, width, width,
                                             d_bitmask.get(), words, kRows, t.vocab, nullptr, 0,
                                             stream));
  CHECK_TM(treemask_cuda_trie_advance_mask_logits(dt, d_states_b.get(), d_tokens.get(), kRows,
                                                  policy, nullptr, d_logits_b.get(), cudatest::kF32,
                                                  width, width, stream));
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  CHECK_MSG(ended == cudaSuccess,
            std::string("capture was invalidated by a treemask call: ") + cudaGetErrorName(ended));
  if (ended != cudaSuccess) return;
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  // Capturing ran nothing.
  const auto untouched = d_states_a.download(stream);
  CHECK(std::all_of(untouched.begin(), untouched.end(), [](uint32_t s) { return s == 0; }));

  Reference ref(t, policy, kRows);
  for (int step = 0, steps = testutil::scaled(cudatest::kEmulated ? 3 : 12); step < steps; ++step) {
    std::vector<int32_t> tokens(kRows);
    for (size_t r = 0; r < kRows; ++r) tokens[r] = pick_token(rng, t, ref.rows[r].p);
    HostLogits logits(cudatest::kF32, kRows, width, width, rng);
    d_tokens.upload(tokens, stream);
    d_pristine.upload(logits.bytes, stream);
    CHECK_CUDA(cudaMemcpyAsync(d_logits_a.get(), d_pristine.get(), logits.bytes.size(),
                               cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaMemcpyAsync(d_logits_b.get(), d_pristine.get(), logits.bytes.size(),
                               cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));

    std::vector<int32_t> want(kRows * words);
    for (size_t r = 0; r < kRows; ++r) {
      ref.advance(r, tokens[r]);
      const auto row = ref.fill(r, words);
      std::copy(row.begin(), row.end(), want.begin() + r * words);
    }
    CHECK_MSG(d_bitmask.download(stream) == want,
              "graph replay " + std::to_string(step) + ": bitmask differs from the matchers'");
    const auto states_a = d_states_a.download(stream);
    const auto states_b = d_states_b.download(stream);
    for (size_t r = 0; r < kRows; ++r) {
      CHECK_MSG(ref.state_matches(r, states_a[r]) && states_a[r] == states_b[r],
                row_context("graph replay state", step, r));
    }
    cudatest::reference_apply(logits, want, words, t.vocab, nullptr);
    std::string diff = cudatest::first_difference(logits, d_logits_a.download(stream));
    CHECK_MSG(diff.empty(), "graph replay " + std::to_string(step) + ", apply: " + diff);
    diff = cudatest::first_difference(logits, d_logits_b.download(stream));
    CHECK_MSG(diff.empty(), "graph replay " + std::to_string(step) + ", mask_logits: " + diff);
  }
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  treemask_cuda_trie_free(dt);
  CHECK_CUDA(cudaStreamDestroy(stream));
}

// The host's answer for a row of ids: a walk from the root with
// treemask_trie_advance_states, ids outside [0, INT32_MAX) as INT32_MAX.
uint32_t host_walk(const TrieUnderTest &t, const int64_t *ids, size_t n, int32_t policy) {
  uint32_t state = TREEMASK_STATE_ROOT;
  for (size_t k = 0; k < n; ++k) {
    const int32_t token =
        ids[k] >= 0 && ids[k] < INT32_MAX ? static_cast<int32_t>(ids[k]) : INT32_MAX;
    CHECK_TM(treemask_trie_advance_states(t.trie.p, &state, &token, 1, policy, nullptr));
  }
  return state;
}

// The bitmask row of a state (the host's fill).
std::vector<int32_t> state_row(const TrieUnderTest &t, uint32_t state) {
  std::vector<int32_t> row(static_cast<size_t>((t.vocab + 31) / 32));
  CHECK_TM(treemask_trie_fill_states(t.trie.p, &state, 1, row.data(), row.size()));
  return row;
}

// The tokens a state allows (the host's fill).
std::vector<int32_t> allowed_tokens(const TrieUnderTest &t, uint32_t state) {
  const std::vector<int32_t> row = state_row(t, state);
  std::vector<int32_t> out;
  for (int32_t tok = 0; tok < t.vocab; ++tok) {
    if (cudatest::bit_set(row.data(), static_cast<size_t>(tok))) out.push_back(tok);
  }
  return out;
}

// treemask_cuda_trie_advance_states (the advance alone) against the host's.
void test_advance_states(const TrieUnderTest &t, std::mt19937_64 &rng, cudaStream_t stream) {
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  const size_t n = 300;
  std::vector<uint32_t> states(n);
  std::vector<int32_t> tokens(n);
  for (int32_t policy = 0; policy <= 2; ++policy) {
    for (size_t i = 0; i < n; ++i) {
      const uint64_t kind = rng() % 8;
      states[i] = kind == 0   ? kTerminated
                  : kind == 1 ? kFailed
                              : static_cast<uint32_t>(rng() % t.n_nodes);
      tokens[i] = rng() % 10 == 0 ? -1 : static_cast<int32_t>(rng() % (t.vocab + 2));
    }
    DeviceArray<uint32_t> dev_states(states);
    DeviceArray<int32_t> dev_tokens(tokens);
    DeviceArray<uint8_t> dev_accepted(n);
    std::vector<bool> want_accepted(n);
    for (size_t i = 0; i < n; ++i) {
      bool ok = false;
      CHECK_TM(treemask_trie_advance_states(t.trie.p, &states[i], &tokens[i], 1, policy, &ok));
      want_accepted[i] = ok;
    }
    CHECK_TM(treemask_cuda_trie_advance_states(dt, dev_states.get(), dev_tokens.get(), n, policy,
                                               dev_accepted.get(), stream));
    CHECK(dev_states.download(stream) == states);
    const auto accepted = dev_accepted.download(stream);
    for (size_t i = 0; i < n; ++i) CHECK((accepted[i] != 0) == want_accepted[i]);
  }
  CHECK(treemask_cuda_trie_advance_states(dt, nullptr, nullptr, 1, 0, nullptr, stream) ==
        TREEMASK_ERR_INVALID_ARGUMENT);
  treemask_cuda_trie_free(dt);
}

// How a step of test_follow_rows asks for its states.
enum class Follow {
  kPlain,       // treemask_cuda_trie_follow_rows
  kCopy,        // the same with rows->copy_to; the next call's prev reads the copy
  kMaskCopy,    // treemask_cuda_trie_follow_rows_mask_logits, scores copied into logits
  kMaskInPlace  // the same in place (scores NULL or equal to logits)
};

// A decode loop's rows on the device: each step gathers the previous rows
// the way beam search does (reordered, duplicated, some dropped), appends
// one id per row (mostly allowed, also stops, rejected ids, ids past the
// vocabulary, negative and huge int64 ids) and asks for every row's state
// with the previous call as prev. Rows live in a buffer wider than they are
// (transformers' running sequences), the row count changes, a step is
// sometimes skipped (prev one id too short: every row walks from the
// root), rows sometimes come from nowhere, and sometimes prev is forged (a
// key that matches but ids that do not: the comparison must reject it).
// Each step takes one of the Follow forms at random: every state must equal
// the host's walk of its row, a copy the ids (the next step's prev reads
// the copy, the original ids overwritten), masked logits the scores with
// -inf outside each state's allowed set (columns past the width untouched).
void test_follow_rows(const TrieUnderTest &t, int32_t policy, std::mt19937_64 &rng,
                      cudaStream_t stream) {
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(t.trie.p, stream, &dt));
  const size_t capacity = 25, max_rows = 40, copy_stride = capacity + 3;
  std::vector<std::vector<int64_t>> rows(1 + rng() % 8);
  struct Call {
    std::unique_ptr<DeviceArray<int64_t>> ids;
    DeviceArray<uint32_t> states;
    DeviceArray<uint64_t> keys;
    treemask_cuda_token_rows desc;
    Call(const std::vector<int64_t> &buffer, size_t n_rows, size_t n_tokens, size_t stride)
        : ids(std::make_unique<DeviceArray<int64_t>>(buffer)), states(n_rows), keys(n_rows) {
      treemask_cuda_token_rows_init(&desc);
      desc.tokens = ids->get();
      desc.n_rows = n_rows;
      desc.n_tokens = n_tokens;
      desc.row_stride = stride;
      desc.states = states.get();
      desc.keys = keys.get();
    }
  };
  std::unique_ptr<Call> prev;
  for (size_t n_tokens = 0; n_tokens < capacity - 1; ++n_tokens) {
    if (n_tokens > 0) {
      // Gather like beam search, then append one id per row.
      std::vector<std::vector<int64_t>> next;
      const size_t n_next = 1 + rng() % max_rows;
      for (size_t i = 0; i < n_next; ++i) {
        if (rng() % 25 == 0) {  // a row from nowhere
          std::vector<int64_t> fresh(n_tokens - 1);
          for (auto &id : fresh) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(t.vocab));
          next.push_back(fresh);
        } else {
          next.push_back(rows[rng() % rows.size()]);
        }
      }
      for (auto &row : next) {
        const std::vector<int32_t> allowed =
            allowed_tokens(t, host_walk(t, row.data(), row.size(), policy));
        const uint64_t kind = rng() % 20;
        int64_t id;
        if (kind < 12 && !allowed.empty()) {
          id = allowed[rng() % allowed.size()];
        } else if (kind < 14) {
          id = t.stops[rng() % t.stops.size()];
        } else if (kind < 16) {
          id = static_cast<int64_t>(rng() % static_cast<uint64_t>(t.vocab));
        } else if (kind < 17) {
          id = t.vocab + static_cast<int64_t>(rng() % 5);
        } else if (kind < 18) {
          id = -1 - static_cast<int64_t>(rng() % 3);
        } else if (kind < 19) {
          id = int64_t{1} << 40;
        } else {
          id = INT32_MAX;
        }
        row.push_back(id);
      }
      rows = std::move(next);
    }
    const size_t n_rows = rows.size();
    std::vector<int64_t> buffer(n_rows * capacity, 7);
    for (size_t r = 0; r < n_rows; ++r) {
      std::copy(rows[r].begin(), rows[r].end(), buffer.begin() + r * capacity);
    }
    auto call = std::make_unique<Call>(buffer, n_rows, n_tokens, capacity);
    const bool skip_prev = rng() % 8 == 0;
    if (prev && rng() % 6 == 0 && prev->desc.n_rows > 0 && prev->desc.n_tokens > 0) {
      // A forged prev: its keys still those of the rows' ids, its ids and
      // states those of other ids (each row's first id changed). A row that
      // trusted the key would take a state that is not its own.
      auto changed = prev->ids->download(stream);
      const size_t stride = prev->desc.row_stride;
      std::vector<uint32_t> states(prev->desc.n_rows);
      for (size_t r = 0; r < prev->desc.n_rows; ++r) {
        int64_t *row = &changed[r * stride];
        row[0] = row[0] == 0 ? 1 : 0;
        states[r] = host_walk(t, row, prev->desc.n_tokens, policy);
      }
      prev->ids->upload(changed, stream);
      prev->states.upload(states, stream);
    }
    const auto form = static_cast<Follow>(rng() % 4);
    std::unique_ptr<DeviceArray<int64_t>> copy;
    if (form != Follow::kPlain && rng() % 4 != 0) {
      copy = std::make_unique<DeviceArray<int64_t>>(std::vector<int64_t>(n_rows * copy_stride, -5));
      call->desc.copy_to = copy->get();
      call->desc.copy_stride = copy_stride;
    }
    const treemask_cuda_token_rows *before = skip_prev || !prev ? nullptr : &prev->desc;
    const std::string where = t.name + " policy " + std::to_string(policy) + ", " +
                              std::to_string(n_tokens) + " ids, form " +
                              std::to_string(static_cast<int>(form));
    if (form == Follow::kPlain || form == Follow::kCopy) {
      CHECK_TM(treemask_cuda_trie_follow_rows(dt, before, &call->desc, policy, stream));
    } else {
      // Scores and logits of their own strides; columns past the width of
      // logits must keep their bytes.
      const int32_t dtype = static_cast<int32_t>(rng() % 3);
      const size_t width = static_cast<size_t>(t.vocab) + rng() % 3;
      // Half the time strides of whole 16-byte vectors (the vector path).
      const bool vectors = rng() % 2 == 0;
      const size_t stride = vectors ? (width + 7) / 8 * 8 : width + rng() % 5;
      const size_t scores_stride = form != Follow::kMaskCopy ? stride
                                   : vectors                 ? stride + 8
                                                             : width + rng() % 4;
      HostLogits scores(dtype, n_rows, scores_stride, width, rng);
      HostLogits want(dtype, n_rows, stride, width, rng);  // logits before the call
      DeviceArray<uint8_t> d_logits(want.bytes);
      // Half the time a finished token (a pad id) that TERMINATED rows keep:
      // a stop token, the first or last id, or any.
      int32_t finished = -1;
      if (rng() % 2 == 0) {
        const int32_t picks[] = {t.stops[rng() % t.stops.size()], 0, t.vocab - 1,
                                 static_cast<int32_t>(rng() % static_cast<uint64_t>(t.vocab))};
        finished = picks[rng() % 4];
      }
      if (form == Follow::kMaskInPlace) {
        d_logits.upload(scores.bytes, stream);
        want = scores;
        CHECK_TM(treemask_cuda_trie_follow_rows_mask_logits(
            dt, before, &call->desc, policy, rng() % 2 ? nullptr : d_logits.get(),
            rng() % 2 ? 0 : stride, d_logits.get(), dtype, stride, width, finished,
            random_flags(rng), stream));
      } else {
        DeviceArray<uint8_t> d_scores(scores.bytes);
        CHECK_TM(treemask_cuda_trie_follow_rows_mask_logits(
            dt, before, &call->desc, policy, d_scores.get(), scores_stride, d_logits.get(), dtype,
            stride, width, finished, random_flags(rng), stream));
        CHECK_MSG(d_scores.download(stream) == scores.bytes, "scores were written: " + where);
        const size_t eb = cudatest::dtype_bytes(dtype);
        for (size_t r = 0; r < n_rows; ++r) {
          std::memcpy(&want.bytes[r * stride * eb], &scores.bytes[r * scores_stride * eb],
                      width * eb);
        }
      }
      std::vector<int32_t> bitmask;
      const size_t words = static_cast<size_t>((t.vocab + 31) / 32);
      for (size_t r = 0; r < n_rows; ++r) {
        const uint32_t state = host_walk(t, rows[r].data(), rows[r].size(), policy);
        auto row = state_row(t, state);
        if (finished >= 0 && state == kTerminated) {
          row[static_cast<size_t>(finished) / 32] |= static_cast<int32_t>(1u << (finished % 32));
        }
        bitmask.insert(bitmask.end(), row.begin(), row.end());
      }
      cudatest::reference_apply(want, bitmask, words, t.vocab, nullptr);
      const std::string diff = cudatest::first_difference(want, d_logits.download(stream));
      CHECK_MSG(diff.empty(), "follow_rows_mask_logits, " + where + ", finished_token " +
                                  std::to_string(finished) + ", " + cudatest::dtype_name(dtype) +
                                  ": " + diff);
    }
    const auto got = call->states.download(stream);
    for (size_t r = 0; r < n_rows; ++r) {
      const uint32_t want = host_walk(t, rows[r].data(), rows[r].size(), policy);
      CHECK_MSG(got[r] == want, where + " row " + std::to_string(r) + ": " +
                                    std::to_string(got[r]) + " vs " + std::to_string(want));
    }
    if (copy) {
      // The copy holds the ids; from now on the rows are read from it (the
      // next call's prev) while the original buffer is overwritten.
      const auto copied = copy->download(stream);
      for (size_t r = 0; r < n_rows; ++r) {
        CHECK_MSG(std::equal(rows[r].begin(), rows[r].end(), copied.begin() + r * copy_stride),
                  "copy_to row " + std::to_string(r) + " differs from the ids: " + where);
      }
      call->ids->upload(std::vector<int64_t>(n_rows * capacity, 3), stream);
      call->ids = std::move(copy);
      call->desc.tokens = call->ids->get();
      call->desc.row_stride = copy_stride;
      call->desc.copy_to = nullptr;
    }
    prev = std::move(call);
  }
  // A row that matches prev takes prev's state (one step, no walk): with
  // prev's states all TERMINATED, rows that extend prev's rows stay so.
  {
    const size_t n_rows = prev->desc.n_rows, n_tokens = prev->desc.n_tokens + 1;
    const size_t stride = prev->desc.row_stride;
    auto ids = prev->ids->download(stream);
    for (size_t r = 0; r < n_rows; ++r) ids[r * stride + n_tokens - 1] = 1;
    Call next(ids, n_rows, n_tokens, stride);
    prev->states.upload(std::vector<uint32_t>(n_rows, kTerminated), stream);
    CHECK_TM(treemask_cuda_trie_follow_rows(dt, &prev->desc, &next.desc, policy, stream));
    CHECK(next.states.download(stream) == std::vector<uint32_t>(n_rows, kTerminated));
    // Overlaps are refused before anything runs: a copy onto the ids or
    // onto prev's, scores over logits (but not scores equal to logits with
    // another stride).
    auto refused = [&](treemask_status st, const char *what) {
      CHECK_MSG(st == TREEMASK_ERR_INVALID_ARGUMENT, std::string("not refused: ") + what);
      CHECK_MSG(std::string(treemask_last_error()).find(what) != std::string::npos,
                std::string(treemask_last_error()) + " does not name " + what);
    };
    treemask_cuda_token_rows bad = next.desc;
    bad.copy_to = const_cast<int64_t *>(bad.tokens) + 1;
    refused(treemask_cuda_trie_follow_rows(dt, &prev->desc, &bad, policy, stream),
            "copy_to overlaps rows->tokens");
    bad.copy_to = const_cast<int64_t *>(prev->desc.tokens);
    bad.copy_stride = n_tokens;  // within prev's rows (their stride is wider)
    refused(treemask_cuda_trie_follow_rows(dt, &prev->desc, &bad, policy, stream),
            "copy_to overlaps prev->tokens");
    DeviceArray<int64_t> narrow(n_rows * n_tokens);
    bad = next.desc;
    bad.copy_to = narrow.get();
    bad.copy_stride = n_tokens - 1;
    refused(treemask_cuda_trie_follow_rows(dt, nullptr, &bad, policy, stream), "copy_stride");
    const size_t width = static_cast<size_t>(t.vocab);
    DeviceArray<float> logits((n_rows + 1) * width);
    // The caller's word on the pointers changes none of these checks.
    const uint32_t flags = random_flags(rng);
    refused(treemask_cuda_trie_follow_rows_mask_logits(
                dt, nullptr, &next.desc, policy, logits.get() + width / 2, width, logits.get(), 0,
                width, width, -1, flags, stream),
            "scores overlaps logits");
    if (n_rows > 1) {
      refused(treemask_cuda_trie_follow_rows_mask_logits(dt, nullptr, &next.desc, policy,
                                                         logits.get(), width + 1, logits.get(), 0,
                                                         width, width, -1, flags, stream),
              "scores_row_stride");
    }
    refused(treemask_cuda_trie_follow_rows_mask_logits(dt, nullptr, &next.desc, policy, nullptr, 0,
                                                       logits.get(), 0, width, width - 1, -1, flags,
                                                       stream),
            "logits_width");
    refused(
        treemask_cuda_trie_follow_rows_mask_logits(dt, nullptr, &next.desc, policy, nullptr, 0,
                                                   logits.get(), 0, width, width, -1, 0x6, stream),
        "flags 0x6 has unknown bits 0x6");
    for (const int32_t finished : {t.vocab, -2, INT32_MIN}) {
      refused(treemask_cuda_trie_follow_rows_mask_logits(dt, nullptr, &next.desc, policy, nullptr,
                                                         0, logits.get(), 0, width, width, finished,
                                                         flags, stream),
              ("finished_token " + std::to_string(finished) + " is neither -1 nor a token in [0, " +
               std::to_string(t.vocab) + ")")
                  .c_str());
    }
  }
  // Errors: a NULL rows, an unknown policy, row_stride < n_tokens, host arrays.
  treemask_cuda_token_rows bad;
  treemask_cuda_token_rows_init(&bad);
  CHECK(treemask_cuda_trie_follow_rows(dt, nullptr, nullptr, 0, stream) ==
        TREEMASK_ERR_INVALID_ARGUMENT);
  CHECK(treemask_cuda_trie_follow_rows(dt, nullptr, &bad, 7, stream) ==
        TREEMASK_ERR_INVALID_ARGUMENT);
  bad = prev->desc;
  bad.row_stride = bad.n_tokens - 1;
  CHECK(treemask_cuda_trie_follow_rows(dt, nullptr, &bad, 0, stream) ==
        TREEMASK_ERR_INVALID_ARGUMENT);
  CHECK(std::string(treemask_last_error()).find("row_stride") != std::string::npos);
  std::vector<uint32_t> host_states(prev->desc.n_rows);
  bad = prev->desc;
  bad.states = host_states.data();
  CHECK(treemask_cuda_trie_follow_rows(dt, nullptr, &bad, 0, stream) ==
        TREEMASK_ERR_INVALID_ARGUMENT);
  CHECK(std::string(treemask_last_error()).find("rows->states") != std::string::npos);
  bad = prev->desc;
  bad.n_rows = 0;  // nothing to do
  CHECK_TM(treemask_cuda_trie_follow_rows(dt, nullptr, &bad, 0, stream));
  treemask_cuda_trie_free(dt);
}

// The masked copy where whole 16-byte vectors are kept (every row of the
// dense trie at depth 1 allows 40 of its 41 tokens): each dtype, a copy
// from scores of another stride and in place, against the reference; with
// and without TREEMASK_CUDA_CALLER_CHECKED_POINTERS (which must make no
// pointer query where the emulation counts them, and change nothing else).
void test_masked_copy_of_kept_vectors(const TrieUnderTest &dense, cudaStream_t stream) {
  treemask_cuda_trie *dt = nullptr;
  CHECK_TM(treemask_cuda_trie_upload(dense.trie.p, stream, &dt));
  std::mt19937_64 rng(5);
  const size_t n_rows = 5, width = static_cast<size_t>(dense.vocab), stride = 48;
  std::vector<int64_t> ids(n_rows);
  for (size_t r = 0; r < n_rows; ++r) ids[r] = static_cast<int64_t>(r);
  DeviceArray<int64_t> d_ids(ids);
  DeviceArray<uint32_t> states(n_rows);
  DeviceArray<uint64_t> keys(n_rows);
  treemask_cuda_token_rows rows;
  treemask_cuda_token_rows_init(&rows);
  rows.tokens = d_ids.get();
  rows.n_rows = n_rows;
  rows.n_tokens = 1;
  rows.states = states.get();
  rows.keys = keys.get();
  std::vector<int32_t> bitmask;
  for (size_t r = 0; r < n_rows; ++r) {
    const auto row = state_row(dense, host_walk(dense, &ids[r], 1, TREEMASK_FAILURE_REJECT));
    bitmask.insert(bitmask.end(), row.begin(), row.end());
  }
  for (int32_t dtype = 0; dtype < 3; ++dtype) {
    for (const bool in_place : {false, true}) {
      const uint32_t flags = (dtype + in_place) % 2 ? TREEMASK_CUDA_CALLER_CHECKED_POINTERS : 0;
      const size_t scores_stride = in_place ? stride : stride + 8;
      HostLogits scores(dtype, n_rows, scores_stride, width, rng);
      HostLogits want(dtype, n_rows, stride, width, rng);
      DeviceArray<uint8_t> d_scores(scores.bytes), d_logits(in_place ? scores.bytes : want.bytes);
      const size_t eb = cudatest::dtype_bytes(dtype);
      if (in_place) {
        want = scores;
      } else {
        for (size_t r = 0; r < n_rows; ++r) {
          std::memcpy(&want.bytes[r * stride * eb], &scores.bytes[r * scores_stride * eb],
                      width * eb);
        }
      }
      const long queries = cudatest::pointer_queries_in([&] {
        CHECK_TM(treemask_cuda_trie_follow_rows_mask_logits(
            dt, nullptr, &rows, TREEMASK_FAILURE_REJECT, in_place ? nullptr : d_scores.get(),
            scores_stride, d_logits.get(), dtype, stride, width, -1, flags, stream));
      });
      // ids, states, keys, logits and (not in place) scores: one query each.
      if (queries >= 0) {
        CHECK_MSG(queries == (flags      ? 0
                              : in_place ? 4
                                         : 5),
                  std::to_string(queries) + " pointer queries with flags " + std::to_string(flags));
      }
      cudatest::reference_apply(want, bitmask, bitmask.size() / n_rows, dense.vocab, nullptr);
      const std::string diff = cudatest::first_difference(want, d_logits.download(stream));
      CHECK_MSG(diff.empty(), std::string("masked copy of kept vectors, ") +
                                  cudatest::dtype_name(dtype) + (in_place ? ", in place" : "") +
                                  ": " + diff);
    }
  }
  treemask_cuda_trie_free(dt);
}

}  // namespace

// TREEMASK_TEST_SANITIZER_SHAPES=1 (build-gpu/run.sh under compute-sanitizer):
// a few launches of each kernel shape instead of the whole test, so that
// racecheck and synccheck finish in seconds.
bool sanitizer_shapes() {
  const char *v = std::getenv("TREEMASK_TEST_SANITIZER_SHAPES");
  return v && std::string(v) == "1";
}

void run_sanitizer_shapes() {
  std::mt19937_64 rng(78);
  TrieUnderTest small, dense;
  random_small_trie(rng, 100, small);
  dense_trie(dense);
  walk(small, TREEMASK_FAILURE_FAIL_CLOSED, 9, 2, rng, nullptr);
  test_masked_copy_of_kept_vectors(dense, nullptr);
  test_follow_rows(small, TREEMASK_FAILURE_FAIL_CLOSED, rng, nullptr);
}

int main() {
  cudatest::skip_without_device("test_cuda_trie");
  if (sanitizer_shapes()) {
    run_sanitizer_shapes();
    return cudatest::finish("test_cuda_trie (sanitizer shapes)");
  }
  std::mt19937_64 rng(77);
  TrieUnderTest big;
  big_trie(rng, big);
  test_graph(big, rng);

  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int steps = testutil::scaled(24);
  const int big_steps = testutil::scaled(cudatest::kEmulated ? 6 : 24);
  for (int32_t policy = 0; policy <= 2; ++policy) walk(big, policy, 37, big_steps, rng, stream);
  for (int i = 0, n = testutil::scaled(12); i < n; ++i) {
    static constexpr int32_t kVocabs[] = {1, 2, 31, 32, 33, 64, 100, 1000};
    TrieUnderTest small;
    random_small_trie(rng, kVocabs[i % 8], small);
    walk(small, i % 3, 9, steps, rng, i % 2 ? nullptr : stream);
  }
  test_reserved_and_invalid_states(big, stream);
  test_step_errors(big, stream);
  test_advance_states(big, rng, stream);
  for (int32_t policy = 0; policy <= 2; ++policy) test_follow_rows(big, policy, rng, stream);
  {
    TrieUnderTest dense;
    dense_trie(dense);
    test_masked_copy_of_kept_vectors(dense, stream);
    test_follow_rows(dense, TREEMASK_FAILURE_FAIL_CLOSED, rng, stream);
  }
  for (int i = 0; i < 6; ++i) {
    TrieUnderTest small;
    random_small_trie(rng, i % 2 ? 40 : 3, small);
    test_advance_states(small, rng, stream);
    test_follow_rows(small, i % 3, rng, i % 2 ? nullptr : stream);
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  return cudatest::finish("test_cuda_trie");
}
