// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "trie/trie.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <new>

namespace treemask {

namespace {

// Below this fanout, setting bits one by one beats copying a cached row.
constexpr size_t kMinDenseFanout = 64;

// Cached rows start on a cache line: a copy into a row aligned the same way
// (a torch tensor's, a numpy bitmask's) then takes memcpy's fastest path
// (measured: 75 ns instead of up to 105 for a 151,936-token row).
constexpr std::align_val_t kRowAlign{64};

uint64_t mix_node(uint32_t node) {
  uint64_t x = node;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

}  // namespace

uint64_t TrieArrays::bytes() const {
  uint64_t total = 0;
  for_each_array(*this, [&](const ArrayInfo &info, const auto &) {
    if (info.kind != ArrayKind::kDerived && info.kind != ArrayKind::kVocab) total += info.bytes();
  });
  return total;
}

Trie::Trie(std::unique_ptr<TrieStorage> storage, const TrieArrays &arrays,
           size_t dense_row_cache_bytes)
    : storage_(std::move(storage)), a_(arrays), dense_budget_(dense_row_cache_bytes) {
  // Copying a row costs about words / 8 single-bit updates (a cached row is
  // read-only, bits are read-modify-write), so cache only nodes whose fanout
  // is at least that.
  dense_threshold_ = std::max(kMinDenseFanout, row_words() / 8);
  if (a_.n_heads > 0 && a_.tail_range > 0) {  // validated: <= 65,536
    tail_values_.resize(a_.tail_range);
    for (uint32_t k = 0; k < a_.tail_range; ++k) {
      tail_values_[k] = a_.tail_base + static_cast<int32_t>(k);
    }
    a_.tail_values = tail_values_.data();
  }
}

void Trie::set_kind(Ref<const TrieKind> kind) { kind_ = std::move(kind); }

int32_t Trie::token_into(uint32_t node) const {
  if (node < a_.n_explicit) return a_.edge_tokens[node - 1];
  return a_.tail_base + a_.tail_tokens[node - a_.n_explicit];
}

uint32_t Trie::parent(uint32_t node) const {
  if (node < a_.n_explicit) {
    // The CSR node whose edge range holds edge node - 1.
    const uint32_t *off = a_.node_offsets;
    const uint32_t *it = std::upper_bound(off, off + a_.n_explicit + 1, node - 1);
    return static_cast<uint32_t>(it - off) - 1;
  }
  const uint32_t i = node - static_cast<uint32_t>(a_.n_explicit);
  // The tail holding i: the last sample at or before i, then the lengths.
  const uint32_t *samples_end = a_.tail_samples + a_.n_tail_samples();
  const auto j =
      static_cast<uint64_t>(std::upper_bound(a_.tail_samples, samples_end, i) - a_.tail_samples) -
      1;
  uint32_t k = static_cast<uint32_t>(j * kTailSample), start = a_.tail_samples[j];
  while (start + a_.tail_lengths[k] <= i) start += a_.tail_lengths[k++];
  if (start != i) return node - 1;
  // The first node of tail k: its parent is the k-th head (a select).
  const uint32_t *rank_end = a_.head_rank + a_.head_words();
  const uint64_t w =
      static_cast<uint64_t>(std::upper_bound(a_.head_rank, rank_end, k) - a_.head_rank) - 1;
  uint64_t bits = a_.head_bits[w];
  for (uint32_t skip = k - a_.head_rank[w]; skip > 0; --skip) bits &= bits - 1;
  return static_cast<uint32_t>(w * 64 + static_cast<uint64_t>(std::countr_zero(bits)));
}

Trie::~Trie() {
  if (!cache_) return;
  for (size_t i = 0; i <= cache_mask_; ++i) {
    ::operator delete[](const_cast<uint32_t *>(cache_[i].row.load(std::memory_order_relaxed)),
                        kRowAlign);
  }
}

bool Trie::is_stop_token(int32_t token) const {
  const auto stops = stop_tokens();
  if (stops.size() <= 8) {
    for (int32_t s : stops) {
      if (s == token) return true;
    }
    return false;
  }
  return std::binary_search(stops.begin(), stops.end(), token);
}

int64_t max_label_id(const Trie &trie) {
  struct MaxLabel {
    int64_t value;
  };
  return trie
      .derived<MaxLabel>([&] {
        const TrieArrays &a = trie.arrays();
        int64_t top = -1;
        if (a.has_labels()) {
          for (uint64_t r = 0; r < a.n_terminals; ++r) top = std::max(top, a.first_label(r));
          for (uint64_t i = 0; i < a.n_multi_labels; ++i) top = std::max(top, a.multi_labels[i]);
        }
        return std::make_shared<const MaxLabel>(MaxLabel{top});
      })
      .value;
}

LabelIds Trie::labels(uint32_t node) const {
  if (!is_terminal(node) || !a_.has_labels()) return {};
  const uint32_t rank = rank64(a_.terminal_bits, a_.terminal_rank, node);
  const uint32_t *multi_end = a_.multi_ranks + a_.n_multi;
  const uint32_t *it = std::lower_bound(a_.multi_ranks, multi_end, rank);
  if (it == multi_end || *it != rank) return LabelIds(a_.first_label(rank));
  const uint64_t i = static_cast<uint64_t>(it - a_.multi_ranks);
  const uint32_t begin = a_.multi_offsets[i];
  return LabelIds(
      std::span<const int64_t>(a_.multi_labels + begin, a_.multi_offsets[i + 1] - begin));
}

// Values, not a reference to a struct: a reference could alias the row the
// loop writes, and every bit set would reload it.
void Trie::write_children_row(const int32_t *tokens, uint32_t count, uint32_t first_child,
                              uint32_t *row) const {
  const size_t words = row_words();
  if (const uint32_t *cached = cached_row(tokens, count, first_child)) {
    std::memcpy(row, cached, words * sizeof(uint32_t));
    return;
  }
  std::memset(row, 0, words * sizeof(uint32_t));
  for (uint32_t i = 0; i < count; ++i) set_bit(row, tokens[i]);
}

Trie::Derived &Trie::derived_entry(const void *key) const {
  std::lock_guard<std::mutex> lock(derived_mutex_);
  for (DerivedNode *n = derived_.get(); n; n = n->next.get()) {
    if (n->key == key) return n->entry;
  }
  auto node = std::make_unique<DerivedNode>();
  node->key = key;
  node->next = std::move(derived_);
  derived_ = std::move(node);
  return derived_->entry;
}

const uint32_t *Trie::cached_row(const int32_t *tokens, uint32_t count,
                                 uint32_t first_child) const {
  if (dense_budget_ == 0 || count < dense_threshold_) return nullptr;
  const uint32_t id = first_child;  // names the parent: a child has one
  const size_t row_bytes = row_words() * sizeof(uint32_t);
  std::call_once(cache_once_, [&] {
    // No more rows can ever be cached than the budget holds or than there
    // are nodes of that fanout.
    const uint64_t by_budget = dense_budget_ / row_bytes;
    const uint64_t by_fanout = a_.n_edges() / dense_threshold_ + 1;
    const uint64_t rows = std::min(by_budget, by_fanout);
    if (rows == 0) return;
    const uint64_t capacity = std::bit_ceil(rows * 2);
    cache_.reset(new (std::nothrow) CacheSlot[capacity]);
    if (cache_) cache_mask_ = capacity - 1;
  });
  if (!cache_) return nullptr;

  size_t slot = mix_node(id) & cache_mask_;
  for (size_t probes = 0; probes <= cache_mask_; ++probes, slot = (slot + 1) & cache_mask_) {
    CacheSlot &s = cache_[slot];
    uint32_t key = s.node.load(std::memory_order_acquire);
    if (key == id) return s.row.load(std::memory_order_acquire);  // null while being built
    if (key != kEmptySlot) continue;
    // Reserve budget before claiming the slot, so the cache never overshoots.
    const uint64_t before = dense_cache_used_.fetch_add(row_bytes, std::memory_order_relaxed);
    if (before + row_bytes > dense_budget_) {
      dense_cache_used_.fetch_sub(row_bytes, std::memory_order_relaxed);
      return nullptr;
    }
    if (!s.node.compare_exchange_strong(key, id, std::memory_order_acq_rel)) {
      dense_cache_used_.fetch_sub(row_bytes, std::memory_order_relaxed);
      if (key == id) return s.row.load(std::memory_order_acquire);
      continue;
    }
    auto *row = static_cast<uint32_t *>(::operator new[](row_bytes, kRowAlign, std::nothrow));
    if (!row) return nullptr;  // slot stays claimed with no row: slow path forever
    std::memset(row, 0, row_bytes);
    for (uint32_t i = 0; i < count; ++i) set_bit(row, tokens[i]);
    s.row.store(row, std::memory_order_release);
    return row;
  }
  return nullptr;
}

Status normalize_stop_tokens(int32_t vocab_size, std::vector<int32_t> &stop_tokens) {
  if (stop_tokens.empty()) {
    return error(Code::kInvalidArgument, "at least one stop token is required");
  }
  for (size_t i = 0; i < stop_tokens.size(); ++i) {
    const int32_t t = stop_tokens[i];
    if (t < 0 || t >= vocab_size) {
      return error(Code::kOutOfRange, "stop token ", t, " (stop_tokens[", i,
                   "]) is out of range [0, vocab_size=", vocab_size, ")");
    }
  }
  std::sort(stop_tokens.begin(), stop_tokens.end());
  stop_tokens.erase(std::unique(stop_tokens.begin(), stop_tokens.end()), stop_tokens.end());
  return Status::Ok();
}

}  // namespace treemask
