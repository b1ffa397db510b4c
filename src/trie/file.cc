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
#include <limits>
#include <map>
#include <type_traits>

#include "core/open_file.h"
#include "trie/annotations.h"
#include "trie/xxh64.h"

namespace treemask {

namespace {

constexpr unsigned char kMagic[8] = {0x89, 'T', 'M', 'T', 'R', 'I', 'E', '\n'};
constexpr uint64_t kAlign = 64;
// Padding between sections (never longer than one alignment unit).
constexpr unsigned char kZeroPadding[kAlign] = {};
constexpr size_t kHeaderChecksummed = offsetof(FileHeader, header_checksum);

static_assert(std::endian::native == std::endian::little,
              ".tmtrie files are little-endian and mapped as they are");

uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string errno_text() { return std::strerror(errno); }

// value into out when it fits T (signed values are stored sign-extended).
template <class T>
bool narrow(uint64_t value, T &out) {
  if constexpr (std::is_signed_v<T>) {
    const auto v = static_cast<int64_t>(value);
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(v);
  } else {
    if (value > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(value);
  }
  return true;
}

// The header's counts, each checked against its type, then against each
// other (check_counts), so that every section size below is sound.
Result<TrieArrays> counts_of(const FileHeader &h) {
  TrieArrays a;
#define TREEMASK_READ_COUNT(type, name)                                                         \
  if (!narrow(h.counts.name, a.name)) {                                                         \
    return error(Code::kCorruptFile, "count " #name " = ", h.counts.name, " does not fit its ", \
                 "type (" #type ")");                                                           \
  }
  TREEMASK_TRIE_COUNTS(TREEMASK_READ_COUNT)
#undef TREEMASK_READ_COUNT
  TM_TRY(check_counts(a));
  return a;
}

void write_counts(const TrieCounts &c, FileHeader &h) {
#define TREEMASK_WRITE_COUNT(type, name) h.counts.name = static_cast<uint64_t>(c.name);
  TREEMASK_TRIE_COUNTS(TREEMASK_WRITE_COUNT)
#undef TREEMASK_WRITE_COUNT
}

// Calls f(index, info, pointer) for each saved array of a, index being its
// section.
template <class Arrays, class F>
void for_each_section_array(Arrays &a, F &&f) {
  size_t i = 0;
  for_each_array(a, [&](const ArrayInfo &info, auto &p) {
    if (info.kind != ArrayKind::kDerived) f(i++, info, p);
  });
}

// Byte sizes every section must have for the counts; the names for messages.
struct SectionPlan {
  std::array<uint64_t, kFileSections> bytes{};
  std::array<const char *, kFileSections> names{};
};

SectionPlan plan_sections(const TrieArrays &a, const FileHeader &h) {
  SectionPlan p;
  for_each_section_array(a, [&](size_t i, const ArrayInfo &info, const auto &) {
    p.bytes[i] = info.bytes();
    p.names[i] = info.name;
  });
  const auto index = static_cast<size_t>(FileSection::metadata_index);
  const auto strings = static_cast<size_t>(FileSection::metadata_strings);
  p.bytes[index] = uint64_t{h.n_metadata} * sizeof(MetadataEntry);
  p.names[index] = "metadata_index";
  p.bytes[strings] = h.section(FileSection::metadata_strings).bytes;  // free-form
  p.names[strings] = "metadata_strings";
  return p;
}

Status check_header(const FileHeader &h) {
  if (h.n_counts != kFileCounts || h.n_sections != kFileSections) {
    return error(Code::kCorruptFile, "the header lists ", h.n_counts, " counts and ", h.n_sections,
                 " sections; format version ", kTmtrieFormatVersion, " has ", kFileCounts, " and ",
                 kFileSections);
  }
  if (h.flags != 0) return error(Code::kCorruptFile, "unknown flags ", Hex{h.flags});
  if (h.reserved != 0) return error(Code::kCorruptFile, "reserved header field is not zero");
  if (h.n_metadata > kMaxMetadataEntries) {
    return error(Code::kCorruptFile, "metadata entry count ", h.n_metadata, " exceeds ",
                 kMaxMetadataEntries);
  }
  return Status::Ok();
}

Status check_sections(const FileHeader &h, const SectionPlan &plan, uint64_t size) {
  for (size_t i = 0; i < kFileSections; ++i) {
    const FileSectionRef &s = h.sections[i];
    if (s.bytes != plan.bytes[i]) {
      return error(Code::kCorruptFile, "section ", plan.names[i], " is ", s.bytes,
                   " bytes; the counts need ", plan.bytes[i]);
    }
    if (s.offset % kAlign != 0 || s.offset < h.header_bytes || s.offset > size ||
        s.bytes > size - s.offset) {
      return error(Code::kCorruptFile, "section ", plan.names[i], " [", s.offset, ", +", s.bytes,
                   ") is misaligned or outside the file (", size, " bytes)");
    }
  }
  return Status::Ok();
}

// A view into a mapped section; valid once check_sections passed.
template <class T>
const T *view(const unsigned char *data, const FileHeader &h, FileSection s) {
  return reinterpret_cast<const T *>(data + h.section(s).offset);
}

Result<std::vector<std::pair<std::string_view, std::string_view>>> read_metadata(
    const unsigned char *data, const FileHeader &h) {
  const auto *index = view<MetadataEntry>(data, h, FileSection::metadata_index);
  const auto *strings = view<char>(data, h, FileSection::metadata_strings);
  const uint64_t n = h.section(FileSection::metadata_strings).bytes;
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
  // Gives up the descriptor (the caller closes it): closing it here and
  // again in the destructor would close whatever another thread opened
  // under the same number in between (a socket of a server's, say).
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

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
  TM_TRY(check_header(h));
  TM_ASSIGN_OR_RETURN(TrieArrays a, counts_of(h));
  TM_TRY(check_sections(h, plan_sections(a, h), size));
  TM_ASSIGN_OR_RETURN(auto metadata, read_metadata(data, h));
  for_each_section_array(a, [&](size_t i, const ArrayInfo &info, auto &p) {
    using T = std::remove_cvref_t<decltype(*p)>;
    p = info.count ? reinterpret_cast<const T *>(data + h.sections[i].offset) : nullptr;
  });

  TrieImage image;
  image.arrays = a;
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
  FileHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.format_version = kTmtrieFormatVersion;
  h.header_bytes = sizeof(FileHeader);
  h.n_counts = kFileCounts;
  h.n_sections = kFileSections;
  h.n_metadata = static_cast<uint32_t>(index.size());
  write_counts(a, h);
  Piece pieces[kFileSections] = {};
  for_each_section_array(a, [&](size_t i, const ArrayInfo &info, const auto *p) {
    pieces[i] = {p, info.bytes()};
  });
  pieces[static_cast<size_t>(FileSection::metadata_index)] = {index.data(),
                                                              index.size() * sizeof(MetadataEntry)};
  pieces[static_cast<size_t>(FileSection::metadata_strings)] = {strings.data(), strings.size()};
  uint64_t offset = sizeof(FileHeader);
  for (size_t i = 0; i < kFileSections; ++i) {
    offset = align_up(offset);
    h.sections[i] = {offset, pieces[i].bytes};
    offset += pieces[i].bytes;
  }
  h.file_bytes = offset;

  // Visits the payload as it is laid out: padding, then each section.
  auto for_each_payload_piece = [&](auto &&visit) -> Status {
    uint64_t at = sizeof(FileHeader);
    for (size_t i = 0; i < kFileSections; ++i) {
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
  if (s.ok() && close(fd.release()) != 0) {
    s = error(Code::kIo, "cannot write \"", tmp, "\": ", errno_text());
  }
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = error(Code::kIo, "cannot rename \"", tmp, "\" to \"", path, "\": ", errno_text());
  }
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

Result<MappedTrie> map_trie_file(const std::string &path, uint32_t flags) {
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
  MappedTrie out;
  out.storage = std::make_unique<MappedTrieStorage>(base, size);
  auto image = parse_trie_image(static_cast<const unsigned char *>(base), size, flags);
  if (!image.ok()) {
    return Status(image.status().code(), cat("\"", path, "\": ", image.status().message()));
  }
  out.arrays = image.value().arrays;
  out.metadata.reserve(image.value().metadata.size());
  for (const auto &[k, v] : image.value().metadata) out.metadata.push_back({k, v});
  return out;
}

}  // namespace treemask
