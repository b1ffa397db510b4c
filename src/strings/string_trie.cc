// Building the byte trie of a string set, and its node accessors.
//
// The builder sorts the strings (string_sort.h) and numbers the nodes in
// depth-first order without building a pointer trie first: string k (in
// sorted order, prefix included, length L_k) shares lcp_k bytes with the
// string before it, so it creates the nodes at depths lcp_k + 1 .. L_k, with
// consecutive ids from start_k = 1 + the nodes created before it, and gives
// the node at depth lcp_k on the current path a child. Two passes over the
// sorted strings keep that path as a stack of runs (walk_runs): the first
// writes labels and bits and counts each branching node's children, the
// second, once branch ranks are known, writes the branch table. Each pass is
// linear in the nodes plus the strings, and reads each string once.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "strings/string_trie.h"

#include <algorithm>
#include <cstring>

#include "strings/string_sort.h"

namespace treemask {

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
  // The index in the caller's list of sorted string i.
  uint32_t original(size_t i) const { return sorted_.order[i]; }

 private:
  const StringList &s_;
  std::string_view prefix_;
  SortedStrings sorted_;
};

// The path of the string being added, as runs of nodes: a run holds the
// nodes one string created at depths [d0, d1] (ids base + depth - d0), each
// with the next as its only child so far, except the last, which has
// `last_children`. A string that leaves the path at depth l closes the runs
// below l (their nodes' child counts are final) and cuts the run holding
// depth l there; if it goes on past l, the node at l gains a child (its
// first new node) and its nodes form a new run. So the stack holds one run
// per branching point on the path, never one entry per byte.
struct Run {
  uint64_t d0, d1;
  uint32_t base;
  uint32_t last_children;
  uint32_t node_at(uint64_t d) const { return base + static_cast<uint32_t>(d - d0); }
};

// What a pass over the sorted strings reports, in this order for a string:
// closed runs (close(run): their nodes' children are final), then a child
// gained (attach(parent, index of the child among the parent's, child)),
// then the new nodes (created(string, run)) or the end of a string that
// created none (ended_at(string, node)).
template <class Close, class Attach, class Created, class EndedAt>
void walk_runs(const PrefixedStrings &s, const std::vector<uint32_t> &start, Close &&close,
               Attach &&attach, Created &&created, EndedAt &&ended_at) {
  std::vector<Run> path{{0, 0, 0, 0}};  // the root
  for (size_t k = 0; k < s.size(); ++k) {
    const uint64_t l = s.lcp(k);
    const uint64_t len = s.length(k);
    while (path.back().d0 > l) {
      close(path.back());
      path.pop_back();
    }
    Run &top = path.back();
    if (l < top.d1) {  // cut the run after depth l
      close(Run{l + 1, top.d1, top.node_at(l + 1), top.last_children});
      top.d1 = l;
      top.last_children = 1;
    }
    if (len == l) {
      ended_at(k, top.node_at(l));
      continue;
    }
    attach(top.node_at(l), top.last_children++, start[k]);
    path.push_back({l + 1, len, start[k], 0});
    created(k, path.back());
  }
  while (!path.empty()) {
    close(path.back());
    path.pop_back();
  }
}

// Sets bits [first, last] of a bitset.
void set_range(std::vector<uint64_t> &bits, uint64_t first, uint64_t last) {
  for (uint64_t n = first; n <= last;) {
    if ((n & 63) == 0 && n + 63 <= last) {
      bits[n >> 6] = ~uint64_t{0};
      n += 64;
    } else {
      set(bits, n++);
    }
  }
}

// ends (when given) receives the node each string ends at, by its index in
// the caller's list.
Result<std::unique_ptr<VectorTrieStorage>> build_storage(const PrefixedStrings &s,
                                                         std::vector<uint32_t> *ends) {
  // Node ids: string k's new nodes start at start[k].
  std::vector<uint32_t> start(s.size());
  uint64_t n_nodes = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    if (n_nodes > kMaxByteTrieNodes) break;
    start[k] = static_cast<uint32_t>(n_nodes);
    n_nodes += s.length(k) - s.lcp(k);
  }
  if (n_nodes > kMaxByteTrieNodes) {
    return error(Code::kOutOfRange, "the string set needs more than ", kMaxByteTrieNodes,
                 " trie nodes");
  }

  auto st = std::make_unique<VectorTrieStorage>();
  const uint64_t words = (n_nodes + 63) / 64;
  st->byte_labels.assign(n_nodes, 0);
  st->terminal_bits.assign(words, 0);
  st->unary_bits.assign(words, 0);
  st->branch_bits.assign(words, 0);
  st->branch_rank.assign(words, 0);

  // Pass 1: labels, bits, and each branching node's child count (in the
  // order they close; placed by rank below).
  std::vector<std::pair<uint32_t, uint32_t>> branch_counts;
  walk_runs(
      s, start,
      [&](const Run &r) {
        const uint32_t last = r.node_at(r.d1);
        if (r.d1 > r.d0) set_range(st->unary_bits, r.base, last - 1);
        if (r.last_children == 1) set(st->unary_bits, last);
        if (r.last_children >= 2) {
          set(st->branch_bits, last);
          branch_counts.push_back({last, r.last_children});
        }
      },
      [](uint32_t, uint32_t, uint32_t) {},
      [&](size_t k, const Run &r) {
        for (uint64_t d = r.d0; d <= r.d1; ++d) st->byte_labels[r.node_at(d)] = s.byte(k, d - 1);
        set(st->terminal_bits, r.node_at(r.d1));
        if (ends) (*ends)[s.original(k)] = r.node_at(r.d1);
      },
      [&](size_t k, uint32_t node) {
        set(st->terminal_bits, node);
        if (ends) (*ends)[s.original(k)] = node;
      });

  uint32_t rank = 0;
  for (uint64_t w = 0; w < words; ++w) {
    st->branch_rank[w] = rank;
    rank += static_cast<uint32_t>(std::popcount(st->branch_bits[w]));
  }
  const auto rank_of = [&](uint32_t node) {
    const uint64_t below = st->branch_bits[node >> 6] & ((uint64_t{1} << (node & 63)) - 1);
    return st->branch_rank[node >> 6] + static_cast<uint32_t>(std::popcount(below));
  };
  st->branch_first.assign(branch_counts.size() + 1, 0);
  for (const auto &[node, count] : branch_counts) st->branch_first[rank_of(node) + 1] = count;
  branch_counts = {};
  for (size_t k = 1; k < st->branch_first.size(); ++k) {
    st->branch_first[k] += st->branch_first[k - 1];
  }

  // Pass 2: the children of branching nodes, from the labels. A branching
  // node's first child is the next node; it is written with the second.
  st->child_bytes.assign(st->branch_first.back(), 0);
  st->child_ids.assign(st->branch_first.back(), 0);
  walk_runs(
      s, start, [](const Run &) {},
      [&](uint32_t parent, uint32_t index, uint32_t child) {
        if (index == 0 || !test(st->branch_bits.data(), parent)) return;
        const uint32_t first = st->branch_first[rank_of(parent)];
        if (index == 1) {
          st->child_bytes[first] = st->byte_labels[parent + 1];
          st->child_ids[first] = parent + 1;
        }
        st->child_bytes[first + index] = st->byte_labels[child];
        st->child_ids[first + index] = child;
      },
      [](size_t, const Run &) {}, [](size_t, uint32_t) {});
  return st;
}

}  // namespace

