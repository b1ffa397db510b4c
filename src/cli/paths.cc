// treemask paths: every allowed sequence, one per line, in lexicographic
// order of token ids: the exhaustive proof of what a trie holds.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <charconv>

#include "cli/cli.h"

namespace treemask::cli {

namespace {

constexpr const char *kUsage =
    "usage: treemask paths FILE [--vocab-size N --stop-tokens A,B ...] [--trusted]\n";

constexpr const char *kHelp =
    "Prints every sequence the trie allows, one per line, as space-separated token ids\n"
    "in lexicographic order. Stop tokens are not printed; a sequence that is a prefix of\n"
    "another is printed too (before it); the empty sequence is an empty line.\n"
    "FILE is a .tmtrie or anything `treemask compile` reads (with the same options).\n"
    "Exit status: 0 ok, 1 bad input (or a corrupted trie), 2 usage.\n";

class Output {
 public:
  ~Output() { flush(); }
  void token(int32_t t, bool first) {
    if (buf_.size() > kFlushAt) flush();
    if (!first) buf_.push_back(' ');
    char digits[16];
    const auto r = std::to_chars(digits, digits + sizeof(digits), t);
    buf_.append(digits, r.ptr);
  }
  void end_line() { buf_.push_back('\n'); }
  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  std::string buf_;
};

}  // namespace

// Depth-first, children in ascending token order: a terminal node's own
// sequence comes before its extensions, which is lexicographic order.
Status write_paths(const Trie &trie) {
  Output out;
  struct Frame {
    uint32_t node;
    uint32_t next_child;
  };
  std::vector<Frame> stack{{0, 0}};
  std::vector<int32_t> path;
  if (trie.is_terminal(0)) out.end_line();
  while (!stack.empty()) {
    Frame &f = stack.back();
    const Children c = trie.children(f.node);
    if (f.next_child == c.count) {
      stack.pop_back();
      if (!path.empty()) path.pop_back();
      continue;
    }
    const uint32_t i = f.next_child++;
    const uint32_t child = c.first_child + i;
    path.push_back(c.tokens[i]);
    if (trie.is_terminal(child)) {
      for (size_t k = 0; k < path.size(); ++k) out.token(path[k], k == 0);
      out.end_line();
    }
    stack.push_back({child, 0});
  }
  return Status::Ok();
}

int cmd_paths(int argc, char **argv) {
  Args args;
  if (auto done = parse_command(argc, argv, kInputFlags, kUsage, kHelp, args)) return *done;
  Diagnostics diag;
  Loaded loaded;
  if (auto done = load_or_exit(args, kUsage, diag, false, loaded)) return *done;
  if (Status s = write_paths(*loaded.trie.value()); !s.ok()) {
    std::fflush(stdout);
    print_error(s.message());
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace treemask::cli
