// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "batch/batch.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <new>
#include <utility>

#include "core/bits.h"
#include "core/memory.h"

namespace treemask {

namespace {

// A chunk of work handed to one thread is about this many bitmask words (a
// word written costs about the same as one token listed and set), so that
// waking a worker is always worth it.
constexpr size_t kChunkWords = 16384;
// What one incremental row costs in those units (listing, clearing and
// setting a few tokens, plus the per-row calls).
constexpr size_t kIncrementalRowWords = 128;
// Accepting a token costs a child lookup; a few hundred per chunk.
constexpr size_t kAcceptGrain = 256;

// What a batch holds per slot before any matcher: the slot table (8 bytes),
// the list of non-empty slots (4), the stamps of a slot list (8), a reorder's
// scratch (16), and a few for the bindings' own per-slot entry.
constexpr uint64_t kBytesPerSlot = 48;

// Up to this many allowed tokens a row is updated token by token (clear the
// old words, set the new bits); above it a full-row write is cheaper.
size_t incremental_cap(size_t bitmask_row_words) {
  return std::max<size_t>(32, bitmask_row_words / 32);
}

// The value reported by the lowest index among concurrent tasks, so that a
// multi-threaded call reports the same failure as a sequential one.
template <class T>
class LowestIndex {
 public:
  void record(size_t index, T value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index < index_) {
      index_ = index;
      value_ = std::move(value);
    }
  }
  bool empty() const { return index_ == std::numeric_limits<size_t>::max(); }
  T take() { return std::move(value_); }

 private:
  std::mutex mu_;
  size_t index_ = std::numeric_limits<size_t>::max();
  T value_{};
};

Status with_slot(size_t slot, const Status &s) {
  return Status(s.code(), cat("slot ", slot, ": ", s.message()));
}

// Runs one slot's share of a call on a pool thread and records its failure.
// Nothing may unwind out of a pool task, so exceptions become statuses here
// (with messages short enough not to allocate).
template <class Body>
void run_task(size_t index, LowestIndex<Status> &failure, Body &&body) noexcept {
  try {
    Status s = body();
    if (!s.ok()) failure.record(index, std::move(s));
  } catch (const std::bad_alloc &) {
    failure.record(index, Status(Code::kOutOfMemory, "out of memory"));
  } catch (...) {
    failure.record(index, Status(Code::kInternal, "internal error"));
  }
}

}  // namespace

Result<std::unique_ptr<Batch>> Batch::create(const BatchOptions &opts) {
  if (opts.n_slots == 0 ||
      opts.n_slots > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return error(Code::kInvalidArgument, "n_slots must be in [1, 2^31 - 1], got ", opts.n_slots);
  }
  if (opts.n_threads > kMaxThreads) {
    return error(Code::kInvalidArgument, "n_threads must be at most ", kMaxThreads, ", got ",
                 opts.n_threads);
  }
  // The slot table is written at creation: a size the process cannot get
  // would be granted by the kernel's overcommit and then end the process
  // (the OOM killer) instead of failing. Refuse it here, cheaply, against
  // what is available now (core/memory.h), not the machine's total.
  if (const AvailableMemory have = available_memory();
      have.bytes > 0 && opts.n_slots > have.bytes / kBytesPerSlot) {
    return error(Code::kOutOfMemory, "n_slots ", opts.n_slots, " needs ",
                 (opts.n_slots * kBytesPerSlot) >> 20, " MiB for the batch's own tables (",
                 kBytesPerSlot, " bytes a slot before any matcher), more than the ",
                 have.bytes >> 20, " MiB available (", have.limit, ")");
  }
  return std::unique_ptr<Batch>(new Batch(opts));
}

Status Batch::set_matcher(size_t slot, const Matcher *m) {
  if (slot >= size()) {
    return error(Code::kOutOfRange, "slot ", slot, " is out of range [0, n_slots=", size(), ")");
  }
  if (!m) {
    slots_[slot].reset();
    slots_changed();
    return Status::Ok();
  }
  TM_ASSIGN_OR_RETURN(slots_[slot], m->clone());
  slots_changed();
  return Status::Ok();
}

