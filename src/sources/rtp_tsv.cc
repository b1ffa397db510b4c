// RTP-LLM's text form of a prefix dictionary: "key<TAB>id\x02id..." lines.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <charconv>

#include "sources/lines.h"
#include "sources/rtp.h"
#include "sources/rtp_dict.h"

namespace treemask {

namespace {

constexpr char kIdSeparator = '\x02';

}  // namespace

Result<Ref<Trie>> load_rtp_tsv(const RtpOptions &opts, std::string_view data, Diagnostics &diag) {
  if (!opts.start_token_id || !opts.end_token_id) {
    return error(Code::kInvalidArgument,
                 "the TSV form has no header: start_token_id and end_token_id must be given");
  }
  // The key/list separator is a tab: a sep with one would split keys apart.
  if (opts.sep && opts.sep->find('\t') != std::string::npos) {
    return error(Code::kInvalidArgument,
                 "sep must not contain a tab: the TSV form separates the key from its ids with "
                 "one");
  }
  TM_ASSIGN_OR_RETURN(RtpConfig config, resolve_rtp_config(opts, {}, {}, {}));
  TM_ASSIGN_OR_RETURN(RtpDictCollector dict, RtpDictCollector::create(config, opts.build, diag));
  if (data.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return error(Code::kParse, "empty input: no prefix_dict lines");
  }
  const Status read =
      for_each_line(data, opts.progress, [&](std::string_view line, uint64_t line_no) {
        const std::string where = cat("line ", line_no, ": ");
        const size_t tab = line.find('\t');
        if (tab == std::string_view::npos) {
          return diag.problem(error(Code::kParse, where, "no tab between the key and its ids: \"",
                                    line.substr(0, 60), line.size() > 60 ? "...\"" : "\""));
        }
        bool accepted = false;
        TM_TRY(dict.begin_key(line.substr(0, tab), where, &accepted));
        if (!accepted) return Status::Ok();
        // An empty list is allowed; an empty element (a doubled, leading or
        // trailing \x02) is an error wherever it is.
        const std::string_view ids = line.substr(tab + 1);
        size_t position = 0;
        for (size_t begin = 0; !ids.empty() && begin <= ids.size(); ++position) {
          size_t end = ids.find(kIdSeparator, begin);
          if (end == std::string_view::npos) end = ids.size();
          const std::string_view text = ids.substr(begin, end - begin);
          begin = end + 1;
          int64_t id = 0;
          const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
          if (text.empty()) {
            TM_TRY(diag.problem(error(Code::kParse, dict.context(), ": empty id at position ",
                                      position, " (a doubled, leading or trailing \\x02)")));
          } else if (ec == std::errc::invalid_argument || ptr != text.data() + text.size()) {
            TM_TRY(dict.add_non_integer(cat("\"", text, "\"")));
          } else if (ec == std::errc::result_out_of_range) {
            TM_TRY(dict.add_outside_int32(text));
          } else {
            TM_TRY(dict.add_id(id));
          }
        }
        dict.end_key();
        return Status::Ok();
      });
  if (!read.ok()) return read;
  return dict.build();
}

}  // namespace treemask
