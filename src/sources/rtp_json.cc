// RTP-LLM's JSON form of a prefix dictionary, parsed with simdjson On-Demand:
// keys are turned into token ids as the parser passes them, so no DOM and no
// map of key strings is ever built.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cctype>

#include "sources/json_util.h"
#include "sources/read_file.h"
#include "sources/rtp.h"
#include "sources/rtp_dict.h"

namespace treemask {

namespace {

namespace od = simdjson::ondemand;
constexpr uint64_t kProgressEveryKeys = 1u << 15;

// Where the first top-level value of text ends, if it is a balanced object
// or array followed by something other than whitespace: simdjson reports
// such trailing junk as an unbalanced document, so its errors are checked
// against this first (error path only; one pass over the text).
std::optional<size_t> trailing_content_at(std::string_view text) {
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string_view::npos || (text[i] != '{' && text[i] != '[')) return std::nullopt;
  size_t depth = 0;
  bool in_string = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      const size_t rest = text.find_first_not_of(" \t\r\n", i + 1);
      if (rest == std::string_view::npos) return std::nullopt;
      return rest;
    }
  }
  return std::nullopt;
}

struct TopLevel {
  std::optional<int64_t> start, end;
  std::optional<std::string> sep;
  bool has_prefix_dict = false;
};

class RtpJsonParser {
 public:
  RtpJsonParser(const char *buf, size_t len, size_t capacity, Diagnostics &diag)
      : buf_(buf), len_(len), capacity_(capacity), diag_(diag) {}

