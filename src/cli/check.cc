// treemask check: validates a dictionary and lists every problem (not just
// the first), or walks every node of a .tmtrie file.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "cli/cli.h"

namespace treemask::cli {

namespace {

constexpr const char *kCheckUsage =
    "usage: treemask check INPUT --vocab-size N [--stop-tokens A,B] [--format F]\n"
    "                      [--start-token S --end-token E --sep X] [--rtp-defaults]\n";

constexpr const char *kCheckHelp =
    "Reads INPUT like `treemask compile` but does not stop at the first problem: lists\n"
    "every error (bad keys, ids out of range, duplicate keys, malformed lines) and every\n"
    "warning (unknown fields, keys the root cannot reach). A .tmtrie file is verified\n"
    "(checksum) and its structure validated (sorted children, ids in range, labels).\n"
    "Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage.\n";

}  // namespace

int cmd_check(int argc, char **argv) {
  Args args;
  if (auto done = parse_command(argc, argv, kInputFlags, kCheckUsage, kCheckHelp, args))
    return *done;
  Diagnostics diag(/*keep_going=*/true, /*max_kept=*/size_t{1} << 16);
  Loaded loaded;
  if (auto done = load_or_exit(args, kCheckUsage, diag, true, loaded, /*allow_failure=*/true)) {
    return *done;
  }
  // A load that failed on its own (malformed JSON, a missing file) rather than
  // by returning the first of the problems it collected.
  if (!loaded.trie.ok() && (diag.n_errors() == 0 || !loaded.trie.status().message().ends_with(
                                                        diag.first_error().message()))) {
    (void)diag.problem(loaded.trie.status());
  }
  for (const std::string &e : diag.errors()) std::printf("error: %s\n", printable(e).c_str());
  for (const std::string &w : diag.warnings()) print_warning(stdout, w);
  const uint64_t hidden =
      diag.n_errors() + diag.n_warnings() - diag.errors().size() - diag.warnings().size();
  if (hidden > 0) std::printf("... and %s more not shown\n", with_commas(hidden).c_str());
  std::printf("%s: %s error%s, %s warning%s\n", printable(loaded.input.path).c_str(),
              with_commas(diag.n_errors()).c_str(), diag.n_errors() == 1 ? "" : "s",
              with_commas(diag.n_warnings()).c_str(), diag.n_warnings() == 1 ? "" : "s");
  return diag.n_errors() > 0 ? kExitBadInput : kExitOk;
}

}  // namespace treemask::cli
