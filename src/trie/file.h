// The .tmtrie file: a compiled trie that loads by mmap plus one linear check.
//
// Layout (version 2, little-endian, every section 64-byte aligned):
//
//   FileHeader (400 bytes): magic "\x89TMTRIE\n", format version, the file's
//     own size, flags, counts, vocab size, max depth / fanout, the XXH64 of the
//     payload (every byte after the header), a table of (offset, bytes) for
//     each section, and last the XXH64 of the header bytes before it.
//   sections, in FileSection order: the arrays of TrieArrays verbatim, then the
//     metadata index (MetadataEntry per entry, sorted by key) and the metadata
//     strings (each NUL-terminated). Padding bytes are zero.
//
// Loading checks magic, version, header checksum, the file size against the
// header, each section's bounds, alignment and exact size for its count, the
// metadata, and then always runs the linear structural validation of the
// arrays (validate_trie_arrays in trie.h: offsets, child order, token and
// stop-token ranges, terminal ranks, labels), at about memory bandwidth. The
// payload checksum costs one more pass and is verified unless the caller
// passes kLoadTrusted (which skips only the checksum). So every trie that
// loads is as sound as a built one and the hot paths never re-check it. A
// mapped file must not be truncated or rewritten in place while loaded (the
// writer replaces files by rename).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "trie/trie.h"

namespace treemask {

// Version 2 added the tail arrays (trie.h); version 1 files are refused
// with kVersionMismatch (recompile them).
inline constexpr uint32_t kTmtrieFormatVersion = 2;
inline constexpr uint32_t kLoadTrusted = 1u;  // TREEMASK_LOAD_TRUSTED

enum class FileSection : uint32_t {
  kNodeOffsets,
  kEdgeTokens,
  kTerminalBits,
  kTerminalRank,
  kFirstLabels,
  kMultiRanks,
  kMultiOffsets,
  kMultiLabels,
  kStopTokens,
  kHeadBits,
  kHeadRank,
  kTailLengths,
  kTailSamples,
  kTailTokens,
  kMetadataIndex,
  kMetadataStrings,
  kCount,
};

struct FileSectionRef {
  uint64_t offset;
  uint64_t bytes;
};

struct FileHeader {
  unsigned char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  uint64_t file_bytes;
  uint64_t flags;  // kFlagHasLabels, kFlagLabels32
  uint64_t payload_checksum;
  uint64_t n_nodes;
  uint64_t n_terminals;
  uint64_t n_multi;
  uint64_t n_multi_labels;
  uint32_t n_stop_tokens;
  int32_t vocab_size;
  uint32_t max_depth;
  uint32_t max_fanout;
  uint32_t n_metadata;
  uint32_t n_sections;
  FileSectionRef sections[static_cast<size_t>(FileSection::kCount)];
  uint64_t n_explicit;
  uint64_t n_heads;
  int32_t tail_base;
  uint32_t tail_range;
  unsigned char reserved[16];  // zero
  uint64_t header_checksum;
};
static_assert(sizeof(FileHeader) == 400, "the v2 header is 400 bytes");

inline constexpr uint64_t kFlagHasLabels = 1;
inline constexpr uint64_t kFlagLabels32 = 2;  // first_labels holds uint32 values
inline constexpr uint32_t kMaxMetadataEntries = 1u << 20;

struct MetadataEntry {
  uint64_t key_offset;  // into the strings section
  uint64_t value_offset;
  uint32_t key_bytes;  // without the NUL
  uint32_t value_bytes;
};
static_assert(sizeof(MetadataEntry) == 24);

// Writes trie to path, with its own metadata merged with `extra` (extra wins
// on equal keys). Writes a temporary file beside path and renames it over
// path, so processes that have the old file mapped keep a valid mapping.
Status save_trie(const Trie &trie, const std::string &path,
                 const std::vector<std::pair<std::string, std::string>> &extra_metadata);

// Maps path and checks it (see above). flags: kLoadTrusted skips the payload
// checksum. Metadata entries point into the mapping.
Result<Ref<Trie>> load_trie(const std::string &path, uint32_t flags,
                            size_t dense_row_cache_bytes = size_t{64} << 20);

// The checks of load_trie over an image in memory, which must stay alive and
// unmodified while the returned arrays are used: a pure function over bytes
// (what a fuzzer drives). data must be 8-byte aligned.
struct TrieImage {
  TrieArrays arrays;
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
};
Result<TrieImage> parse_trie_image(const unsigned char *data, size_t size, uint32_t flags);

}  // namespace treemask
