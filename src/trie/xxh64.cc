// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "trie/xxh64.h"

#include <bit>
#include <cstring>

namespace treemask {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

// Unaligned little-endian loads (the file format is little-endian only).
inline uint64_t load64(const unsigned char *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const unsigned char *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  return std::rotl(acc, 31) * kP1;
}

inline uint64_t merge_round(uint64_t acc, uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kP1 + kP4;
}

inline void stripes(uint64_t lanes[4], const unsigned char *p, size_t n_stripes) {
  uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  for (size_t i = 0; i < n_stripes; ++i, p += 32) {
    a = round(a, load64(p));
    b = round(b, load64(p + 8));
    c = round(c, load64(p + 16));
    d = round(d, load64(p + 24));
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
}

}  // namespace

void Xxh64::update(const void *data, size_t size) {
  auto *p = static_cast<const unsigned char *>(data);
  total_ += size;
  if (n_pending_ > 0) {
    const size_t take = size < 32 - n_pending_ ? size : 32 - n_pending_;
    std::memcpy(pending_ + n_pending_, p, take);
    n_pending_ += take;
    p += take;
    size -= take;
    if (n_pending_ < 32) return;
    stripes(lanes_, pending_, 1);
    n_pending_ = 0;
  }
  stripes(lanes_, p, size / 32);
  p += size / 32 * 32;
  size %= 32;
  std::memcpy(pending_, p, size);
  n_pending_ = size;
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = std::rotl(lanes_[0], 1) + std::rotl(lanes_[1], 7) + std::rotl(lanes_[2], 12) +
        std::rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) h = merge_round(h, lane);
  } else {
    h = lanes_[2] + kP5;  // lanes_[2] is the seed
  }
  h += total_;
  const unsigned char *p = pending_;
  size_t n = n_pending_;
  for (; n >= 8; n -= 8, p += 8) h = std::rotl(h ^ round(0, load64(p)), 27) * kP1 + kP4;
  if (n >= 4) {
    h = std::rotl(h ^ (uint64_t{load32(p)} * kP1), 23) * kP2 + kP3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; --n, ++p) h = std::rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void *data, size_t size) {
  Xxh64 h;
  h.update(data, size);
  return h.digest();
}

}  // namespace treemask
