// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "trie/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>

#include "core/open_file.h"
#include "trie/annotations.h"
#include "trie/xxh64.h"

namespace treemask {

namespace {

constexpr unsigned char kMagic[8] = {0x89, 'T', 'M', 'T', 'R', 'I', 'E', '\n'};
constexpr uint64_t kAlign = 64;
// Padding between sections (never longer than one alignment unit).
constexpr unsigned char kZeroPadding[kAlign] = {};
constexpr size_t kSections = static_cast<size_t>(FileSection::kCount);
constexpr size_t kHeaderChecksummed = offsetof(FileHeader, header_checksum);

static_assert(std::endian::native == std::endian::little,
              ".tmtrie files are little-endian and mapped as they are");

uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string errno_text() { return std::strerror(errno); }

// Byte sizes every section must have for the header's counts.
std::array<uint64_t, kSections> expected_bytes(const FileHeader &h) {
  const uint64_t words = (h.n_nodes + 63) / 64;
  const uint64_t head_words = h.n_heads ? (h.n_explicit + 63) / 64 : 0;
  std::array<uint64_t, kSections> b{};
  auto at = [&b](FileSection s) -> uint64_t & { return b[static_cast<size_t>(s)]; };
  at(FileSection::kNodeOffsets) = (h.n_explicit + 1) * 4;
  at(FileSection::kEdgeTokens) = (h.n_explicit - 1) * 4;
  at(FileSection::kHeadBits) = head_words * 8;
  at(FileSection::kHeadRank) = head_words * 4;
  at(FileSection::kTailLengths) = h.n_heads;
  at(FileSection::kTailSamples) = (h.n_heads + kTailSample - 1) / kTailSample * 4;
  at(FileSection::kTailTokens) = (h.n_nodes - h.n_explicit) * 2;
  at(FileSection::kTerminalBits) = words * 8;
  at(FileSection::kTerminalRank) = words * 4;
  at(FileSection::kFirstLabels) =
      (h.flags & kFlagHasLabels) ? h.n_terminals * ((h.flags & kFlagLabels32) ? 4 : 8) : 0;
  at(FileSection::kMultiRanks) = h.n_multi * 4;
  at(FileSection::kMultiOffsets) = (h.n_multi + 1) * 4;
  at(FileSection::kMultiLabels) = h.n_multi_labels * 8;
  at(FileSection::kStopTokens) = uint64_t{h.n_stop_tokens} * 4;
  at(FileSection::kMetadataIndex) = uint64_t{h.n_metadata} * sizeof(MetadataEntry);
  at(FileSection::kMetadataStrings) =
      h.sections[static_cast<size_t>(FileSection::kMetadataStrings)].bytes;  // free-form
  return b;
}

const char *section_name(size_t i) {
  static const char *const names[kSections] = {
      "node_offsets", "edge_tokens", "terminal_bits",  "terminal_rank",
      "first_labels", "multi_ranks", "multi_offsets",  "multi_labels",
      "stop_tokens",  "head_bits",   "head_rank",      "tail_lengths",
      "tail_samples", "tail_tokens", "metadata_index", "metadata_strings"};
  return names[i];
}

Status check_counts(const FileHeader &h) {
  if (h.n_nodes == 0 || h.n_nodes > kMaxNodes) {
    return error(Code::kCorruptFile, "node count ", h.n_nodes, " is outside [1, ", kMaxNodes, "]");
  }
  if (h.vocab_size <= 0) return error(Code::kCorruptFile, "vocab_size ", h.vocab_size, " <= 0");
  if (h.n_explicit == 0 || h.n_explicit > h.n_nodes || h.n_heads > h.n_explicit) {
    return error(Code::kCorruptFile, "inconsistent counts: ", h.n_explicit, " CSR nodes and ",
                 h.n_heads, " tails for ", h.n_nodes, " nodes");
  }
  if (h.n_terminals > h.n_nodes || h.n_multi > h.n_terminals || h.n_multi_labels > 0xFFFFFFFFull) {
    return error(Code::kCorruptFile, "inconsistent counts: ", h.n_terminals, " terminals, ",
                 h.n_multi, " multi-label terminals, ", h.n_multi_labels, " labels, for ",
                 h.n_nodes, " nodes");
  }
  if (h.n_stop_tokens == 0 || h.n_stop_tokens > static_cast<uint32_t>(h.vocab_size)) {
    return error(Code::kCorruptFile, "stop token count ", h.n_stop_tokens, " is outside [1, ",
                 h.vocab_size, "]");
  }
  if (h.n_metadata > kMaxMetadataEntries) {
    return error(Code::kCorruptFile, "metadata entry count ", h.n_metadata, " exceeds ",
                 kMaxMetadataEntries);
  }
  constexpr uint64_t kKnown = kFlagHasLabels | kFlagLabels32;
  if (h.flags & ~kKnown) return error(Code::kCorruptFile, "unknown flags ", Hex{h.flags & ~kKnown});
  if ((h.flags & kFlagLabels32) && !(h.flags & kFlagHasLabels)) {
    return error(Code::kCorruptFile, "flags ", Hex{h.flags}, ": 32-bit labels without labels");
  }
  if (h.n_sections != kSections) {
    return error(Code::kCorruptFile, "section count ", h.n_sections, ", expected ", kSections);
  }
  return Status::Ok();
}

// Views into the mapped sections; valid once check_sections passed.
template <class T>
const T *view(const unsigned char *data, const FileHeader &h, FileSection s) {
  return reinterpret_cast<const T *>(data + h.sections[static_cast<size_t>(s)].offset);
}

Status check_sections(const FileHeader &h, uint64_t size) {
  const auto want = expected_bytes(h);
  for (size_t i = 0; i < kSections; ++i) {
    const FileSectionRef &s = h.sections[i];
    if (s.bytes != want[i]) {
      return error(Code::kCorruptFile, "section ", section_name(i), " is ", s.bytes,
                   " bytes; the counts need ", want[i]);
    }
    if (s.offset % kAlign != 0 || s.offset < h.header_bytes || s.offset > size ||
        s.bytes > size - s.offset) {
      return error(Code::kCorruptFile, "section ", section_name(i), " [", s.offset, ", +", s.bytes,
                   ") is misaligned or outside the file (", size, " bytes)");
    }
  }
  return Status::Ok();
}

Status check_arrays(const unsigned char *data, const FileHeader &h) {
  const auto *offsets = view<uint32_t>(data, h, FileSection::kNodeOffsets);
  if (offsets[0] != 0 || offsets[h.n_explicit] != h.n_explicit - 1) {
    return error(Code::kCorruptFile, "node_offsets does not span the ", h.n_explicit - 1,
                 " CSR edges");
  }
  const auto *multi = view<uint32_t>(data, h, FileSection::kMultiOffsets);
  if (multi[0] != 0 || multi[h.n_multi] != h.n_multi_labels) {
    return error(Code::kCorruptFile, "multi_offsets does not span the ", h.n_multi_labels,
                 " labels");
  }
  const auto *stops = view<int32_t>(data, h, FileSection::kStopTokens);
  for (uint32_t i = 0; i < h.n_stop_tokens; ++i) {
    if (stops[i] < 0 || stops[i] >= h.vocab_size || (i > 0 && stops[i] <= stops[i - 1])) {
      return error(Code::kCorruptFile, "stop token ", stops[i],
                   " is out of range or out of order (vocab_size ", h.vocab_size, ")");
    }
  }
  return Status::Ok();
}

Result<std::vector<std::pair<std::string_view, std::string_view>>> read_metadata(
    const unsigned char *data, const FileHeader &h) {
  const auto *index = view<MetadataEntry>(data, h, FileSection::kMetadataIndex);
  const auto *strings = view<char>(data, h, FileSection::kMetadataStrings);
  const uint64_t n = h.sections[static_cast<size_t>(FileSection::kMetadataStrings)].bytes;
  auto string_at = [&](uint64_t offset, uint32_t bytes, std::string_view &out) {
    if (offset >= n || bytes >= n - offset || strings[offset + bytes] != '\0') return false;
    out = {strings + offset, bytes};
    return true;
  };
  std::vector<std::pair<std::string_view, std::string_view>> out(h.n_metadata);
  for (uint32_t i = 0; i < h.n_metadata; ++i) {
    if (!string_at(index[i].key_offset, index[i].key_bytes, out[i].first) ||
        !string_at(index[i].value_offset, index[i].value_bytes, out[i].second)) {
      return error(Code::kCorruptFile, "metadata entry ", i, " points outside its strings");
    }
  }
  return out;
}

// Owns the mapping behind a loaded trie.
class MappedTrieStorage final : public TrieStorage {
 public:
  MappedTrieStorage(void *base, size_t size) : base_(base), size_(size) {}
  ~MappedTrieStorage() override { munmap(base_, size_); }
  MappedTrieStorage(const MappedTrieStorage &) = delete;
  MappedTrieStorage &operator=(const MappedTrieStorage &) = delete;

