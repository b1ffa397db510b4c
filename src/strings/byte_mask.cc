// Masks of a string-set trie: the walk of the vocabulary trie against
// the byte trie, the dense-row cache of expensive states, the candidate
// list, and forced tokens.
//
// The walk. From byte-trie node s, every allowed text token spells a path
// from s, so the allowed set is the tokens on the common paths of the two
// tries. The walk keeps one frame per token byte matched so far: a
// vocabulary-trie node's children (a range of the depth-first array, ascending by
// byte) and the byte-trie node reached, whose children (ascending by byte
// too) it merges against them. A vocabulary-trie child whose byte the byte trie
// lacks is skipped with its whole subtree in one step (every token that
// starts with it); a child that matches sets its token and opens a frame if
// it has children. A frame closes when either list runs out, so a byte-trie
// node with one child costs the vocabulary-trie siblings below that byte; the
// root's children are reached through the vocabulary trie's first-byte table
// rather than scanned. Cost: the vocabulary-trie nodes visited, i.e. the tokens
// that are allowed plus their rejected siblings.
//
// The cache. A state whose walk visits many nodes (the root, the nodes just
// after a shared prefix) is walked once: its row (stop tokens not applied,
// as several matchers may use different stop tokens) is kept in a fixed
// open-addressing table under a byte budget, shared by all threads without
// locks (a slot is claimed by CAS on its key and its row published with a
// release store; a reader that finds the key but no row yet walks itself).
//
// Forced tokens (jump-forward). forced_bytes(s) is exact: the bytes every
// string below s continues with (single children, stopping at a string end).
// A token sequence is forced when every continuation's tokenization starts
// with it. Without the tokenizer's merges in the core, the tokenization
// used is the longest match: from the start of the forced bytes, repeatedly
// take the longest text token they begin with. That choice is the same for
// every continuation exactly when no allowed token starting at the same
// position runs past the forced bytes (into the part where continuations
// differ), so forced_tokens stops before the first position where one does.
// The result is unambiguous under longest match; a BPE tokenizer's own
// tokenization of the same bytes can differ (it is not longest-match), so an
// engine that must feed the tokenizer's exact tokens should tokenize
// forced_bytes itself. The tokens returned are always allowed, in sequence.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "strings/string_trie.h"

namespace treemask {

// ---------------------------------------------------------------- cache

class DenseRowCache {
 public:
  // At most one row per node, whatever the budget.
  DenseRowCache(size_t budget_bytes, size_t row_words, size_t n_nodes)
      : row_words_(row_words), row_bytes_((row_words + 2) * sizeof(uint32_t)) {
    const size_t max_rows = std::min(budget_bytes / row_bytes_, n_nodes);
    budget_ = max_rows * row_bytes_;
    if (max_rows > 0) capacity_ = std::bit_ceil(max_rows * 2);
  }
  ~DenseRowCache() {
    if (!slots_) return;
    for (size_t i = 0; i < capacity_; ++i) delete[] slots_[i].row.load(std::memory_order_relaxed);
  }

  // The cached row of node (row_words words, then the count of its bits as
  // two words), or null.
  const uint32_t *find(uint32_t node) const {
    const Slot *slots = published_.load(std::memory_order_acquire);
    if (!slots) return nullptr;
    for (size_t i = hash(node);; i = (i + 1) & (capacity_ - 1)) {
      const uint32_t key = slots[i].key.load(std::memory_order_acquire);
      if (key == node) return slots[i].row.load(std::memory_order_acquire);
      if (key == kEmpty) return nullptr;
    }
  }

