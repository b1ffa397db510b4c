// Fuzz target: the .tmtrie reader. The input is the file.
//
// Both checksums stop nearly every mutation at the door, so the target also
// parses a copy whose checksums it recomputes: the mutation then reaches
// the header checks, the section checks and the structural validation that
// every load runs. Whatever loads must pass this file's own independent
// validation (sound()) and behave exactly like a built trie: fill, accept,
// next_tokens, forced_tokens, accept_forced_tokens, can_terminate,
// advance_states and fill_states agree (fuzz/trie_checks.h); whatever does
// not load fails with TREEMASK_ERR_CORRUPT_FILE (or VERSION_MISMATCH) and a
// message. The C API's file load (through a memfd) must agree with the
// in-memory load (the parser, then the string-set vocabulary's check) on
// every input.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz/mem_file.h"
#include "fuzz/trie_checks.h"
#include "strings/string_set.h"
#include "trie/file.h"
#include "trie/xxh64.h"

namespace {

using treemask::TrieArrays;

// Arrays owned by the fuzzer's buffer.
struct BorrowedStorage final : treemask::TrieStorage {};

// Everything trie.h promises about a built trie's arrays.
bool bit(const uint64_t *bits, uint64_t i) { return (bits[i / 64] >> (i % 64)) & 1; }

// A string set's byte trie, checked by rebuilding it: a depth-first walk
// from the root through each node's children (unary: the next id; branch:
// its table, ascending by byte) must visit ids 0, 1, 2, ... in order, every
// child labelled with its byte, every leaf an end; the terminal rank and
// count as for token paths; the vocabulary's offsets ascending to its byte
// count and its fingerprint the one its tokens hash to.
bool sound_string_set(const TrieArrays &a) {
  const uint64_t n = a.n_nodes;
  if (n == 0 || a.n_explicit != 0 || a.n_heads != 0) return false;
  std::vector<uint64_t> branch_index(n);
  for (uint64_t i = 0, k = 0; i < n; ++i) {
    branch_index[i] = k;
    k += bit(a.branch_bits, i);
  }
  auto children = [&](uint64_t node, std::vector<std::pair<uint8_t, uint64_t>> &out) {
    out.clear();
    if (bit(a.unary_bits, node)) {
      if (bit(a.branch_bits, node) || node + 1 >= n) return false;
      out.push_back({a.byte_labels[node + 1], node + 1});
      return true;
    }
    if (!bit(a.branch_bits, node)) return bit(a.terminal_bits, node);  // a leaf ends a string
    const uint64_t k = branch_index[node];
    if (k >= a.n_branches) return false;
    const uint32_t first = a.branch_first[k], end = a.branch_first[k + 1];
    if (end < first + 2 || end > a.n_branch_children) return false;
    for (uint32_t c = first; c < end; ++c) {
      if (c > first && a.child_bytes[c] <= a.child_bytes[c - 1]) return false;
      if (a.child_ids[c] >= n || a.byte_labels[a.child_ids[c]] != a.child_bytes[c]) return false;
      out.push_back({a.child_bytes[c], a.child_ids[c]});
    }
    return true;
  };
  // Iterative depth-first walk: the ids it meets must be 0, 1, 2, ...
  std::vector<std::vector<uint64_t>> pending{{0}};
  std::vector<std::pair<uint8_t, uint64_t>> kids;
  uint64_t next_id = 0;
  while (!pending.empty()) {
    if (pending.back().empty()) {
      pending.pop_back();
      continue;
    }
    const uint64_t node = pending.back().back();
    pending.back().pop_back();
    if (node != next_id++ || !children(node, kids)) return false;
    std::vector<uint64_t> level;
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) level.push_back(it->second);
    pending.push_back(std::move(level));
    if (pending.size() > n + 1) return false;
  }
  if (next_id != n || a.byte_labels[0] != 0) return false;
  uint64_t terminals = 0;
  for (uint64_t node = 0; node < n; ++node) {
    if (node % 64 == 0 && a.terminal_rank[node / 64] != terminals) return false;
    terminals += bit(a.terminal_bits, node);
  }
  if (terminals != a.n_terminals) return false;
  const uint32_t nt = a.n_vocab_tokens;
  if (a.vocab_offsets[0] != 0 || a.vocab_offsets[nt] != a.n_vocab_bytes) return false;
  treemask::Xxh64 h;
  h.update("treemask-vocab-1", 16);
  auto le32 = [&](uint32_t v) {
    const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                static_cast<unsigned char>(v >> 16),
                                static_cast<unsigned char>(v >> 24)};
    h.update(b, 4);
  };
  le32(static_cast<uint32_t>(a.vocab_size));
  le32(nt);
  for (uint32_t t = 0; t < nt; ++t) {
    if (a.vocab_offsets[t + 1] < a.vocab_offsets[t] || a.vocab_flags[t] > 1) return false;
    const uint32_t len = a.vocab_offsets[t + 1] - a.vocab_offsets[t];
    h.update(&a.vocab_flags[t], 1);
    le32(len);
    if (len) h.update(a.vocab_bytes + a.vocab_offsets[t], len);
  }
  return h.digest() == *a.vocab_fingerprint;
}

