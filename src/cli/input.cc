// Loading any input the command accepts: a .tmtrie file, an RTP-LLM
// dictionary (JSON or TSV) or JSONL token paths.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstring>

#include "cli/cli.h"
#include "core/open_file.h"
#include "sources/read_file.h"
#include "sources/rtp.h"
#include "strings/string_set.h"
#include "trie/file.h"

namespace treemask::cli {

const std::vector<FlagSpec> kInputFlags = {
    {"vocab-size", true},    {"stop-tokens", true}, {"format", true},
    {"start-token", true},   {"end-token", true},   {"sep", true},
    {"rtp-defaults", false}, {"trusted", false},    {"rtp-compat", false},
};

namespace {

constexpr uint64_t kProgressMinBytes = 4u << 20;

std::optional<UsageError> parse_int(const std::string &flag, const std::string &text,
                                    int32_t &out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range && ptr == text.data() + text.size()) {
    return UsageError{cat("--", flag, " ", text, " is out of range (at most 2147483647)")};
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return UsageError{cat("--", flag, " expects an integer, got \"", text, "\"")};
  }
  return std::nullopt;
}

std::optional<UsageError> parse_int_list(const std::string &flag, const std::string &text,
                                         std::vector<int32_t> &out) {
  for (size_t pos = 0; pos <= text.size();) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    int32_t v;
    if (auto e = parse_int(flag, text.substr(pos, comma - pos), v)) return e;
    out.push_back(v);
    pos = comma + 1;
  }
  return std::nullopt;
}

// The first bytes of a regular file (fewer if it is shorter).
std::string read_head(int fd, size_t n) {
  std::string head(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = pread(fd, head.data() + got, n - got, static_cast<off_t>(got));
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  head.resize(got);
  return head;
}

// What the first bytes of a file look like, for the message of a parse
// error when the format was taken from the name: another format treemask
// reads (pass --format), or a semantic-ID index, which no command reads.
std::string content_hint(const std::string &head, const std::string &format) {
  const size_t first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first == std::string::npos) return {};
  const std::string line = head.substr(first, head.find('\n', first) - first);
  std::string looks;
  if (line.find("\"prefix_dict\"") != std::string::npos ||
      head.find("\"prefix_dict\"") != std::string::npos) {
    looks = "rtp-json";
  } else if (line[0] == '[' || line.rfind("{\"tokens\"", 0) == 0) {
    looks = "jsonl";
  } else if (line[0] == '{' && line.find("\": [\"") != std::string::npos) {
    return "it looks like a semantic-ID index (item -> code strings, as MiniOneRec's "
           "*.index.json), which no treemask command reads: map each code to its token id and "
           "write JSON Lines, one [t0, t1, ...] per item (examples/demo/demo.cc does this)";
  } else if (line.find('\t') != std::string::npos) {
    looks = "rtp-tsv";
  }
  if (looks == format) return {};  // the name was right: the error is in the content
  if (looks.empty()) {
    return "treemask reads rtp-json ({\"prefix_dict\": ...}), rtp-tsv (key<TAB>ids lines), "
           "jsonl ([t0, t1, ...] lines) and tmtrie; --format chooses";
  }
  return cat("it looks like ", looks, ": pass --format ", looks);
}

std::string format_from_name(const std::string &path) {
  const size_t dot = path.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (ext == "json") return "rtp-json";
  if (ext == "txt" || ext == "tsv") return "rtp-tsv";
  if (ext == "jsonl" || ext == "ndjson") return "jsonl";
  if (ext == "tmtrie") return "tmtrie";
  return "";
}

// Redraws one line on stderr: [#####-----]  45%  12.3 MB/s.
class ProgressBar {
 public:
  explicit ProgressBar(const char *what) : what_(what), start_(Clock::now()) {}
  ~ProgressBar() {
    if (drawn_) std::fprintf(stderr, "\r%-70s\r", "");
  }
  void update(uint64_t done, uint64_t total) {
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const int width = 30;
    const int filled = total ? static_cast<int>(width * done / total) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '-');
    std::fprintf(stderr, "\r%s [%s] %3d%%  %7.1f MB/s", what_, bar.c_str(),
                 total ? static_cast<int>(100 * done / total) : 0,
                 secs > 0 ? done / secs / 1e6 : 0.0);
    drawn_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const char *what_;
  Clock::time_point start_;
  bool drawn_ = false;
};

}  // namespace