  // Keeps a copy of row (with its bit count) if the budget allows. The slot
  // table is allocated on the first insert (a trie whose walks are all
  // cheap never pays for it). The cache only saves time: when memory runs
  // out it keeps nothing, and the fill that called it still succeeds.
  void insert(uint32_t node, const uint32_t *row, uint64_t count) {
    if (capacity_ == 0) return;
    if (used_.fetch_add(row_bytes_, std::memory_order_relaxed) + row_bytes_ > budget_) {
      used_.fetch_sub(row_bytes_, std::memory_order_relaxed);
      return;
    }
    std::call_once(allocate_once_, [&] {
      slots_.reset(new (std::nothrow) Slot[capacity_]);
      published_.store(slots_.get(), std::memory_order_release);
    });
    std::unique_ptr<uint32_t[]> copy(slots_ ? new (std::nothrow) uint32_t[row_words_ + 2]
                                            : nullptr);
    if (!copy) {
      used_.fetch_sub(row_bytes_, std::memory_order_relaxed);
      return;
    }
    std::memcpy(copy.get(), row, row_words_ * sizeof(uint32_t));
    copy[row_words_] = static_cast<uint32_t>(count);
    copy[row_words_ + 1] = static_cast<uint32_t>(count >> 32);
    // The budget holds at most half the slots, so a free one exists.
    for (size_t i = hash(node);; i = (i + 1) & (capacity_ - 1)) {
      uint32_t key = slots_[i].key.load(std::memory_order_acquire);
      if (key == kEmpty &&
          slots_[i].key.compare_exchange_strong(key, node, std::memory_order_acq_rel)) {
        slots_[i].row.store(copy.release(), std::memory_order_release);
        rows_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (key == node) {  // another thread has it
        used_.fetch_sub(row_bytes_, std::memory_order_relaxed);
        return;
      }
    }
  }

  uint64_t bytes() const { return used_.load(std::memory_order_relaxed); }
  uint64_t rows() const { return rows_.load(std::memory_order_relaxed); }
  size_t row_words() const { return row_words_; }

 private:
  static constexpr uint32_t kEmpty = kNoNode;
  struct Slot {
    std::atomic<uint32_t> key{kEmpty};
    std::atomic<const uint32_t *> row{nullptr};
  };
  size_t hash(uint32_t node) const {
    return static_cast<size_t>((node * 0x9E3779B97F4A7C15ull) >> 20) & (capacity_ - 1);
  }

  size_t row_words_, row_bytes_;
  size_t budget_ = 0, capacity_ = 0;
  std::once_flag allocate_once_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<const Slot *> published_{nullptr};  // slots_, for readers
  std::atomic<uint64_t> used_{0}, rows_{0};
};

namespace {

// A walk costs more than copying a cached row once it visits about a
// quarter as many vocabulary-trie nodes as the row has words (a visit is a
// dependent load and a few branches; a word of the copy is a fraction of a
// store). Below 256 visits a walk takes about a microsecond: not worth a row.
uint64_t default_cache_threshold(size_t row_words) {
  return std::max<uint64_t>(256, row_words / 4);
}

}  // namespace

StringTrie::StringTrie(Ref<Vocab> vocab, const TrieArrays &arrays, const StringTrieOptions &opts)
    : vocab_(std::move(vocab)),
      a_(arrays),
      cache_(std::make_unique<DenseRowCache>(opts.dense_row_cache_bytes, row_words(), a_.n_nodes)),
      cache_min_visits_(opts.dense_row_min_visits ? opts.dense_row_min_visits
                                                  : default_cache_threshold(row_words())) {}

StringTrie::~StringTrie() = default;

uint64_t StringTrie::dense_cache_bytes() const { return cache_->bytes(); }
uint64_t StringTrie::dense_cache_rows() const { return cache_->rows(); }

// ---------------------------------------------------------------- walk

struct ByteWalk {
  // A vocabulary-trie node's children [pos, end) merged against a byte-trie
  // node's children (bytes[j..n), ids or, for a single child, `only`).
  struct Frame {
    uint32_t pos, end;
    const uint8_t *bytes;
    const uint32_t *ids;  // null: the one child is `only`
    uint32_t only;
    uint32_t j, n;
  };

  const StringTrie &trie;
  const VocabTrieNode *nodes;

  explicit ByteWalk(const StringTrie &t) : trie(t), nodes(t.vocab().vocab_trie().nodes()) {}

  // Opens a frame for byte-trie node s over vocabulary-trie children [pos, end);
  // false if s has no children.
  bool open(Frame &f, uint32_t s, uint32_t pos, uint32_t end) const {
    const TrieArrays &a = trie.a_;
    f.pos = pos;
    f.end = end;
    f.j = 0;
    if (StringTrie::bit(a.unary_bits, s)) {
      f.bytes = a.byte_labels + s + 1;
      f.ids = nullptr;
      f.only = s + 1;
      f.n = 1;
      return true;
    }
    if (!StringTrie::bit(a.branch_bits, s)) return false;
    const uint32_t k = trie.branch_index(s);
    const uint32_t first = a.branch_first[k];
    f.bytes = a.child_bytes + first;
    f.ids = a.child_ids + first;
    f.n = a.branch_first[k + 1] - first;
    return true;
  }