 private:
  void *base_;
  size_t size_;
};

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status write_all(int fd, const void *data, size_t n, const std::string &path) {
  auto *p = static_cast<const char *>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return error(Code::kIo, "cannot write \"", path, "\": ", errno_text());
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

struct Piece {
  const void *data;
  uint64_t bytes;
};

// The counts a FileHeader and a TrieArrays share, in either direction.
template <class From, class To>
void copy_counts(const From &from, To &to) {
  to.n_nodes = from.n_nodes;
  to.n_terminals = from.n_terminals;
  to.n_multi = from.n_multi;
  to.n_multi_labels = from.n_multi_labels;
  to.n_stop_tokens = from.n_stop_tokens;
  to.vocab_size = from.vocab_size;
  to.max_depth = from.max_depth;
  to.max_fanout = from.max_fanout;
  to.n_explicit = from.n_explicit;
  to.n_heads = from.n_heads;
  to.tail_base = from.tail_base;
  to.tail_range = from.tail_range;
}

}  // namespace

Result<TrieImage> parse_trie_image(const unsigned char *data, size_t size, uint32_t flags) {
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) {
    return error(Code::kInvalidArgument, "a trie image must be 8-byte aligned");
  }
  if (size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
    return error(Code::kCorruptFile, "not a .tmtrie file (bad magic bytes)");
  }
  if (size < offsetof(FileHeader, header_bytes)) {
    return error(Code::kCorruptFile, "truncated: ", size, " bytes, no format version");
  }
  uint32_t version;
  std::memcpy(&version, data + offsetof(FileHeader, format_version), sizeof(version));
  if (version != kTmtrieFormatVersion) {
    return error(Code::kVersionMismatch, "format version ", version,
                 "; this library reads version ", kTmtrieFormatVersion,
                 " (recompile the trie with this version of treemask)");
  }
  if (size < sizeof(FileHeader)) {
    return error(Code::kCorruptFile, "truncated: ", size, " bytes, the header alone is ",
                 sizeof(FileHeader));
  }
  FileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (xxh64(data, kHeaderChecksummed) != h.header_checksum) {
    return error(Code::kCorruptFile, "header checksum mismatch (the header is corrupted)");
  }
  if (h.header_bytes != sizeof(FileHeader)) {
    return error(Code::kCorruptFile, "header size ", h.header_bytes, ", expected ",
                 sizeof(FileHeader));
  }
  if (h.file_bytes != size) {
    return error(Code::kCorruptFile, "the file is ", size, " bytes but its header says ",
                 h.file_bytes, " (truncated or appended to)");
  }
  if (!(flags & kLoadTrusted) &&
      xxh64(data + h.header_bytes, size - h.header_bytes) != h.payload_checksum) {
    return error(Code::kCorruptFile, "payload checksum mismatch (the file is corrupted)");
  }
  TM_TRY(check_counts(h));
  TM_TRY(check_sections(h, size));
  TM_TRY(check_arrays(data, h));
  TM_ASSIGN_OR_RETURN(auto metadata, read_metadata(data, h));

