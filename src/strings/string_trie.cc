// Building the byte trie of a string set, and its node accessors.
//
// The builder sorts the strings (string_sort.h) and numbers the nodes in
// depth-first order without building a pointer trie first: string i (in
// sorted order, prefix included, length L_i) shares lcp_i bytes with the
// string before it, so it creates the nodes at depths lcp_i + 1 .. L_i, with
// consecutive ids from start_i = 1 + the nodes created before it. A node
// created by string i at depth d has as children: string i's next node (if
// L_i > d), and the first new node of every later string k that leaves the
// subtree at depth d (lcp_k == d, L_k > d), found by scanning forward while
// lcp_k >= d. Those strings are in ascending order, so the children come out
// ascending by byte. The scans read the lcp array sequentially and cost the
// bytes of the strings below each node: linear in the strings' bytes.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/string_trie.h"

#include <algorithm>
#include <cstring>

#include "strings/string_sort.h"
#include "trie/trie.h"  // normalize_stop_tokens

namespace treemask {

ByteTrieArrays ByteTrieStorage::view() const {
  ByteTrieArrays a;
  a.labels = labels.data();
  a.terminal_bits = terminal_bits.data();
  a.unary_bits = unary_bits.data();
  a.branch_bits = branch_bits.data();
  a.branch_rank = branch_rank.data();
  a.branch_first = branch_first.data();
  a.child_bytes = child_bytes.data();
  a.child_ids = child_ids.data();
  a.n_nodes = labels.size();
  a.n_branches = branch_first.empty() ? 0 : branch_first.size() - 1;
  a.n_branch_children = child_ids.size();
  return a;
}

namespace {

bool test(const uint64_t *bits, uint64_t n) { return (bits[n >> 6] >> (n & 63)) & 1; }
void set(std::vector<uint64_t> &bits, uint64_t n) { bits[n >> 6] |= uint64_t{1} << (n & 63); }

Status check_strings(const StringList &strings, size_t prefix_size) {
  const auto &off = strings.offsets;
  if (off.size() < 2) {
    return error(Code::kInvalidArgument,
                 "a string set needs at least one string (offsets has n_strings + 1 entries, got ",
                 off.size(), ")");
  }
  const size_t n = off.size() - 1;
  if (n >= kMaxByteTrieNodes) return error(Code::kOutOfRange, "too many strings: ", n);
  if (off[0] != 0) return error(Code::kInvalidArgument, "offsets[0] must be 0, got ", off[0]);
  for (size_t i = 0; i < n; ++i) {
    if (off[i + 1] < off[i]) {
      return error(Code::kInvalidArgument, "string ", i, ": offsets decrease (", off[i], " -> ",
                   off[i + 1], ")");
    }
    if (off[i + 1] - off[i] + prefix_size >= kMaxByteTrieNodes) {
      return error(Code::kOutOfRange, "string ", i, " has ", off[i + 1] - off[i],
                   " bytes (with the prefix, at most ", kMaxByteTrieNodes - 1, ")");
    }
  }
  if (off[n] != strings.bytes.size()) {
    return error(Code::kInvalidArgument, "offsets[", n, "] = ", off[n], " does not match the ",
                 strings.bytes.size(), " bytes given");
  }
  return Status::Ok();
}

// The sorted strings seen with the prefix in front (positions and lengths
// count the prefix).
class PrefixedStrings {
 public:
  PrefixedStrings(const StringList &s, std::string_view prefix, SortedStrings sorted)
      : s_(s), prefix_(prefix), sorted_(std::move(sorted)) {}

  size_t size() const { return sorted_.order.size(); }
  uint64_t length(size_t i) const {
    const uint32_t k = sorted_.order[i];
    return prefix_.size() + (s_.offsets[k + 1] - s_.offsets[k]);
  }
  uint64_t lcp(size_t i) const { return i == 0 ? 0 : prefix_.size() + sorted_.lcp[i]; }
  uint8_t byte(size_t i, uint64_t pos) const {
    if (pos < prefix_.size()) return static_cast<uint8_t>(prefix_[pos]);
    return s_.bytes[s_.offsets[sorted_.order[i]] + (pos - prefix_.size())];
  }
  size_t prefix_size() const { return prefix_.size(); }