bool sound(const TrieArrays &a) {
  if (a.is_string_set()) return sound_string_set(a);
  const uint64_t n = a.n_nodes, ne = a.n_explicit;
  if (n == 0 || ne == 0 || ne > n) return false;
  if (a.node_offsets[0] != 0 || a.node_offsets[ne] != ne - 1) return false;
  auto is_stop = [&](int32_t t) {
    return std::binary_search(a.stop_tokens, a.stop_tokens + a.n_stop_tokens, t);
  };
  // The CSR nodes: breadth-first ranges, children ascending and in range, a
  // node without children terminal unless it heads a tail.
  uint64_t heads = 0;
  for (uint64_t node = 0; node < ne; ++node) {
    const uint32_t begin = a.node_offsets[node], end = a.node_offsets[node + 1];
    if (begin > end || end > ne - 1 || begin < node) return false;
    for (uint32_t e = begin; e < end; ++e) {
      const int32_t t = a.edge_tokens[e];
      if (t < 0 || t >= a.vocab_size || (e > begin && t <= a.edge_tokens[e - 1]) || is_stop(t)) {
        return false;
      }
    }
    const bool head = a.head_bits && bit(a.head_bits, node);
    if (a.head_bits && node % 64 == 0 && a.head_rank[node / 64] != heads) return false;
    heads += head;
    if (head && begin != end) return false;
    if (begin == end && !head && !bit(a.terminal_bits, node)) return false;
  }
  if (a.head_bits && ne % 64 != 0 && (a.head_bits[(ne - 1) / 64] >> (ne % 64)) != 0) return false;
  if (!a.head_bits && a.n_heads != 0) return false;
  if (heads != a.n_heads) return false;
  // The tails: consecutive, non-empty, covering every tail node; only the
  // last node of each terminal; tokens in range and no stop token.
  uint64_t end = 0;
  for (uint64_t k = 0; k < heads; ++k) {
    const uint64_t begin = end;
    if (k % 16 == 0 && a.tail_samples[k / 16] != begin) return false;
    end += a.tail_lengths[k];
    if (end <= begin || end > n - ne) return false;
    for (uint64_t i = begin; i < end; ++i) {
      if (bit(a.terminal_bits, ne + i) != (i + 1 == end)) return false;
      if (a.tail_tokens[i] >= a.tail_range) return false;
      const int64_t t = int64_t{a.tail_base} + a.tail_tokens[i];
      if (t < 0 || t >= a.vocab_size || is_stop(static_cast<int32_t>(t))) return false;
    }
  }
  if (end != n - ne) return false;  // the tails cover every tail node
  if (heads > 0 && a.tail_range > 0x10000u) return false;
  uint64_t terminals = 0;
  for (uint64_t node = 0; node < n; ++node) {
    if (node % 64 == 0 && a.terminal_rank[node / 64] != terminals) return false;
    terminals += bit(a.terminal_bits, node);
  }
  const uint64_t words = (n + 63) / 64;
  if (n % 64 != 0 && (a.terminal_bits[words - 1] >> (n % 64)) != 0) return false;
  if (terminals != a.n_terminals) return false;
  for (uint64_t i = 0; i < a.n_multi; ++i) {
    if (a.multi_ranks[i] >= a.n_terminals || (i > 0 && a.multi_ranks[i] <= a.multi_ranks[i - 1]) ||
        a.multi_offsets[i + 1] < a.multi_offsets[i] + 2) {
      return false;
    }
  }
  return a.has_labels() || a.n_multi == 0;
}