  TrieImage image;
  TrieArrays &a = image.arrays;
  a.node_offsets = view<uint32_t>(data, h, FileSection::kNodeOffsets);
  a.edge_tokens = view<int32_t>(data, h, FileSection::kEdgeTokens);
  a.terminal_bits = view<uint64_t>(data, h, FileSection::kTerminalBits);
  a.terminal_rank = view<uint32_t>(data, h, FileSection::kTerminalRank);
  if (h.flags & kFlagLabels32) {
    a.first_labels32 = view<uint32_t>(data, h, FileSection::kFirstLabels);
  } else if (h.flags & kFlagHasLabels) {
    a.first_labels = view<int64_t>(data, h, FileSection::kFirstLabels);
  }
  a.multi_ranks = view<uint32_t>(data, h, FileSection::kMultiRanks);
  a.multi_offsets = view<uint32_t>(data, h, FileSection::kMultiOffsets);
  a.multi_labels = view<int64_t>(data, h, FileSection::kMultiLabels);
  a.stop_tokens = view<int32_t>(data, h, FileSection::kStopTokens);
  if (h.n_heads > 0) {
    a.head_bits = view<uint64_t>(data, h, FileSection::kHeadBits);
    a.head_rank = view<uint32_t>(data, h, FileSection::kHeadRank);
  }
  a.tail_lengths = view<uint8_t>(data, h, FileSection::kTailLengths);
  a.tail_samples = view<uint32_t>(data, h, FileSection::kTailSamples);
  a.tail_tokens = view<uint16_t>(data, h, FileSection::kTailTokens);
  copy_counts(h, a);
  TM_TRY(validate_trie_arrays(a));
  image.metadata = std::move(metadata);
  return image;
}

Status save_trie(const Trie &trie, const std::string &path,
                 const std::vector<std::pair<std::string, std::string>> &extra_metadata) {
  TM_TRY(check_output_path(path));
  // Metadata: the trie's own, overridden by extra; validated by make().
  std::map<std::string, std::string> merged;
  if (const TrieAnnotations *own = trie.annotations()) {
    for (const auto &e : own->metadata()) merged[std::string(e.key)] = std::string(e.value);
  }
  for (const auto &[k, v] : extra_metadata) merged[k] = v;
  TM_ASSIGN_OR_RETURN(auto annotations, TrieAnnotations::make({merged.begin(), merged.end()}, 0));
  std::vector<MetadataEntry> index;
  std::string strings;
  for (const auto &e : annotations->metadata()) {
    MetadataEntry m{strings.size(), strings.size() + e.key.size() + 1,
                    static_cast<uint32_t>(e.key.size()), static_cast<uint32_t>(e.value.size())};
    strings.append(e.key).push_back('\0');
    strings.append(e.value).push_back('\0');
    index.push_back(m);
  }

  const TrieArrays &a = trie.arrays();
  const bool has_labels = a.has_labels();
  FileHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.format_version = kTmtrieFormatVersion;
  h.header_bytes = sizeof(FileHeader);
  h.flags = (has_labels ? kFlagHasLabels : 0) | (a.first_labels32 ? kFlagLabels32 : 0);
  copy_counts(a, h);
  h.n_metadata = static_cast<uint32_t>(index.size());
  h.n_sections = kSections;
  h.sections[static_cast<size_t>(FileSection::kMetadataStrings)].bytes = strings.size();
  const auto bytes = expected_bytes(h);
  const Piece pieces[kSections] = {
      {a.node_offsets, bytes[0]},
      {a.edge_tokens, bytes[1]},
      {a.terminal_bits, bytes[2]},
      {a.terminal_rank, bytes[3]},
      {a.first_labels32 ? static_cast<const void *>(a.first_labels32) : a.first_labels, bytes[4]},
      {a.multi_ranks, bytes[5]},
      {a.multi_offsets, bytes[6]},
      {a.multi_labels, bytes[7]},
      {a.stop_tokens, bytes[8]},
      {a.head_bits, bytes[9]},
      {a.head_rank, bytes[10]},
      {a.tail_lengths, bytes[11]},
      {a.tail_samples, bytes[12]},
      {a.tail_tokens, bytes[13]},
      {index.data(), bytes[14]},
      {strings.data(), bytes[15]},
  };
  uint64_t offset = sizeof(FileHeader);
  for (size_t i = 0; i < kSections; ++i) {
    offset = align_up(offset);
    h.sections[i] = {offset, pieces[i].bytes};
    offset += pieces[i].bytes;
  }
  h.file_bytes = offset;

  // Visits the payload as it is laid out: padding, then each section.
  auto for_each_payload_piece = [&](auto &&visit) -> Status {
    uint64_t at = sizeof(FileHeader);
    for (size_t i = 0; i < kSections; ++i) {
      if (h.sections[i].offset > at) TM_TRY(visit(kZeroPadding, h.sections[i].offset - at));
      if (pieces[i].bytes > 0) TM_TRY(visit(pieces[i].data, pieces[i].bytes));
      at = h.sections[i].offset + pieces[i].bytes;
    }
    return Status::Ok();
  };
  Xxh64 payload;
  TM_TRY(for_each_payload_piece([&](const void *p, uint64_t n) {
    payload.update(p, n);
    return Status::Ok();
  }));
  h.payload_checksum = payload.digest();
  h.header_checksum = xxh64(&h, kHeaderChecksummed);

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = cat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
  FileDescriptor fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return error(Code::kIo, "cannot create \"", tmp, "\" (to write \"", path,
                 "\"): ", errno_text());
  }
  Status s = write_all(fd.get(), &h, sizeof(h), tmp);
  if (s.ok()) {
    s = for_each_payload_piece(
        [&](const void *p, uint64_t n) { return write_all(fd.get(), p, n, tmp); });
  }
  if (s.ok() && close(fd.get()) != 0) {
    s = error(Code::kIo, "cannot write \"", tmp, "\": ", errno_text());
  }
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = error(Code::kIo, "cannot rename \"", tmp, "\" to \"", path, "\": ", errno_text());
  }
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