 private:
  const StringList &s_;
  std::string_view prefix_;
  SortedStrings sorted_;
};

class Builder {
 public:
  Builder(const PrefixedStrings &s, std::vector<uint32_t> start)
      : s_(s), start_(std::move(start)) {}

  // Calls f(node, string, depth) for every node in id order.
  template <class F>
  void for_each_node(F &&f) const {
    f(0u, size_t{0}, uint64_t{0});
    for (size_t i = 0; i < s_.size(); ++i) {
      const uint64_t lcp = s_.lcp(i), len = s_.length(i);
      for (uint64_t d = lcp + 1; d <= len; ++d) f(node_id(i, d), i, d);
    }
  }

  // Calls f(byte, child id) for every child of the node that string i
  // created at depth d, in ascending byte order.
  template <class F>
  void for_each_child(uint32_t node, size_t i, uint64_t d, F &&f) const {
    if (d < s_.length(i)) f(s_.byte(i, d), node + 1);
    if (d < s_.prefix_size()) return;  // inside the prefix: one child
    for (size_t k = i + 1; k < s_.size(); ++k) {
      const uint64_t l = s_.lcp(k);
      if (l < d) break;
      if (l == d && s_.length(k) > d) f(s_.byte(k, d), start_[k]);
    }
  }

  uint32_t node_id(size_t i, uint64_t d) const {
    return start_[i] + static_cast<uint32_t>(d - s_.lcp(i) - 1);
  }

 private:
  const PrefixedStrings &s_;
  std::vector<uint32_t> start_;
};

Result<std::unique_ptr<ByteTrieStorage>> build_storage(const PrefixedStrings &s) {
  // Node ids: string i's new nodes start at start[i].
  std::vector<uint32_t> start(s.size());
  uint64_t n_nodes = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (n_nodes > kMaxByteTrieNodes) break;
    start[i] = static_cast<uint32_t>(n_nodes);
    n_nodes += s.length(i) - s.lcp(i);
  }
  if (n_nodes > kMaxByteTrieNodes) {
    return error(Code::kOutOfRange, "the string set needs more than ", kMaxByteTrieNodes,
                 " trie nodes");
  }
  const Builder b(s, std::move(start));

  auto st = std::make_unique<ByteTrieStorage>();
  const uint64_t words = (n_nodes + 63) / 64;
  st->labels.assign(n_nodes, 0);
  st->terminal_bits.assign(words, 0);
  st->unary_bits.assign(words, 0);
  st->branch_bits.assign(words, 0);
  st->branch_rank.assign(words, 0);

  // Pass 1: labels, bits and the size of the branch table.
  uint64_t n_branches = 0, n_children = 0;
  b.for_each_node([&](uint32_t node, size_t i, uint64_t d) {
    if (d > 0) st->labels[node] = s.byte(i, d - 1);
    if (d == s.length(i)) set(st->terminal_bits, node);
    uint32_t count = 0;
    b.for_each_child(node, i, d, [&](uint8_t, uint32_t) { ++count; });
    if (count == 1) set(st->unary_bits, node);
    if (count >= 2) {
      set(st->branch_bits, node);
      ++n_branches;
      n_children += count;
    }
  });
  // A string that creates no node equals the one before it (sorted, and a
  // prefix of it): its end is the node at its length on the path of the
  // last string that created nodes (or the root).
  size_t creator = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const uint64_t len = s.length(i);
    if (len > s.lcp(i)) {
      creator = i;
    } else {
      set(st->terminal_bits, len == 0 ? 0 : b.node_id(creator, len));
    }
  }
  uint32_t rank = 0;
  for (uint64_t w = 0; w < words; ++w) {
    st->branch_rank[w] = rank;
    rank += static_cast<uint32_t>(std::popcount(st->branch_bits[w]));
  }