  // One stack per thread, reused by every walk (a walk never starts another
  // from inside its emitter).
  static std::vector<Frame> &frames(size_t depth) {
    thread_local std::vector<Frame> stack;
    if (stack.size() < depth + 1) stack.resize(depth + 1);
    return stack;
  }

  // Walks the tokens below vocabulary-trie node `root_pos`'s children [pos, end)
  // from byte-trie node s, calling emit(token) for each allowed one (stop
  // tokens included: the caller applies them). emit returns false to stop.
  // `at_root`: [pos, end) are the vocabulary trie root's children (first-byte
  // table). Returns the vocabulary-trie nodes visited.
  template <class Emit>
  uint64_t run(uint32_t s, uint32_t pos, uint32_t end, bool at_root, Emit &&emit) const {
    const VocabTrie &tt = trie.vocab().vocab_trie();
    std::vector<Frame> &stack = frames(tt.max_depth());
    // The current frame lives in locals (registers: nothing the emitter
    // writes can alias it); the frames above it wait on the stack.
    Frame f;
    if (!open(f, s, pos, end)) return 0;
    uint64_t visits = 0;
    size_t below = 0;  // frames on the stack
    for (;;) {
      if (f.pos >= f.end || f.j >= f.n) {
        if (below == 0) break;
        f = stack[--below];
        continue;
      }
      const VocabTrieNode node = nodes[f.pos];
      const uint8_t b = node.byte(), want = f.bytes[f.j];
      ++visits;
      if (b < want) {
        f.pos =
            (below == 0 && at_root) ? tt.root_child_at_or_after(want) : f.pos + node.subtree_size();
        continue;
      }
      if (b > want) {
        while (f.j < f.n && f.bytes[f.j] < b) ++f.j;
        continue;
      }
      // Same byte. f.j stays: a duplicate token's sibling may follow.
      const uint32_t child = f.ids ? f.ids[f.j] : f.only;
      const uint32_t here = f.pos;
      f.pos += node.subtree_size();
      if (node.token != VocabTrieNode::kNoToken && !emit(node.token)) return visits;
      Frame next;
      if (node.subtree_size() > 1 && open(next, child, here + 1, f.pos)) {
        stack[below++] = f;
        f = next;
      }
    }
    return visits;
  }

  template <class Emit>
  uint64_t from_root(uint32_t s, Emit &&emit) const {
    const VocabTrie &tt = trie.vocab().vocab_trie();
    return run(s, 1, tt.root_end(), true, emit);
  }
};

namespace {

bool is_stop(std::span<const int32_t> stops, int32_t t) {
  return std::binary_search(stops.begin(), stops.end(), t);
}

// Sets the stop tokens' bits as `terminal` says (a walk may have set one
// that has text bytes); returns the change to the allowed count.
int64_t apply_stops(uint32_t *row, std::span<const int32_t> stops, bool terminal) {
  int64_t delta = 0;
  for (const int32_t t : stops) {
    uint32_t &w = row[static_cast<uint32_t>(t) >> 5];
    const uint32_t m = uint32_t{1} << (t & 31);
    delta += static_cast<int64_t>(terminal) - static_cast<int64_t>((w & m) != 0);
    w = terminal ? (w | m) : (w & ~m);
  }
  return delta;
}

}  // namespace

uint64_t StringTrie::walk_visits(uint32_t node) const {
  return ByteWalk(*this).from_root(node, [](int32_t) { return true; });
}

uint64_t StringTrie::write_allowed_row(uint32_t node, std::span<const int32_t> stops, uint32_t *row,
                                       size_t bitmask_row_words) const {
  const size_t words = row_words();
  uint64_t count;
  if (const uint32_t *cached = cache_->find(node)) {
    std::memcpy(row, cached, words * sizeof(uint32_t));
    count = cached[words] | (uint64_t{cached[words + 1]} << 32);
  } else {
    std::memset(row, 0, words * sizeof(uint32_t));
    count = 0;
    const uint64_t visits = ByteWalk(*this).from_root(node, [&](int32_t t) {
      row[static_cast<uint32_t>(t) >> 5] |= uint32_t{1} << (t & 31);
      ++count;
      return true;
    });
    if (visits >= cache_min_visits_) cache_->insert(node, row, count);
  }
  count = static_cast<uint64_t>(static_cast<int64_t>(count) +
                                apply_stops(row, stops, is_terminal(node)));
  if (bitmask_row_words > words) {
    std::memset(row + words, 0, (bitmask_row_words - words) * sizeof(uint32_t));
  }
  return count;
}

size_t StringTrie::list_allowed(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                                size_t cap) const {
  const size_t words = row_words();
  const bool terminal = is_terminal(node);
  // A long list is read off a row (a scan of the words beats sorting).
  const auto from_row = [&](const uint32_t *row) {
    size_t k = 0;
    size_t next_stop = 0;
    for (size_t w = 0; w < words; ++w) {
      for (uint32_t bits = row[w]; bits != 0; bits &= bits - 1) {
        const auto t = static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits)));
        while (next_stop < stops.size() && stops[next_stop] < t) {
          if (terminal && k++ < cap) out[k - 1] = stops[next_stop];
          ++next_stop;
        }
        if (next_stop < stops.size() && stops[next_stop] == t) continue;  // added below
        if (k++ < cap) out[k - 1] = t;
      }
    }
    for (; next_stop < stops.size(); ++next_stop) {
      if (terminal && k++ < cap) out[k - 1] = stops[next_stop];
    }
    return k;
  };
  if (const uint32_t *cached = cache_->find(node)) return from_row(cached);

  thread_local std::vector<int32_t> found;
  found.clear();
  const uint64_t visits = ByteWalk(*this).from_root(node, [&](int32_t t) {
    found.push_back(t);
    return true;
  });
  if (visits >= cache_min_visits_ || found.size() > words) {
    thread_local std::vector<uint32_t> row;
    row.assign(words, 0);
    for (const int32_t t : found) row[static_cast<uint32_t>(t) >> 5] |= uint32_t{1} << (t & 31);
    if (visits >= cache_min_visits_) cache_->insert(node, row.data(), found.size());
    return from_row(row.data());
  }
  std::erase_if(found, [&](int32_t t) { return is_stop(stops, t); });
  if (terminal) found.insert(found.end(), stops.begin(), stops.end());
  std::sort(found.begin(), found.end());
  std::copy_n(found.begin(), std::min(cap, found.size()), out);
  return found.size();
}