  Result<Ref<Trie>> run(const RtpOptions &opts) {
    // A UTF-8 byte-order mark (Windows editors write one) is skipped.
    if (std::string_view(buf_, len_).starts_with("\xEF\xBB\xBF")) {
      buf_ += 3;
      len_ -= 3;
      capacity_ -= 3;
    }
    const std::string_view text(buf_, len_);
    if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF") ||
        (len_ >= 2 && (buf_[0] == '\0' || buf_[1] == '\0'))) {
      return error(Code::kParse,
                   "the input looks like UTF-16 (a byte-order mark or NUL bytes); RTP-LLM JSON "
                   "must be UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8");
    }
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      return error(Code::kParse, "empty input: expected a JSON object with a \"prefix_dict\"");
    }
    TM_TRY(json::reserve_parser(parser_, len_));
    if (auto e = parser_.iterate(buf_, len_, capacity_).get(doc_)) {
      if (auto junk = trailing_content_at(text)) return trailing_content(*junk);
      return json::syntax_error(e, json::indexing_error_offset(e, buf_, len_));
    }
    TM_ASSIGN_OR_RETURN(TopLevel top, read_top_level());
    TM_ASSIGN_OR_RETURN(RtpConfig config, resolve_rtp_config(opts, top.start, top.end, top.sep));
    TM_ASSIGN_OR_RETURN(RtpDictCollector dict, RtpDictCollector::create(config, opts.build, diag_));
    doc_.rewind();
    TM_TRY(read_prefix_dict(dict, opts.progress));
    return dict.build();
  }

 private:
  Status trailing_content(size_t at) {
    return error(Code::kParse, "malformed JSON at byte ", at,
                 ": trailing content after the top-level object");
  }
  Status syntax(simdjson::error_code e) {
    if (auto junk = trailing_content_at({buf_, len_})) return trailing_content(*junk);
    // An unbalanced document is reported at the root; find where it goes wrong.
    const uint64_t at = e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT
                            ? json::indexing_error_offset(e, buf_, len_)
                            : json::offset_of(doc_, buf_, len_);
    return json::syntax_error(e, at);
  }
  uint64_t offset() { return json::offset_of(doc_, buf_, len_); }

  // Pass 1: the scalar fields, wherever they are; prefix_dict is skipped.
  Result<TopLevel> read_top_level() {
    TopLevel top;
    od::object root;
    if (auto e = doc_.get_object().get(root)) {
      if (json::is_syntax_error(e)) return syntax(e);
      return error(Code::kParse, "the top level must be a JSON object");
    }
    for (auto field : root) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return syntax(e);
      auto read_int = [&](std::optional<int64_t> &out) -> Status {
        int64_t v;
        if (auto e = field.value().get_int64().get(v)) {
          if (json::is_syntax_error(e)) return syntax(e);
          return error(Code::kParse, "top-level \"", key, "\" must be an integer (byte ", offset(),
                       ")");
        }
        out = v;
        return Status::Ok();
      };
      const bool seen = (key == "start_token_id" && top.start) ||
                        (key == "end_token_id" && top.end) || (key == "sep" && top.sep) ||
                        (key == "prefix_dict" && top.has_prefix_dict);
      if (seen) return error(Code::kParse, "duplicate top-level field \"", key, "\"");
      if (key == "start_token_id") {
        TM_TRY(read_int(top.start));
      } else if (key == "end_token_id") {
        TM_TRY(read_int(top.end));
      } else if (key == "sep") {
        std::string_view sep;
        if (auto e = field.value().get_string().get(sep)) {
          if (json::is_syntax_error(e)) return syntax(e);
          return error(Code::kParse, "top-level \"sep\" must be a string");
        }
        top.sep = std::string(sep);
      } else if (key == "prefix_dict") {
        top.has_prefix_dict = true;
      } else {
        diag_.warning(cat("unknown top-level field \"", key, "\" ignored"));
      }
    }
    if (!doc_.current_location().error()) return trailing_content(offset());
    if (!top.has_prefix_dict) return error(Code::kInvalidArgument, "missing \"prefix_dict\"");
    return top;
  }

  // Pass 2: every key of prefix_dict.
  Status read_prefix_dict(RtpDictCollector &dict, const ProgressFn &progress) {
    od::object root, prefix_dict;
    if (auto e = doc_.get_object().get(root)) return syntax(e);
    for (auto field : root) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return syntax(e);
      if (key != "prefix_dict") continue;
      if (auto e = field.value().get_object().get(prefix_dict)) {
        if (json::is_syntax_error(e)) return syntax(e);
        return error(Code::kParse, "\"prefix_dict\" must be an object (byte ", offset(), ")");
      }
      uint64_t n_keys = 0;
      for (auto entry : prefix_dict) {
        if (progress && ++n_keys % kProgressEveryKeys == 0) progress(offset(), len_);
        TM_TRY(read_entry(dict, entry));
      }
      return Status::Ok();
    }
    return error(Code::kInternal, "prefix_dict vanished between passes");
  }

  Status read_entry(RtpDictCollector &dict, simdjson::simdjson_result<od::field> &entry) {
    std::string_view key;
    if (auto e = entry.unescaped_key().get(key)) return syntax(e);
    bool accepted = false;
    TM_TRY(dict.begin_key(key, "prefix_dict ", &accepted));
    // The value's shape is checked under every key, also one that is
    // ignored (compatibility mode, or a bad key when the diagnostics keep
    // going): RTP-LLM's loader refuses a malformed value wherever it stands.
    od::array list;
    if (auto e = entry.value().get_array().get(list)) {
      if (json::is_syntax_error(e)) return syntax(e);
      return diag_.problem(error(Code::kParse, dict.context(),
                                 ": the value must be a list of token ids (byte ", offset(), ")"));
    }
    for (auto element : list) {
      int64_t id;
      const auto e = element.get_int64().get(id);
      if (!e) {
        if (accepted) TM_TRY(dict.add_id(id));
        continue;
      }
      if (json::is_syntax_error(e)) return syntax(e);
      std::string_view text;
      if (element.raw_json_token().get(text)) text = "?";
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
        text.remove_suffix(1);
      }
      // An integer too large for int64 (a 26-digit id) is reported by
      // simdjson as a type error; it is as much outside int32 as a 20-digit one.
      const std::string_view digits = text.substr(text.starts_with('-') ? 1 : 0);
      const bool integer_text =
          !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
      if (e == simdjson::INCORRECT_TYPE && !integer_text) {
        TM_TRY(dict.add_non_integer(cat(text, " (at byte ", offset(), ")")));
      } else if (accepted) {
        TM_TRY(dict.add_outside_int32(text));
      }
    }
    dict.end_key();
    return Status::Ok();
  }

  const char *buf_;
  size_t len_;
  size_t capacity_;
  Diagnostics &diag_;
  od::parser parser_;
  od::document doc_;
};

}  // namespace

Result<Ref<Trie>> load_rtp_json(const RtpOptions &opts, std::string_view json, Diagnostics &diag) {
  const simdjson::padded_string padded(json);
  // simdjson reports a failed copy as an empty string, not as an error.
  if (padded.size() != json.size()) {
    return error(Code::kOutOfMemory, "out of memory copying ", json.size(), " bytes of JSON");
  }
  return RtpJsonParser(padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING,
                       diag)
      .run(opts);
}

Result<Ref<Trie>> load_rtp_json_file(const RtpOptions &opts, const std::string &path,
                                     Diagnostics &diag) {
  TM_ASSIGN_OR_RETURN(FileBytes file, read_file(path, simdjson::SIMDJSON_PADDING));
  auto trie = RtpJsonParser(file.data.get(), file.size, file.capacity, diag).run(opts);
  if (!trie.ok()) {
    return Status(trie.status().code(), cat("\"", path, "\": ", trie.status().message()));
  }
  return trie;
}

}  // namespace treemask
