// treemask paths: every allowed sequence, one per line, in lexicographic
// order of token ids: the exhaustive proof of what a trie holds.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <charconv>
#include <span>
#include <string>
#include <string_view>

#include "cli/cli.h"
#include "rules/trie_rules.h"

namespace treemask::cli {

namespace {

constexpr const char *kPathsUsage =
    "usage: treemask paths FILE [--vocab-size N --stop-tokens A,B ...] [--trusted]\n"
    "                      [--labels] [--with-stop]\n";

constexpr const char *kPathsHelp =
    "Prints every sequence the trie allows, one per line, as space-separated token ids\n"
    "in lexicographic order. A sequence that is a prefix of another is printed too\n"
    "(before it); the empty sequence (a terminal root) is the line \"(empty)\".\n"
    "FILE is a .tmtrie or anything `treemask compile` reads (with the same options).\n"
    "\n"
    "Options:\n"
    "  --with-stop   end each sequence with the stop token that completes it (the\n"
    "                smallest, when the trie has several)\n"
    "  --labels      append a tab and the label ids of the sequence, comma-separated\n"
    "                (nothing for a trie without labels)\n"
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
  void text(std::string_view s) { buf_.append(s); }
  void label_ids(const LabelIds &ids) {
    buf_.push_back('\t');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) buf_.push_back(',');
      buf_.append(std::to_string(ids[i]));
    }
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
Status write_paths(const Trie &trie, bool with_stop, bool labels) {
  TM_TRY(check_supported(trie, TrieFeature::kTokenPaths, "listing token paths"));
  Output out;
  const auto stops = trie.stop_tokens();
  // One complete sequence: its tokens, then what the options add.
  auto finish = [&](uint32_t node, const std::vector<int32_t> &path) -> Status {
    for (size_t k = 0; k < path.size(); ++k) out.token(path[k], k == 0);
    if (with_stop && !stops.empty()) {
      out.token(stops.front(), path.empty());
    } else if (path.empty()) {
      out.text("(empty)");
    }
    // The load validated the arrays: labels() cannot fail.
    const LabelIds ids = labels ? trie.labels(node) : LabelIds{};
    if (!ids.empty()) out.label_ids(ids);
    out.end_line();
    return Status::Ok();
  };
  struct Frame {
    uint32_t node;
    uint32_t next_child;
  };
  std::vector<Frame> stack{{0, 0}};
  std::vector<int32_t> path;
  if (trie.is_terminal(0)) TM_TRY(finish(0, path));
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
    if (trie.is_terminal(child)) TM_TRY(finish(child, path));
    stack.push_back({child, 0});
  }
  return Status::Ok();
}

int cmd_paths(int argc, char **argv) {
  Args args;
  auto spec = kInputFlags;
  spec.push_back({"labels", false});
  spec.push_back({"with-stop", false});
  if (auto done = parse_command(argc, argv, spec, kPathsUsage, kPathsHelp, args)) return *done;
  Diagnostics diag;
  Loaded loaded;
  if (auto done = load_or_exit(args, kPathsUsage, diag, false, loaded)) return *done;
  if (Status s = write_paths(*loaded.trie.value(), args.has("with-stop"), args.has("labels"));
      !s.ok()) {
    std::fflush(stdout);
    print_error(s.message());
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace treemask::cli