Status Batch::select_slots(const int32_t *slots, size_t n_slots, size_t bitmask_row_words,
                           std::span<const uint32_t> &selected) {
  auto too_narrow = [&](uint32_t s) {
    return error(Code::kBufferTooSmall, "bitmask_row_words ", bitmask_row_words, " < ",
                 slots_[s]->trie().row_words(), ", the words slot ", s, "'s vocab_size ",
                 slots_[s]->trie().vocab_size(), " needs");
  };
  if (!slots) {
    if (n_slots != 0) {
      return error(Code::kInvalidArgument, "slots is NULL but n_slots is ", n_slots,
                   " (pass NULL and 0 for every slot)");
    }
    if (occupied_dirty_) {
      occupied_.clear();
      occupied_row_words_ = 0;
      for (size_t s = 0; s < size(); ++s) {
        if (!slots_[s]) continue;
        occupied_.push_back(static_cast<uint32_t>(s));
        occupied_row_words_ = std::max(occupied_row_words_, slots_[s]->trie().row_words());
      }
      occupied_dirty_ = false;
    }
    if (bitmask_row_words < occupied_row_words_) {
      for (uint32_t s : occupied_) {
        if (bitmask_row_words < slots_[s]->trie().row_words()) return too_narrow(s);
      }
    }
    selected = occupied_;
    return Status::Ok();
  }
  selected_.clear();
  if (seen_stamp_.size() != size()) seen_stamp_.assign(size(), 0);
  ++stamp_;
  for (size_t i = 0; i < n_slots; ++i) {
    const int32_t s = slots[i];
    if (s < 0 || static_cast<size_t>(s) >= size()) {
      return error(Code::kOutOfRange, "slots[", i, "] = ", s,
                   " is out of range [0, n_slots=", size(), ")");
    }
    if (!slots_[s]) return error(Code::kInvalidArgument, "slots[", i, "] = ", s, " is empty");
    if (seen_stamp_[s] == stamp_) {
      return error(Code::kInvalidArgument, "slots[", i, "] = ", s, " is listed twice");
    }
    seen_stamp_[s] = stamp_;
    if (bitmask_row_words < slots_[s]->trie().row_words())
      return too_narrow(static_cast<uint32_t>(s));
    selected_.push_back(static_cast<uint32_t>(s));
  }
  selected = selected_;
  return Status::Ok();
}

namespace {

// Sets the bits of an ascending token list (tokens < vocab_size: the trie
// is validated) and appends the distinct words it touched to words (which
// has room for the list). Returns how many words it appended.
inline uint32_t set_list(uint32_t *row, std::span<const int32_t> tokens, uint32_t *words) {
  uint32_t n = 0, last = UINT32_MAX;
  for (int32_t t : tokens) {
    const uint32_t w = static_cast<uint32_t>(t) >> 5;
    row[w] |= uint32_t{1} << (static_cast<uint32_t>(t) & 31);
    if (w != last) words[n++] = last = w;
  }
  return n;
}

}  // namespace

Status Batch::fill_row(size_t slot, uint32_t *row, size_t bitmask_row_words, bool track,
                       bool incremental, bool *need_apply) {
  const Matcher &m = *slots_[slot];
  const size_t cap = incremental_cap(bitmask_row_words);
  RowRecord *record = track ? &records_[slot] : nullptr;
  if (record && record->words.size() != cap) {
    record->words.resize(cap);
    record->tokens.resize(cap);
  }
  // In the STICKY_ERROR failed state next_tokens lists nothing while fill
  // writes the stop tokens: only fill can write that row.
  const bool listable = m.state().phase != Phase::kFailed;
  const auto vocab = static_cast<size_t>(m.trie().vocab_size());
  // Plain matchers hand over their allowed set as two lists without copying;
  // matchers in modes list it through next_tokens.
  std::span<const int32_t> first, second;
  auto list_allowed = [&]() -> size_t {
    if (m.allowed_lists(first, second)) return first.size() + second.size();
    const size_t n = m.next_tokens(record->tokens.data(), cap);
    first = {record->tokens.data(), std::min(n, cap)};
    second = {};
    return n;
  };
  if (record && incremental && record->known && listable) {
    for (uint32_t i = 0; i < record->n_touched; ++i) row[record->words[i]] = 0;
    record->known = false;
    const size_t n = list_allowed();
    if (n <= cap) {
      uint32_t *words = record->words.data();
      const uint32_t k = set_list(row, first, words);
      record->n_touched = k + set_list(row, second, words + k);
      record->known = true;
      m.count_fill();
      if (need_apply) need_apply[slot] = n != vocab;
      return Status::Ok();
    }
  }
  bool need = true;
  Status s = m.fill(row, bitmask_row_words, &need);
  if (need_apply) need_apply[slot] = need;
  if (record) {
    // Remember the words of a small allowed set, so the next incremental
    // fill is O(fanout) even after this full write; a large set is
    // rewritten in full anyway. Count first: listing a large set only to
    // find it too large costs more than the query.
    record->known = false;
    const bool small = s.ok() && listable &&
                       (m.allowed_lists(first, second) ? first.size() + second.size()
                                                       : m.next_tokens(nullptr, 0)) <= cap;
    if (small) {
      list_allowed();
      uint32_t *words = record->words.data();
      uint32_t k = 0;
      for (auto list : {first, second}) {
        uint32_t last = UINT32_MAX;
        for (int32_t t : list) {
          const uint32_t w = static_cast<uint32_t>(t) >> 5;
          if (w != last) words[k++] = last = w;
        }
      }
      record->n_touched = k;
      record->known = true;
    }
  }
  return s;
}

