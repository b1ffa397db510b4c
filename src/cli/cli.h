// The `treemask` command: shared pieces of the subcommands (argument
// parsing, loading any input, output helpers). Exit codes: 0 ok, 1 bad
// input, 2 usage.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sources/diagnostics.h"
#include "trie/trie.h"

namespace treemask::cli {

enum Exit : int { kExitOk = 0, kExitBadInput = 1, kExitUsage = 2 };

// A usage problem: reported with the command's usage line, exit 2.
struct UsageError {
  std::string message;
};

// Flags of one subcommand: name (without "--") -> takes a value.
struct FlagSpec {
  const char *name;
  bool takes_value;
  bool repeatable = false;
};

class Args {
 public:
  // Throws nothing; problems are returned as a UsageError message.
  static std::optional<UsageError> parse(int argc, char **argv, const std::vector<FlagSpec> &spec,
                                         Args &out);

  bool has(const std::string &flag) const { return values_.count(flag) > 0; }
  const std::string *value(const std::string &flag) const;
  const std::vector<std::string> &all(const std::string &flag) const;
  const std::vector<std::string> &positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

// The input flags shared by compile, paths, inspect and check.
extern const std::vector<FlagSpec> kInputFlags;

struct Input {
  std::string path;
  std::string format;  // rtp-json, rtp-tsv, jsonl, tmtrie
  uint64_t bytes = 0;
  // What the first bytes look like when the format came from the name and
  // they suggest another (said after a parse error); empty otherwise.
  std::string hint;
};

// Works out the format and loads the trie. Usage problems (missing
// --vocab-size, unknown format) become UsageError; input problems a Status.
// progress: draw a bar on stderr for large inputs when it is a terminal.
struct Loaded {
  Input input;
  Result<Ref<Trie>> trie = Status(Code::kInternal, "not loaded");
  double seconds = 0;
};
std::optional<UsageError> load_input(const Args &args, Diagnostics &diag, bool progress,
                                     Loaded &out);

// Parses one subcommand's command line. Returns the exit status to end with
// (after printing the usage problem, or the help for --help), or nullopt.
std::optional<int> parse_command(int argc, char **argv, const std::vector<FlagSpec> &spec,
                                 const char *usage, const char *help, Args &args);

// Prints a usage problem and the usage text; returns kExitUsage.
int usage_error(const std::string &message, const char *usage);

// load_input, reporting what stops the command: a usage problem (exit 2) or,
// unless allow_failure, an input that failed to load (exit 1). nullopt: go on.
std::optional<int> load_or_exit(const Args &args, const char *usage, Diagnostics &diag,
                                bool progress, Loaded &out, bool allow_failure = false);

// "1,234,567".
std::string with_commas(uint64_t n);
// Prints "treemask: <message>" to stderr, one printable line (control
// bytes escaped as the C API's treemask_last_error() does).
void print_error(const std::string &message);
// text with its control bytes escaped: what every message quoting input
// must print (a NUL would cut the line, a newline fake another message, an
// ESC drive the terminal).
inline std::string printable(std::string_view text) { return escape_control(text); }
// Prints "warning: <message>" (escaped) to `to`.
inline void print_warning(std::FILE *to, std::string_view message) {
  std::fprintf(to, "warning: %s\n", printable(message).c_str());
}

int cmd_compile(int argc, char **argv);
int cmd_paths(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_check(int argc, char **argv);

}  // namespace treemask::cli
