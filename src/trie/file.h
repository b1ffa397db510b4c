// The .tmtrie file: a compiled trie that loads by mmap plus one linear check.
//
// Layout (version 4, little-endian, every section 64-byte aligned):
//
//   FileHeader: magic "\x89TMTRIE\n", format version, the header's and the
//     file's size, flags (none defined: 0), the XXH64 of the payload (every
//     byte after the header), the number of counts, sections and metadata
//     entries, the trie's counts (TREEMASK_TRIE_COUNTS of trie/layout.h, each
//     as 64 bits), a table of (offset, bytes) for each section, and last the
//     XXH64 of the header bytes before it.
//   sections, in FileSection order: the saved arrays of trie/layout.h
//     verbatim, in table order, then the metadata index (MetadataEntry per
//     entry, sorted by key) and the metadata strings (each NUL-terminated).
//     Padding bytes are zero.
//
// The header and the section list follow the tables of trie/layout.h, so a
// new array or count changes them without code here (and is a new format
// version).
//
// Loading checks magic, version, header checksum, the file size against the
// header, each count against its type and the others (check_counts), each
// section's bounds, alignment and exact size for the counts, the metadata,
// and then always runs the linear structural validation of the arrays
// (validate_trie_arrays in trie.h: offsets, child order, token and
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
#include "trie/annotations.h"
#include "trie/trie.h"

namespace treemask {

// Version 2 added the tail arrays (trie.h), version 3 made the header and
// the sections follow the tables of trie/layout.h, version 4 added string
// sets (their byte trie and vocabulary); older files are refused with
// kVersionMismatch (recompile them).
inline constexpr uint32_t kTmtrieFormatVersion = 4;
inline constexpr uint32_t kLoadTrusted = 1u;  // TREEMASK_LOAD_TRUSTED

// The sections: the saved arrays of trie/layout.h (named like them), then
// the metadata.
enum class FileSection : uint32_t {
#define TREEMASK_FILE_SECTION_kPlain(name) name,
#define TREEMASK_FILE_SECTION_kHost(name) name,
#define TREEMASK_FILE_SECTION_kDerived(name)
#define TREEMASK_FILE_SECTION_kVocab(name) name,
#define TREEMASK_FILE_SECTION(name, type, count, kind) TREEMASK_FILE_SECTION_##kind(name)
  TREEMASK_TRIE_ARRAYS(TREEMASK_FILE_SECTION)
#undef TREEMASK_FILE_SECTION
#undef TREEMASK_FILE_SECTION_kPlain
#undef TREEMASK_FILE_SECTION_kHost
#undef TREEMASK_FILE_SECTION_kDerived
#undef TREEMASK_FILE_SECTION_kVocab
      metadata_index,
  metadata_strings,
  kCount,
};
inline constexpr size_t kFileSections = static_cast<size_t>(FileSection::kCount);

struct FileSectionRef {
  uint64_t offset;
  uint64_t bytes;
};

// The counts of trie/layout.h as the header stores them: 64 bits each,
// signed values sign-extended.
struct FileCounts {
#define TREEMASK_FILE_COUNT(type, name) uint64_t name;
  TREEMASK_TRIE_COUNTS(TREEMASK_FILE_COUNT)
#undef TREEMASK_FILE_COUNT
};
inline constexpr size_t kFileCounts = sizeof(FileCounts) / sizeof(uint64_t);

struct FileHeader {
  unsigned char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  uint64_t file_bytes;
  uint64_t flags;  // none defined: 0
  uint64_t payload_checksum;
  uint32_t n_counts;    // kFileCounts
  uint32_t n_sections;  // kFileSections
  uint32_t n_metadata;
  uint32_t reserved;  // zero
  FileCounts counts;
  FileSectionRef sections[kFileSections];
  uint64_t header_checksum;

  FileSectionRef &section(FileSection s) { return sections[static_cast<size_t>(s)]; }
  const FileSectionRef &section(FileSection s) const { return sections[static_cast<size_t>(s)]; }
};
static_assert(sizeof(FileHeader) == 56 + 8 * kFileCounts + 16 * kFileSections + 8,
              "the header has no padding");

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

// Maps path and checks it (see above): the arrays of a trie of either kind,
// the mapping that holds them and the metadata entries, which point into it.
// flags: kLoadTrusted skips the payload checksum. Errors name the path.
// load_trie (strings/string_set.h) makes the Trie of its kind from it.
struct MappedTrie {
  std::unique_ptr<TrieStorage> storage;
  TrieArrays arrays;
  std::vector<TrieAnnotations::Entry> metadata;
};
Result<MappedTrie> map_trie_file(const std::string &path, uint32_t flags);

// The checks of map_trie_file over an image in memory, which must stay alive and
// unmodified while the returned arrays are used: a pure function over bytes
// (what a fuzzer drives). data must be 8-byte aligned.
struct TrieImage {
  TrieArrays arrays;
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
};
Result<TrieImage> parse_trie_image(const unsigned char *data, size_t size, uint32_t flags);

}  // namespace treemask