template <class Body>
Status Batch::for_each_index(size_t n, size_t grain, Body &&body) {
  if (pool_.n_workers() == 0 || n <= grain) {
    // On the caller's thread: an exception reaches the C shim's guard.
    for (size_t i = 0; i < n; ++i) {
      Status s = body(i);
      if (!s.ok()) {
        for (size_t j = i + 1; j < n; ++j) (void)body(j);  // later entries still run
        return s;
      }
    }
    return Status::Ok();
  }
  LowestIndex<Status> failure;
  auto task = [&](size_t i) { run_task(i, failure, [&] { return body(i); }); };
  pool_.run(n, grain, task);
  return failure.empty() ? Status::Ok() : failure.take();
}

Status Batch::fill_selected(std::span<const uint32_t> selected, uint32_t *bitmask,
                            size_t bitmask_row_words, bool track, bool incremental,
                            bool *need_apply) {
  const size_t row_cost = incremental ? kIncrementalRowWords : bitmask_row_words;
  return for_each_index(selected.size(), std::max<size_t>(1, kChunkWords / row_cost),
                        [&](size_t i) {
                          const uint32_t slot = selected[i];
                          Status s = fill_row(slot, bitmask + slot * bitmask_row_words,
                                              bitmask_row_words, track, incremental, need_apply);
                          return s.ok() ? s : with_slot(slot, s);
                        });
}

Status Batch::fill(uint32_t *bitmask, size_t bitmask_row_words, const int32_t *slots,
                   size_t n_slots, bool *need_apply) {
  if (!bitmask) return error(Code::kInvalidArgument, "bitmask is NULL");
  std::span<const uint32_t> selected;
  TM_TRY(select_slots(slots, n_slots, bitmask_row_words, selected));
  // Writing the bound buffer here is a full fill of it: keep its records
  // true.
  const bool bound = bitmask == bound_ && bitmask_row_words == bound_words_;
  if (!bound && bound_) {
    const uint32_t *bound_end = bound_ + size() * bound_words_;
    const uint32_t *end = bitmask + size() * bitmask_row_words;
    if (bitmask < bound_end && bound_ < end) {
      return error(Code::kInvalidArgument,
                   "bitmask overlaps the bound buffer with another row layout; use "
                   "treemask_batch_fill_bound or bind the buffer again");
    }
  }
  return fill_selected(selected, bitmask, bitmask_row_words, bound, false, need_apply);
}

Status Batch::bind(uint32_t *bitmask, size_t bitmask_row_words) {
  if (bitmask && bitmask_row_words == 0) {
    return error(Code::kInvalidArgument, "bitmask_row_words is 0");
  }
  if (bitmask && bitmask_row_words > std::numeric_limits<size_t>::max() / 4 / size()) {
    return error(Code::kOutOfRange, "bitmask_row_words ", bitmask_row_words, " x n_slots ", size(),
                 " overflows the address space");
  }
  bound_ = bitmask;
  bound_words_ = bitmask ? bitmask_row_words : 0;
  if (!bitmask) {
    records_.clear();
    return Status::Ok();
  }
  records_.resize(size());
  for (auto &r : records_) r.known = false;
  return Status::Ok();
}