// What a load runs (load_trie, strings/string_set.h): the file's parser,
// then make_validated_trie, which checks a string set's saved vocabulary
// (its rules and fingerprint are the strings layer's, not the parser's).
// On success *arrays are the loaded arrays.
treemask::Result<treemask::Ref<treemask::Trie>> load_image(const unsigned char *image, size_t size,
                                                           uint32_t flags, TrieArrays *arrays) {
  auto parsed = treemask::parse_trie_image(image, size, flags);
  if (!parsed.ok()) return parsed.status();
  *arrays = parsed.value().arrays;
  return treemask::make_validated_trie(std::make_unique<BorrowedStorage>(), *arrays,
                                       size_t{1} << 20);
}

void exercise_image(const unsigned char *image, size_t size, uint32_t flags) {
  TrieArrays a;
  auto made = load_image(image, size, flags, &a);
  if (!made.ok()) {
    const auto code = made.status().code();
    FUZZ_CHECK(code == treemask::Code::kCorruptFile || code == treemask::Code::kVersionMismatch);
    FUZZ_CHECK(!made.status().message().empty());
    return;
  }
  FUZZ_CHECK(sound(a));  // the load's validation is at least as strict
  treemask::Ref<treemask::Trie> trie = made.take_value();
  fuzz::ExerciseLimits limits;
  limits.max_nodes = 256;
  fuzz::exercise_trie(reinterpret_cast<treemask_trie *>(trie.get()), true, limits);
}

// Recomputes both checksums of a header-sized or larger image in place.
void fix_checksums(unsigned char *image, size_t size) {
  if (size < sizeof(treemask::FileHeader)) return;
  treemask::FileHeader h;
  std::memcpy(&h, image, sizeof(h));
  if (h.header_bytes == sizeof(h) && h.file_bytes == size) {
    h.payload_checksum = treemask::xxh64(image + sizeof(h), size - sizeof(h));
  }
  h.header_checksum = treemask::xxh64(&h, offsetof(treemask::FileHeader, header_checksum));
  std::memcpy(image, &h, sizeof(h));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The reader needs 8-byte alignment, as a mapping has.
  std::vector<uint64_t> storage((size + 7) / 8 + 1);
  auto *image = reinterpret_cast<unsigned char *>(storage.data());
  std::memcpy(image, data, size);

  // The C API's mapped load agrees with the in-memory load on the raw bytes.
  for (const uint32_t flags : {0u, unsigned{TREEMASK_LOAD_TRUSTED}}) {
    TrieArrays a;
    auto made = load_image(image, size, flags, &a);
    fuzz::MemFile file(data, size);
    testutil::TrieHandle loaded;
    const treemask_status s = treemask_trie_load(file.path(), flags, &loaded.p);
    const treemask_status want = size == 0   ? TREEMASK_ERR_CORRUPT_FILE
                                 : made.ok() ? TREEMASK_OK
                                             : static_cast<treemask_status>(made.status().code());
    FUZZ_CHECK(s == want);
    if (s != TREEMASK_OK) FUZZ_CHECK(treemask_last_error()[0] != '\0');
    if (s == TREEMASK_OK) {
      FUZZ_CHECK(sound(a));
      fuzz::ExerciseLimits limits;
      limits.max_nodes = 64;
      fuzz::exercise_trie(loaded.p, true, limits);
    }
  }

  exercise_image(image, size, 0);
  fix_checksums(image, size);
  exercise_image(image, size, 0);
  exercise_image(image, size, TREEMASK_LOAD_TRUSTED);
  return 0;
}