  // Pass 2: the branch table, in node order.
  st->branch_first.reserve(n_branches + 1);
  st->child_bytes.reserve(n_children);
  st->child_ids.reserve(n_children);
  b.for_each_node([&](uint32_t node, size_t i, uint64_t d) {
    if (!test(st->branch_bits.data(), node)) return;
    st->branch_first.push_back(static_cast<uint32_t>(st->child_ids.size()));
    b.for_each_child(node, i, d, [&](uint8_t byte, uint32_t id) {
      st->child_bytes.push_back(byte);
      st->child_ids.push_back(id);
    });
  });
  st->branch_first.push_back(static_cast<uint32_t>(st->child_ids.size()));
  return st;
}

}  // namespace

Status validate_byte_trie_arrays(const ByteTrieArrays &a) {
  if (a.n_nodes == 0 || a.n_nodes > kMaxByteTrieNodes) {
    return error(Code::kCorruptFile, "byte trie: ", a.n_nodes, " nodes");
  }
  if (a.n_branch_children > UINT32_MAX || a.n_branches > a.n_nodes) {
    return error(Code::kCorruptFile, "byte trie: branch table of ", a.n_branches, " nodes and ",
                 a.n_branch_children, " children");
  }
  if (a.labels[0] != 0) return error(Code::kCorruptFile, "byte trie: the root has a label");
  const uint64_t words = a.words();
  uint64_t rank = 0;
  for (uint64_t w = 0; w < words; ++w) {
    if (a.branch_rank[w] != rank) {
      return error(Code::kCorruptFile, "byte trie: branch_rank[", w, "] = ", a.branch_rank[w],
                   ", expected ", rank);
    }
    rank += std::popcount(a.branch_bits[w]);
  }
  const uint64_t tail = a.n_nodes & 63;
  const uint64_t past = tail ? ~((uint64_t{1} << tail) - 1) : 0;
  if ((a.terminal_bits[words - 1] | a.unary_bits[words - 1] | a.branch_bits[words - 1]) & past) {
    return error(Code::kCorruptFile, "byte trie: bits set past the last node");
  }
  if (rank != a.n_branches) {
    return error(Code::kCorruptFile, "byte trie: ", rank, " branch nodes, the table has ",
                 a.n_branches);
  }
  if (a.branch_first[0] != 0 || a.branch_first[a.n_branches] != a.n_branch_children) {
    return error(Code::kCorruptFile, "byte trie: branch offsets do not span the child table");
  }
  uint64_t k = 0;
  for (uint64_t n = 0; n < a.n_nodes; ++n) {
    const bool unary = test(a.unary_bits, n), branch = test(a.branch_bits, n);
    if (unary && branch)
      return error(Code::kCorruptFile, "byte trie: node ", n, " is unary and a branch");
    if (!unary && !branch && !test(a.terminal_bits, n)) {
      return error(Code::kCorruptFile, "byte trie: leaf ", n, " is not terminal");
    }
    if (unary && n + 1 >= a.n_nodes) {
      return error(Code::kCorruptFile, "byte trie: unary node ", n, " has no next node");
    }
    if (!branch) continue;
    const uint32_t first = a.branch_first[k], end = a.branch_first[k + 1];
    ++k;
    if (end < first || end - first < 2) {
      return error(Code::kCorruptFile, "byte trie: branch node ", n, " has children [", first, ", ",
                   end, ")");
    }
    for (uint32_t c = first; c < end; ++c) {
      const uint32_t id = a.child_ids[c];
      const bool ok = id > n && id < a.n_nodes && a.labels[id] == a.child_bytes[c] &&
                      (c == first ? id == n + 1 : a.child_bytes[c] > a.child_bytes[c - 1]);
      if (!ok) {
        return error(Code::kCorruptFile, "byte trie: branch node ", n, ", child ", c - first,
                     " (byte ", int{a.child_bytes[c]}, ", node ", id, ") is out of order or range");
      }
    }
  }
  return Status::Ok();
}