Status Batch::fill_bound(const int32_t *slots, size_t n_slots, bool incremental, bool *need_apply) {
  if (!bound_) {
    return error(Code::kInvalidState, "no bitmask is bound; call treemask_batch_bind_bitmask");
  }
  std::span<const uint32_t> selected;
  TM_TRY(select_slots(slots, n_slots, bound_words_, selected));
  return fill_selected(selected, bound_, bound_words_, true, incremental, need_apply);
}

Status Batch::invalidate(const int32_t *rows, size_t n_rows) {
  if (!rows) {
    if (n_rows != 0) {
      return error(Code::kInvalidArgument, "rows is NULL but n_rows is ", n_rows,
                   " (pass NULL and 0 for every row)");
    }
    for (auto &r : records_) r.known = false;
    return Status::Ok();
  }
  for (size_t i = 0; i < n_rows; ++i) {
    if (rows[i] < 0 || static_cast<size_t>(rows[i]) >= size()) {
      return error(Code::kOutOfRange, "rows[", i, "] = ", rows[i],
                   " is out of range [0, n_slots=", size(), ")");
    }
  }
  if (records_.empty()) return Status::Ok();  // nothing bound: nothing is remembered
  for (size_t i = 0; i < n_rows; ++i) records_[rows[i]].known = false;
  return Status::Ok();
}

Status Batch::accept(const int32_t *tokens, size_t n_tokens, bool *accepted,
                     std::string *first_rejection) {
  if (!tokens) return error(Code::kInvalidArgument, "tokens is NULL");
  if (n_tokens != size()) {
    return error(Code::kInvalidArgument, "n_tokens is ", n_tokens,
                 "; pass one token per slot (n_slots = ", size(), ", -1 for no token)");
  }
  for (size_t i = 0; i < size(); ++i) {
    if (tokens[i] >= 0 && !slots_[i]) {
      return error(Code::kInvalidArgument, "tokens[", i, "] = ", tokens[i], " but slot ", i,
                   " is empty (pass -1 for no token)");
    }
  }
  LowestIndex<std::string> rejection;
  TM_TRY(for_each_index(size(), kAcceptGrain, [&](size_t slot) {
    bool ok = true;
    Status s;
    if (tokens[slot] >= 0) {
      std::string why;
      s = slots_[slot]->accept(tokens[slot], &ok, &why);
      if (!s.ok()) s = with_slot(slot, s);
      if (s.ok() && !ok) rejection.record(slot, cat("slot ", slot, ": ", why));
    }
    if (accepted) accepted[slot] = ok && s.ok();
    return s;
  }));
  if (!rejection.empty() && first_rejection) *first_rejection = rejection.take();
  return Status::Ok();
}

Status Batch::reorder(const int32_t *src, size_t n) {
  if (!src) return error(Code::kInvalidArgument, "src is NULL");
  if (n != size()) {
    return error(Code::kInvalidArgument, "n is ", n,
                 "; src needs one entry per slot (n_slots = ", size(), ")");
  }
  // The first slot that takes a source gets its matcher; every other one a
  // clone (cheap: the history is shared copy-on-write). Clones are made
  // first, so a failure leaves the batch unchanged.
  std::vector<size_t> first_taker(size(), std::numeric_limits<size_t>::max());
  for (size_t i = 0; i < n; ++i) {
    if (src[i] < -1 || src[i] >= static_cast<int64_t>(size())) {
      return error(Code::kOutOfRange, "src[", i, "] = ", src[i],
                   " is out of range [-1, n_slots=", size(), ")");
    }
    if (src[i] >= 0 && first_taker[src[i]] == std::numeric_limits<size_t>::max()) {
      first_taker[src[i]] = i;
    }
  }
  std::vector<std::unique_ptr<Matcher>> next(size());
  for (size_t i = 0; i < n; ++i) {
    if (src[i] < 0 || first_taker[src[i]] == i || !slots_[src[i]]) continue;
    auto copy = slots_[src[i]]->clone();
    if (!copy.ok()) return with_slot(static_cast<size_t>(src[i]), copy.status());
    next[i] = copy.take_value();
  }
  for (size_t i = 0; i < n; ++i) {
    if (src[i] >= 0 && first_taker[src[i]] == i) next[i] = std::move(slots_[src[i]]);
  }
  slots_ = std::move(next);
  slots_changed();
  return Status::Ok();
}

}  // namespace treemask