Result<BuiltByteTrie> build_byte_trie(const StringList &strings, std::string_view prefix) {
  TM_TRY(check_strings(strings, prefix.size()));
  const size_t n = strings.offsets.size() - 1;
  BuiltByteTrie out;
  out.ends.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    out.max_depth = std::max<uint64_t>(out.max_depth,
                                       prefix.size() + strings.offsets[i + 1] - strings.offsets[i]);
  }
  {
    const PrefixedStrings s(strings, prefix,
                            sort_strings(strings.bytes.data(), strings.offsets.data(), n));
    TM_ASSIGN_OR_RETURN(out.storage, build_storage(s, &out.ends));
  }
  return out;
}

uint32_t StringTrie::child(uint32_t node, uint8_t byte) const {
  if (bit(a_.unary_bits, node)) return a_.byte_labels[node + 1] == byte ? node + 1 : kNoNode;
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
  if (bit(a_.unary_bits, node)) return a_.byte_labels[node + 1];
  return a_.child_bytes[a_.branch_first[branch_index(node)] + i];
}

uint32_t StringTrie::child_id(uint32_t node, uint32_t i) const {
  if (bit(a_.unary_bits, node)) return node + 1;
  return a_.child_ids[a_.branch_first[branch_index(node)] + i];
}

NodeStep StringTrie::step_token(uint32_t node, int32_t token,
                                std::span<const int32_t> stops) const {
  if (std::binary_search(stops.begin(), stops.end(), token)) {
    return is_terminal(node) ? NodeStep{NodeStep::kTerminated, kNoNode}
                             : NodeStep{NodeStep::kRejected, kNoNode};
  }
  if (!vocab_->is_text_token(token)) return {NodeStep::kRejected, kNoNode};
  const uint32_t next = walk(node, vocab_->token_bytes(token));
  return next == kNoNode ? NodeStep{NodeStep::kRejected, kNoNode}
                         : NodeStep{NodeStep::kAdvanced, next};
}

const char *StringTrie::unsupported(TrieFeature f) const {
  switch (f) {
    case TrieFeature::kDecodingModes:
      return "the decoding modes are defined over token paths, and a string set allows any "
             "tokenization of its strings";
    case TrieFeature::kDeviceSteps:
      return "the device steps walk token paths only; fill its rows on the host "
             "(treemask_trie_fill_states or a matcher) and apply them with "
             "treemask_cuda_apply_token_bitmask";
    case TrieFeature::kTokenPaths:
      return "it allows any tokenization of its strings (treemask inspect describes it)";
  }
  return "unknown feature";
}

std::string StringTrie::describe(uint32_t node) const {
  return cat("bytes=\"", escape_control(path_bytes(node)), "\"");
}

std::string StringTrie::path_bytes(uint32_t node) const {
  // Depth-first ids: the child on the way to node is the last one whose id
  // is at most node's.
  std::string out;
  for (uint32_t at = 0; at != node;) {
    const uint32_t n = child_count(at);
    if (n == 0 || node >= a_.n_nodes) break;
    uint32_t i = 0;
    while (i + 1 < n && child_id(at, i + 1) <= node) ++i;
    at = child_id(at, i);
    out.push_back(static_cast<char>(a_.byte_labels[at]));
  }
  return out;
}

size_t StringTrie::forced_bytes(uint32_t node, uint8_t *out, size_t cap) const {
  size_t k = 0;
  while (!is_terminal(node) && bit(a_.unary_bits, node)) {
    ++node;
    if (k < cap) out[k] = a_.byte_labels[node];
    ++k;
  }
  return k;
}

}  // namespace treemask