// ---------------------------------------------------------------- forced

size_t StringTrie::forced_tokens(uint32_t node, std::span<const int32_t> stops, int32_t *out,
                                 size_t cap) const {
  std::string forced(forced_bytes(node, nullptr, 0), '\0');
  forced_bytes(node, reinterpret_cast<uint8_t *>(forced.data()), forced.size());
  if (forced.empty()) return 0;
  const uint32_t end_state = walk(node, forced);
  const VocabTrie &tt = vocab().vocab_trie();
  const VocabTrieNode *nodes = tt.nodes();
  const ByteWalk walker(*this);

  size_t k = 0;
  for (size_t p = 0; p < forced.size();) {
    // Follow forced[p..] down the vocabulary trie, noting the longest token.
    int32_t longest = VocabTrieNode::kNoToken;
    size_t longest_len = 0;
    uint32_t at = 0;  // vocabulary-trie node of forced[p .. p + depth)
    size_t depth = 0;
    for (; p + depth < forced.size(); ++depth) {
      const auto b = static_cast<uint8_t>(forced[p + depth]);
      const uint32_t end = at + nodes[at].subtree_size();
      uint32_t c = at == 0 ? tt.root_child_at_or_after(b) : at + 1;
      while (c < end && nodes[c].byte() < b) c += nodes[c].subtree_size();
      if (c >= end || nodes[c].byte() != b) break;
      // Same-byte siblings are tokens with the same bytes: the first that is
      // no stop token is the one returned (the smallest id); the last is the
      // one that may have children.
      for (;;) {
        const int32_t t = nodes[c].token;
        if (t != VocabTrieNode::kNoToken && !is_stop(stops, t) && longest_len != depth + 1) {
          longest = t;
          longest_len = depth + 1;
        }
        const uint32_t next = c + nodes[c].subtree_size();
        if (next >= end || nodes[next].byte() != b) break;
        c = next;
      }
      at = c;
    }
    // A token that starts at p and runs past the forced bytes makes the
    // longest match at p depend on the continuation.
    if (p + depth == forced.size() && nodes[at].subtree_size() > 1) {
      bool crosses = false;
      walker.run(end_state, at + 1, at + nodes[at].subtree_size(), false, [&](int32_t t) {
        crosses = !is_stop(stops, t);
        return !crosses;
      });
      if (crosses) break;
    }
    if (longest == VocabTrieNode::kNoToken) break;
    if (k < cap) out[k] = longest;
    ++k;
    p += longest_len;
  }
  return k;
}

}  // namespace treemask
