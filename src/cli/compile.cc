// treemask compile: any input -> .tmtrie, with stats.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/open_file.h"
#include "treemask/version.h"
#include "trie/annotations.h"
#include "trie/file.h"

namespace treemask::cli {

namespace {

constexpr const char *kCompileUsage =
    "usage: treemask compile INPUT -o OUTPUT.tmtrie --vocab-size N [--stop-tokens A,B]\n"
    "                        [--format rtp-json|rtp-tsv|jsonl]\n"
    "                        [--start-token S --end-token E --sep X] [--rtp-defaults]\n"
    "                        [--rtp-compat] [--meta KEY=VALUE]...\n";

constexpr const char *kCompileHelp =
    "Compiles a dictionary into a .tmtrie file that loads in constant time.\n"
    "\n"
    "INPUT formats (chosen from the extension unless --format says):\n"
    "  rtp-json  .json   RTP-LLM tree-decode config {start_token_id, end_token_id, sep,\n"
    "                    prefix_dict}; --start-token/--end-token/--sep supply fields the file\n"
    "                    lacks and must agree with those it has\n"
    "  rtp-tsv   .txt    RTP-LLM's key<TAB>id\\x02id lines; needs --start-token and --end-token\n"
    "  jsonl     .jsonl  one path per line: [t0, t1, ...] or {\"tokens\": [...], \"label\": L};\n"
    "                    needs --stop-tokens\n"
    "  tmtrie            an existing .tmtrie (re-saved, e.g. with new --meta)\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE    where to write (replaced atomically)\n"
    "  --vocab-size N       every token id must be < N (required unless INPUT is .tmtrie)\n"
    "  --stop-tokens A,B    stop tokens (RTP-LLM input: default end_token_id)\n"
    "  --rtp-defaults       RTP-LLM's defaults 225 / 2 for a missing start/end token\n"
    "  --rtp-compat         load what RTP-LLM's own loader accepts: negative or non-int32\n"
    "                       list ids skipped, keys without the start token ignored, sep \"-\"\n"
    "                       allowed, each a counted warning instead of an error\n"
    "  --meta KEY=VALUE     metadata to store (repeatable), e.g. tokenizer=sha256:...; it\n"
    "                       replaces the automatic source, source_format and created_by\n"
    "  --trusted            (tmtrie input) skip the checksum when loading\n"
    "\n"
    "Warnings (unknown fields, unreachable keys) are counted; `treemask check` lists them.\n"
    "Exit status: 0 ok, 1 bad input, 2 usage.\n";

}  // namespace

int cmd_compile(int argc, char **argv) {
  auto spec = kInputFlags;
  spec.push_back({"output", true});
  spec.push_back({"meta", true, true});
  Args args;
  if (auto done = parse_command(argc, argv, spec, kCompileUsage, kCompileHelp, args)) return *done;
  const std::string *output = args.value("output");
  if (!output) return usage_error("missing -o OUTPUT.tmtrie", kCompileUsage);
  // Checked before any work: a bad output must not cost a long parse first.
  if (Status s = check_output_path(*output); !s.ok()) {
    print_error(s.message());
    return kExitBadInput;
  }
  if (args.positional().size() == 1) {
    struct stat in_st {
    }, out_st{};
    if (stat(args.positional()[0].c_str(), &in_st) == 0 && stat(output->c_str(), &out_st) == 0 &&
        in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino) {
      print_error(cat("output \"", *output, "\" is the input file; refusing to overwrite it"));
      return kExitBadInput;
    }
  }
  std::vector<std::pair<std::string, std::string>> metadata;
  for (const std::string &kv : args.all("meta")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return usage_error(cat("--meta expects KEY=VALUE, got \"", kv, "\""), kCompileUsage);
    }
    metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  Diagnostics diag;
  Loaded loaded;
  if (auto done = load_or_exit(args, kCompileUsage, diag, true, loaded)) return *done;
  const Trie &trie = *loaded.trie.value();
  if (loaded.input.format != "tmtrie") {
    // --meta wins over the automatic entries: save_trie keeps the last of
    // equal keys, so they go first.
    const size_t slash = loaded.input.path.rfind('/');
    std::vector<std::pair<std::string, std::string>> automatic = {
        {"source", loaded.input.path.substr(slash == std::string::npos ? 0 : slash + 1)},
        {"source_format", loaded.input.format},
        {"created_by", cat("treemask ", TREEMASK_VERSION_STRING)}};
    metadata.insert(metadata.begin(), automatic.begin(), automatic.end());
  }
  if (Status s = save_trie(trie, *output, metadata); !s.ok()) {
    print_error(s.message());
    return kExitBadInput;
  }
  for (const std::string &w : diag.warnings()) print_warning(stderr, w);
  if (diag.n_warnings() > diag.warnings().size()) {
    std::fprintf(stderr, "warning: ... %s more (treemask check lists them all)\n",
                 with_commas(diag.n_warnings() - diag.warnings().size()).c_str());
  }
  const TrieArrays &a = trie.arrays();
  struct stat st {};
  stat(output->c_str(), &st);
  std::printf("compiled %s (%s, %s bytes) in %.3f s (%.1f MB/s)\n",
              printable(loaded.input.path).c_str(), loaded.input.format.c_str(),
              with_commas(loaded.input.bytes).c_str(), loaded.seconds,
              loaded.seconds > 0 ? loaded.input.bytes / loaded.seconds / 1e6 : 0.0);
  std::printf("  nodes %s, edges %s, terminals %s, labels %s, max depth %u, max fanout %u\n",
              with_commas(a.n_nodes).c_str(), with_commas(a.n_edges()).c_str(),
              with_commas(a.n_terminals).c_str(), with_commas(a.n_labels()).c_str(), a.max_depth,
              a.max_fanout);
  std::printf("  arrays %s bytes (%.2f bytes/edge) -> %s (%s bytes)\n",
              with_commas(a.bytes()).c_str(), a.n_edges() ? double(a.bytes()) / a.n_edges() : 0.0,
              printable(*output).c_str(), with_commas(static_cast<uint64_t>(st.st_size)).c_str());
  std::printf("  warnings %s\n", with_commas(diag.n_warnings()).c_str());
  return kExitOk;
}

}  // namespace treemask::cli
