// The rollback history of a matcher: a stack of earlier states stored in
// fixed-size chunks that clones share copy-on-write. Cloning copies one
// pointer per 64 entries and never the entries themselves; the first push
// into a shared chunk copies that one chunk (at most 63 entries).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

namespace treemask {

template <class Entry>
class History {
  static_assert(std::is_trivially_copyable_v<Entry>);

 public:
  static constexpr size_t kChunk = 64;

  // limit = 0: unbounded. Otherwise at least `limit` newest entries are kept
  // and memory stays O(limit).
  explicit History(size_t limit = 0) : limit_(limit) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  void push(const Entry &e) {
    const size_t chunk = size_ / kChunk, offset = size_ % kChunk;
    if (chunk == chunks_.size()) {
      chunks_.push_back(std::make_shared<Chunk>());
    } else if (chunks_[chunk].use_count() > 1) {
      // Shared with a clone: entries at and past `offset` may be the clone's.
      auto copy = std::make_shared<Chunk>();
      std::copy_n(chunks_[chunk]->items, offset, copy->items);
      chunks_[chunk] = std::move(copy);
    }
    // use_count() is a relaxed read: when it said 1 (we are the only owner),
    // order this write after the release of the last other owner, which may
    // have read the chunk on another thread just before dropping it.
    std::atomic_thread_fence(std::memory_order_acquire);
    chunks_[chunk]->items[offset] = e;
    ++size_;
    if (limit_ != 0 && size_ >= limit_ + 2 * kChunk) {
      chunks_.erase(chunks_.begin());  // the oldest entries can never be rolled back to
      size_ -= kChunk;
    }
  }

  // The entry n places below the top: at(1) is the newest. 1 <= n <= size().
  const Entry &from_top(size_t n) const {
    const size_t index = size_ - n;
    return chunks_[index / kChunk]->items[index % kChunk];
  }

  void pop(size_t n) {
    size_ -= n;
    chunks_.resize((size_ + kChunk - 1) / kChunk);
  }

  void clear() {
    chunks_.clear();
    size_ = 0;
  }

 private:
  struct Chunk {
    Entry items[kChunk];
  };
  std::vector<std::shared_ptr<Chunk>> chunks_;
  size_t size_ = 0;
  size_t limit_ = 0;
};

}  // namespace treemask
