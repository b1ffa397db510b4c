// Token paths as JSON Lines: one path per line, a bare array of token ids or
// {"tokens": [...], "label": L}. Each line is parsed on its own so errors
// name their line.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstring>
#include <limits>

#include "sources/json_util.h"
#include "sources/lines.h"
#include "sources/rtp.h"
#include "trie/annotations.h"

namespace treemask {

namespace {

namespace od = simdjson::ondemand;

class JsonlReader {
 public:
  JsonlReader(const TrieBuildOptions &opts, Diagnostics &diag) : opts_(opts), diag_(diag) {}

  Status read_line(std::string_view line, uint64_t line_no) {
    where_ = cat("line ", line_no, ": ");
    line_ = line;
    const size_t tokens_before = tokens_.size();
    int64_t label = static_cast<int64_t>(offsets_.size() - 1);
    failed_line_ = false;
    Status s = parse_line(label);  // not const: returned, so moved
    if (!s.ok() || failed_line_) {
      tokens_.resize(tokens_before);
      return s;
    }
    offsets_.push_back(tokens_.size());
    labels_.push_back(label);
    return Status::Ok();
  }

  Result<Ref<Trie>> build() {
    if (!diag_.first_error().ok()) return diag_.first_error();
    if (offsets_.size() == 1) return error(Code::kParse, "empty input: no paths");
    TM_ASSIGN_OR_RETURN(Ref<Trie> trie,
                        build_trie_from_paths(opts_, tokens_, offsets_, labels_.data()));
    if (diag_.n_warnings() > 0) {
      TM_ASSIGN_OR_RETURN(auto annotations, TrieAnnotations::make({}, diag_.n_warnings()));
      trie->set_annotations(std::move(annotations));
    }
    return trie;
  }

 private:
  // A problem with this line: recorded; the line is dropped when keeping going.
  Status bad(Code code, std::string_view what) {
    failed_line_ = true;
    return diag_.problem(error(code, where_, what));
  }
  Status syntax(simdjson::error_code e, od::document &doc) {
    failed_line_ = true;
    return diag_.problem(
        json::syntax_error(e, json::offset_of(doc, padded_.data(), line_.size()), on_line()));
  }

  Status parse_line(int64_t &label) {
    if (padded_.size() < line_.size() + simdjson::SIMDJSON_PADDING) {
      padded_.resize(line_.size() + simdjson::SIMDJSON_PADDING);
    }
    std::memcpy(padded_.data(), line_.data(), line_.size());
    std::memset(padded_.data() + line_.size(), 0, simdjson::SIMDJSON_PADDING);
    od::document doc;
    TM_TRY(json::reserve_parser(parser_, line_.size()));
    if (auto e = parser_.iterate(padded_.data(), line_.size(), padded_.size()).get(doc)) {
      failed_line_ = true;
      return diag_.problem(json::syntax_error(
          e, json::indexing_error_offset(e, padded_.data(), line_.size()), on_line()));
    }
    od::json_type type;
    if (auto e = doc.type().get(type)) return syntax(e, doc);
    if (type == od::json_type::array) {
      od::array list;
      if (auto e = doc.get_array().get(list)) return syntax(e, doc);
      TM_TRY(read_tokens(list, doc));
    } else if (type == od::json_type::object) {
      TM_TRY(read_object(doc, label));
    } else {
      return bad(Code::kParse, "expected [token ids] or {\"tokens\": [...], \"label\": L}");
    }
    if (!failed_line_ && !doc.current_location().error()) {
      return syntax(simdjson::TRAILING_CONTENT, doc);
    }
    return Status::Ok();
  }

  std::string on_line() const { return cat(" on ", where_.substr(0, where_.size() - 2)); }

  Status read_object(od::document &doc, int64_t &label) {
    od::object obj;
    if (auto e = doc.get_object().get(obj)) return syntax(e, doc);
    bool has_tokens = false, has_label = false;
    for (auto field : obj) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return syntax(e, doc);
      // A repeated field would otherwise append to the path or silently
      // keep the last label.
      if ((key == "tokens" && has_tokens) || (key == "label" && has_label)) {
        return bad(Code::kParse, cat("duplicate field \"", key, "\""));
      }
      if (key == "tokens") {
        od::array list;
        if (auto e = field.value().get_array().get(list)) {
          if (json::is_syntax_error(e)) return syntax(e, doc);
          return bad(Code::kParse, "\"tokens\" must be a list of token ids");
        }
        has_tokens = true;
        TM_TRY(read_tokens(list, doc));
      } else if (key == "label") {
        has_label = true;
        if (auto e = field.value().get_int64().get(label)) {
          if (json::is_syntax_error(e)) return syntax(e, doc);
          return bad(Code::kParse, "\"label\" must be an integer");
        }
      } else {
        diag_.warning(cat(where_, "unknown field \"", key, "\" ignored"));
      }
    }
    if (!has_tokens) return bad(Code::kParse, "missing \"tokens\"");
    return Status::Ok();
  }

  Status read_tokens(od::array &list, od::document &doc) {
    size_t position = 0;
    for (auto element : list) {
      int64_t t;
      if (auto e = element.get_int64().get(t)) {
        if (json::is_syntax_error(e)) return syntax(e, doc);
        TM_TRY(bad(Code::kParse, cat("token at position ", position, " is not an integer")));
        return Status::Ok();
      }
      if (t < 0 || t >= opts_.vocab_size) {
        TM_TRY(
            bad(Code::kOutOfRange, cat("token ", t, " at position ", position,
                                       " is out of range [0, vocab_size=", opts_.vocab_size, ")")));
        return Status::Ok();
      }
      if (std::binary_search(opts_.stop_tokens.begin(), opts_.stop_tokens.end(),
                             static_cast<int32_t>(t))) {
        TM_TRY(bad(Code::kInvalidArgument,
                   cat("stop token ", t, " at position ", position,
                       ": a stop token may not appear in a path (a path ends where its "
                       "sequence ends; the stop token is allowed there by itself)")));
        return Status::Ok();
      }
      tokens_.push_back(static_cast<int32_t>(t));
      ++position;
    }
    return Status::Ok();
  }

  TrieBuildOptions opts_;
  Diagnostics &diag_;
  od::parser parser_;
  std::vector<char> padded_;
  std::string where_;
  std::string_view line_;
  bool failed_line_ = false;
  std::vector<int32_t> tokens_;
  std::vector<size_t> offsets_{0};
  std::vector<int64_t> labels_;
};

}  // namespace

Result<Ref<Trie>> load_jsonl_paths(const TrieBuildOptions &opts_in, std::string_view data,
                                   Diagnostics &diag, const ProgressFn &progress) {
  TrieBuildOptions opts = opts_in;
  if (opts.vocab_size <= 0) {
    return error(Code::kInvalidArgument, "vocab_size must be positive, got ", opts.vocab_size);
  }
  TM_TRY(normalize_stop_tokens(opts.vocab_size, opts.stop_tokens));
  JsonlReader reader(opts, diag);
  const Status read =
      for_each_line(data, progress, [&reader](std::string_view line, uint64_t line_no) {
        return reader.read_line(line, line_no);
      });
  if (!read.ok()) return read;
  return reader.build();
}

}  // namespace treemask