std::optional<UsageError> load_input(const Args &args, Diagnostics &diag, bool progress,
                                     Loaded &out) {
  if (args.positional().size() != 1) {
    return UsageError{args.positional().empty() ? "missing INPUT" : "give exactly one INPUT"};
  }
  Input &in = out.input;
  in.path = args.positional()[0];
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](Result<Ref<Trie>> trie) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out.trie = std::move(trie);
    return std::nullopt;
  };
  // Checked before anything reads it: a FIFO or device would block or never end.
  size_t file_size = 0;
  auto opened = open_regular_file(in.path, &file_size);
  if (!opened.ok()) {
    if (!args.has("format") && format_from_name(in.path).empty()) {
      return UsageError{cat("cannot tell the format of \"", in.path,
                            "\" from its name; pass --format rtp-json|rtp-tsv|jsonl|tmtrie")};
    }
    return finish(opened.take_status());
  }
  const std::string head = read_head(opened.value(), 4096);
  close(opened.value());
  in.bytes = file_size;
  if (const std::string *f = args.value("format")) {
    in.format = *f;
    if (in.format != "rtp-json" && in.format != "rtp-tsv" && in.format != "jsonl" &&
        in.format != "tmtrie") {
      return UsageError{cat("unknown --format \"", *f, "\" (rtp-json, rtp-tsv, jsonl, tmtrie)")};
    }
  } else if (head.size() >= 8 && std::memcmp(head.data(), "\x89TMTRIE\n", 8) == 0) {
    in.format = "tmtrie";
  } else {
    in.format = format_from_name(in.path);
    if (in.format.empty()) {
      return UsageError{cat("cannot tell the format of \"", in.path,
                            "\" from its name; pass --format rtp-json|rtp-tsv|jsonl|tmtrie")};
    }
    in.hint = content_hint(head, in.format);
  }

  // A flag that does not apply to this input is a mistake, not a no-op.
  const bool rtp = in.format == "rtp-json" || in.format == "rtp-tsv";
  for (const char *flag : {"vocab-size", "stop-tokens", "start-token", "end-token", "sep",
                           "rtp-defaults", "rtp-compat", "trusted"}) {
    const std::string_view name = flag;
    const bool applies = name == "trusted"       ? in.format == "tmtrie"
                         : name == "vocab-size"  ? in.format != "tmtrie"
                         : name == "stop-tokens" ? in.format != "tmtrie"
                                                 : rtp;
    if (args.has(flag) && !applies) {
      return UsageError{cat("--", flag, " does not apply to ", in.format, " input")};
    }
  }
  if (in.format == "tmtrie") {
    return finish(load_trie(in.path, args.has("trusted") ? kLoadTrusted : 0));
  }
  // A .txt label list is not RTP TSV: say where label strings go instead.
  if (in.format == "rtp-tsv" && !args.has("format") && head.find('\t') == std::string::npos &&
      !head.empty()) {
    return UsageError{cat(
        "\"", in.path,
        "\" has no tab in its first lines, so it is not RTP-LLM TSV (key<TAB>ids). For a list of "
        "label strings, one per line, use: python -m treemask compile-labels ",
        in.path, " --tokenizer tokenizer.json --vocab-size V --stop-tokens ID -o out.tmtrie")};
  }

  RtpOptions opts;
  const std::string *vocab = args.value("vocab-size");
  if (!vocab) return UsageError{cat("--vocab-size is required for ", in.format, " input")};
  if (auto e = parse_int("vocab-size", *vocab, opts.build.vocab_size)) return e;
  if (const std::string *s = args.value("stop-tokens")) {
    if (auto e = parse_int_list("stop-tokens", *s, opts.build.stop_tokens)) return e;
  }
  int32_t v;
  if (const std::string *s = args.value("start-token")) {
    if (auto e = parse_int("start-token", *s, v)) return e;
    opts.start_token_id = v;
  }
  if (const std::string *s = args.value("end-token")) {
    if (auto e = parse_int("end-token", *s, v)) return e;
    opts.end_token_id = v;
  }
  if (const std::string *s = args.value("sep")) {
    if (s->find('\t') != std::string::npos && in.format == "rtp-tsv") {
      return UsageError{
          "--sep must not contain a tab: the TSV form separates each key from its "
          "ids with one"};
    }
    opts.sep = *s;
  }
  opts.compat = args.has("rtp-compat");
  // Explicit flags say what the user expects the file to hold; RTP-LLM's
  // defaults only fill what it lacks.
  opts.values_must_match = args.has("start-token") || args.has("end-token") || args.has("sep");
  if (args.has("rtp-defaults")) {
    if (!opts.start_token_id) opts.start_token_id = kRtpDefaultStartToken;
    if (!opts.end_token_id) opts.end_token_id = kRtpDefaultEndToken;
  }
  std::optional<ProgressBar> bar;
  if (progress && in.bytes > kProgressMinBytes && isatty(STDERR_FILENO)) {
    bar.emplace("parsing");
    opts.progress = [&bar](uint64_t done, uint64_t total) { bar->update(done, total); };
  }
  if (in.format == "jsonl" && opts.build.stop_tokens.empty()) {
    return UsageError{"--stop-tokens is required for jsonl input"};
  }
  if (in.format == "rtp-tsv" && (!opts.start_token_id || !opts.end_token_id)) {
    return UsageError{
        "rtp-tsv input has no header: give --start-token and --end-token (or --rtp-defaults)"};
  }
  if (in.format == "rtp-json") return finish(load_rtp_json_file(opts, in.path, diag));
  auto file = read_file(in.path, 0);
  if (!file.ok()) return finish(file.take_status());
  auto with_path = [&](Result<Ref<Trie>> r) -> Result<Ref<Trie>> {
    if (r.ok()) return r;
    return Status(r.status().code(), cat("\"", in.path, "\": ", r.status().message()));
  };
  if (in.format == "rtp-tsv") {
    return finish(with_path(load_rtp_tsv(opts, file.value().view(), diag)));
  }
  return finish(with_path(load_jsonl_paths(opts.build, file.value().view(), diag, opts.progress)));
}

}  // namespace treemask::cli
