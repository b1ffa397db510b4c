// treemask: build, inspect and verify tries from the shell.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstring>

#include "cli/cli.h"
#include "treemask/version.h"

namespace {

constexpr const char *kUsage =
    "usage: treemask <command> [options]   (treemask <command> --help for details)\n"
    "\n"
    "commands:\n"
    "  compile  INPUT -o OUT.tmtrie --vocab-size N ...  compile a dictionary to a .tmtrie file\n"
    "  inspect  FILE                                   counts, histograms, bytes per edge, "
    "metadata\n"
    "  paths    FILE                                   print every allowed sequence\n"
    "  check    INPUT --vocab-size N ...               list every problem of a dictionary\n"
    "  version                                         print the version\n"
    "\n"
    "Inputs: RTP-LLM tree-decode JSON (.json) or TSV (.txt), JSONL token paths (.jsonl),\n"
    "compiled tries (.tmtrie). Exit status: 0 ok, 1 bad input, 2 usage.\n";

}  // namespace

int main(int argc, char **argv) {
  using namespace treemask::cli;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const char *cmd = argv[1];
  if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h") || !std::strcmp(cmd, "help")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (!std::strcmp(cmd, "version") || !std::strcmp(cmd, "--version")) {
    std::printf("treemask %s\n", TREEMASK_VERSION_STRING);
    return kExitOk;
  }
  struct Command {
    const char *name;
    int (*run)(int, char **);
  };
  static const Command commands[] = {{"compile", cmd_compile},
                                     {"inspect", cmd_inspect},
                                     {"paths", cmd_paths},
                                     {"check", cmd_check}};
  for (const Command &c : commands) {
    if (!std::strcmp(cmd, c.name)) return c.run(argc - 2, argv + 2);
  }
  print_error(treemask::cat("unknown command \"", cmd, "\""));
  std::fputs(kUsage, stderr);
  return kExitUsage;
}