Result<Ref<Trie>> load_trie(const std::string &path, uint32_t flags, size_t dense_row_cache_bytes) {
  if (flags & ~kLoadTrusted) {
    return error(Code::kInvalidArgument, "unknown load flags ", Hex{flags & ~kLoadTrusted});
  }
  size_t size = 0;
  TM_ASSIGN_OR_RETURN(const int raw_fd, open_regular_file(path, &size));
  FileDescriptor fd(raw_fd);
  if (size == 0) return error(Code::kCorruptFile, "\"", path, "\": empty file, not a .tmtrie file");
  // The magic from one read first: a file that is no .tmtrie at all (a 2 GB
  // sparse file took 4.7 s) is not mapped and pre-faulted to say so.
  unsigned char magic[sizeof(kMagic)];
  if (size < sizeof(kMagic) ||
      pread(fd.get(), magic, sizeof(magic), 0) != static_cast<ssize_t>(sizeof(magic)) ||
      std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return error(Code::kCorruptFile, "\"", path, "\": not a .tmtrie file (bad magic bytes)");
  }
  // Pre-faulting pays off: the structural validation (and, unless trusted,
  // the checksum) reads nearly every page right away.
  void *base = mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) return error(Code::kIo, "cannot map \"", path, "\": ", errno_text());
  auto storage = std::make_unique<MappedTrieStorage>(base, size);
  auto image = parse_trie_image(static_cast<const unsigned char *>(base), size, flags);
  if (!image.ok()) {
    return Status(image.status().code(), cat("\"", path, "\": ", image.status().message()));
  }
  TrieImage &img = image.value();
  std::vector<TrieAnnotations::Entry> entries;
  entries.reserve(img.metadata.size());
  for (const auto &[k, v] : img.metadata) entries.push_back({k, v});
  auto trie = Ref<Trie>::adopt(new Trie(std::move(storage), img.arrays, dense_row_cache_bytes));
  if (!entries.empty()) trie->set_annotations(TrieAnnotations::borrow(std::move(entries)));
  return trie;
}

}  // namespace treemask
