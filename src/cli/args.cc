// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstring>

#include "cli/cli.h"

namespace treemask::cli {

std::optional<UsageError> Args::parse(int argc, char **argv, const std::vector<FlagSpec> &spec,
                                      Args &out) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") arg = "--help";
    if (arg == "-o") arg = "--output";
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      out.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec *flag = nullptr;
    for (const FlagSpec &f : spec) {
      if (name == f.name) flag = &f;
    }
    if (name == "help") {
      out.values_[name].push_back("");
      continue;
    }
    if (!flag) return UsageError{cat("unknown option --", name)};
    if (flag->takes_value && !inline_value) {
      if (i + 1 >= argc) return UsageError{cat("--", name, " needs a value")};
      value = argv[++i];
    } else if (!flag->takes_value && inline_value) {
      return UsageError{cat("--", name, " takes no value")};
    }
    auto &slot = out.values_[name];
    if (!slot.empty() && !flag->repeatable) return UsageError{cat("--", name, " given twice")};
    slot.push_back(value);
  }
  return std::nullopt;
}

const std::string *Args::value(const std::string &flag) const {
  const auto it = values_.find(flag);
  return it == values_.end() ? nullptr : &it->second.back();
}

const std::vector<std::string> &Args::all(const std::string &flag) const {
  static const std::vector<std::string> kNone;
  const auto it = values_.find(flag);
  return it == values_.end() ? kNone : it->second;
}

std::optional<int> parse_command(int argc, char **argv, const std::vector<FlagSpec> &spec,
                                 const char *usage, const char *help, Args &args) {
  if (auto e = Args::parse(argc, argv, spec, args)) return usage_error(e->message, usage);
  if (!args.has("help")) return std::nullopt;
  std::fputs(usage, stdout);
  std::fputs(help, stdout);
  return kExitOk;
}

int usage_error(const std::string &message, const char *usage) {
  print_error(message);
  std::fputs(usage, stderr);
  return kExitUsage;
}

std::optional<int> load_or_exit(const Args &args, const char *usage, Diagnostics &diag,
                                bool progress, Loaded &out, bool allow_failure) {
  if (auto e = load_input(args, diag, progress, out)) return usage_error(e->message, usage);
  if (out.trie.ok() || allow_failure) return std::nullopt;
  const Status &s = out.trie.status();
  const bool unparsed = s.code() == Code::kParse || s.code() == Code::kInvalidArgument;
  print_error(unparsed && !out.input.hint.empty()
                  ? cat(s.message(), " (read as ", out.input.format, " from the file's name; ",
                        out.input.hint, ")")
                  : s.message());
  return kExitBadInput;
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

void print_error(const std::string &message) {
  std::fprintf(stderr, "treemask: %s\n", printable(message).c_str());
}

}  // namespace treemask::cli
