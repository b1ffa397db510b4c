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
// in-memory parser on every input.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz/mem_file.h"
#include "fuzz/trie_checks.h"
#include "trie/file.h"
#include "trie/xxh64.h"

namespace {

using treemask::TrieArrays;

// Arrays owned by the fuzzer's buffer.
struct BorrowedStorage final : treemask::TrieStorage {};

// Everything trie.h promises about a built trie's arrays.
bool bit(const uint64_t *bits, uint64_t i) { return (bits[i / 64] >> (i % 64)) & 1; }

bool sound(const TrieArrays &a) {
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

void exercise_image(const unsigned char *image, size_t size, uint32_t flags) {
  auto parsed = treemask::parse_trie_image(image, size, flags);
  if (!parsed.ok()) {
    const auto code = parsed.status().code();
    FUZZ_CHECK(code == treemask::Code::kCorruptFile || code == treemask::Code::kVersionMismatch);
    return;
  }
  const TrieArrays &a = parsed.value().arrays;
  FUZZ_CHECK(sound(a));  // the loader's validation is at least as strict
  treemask::Ref<treemask::Trie> trie = treemask::Ref<treemask::Trie>::adopt(
      new treemask::Trie(std::make_unique<BorrowedStorage>(), a, size_t{1} << 20));
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

  // The C API's mapped load agrees with the parser on the raw bytes.
  for (const uint32_t flags : {0u, unsigned{TREEMASK_LOAD_TRUSTED}}) {
    auto parsed = treemask::parse_trie_image(image, size, flags);
    fuzz::MemFile file(data, size);
    testutil::TrieHandle loaded;
    const treemask_status s = treemask_trie_load(file.path(), flags, &loaded.p);
    const treemask_status want = size == 0 ? TREEMASK_ERR_CORRUPT_FILE
                                 : parsed.ok()
                                     ? TREEMASK_OK
                                     : static_cast<treemask_status>(parsed.status().code());
    FUZZ_CHECK(s == want);
    if (s != TREEMASK_OK) FUZZ_CHECK(treemask_last_error()[0] != '\0');
    if (s == TREEMASK_OK) {
      FUZZ_CHECK(sound(parsed.value().arrays));
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