Result<Ref<StringTrie>> build_string_trie(Ref<Vocab> vocab, const StringTrieOptions &opts,
                                          const StringList &strings) {
  if (!vocab) return error(Code::kInvalidArgument, "a string set needs a vocabulary");
  std::vector<int32_t> stops = opts.stop_tokens;
  TM_TRY(normalize_stop_tokens(vocab->vocab_size(), stops));
  TM_TRY(check_strings(strings, opts.prefix.size()));
  const size_t n = strings.offsets.size() - 1;
  std::unique_ptr<ByteTrieStorage> storage;
  {
    const PrefixedStrings s(strings, opts.prefix,
                            sort_strings(strings.bytes.data(), strings.offsets.data(), n));
    TM_ASSIGN_OR_RETURN(storage, build_storage(s));
  }
  const Status valid = validate_byte_trie_arrays(storage->view());
  if (!valid.ok()) return error(Code::kInternal, "string trie builder: ", valid.message());
  return Ref<StringTrie>::adopt(
      new StringTrie(std::move(vocab), std::move(storage), std::move(stops), opts));
}

uint32_t StringTrie::child(uint32_t node, uint8_t byte) const {
  if (bit(a_.unary_bits, node)) return a_.labels[node + 1] == byte ? node + 1 : kNoNode;
  if (!bit(a_.branch_bits, node)) return kNoNode;
  const uint32_t k = branch_index(node);
  const uint8_t *first = a_.child_bytes + a_.branch_first[k];
  const uint8_t *last = a_.child_bytes + a_.branch_first[k + 1];
  const uint8_t *it = std::lower_bound(first, last, byte);
  return it != last && *it == byte ? a_.child_ids[it - a_.child_bytes] : kNoNode;
}

uint32_t StringTrie::walk(uint32_t node, std::string_view bytes) const {
  for (const char c : bytes) {
    node = child(node, static_cast<uint8_t>(c));
    if (node == kNoNode) break;
  }
  return node;
}

uint32_t StringTrie::child_count(uint32_t node) const {
  if (bit(a_.unary_bits, node)) return 1;
  if (!bit(a_.branch_bits, node)) return 0;
  const uint32_t k = branch_index(node);
  return a_.branch_first[k + 1] - a_.branch_first[k];
}

uint8_t StringTrie::child_byte(uint32_t node, uint32_t i) const {
  if (bit(a_.unary_bits, node)) return a_.labels[node + 1];
  return a_.child_bytes[a_.branch_first[branch_index(node)] + i];
}

uint32_t StringTrie::child_id(uint32_t node, uint32_t i) const {
  if (bit(a_.unary_bits, node)) return node + 1;
  return a_.child_ids[a_.branch_first[branch_index(node)] + i];
}

TokenStep StringTrie::step_token(uint32_t node, int32_t token,
                                 std::span<const int32_t> stops) const {
  if (std::binary_search(stops.begin(), stops.end(), token)) {
    return is_terminal(node) ? TokenStep{TokenStep::kTerminated, kNoNode}
                             : TokenStep{TokenStep::kRejected, kNoNode};
  }
  if (!vocab_->is_text_token(token)) return {TokenStep::kRejected, kNoNode};
  const uint32_t next = walk(node, vocab_->token_bytes(token));
  return next == kNoNode ? TokenStep{TokenStep::kRejected, kNoNode}
                         : TokenStep{TokenStep::kAdvanced, next};
}

size_t StringTrie::forced_bytes(uint32_t node, uint8_t *out, size_t cap) const {
  size_t k = 0;
  while (!is_terminal(node) && bit(a_.unary_bits, node)) {
    ++node;
    if (k < cap) out[k] = a_.labels[node];
    ++k;
  }
  return k;
}

}  // namespace treemask
