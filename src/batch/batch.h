// A batch: a fixed number of slots, each holding a matcher or nothing, filled
// and advanced together on the batch's own worker threads. See treemask.h,
// section 6, for the contract; the C shim only converts.
//
// Matchers are driven only through their own methods (fill, next_tokens,
// accept, clone), so every decoding mode a matcher has works in a batch
// unchanged.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "batch/worker_pool.h"
#include "core/status.h"
#include "matcher/matcher.h"

namespace treemask {

struct BatchOptions {
  size_t n_slots = 0;
  size_t n_threads = 0;  // worker threads besides the caller's
};

class Batch {
 public:
  static constexpr size_t kMaxThreads = 256;

  static Result<std::unique_ptr<Batch>> create(const BatchOptions &opts);

  size_t size() const { return slots_.size(); }
  size_t n_threads() const { return pool_.n_workers(); }

  // Stores a clone of m in slot (nullptr empties it).
  Status set_matcher(size_t slot, const Matcher *m);
  // The slot's matcher (nullptr when empty or out of range), owned by the batch.
  Matcher *matcher(size_t slot) const {
    return slot < slots_.size() ? slots_[slot].get() : nullptr;
  }

  // Full-row fill of the listed slots (slots == nullptr: every non-empty
  // slot) into rows of `bitmask`, row = slot index.
  Status fill(uint32_t *bitmask, size_t bitmask_row_words, const int32_t *slots, size_t n_slots,
              bool *need_apply);

  // Binds (nullptr: unbinds) the buffer fill_bound writes; forgets every row.
  Status bind(uint32_t *bitmask, size_t bitmask_row_words);
  // Fill into the bound buffer. Incremental: rows whose contents the batch
  // knows are updated in O(fanout).
  Status fill_bound(const int32_t *slots, size_t n_slots, bool incremental, bool *need_apply);
  // Forgets what the listed rows (nullptr: all) of the bound buffer hold.
  Status invalidate(const int32_t *rows, size_t n_rows);

  // tokens[i] < 0: no token for slot i. *first_rejection receives the
  // message of the lowest slot that rejected its token (unchanged if none).
  Status accept(const int32_t *tokens, size_t n_tokens, bool *accepted,
                std::string *first_rejection);

  // Slot i takes the state of slot src[i] (-1: empty).
  Status reorder(const int32_t *src, size_t n);

 private:
  // What the batch knows about one row of the bound buffer: when `known`, the
  // row is zero outside words[0 .. n_touched) (the words the last allowed
  // set touched), so an incremental fill clears just those.
  struct RowRecord {
    bool known = false;
    uint32_t n_touched = 0;
    std::vector<uint32_t> words;  // the words that may be non-zero (at most cap)
    std::vector<int32_t> tokens;  // scratch for next_tokens (matchers in modes)
  };

  explicit Batch(const BatchOptions &opts) : pool_(opts.n_threads), slots_(opts.n_slots) {}

  // Checks a slot list (range, empty slots, repeats, row width) and sets
  // `selected` to the slots to fill (slots == nullptr: the non-empty slots).
  Status select_slots(const int32_t *slots, size_t n_slots, size_t bitmask_row_words,
                      std::span<const uint32_t> &selected);
  Status fill_selected(std::span<const uint32_t> selected, uint32_t *bitmask,
                       size_t bitmask_row_words, bool track, bool incremental, bool *need_apply);
  Status fill_row(size_t slot, uint32_t *row, size_t bitmask_row_words, bool track,
                  bool incremental, bool *need_apply);
  void slots_changed() { occupied_dirty_ = true; }
  // Runs body(i) -> Status for every i in [0, n), on the pool when n is more
  // than one chunk of `grain`; every i runs even after a failure, and the
  // failure of the lowest i is returned.
  template <class Body>
  Status for_each_index(size_t n, size_t grain, Body &&body);

  WorkerPool pool_;
  std::vector<std::unique_ptr<Matcher>> slots_;
  uint32_t *bound_ = nullptr;
  size_t bound_words_ = 0;
  std::vector<RowRecord> records_;
  // The non-empty slots and the most words any of their rows needs, kept
  // between calls (a fill of every slot is the common case).
  std::vector<uint32_t> occupied_;
  size_t occupied_row_words_ = 0;
  bool occupied_dirty_ = true;
  // Scratch of select_slots for explicit lists, kept to avoid an allocation
  // per call.
  std::vector<uint32_t> selected_;
  std::vector<uint64_t> seen_stamp_;
  uint64_t stamp_ = 0;
};

}  // namespace treemask
