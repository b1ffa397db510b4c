// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "sources/rtp_dict.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "trie/annotations.h"
#include "trie/bfs_builder.h"

namespace treemask {

namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

Status pick_value(const char *field, std::optional<int64_t> from_file, std::optional<int32_t> given,
                  bool must_match, int32_t default_hint, int32_t &out) {
  if (from_file) {
    if (*from_file < kInt32Min || *from_file > kInt32Max) {
      return error(Code::kOutOfRange, "\"", field, "\" ", *from_file, " is outside int32");
    }
    if (given && must_match && *given != *from_file) {
      return error(Code::kInvalidArgument, "\"", field, "\" is ", *from_file, " in the input but ",
                   *given, " was given");
    }
    out = static_cast<int32_t>(*from_file);
    return Status::Ok();
  }
  if (!given) {
    return error(Code::kInvalidArgument, "missing top-level field \"", field,
                 "\" (give it in the input, or opt in to RTP-LLM's default ", default_hint, ")");
  }
  out = *given;
  return Status::Ok();
}

}  // namespace

Result<RtpConfig> resolve_rtp_config(const RtpOptions &opts, std::optional<int64_t> file_start,
                                     std::optional<int64_t> file_end,
                                     std::optional<std::string_view> file_sep) {
  RtpConfig c;
  TM_TRY(pick_value("start_token_id", file_start, opts.start_token_id, opts.values_must_match,
                    kRtpDefaultStartToken, c.start_token_id));
  TM_TRY(pick_value("end_token_id", file_end, opts.end_token_id, opts.values_must_match,
                    kRtpDefaultEndToken, c.end_token_id));
  if (file_sep && opts.sep && opts.values_must_match && *opts.sep != *file_sep) {
    return error(Code::kInvalidArgument, "\"sep\" is \"", *file_sep, "\" in the input but \"",
                 *opts.sep, "\" was given");
  }
  c.sep = file_sep ? std::string(*file_sep) : opts.sep ? *opts.sep : std::string(kRtpDefaultSep);
  c.compat = opts.compat;
  if (c.sep.empty()) return error(Code::kInvalidArgument, "sep must not be empty");
  // RTP-LLM's own fixtures use "-"; its keys then hold no negative ids, and
  // compatibility mode reads them as it does.
  if (c.compat && c.sep == "-") return c;
  if (c.sep.find_first_of("0123456789-") != std::string::npos) {
    return error(Code::kInvalidArgument, "sep \"", c.sep,
                 "\" contains a digit or '-', which makes keys ambiguous");
  }
  return c;
}

Result<RtpDictCollector> RtpDictCollector::create(const RtpConfig &config,
                                                  const TrieBuildOptions &build,
                                                  Diagnostics &diag) {
  RtpDictCollector c(config, build, diag);
  if (build.vocab_size <= 0) {
    return error(Code::kInvalidArgument, "vocab_size must be positive, got ", build.vocab_size);
  }
  if (config.end_token_id < 0 || config.end_token_id >= build.vocab_size) {
    return error(Code::kOutOfRange, "end_token_id ", config.end_token_id,
                 " is out of range [0, vocab_size=", build.vocab_size, ")");
  }
  if (c.build_.stop_tokens.empty()) c.build_.stop_tokens.push_back(config.end_token_id);
  TM_TRY(normalize_stop_tokens(build.vocab_size, c.build_.stop_tokens));
  c.build_.no_labels = true;
  c.start_text_ = std::to_string(config.start_token_id);
  return c;
}

std::string RtpDictCollector::context() const { return cat(where_, "key \"", key_, "\""); }

Status RtpDictCollector::begin_key(std::string_view key, std::string_view where, bool *accepted) {
  *accepted = false;
  in_entry_ = false;
  where_.assign(where);
  key_.assign(key);
  const std::string_view sep = config_.sep;
  const size_t tokens_before = key_tokens_.size();
  auto reject = [&](Code code, const auto &...what) {
    key_tokens_.resize(tokens_before);
    return diag_->problem(error(code, context(), ": ", what...));
  };
  if (!key.starts_with(start_text_) ||
      (key.size() > start_text_.size() && !key.substr(start_text_.size()).starts_with(sep))) {
    if (config_.compat) {
      // RTP-LLM only ever looks keys up by start_token_id + generated ids.
      diag_->warning(cat(context(), " ignored: it does not start with start_token_id ",
                         config_.start_token_id, " followed by sep \"", sep,
                         "\" (RTP-LLM compatibility)"));
      return Status::Ok();
    }
    return reject(Code::kInvalidArgument, "does not start with start_token_id ",
                  config_.start_token_id, " followed by sep \"", sep, "\"");
  }
  for (size_t pos = start_text_.size(); pos < key.size();) {
    pos += sep.size();
    // Fast path: a canonical decimal id followed by sep or the end. sep has
    // no digits, so the digit run is the whole part.
    const size_t begin = pos;
    int64_t value = 0;
    while (pos < key.size() && pos - begin < 11 && key[pos] >= '0' && key[pos] <= '9') {
      value = value * 10 + (key[pos++] - '0');
    }
    const bool at_boundary = pos == key.size() || key.compare(pos, sep.size(), sep) == 0;
    const bool canonical = pos > begin && (key[begin] != '0' || pos - begin == 1);
    if (at_boundary && canonical && value < build_.vocab_size) {
      key_tokens_.push_back(static_cast<int32_t>(value));
      continue;
    }
    size_t end = key.find(sep, begin);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view part = key.substr(begin, end - begin);
    if (part.empty()) return reject(Code::kParse, "empty id between separators");
    const bool negative = part[0] == '-';
    const std::string_view digits = part.substr(negative ? 1 : 0);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return reject(Code::kParse, "\"", part, "\" is not an integer");
    }
    if (digits.size() > 1 && digits[0] == '0') {
      return reject(Code::kParse, "id \"", part,
                    "\" has leading zeros; RTP-LLM compares keys as text, so this key could "
                    "never match");
    }
    if (digits.size() > 10 ||
        std::from_chars(digits.data(), digits.data() + digits.size(), value).ec != std::errc() ||
        value > kInt32Max + (negative ? 1 : 0)) {
      return reject(Code::kOutOfRange, "id ", part, " is outside int32");
    }
    return reject(Code::kOutOfRange, "id ", part,
                  " is out of range [0, vocab_size=", build_.vocab_size, ")");
  }
  in_entry_ = true;
  saw_end_ = false;
  *accepted = true;
  return Status::Ok();
}

Status RtpDictCollector::add_id(int64_t id) {
  if (id < kInt32Min || id > kInt32Max) return add_outside_int32(std::to_string(id));
  if (id == config_.end_token_id) {
    saw_end_ = true;
    return Status::Ok();
  }
  if (id < 0 && config_.compat) {
    diag_->warning(cat(context(), ": negative id ", id, " skipped (RTP-LLM compatibility)"));
    return Status::Ok();
  }
  if (id < 0 || id >= build_.vocab_size) {
    return diag_->problem(error(Code::kOutOfRange, context(), ": id ", id,
                                " is out of range [0, vocab_size=", build_.vocab_size, ")"));
  }
  const auto &stops = build_.stop_tokens;
  if (std::binary_search(stops.begin(), stops.end(), static_cast<int32_t>(id))) {
    return diag_->problem(error(Code::kInvalidArgument, context(), ": id ", id,
                                " is a stop token; only end_token_id ", config_.end_token_id,
                                " may end a sequence inside a list"));
  }
  ids_.push_back(static_cast<int32_t>(id));
  return Status::Ok();
}

Status RtpDictCollector::add_outside_int32(std::string_view text) {
  if (config_.compat) {
    diag_->warning(
        cat(context(), ": id ", text, " is outside int32, skipped (RTP-LLM compatibility)"));
    return Status::Ok();
  }
  return diag_->problem(error(Code::kOutOfRange, context(), ": id ", text, " is outside int32"));
}

Status RtpDictCollector::add_non_integer(std::string_view text) {
  return diag_->problem(
      error(Code::kParse, context(), ": list element ", text, " is not an integer token id"));
}

void RtpDictCollector::end_key() {
  if (!in_entry_) return;
  in_entry_ = false;
  const auto begin = ids_.begin() + static_cast<ptrdiff_t>(id_offsets_.back());
  std::sort(begin, ids_.end());
  ids_.erase(std::unique(begin, ids_.end()), ids_.end());
  // An empty list allows only end_token_id: a terminal leaf, like a missing key.
  terminal_.push_back(saw_end_ || begin == ids_.end());
  key_offsets_.push_back(key_tokens_.size());
  id_offsets_.push_back(ids_.size());
}

std::string RtpDictCollector::key_text(uint32_t entry) const {
  std::string out = start_text_;
  for (int32_t t : key_of(entry)) out += cat(config_.sep, t);
  return out;
}

Result<Ref<Trie>> RtpDictCollector::build() {
  const auto n_entries = static_cast<uint32_t>(terminal_.size());
  // Entries by key length, each level sorted by key: the nodes of one trie
  // level are in the same (lexicographic) order, so a merge finds each
  // child's key.
  std::vector<std::vector<uint32_t>> levels;
  for (uint32_t e = 0; e < n_entries; ++e) {
    const size_t len = key_of(e).size();
    if (levels.size() <= len) levels.resize(len + 1);
    levels[len].push_back(e);
  }
  auto key_less = [this](uint32_t a, uint32_t b) {
    const auto ka = key_of(a), kb = key_of(b);
    return std::lexicographical_compare(ka.begin(), ka.end(), kb.begin(), kb.end());
  };
  for (auto &level : levels) {
    if (!std::is_sorted(level.begin(), level.end(), key_less)) {
      std::stable_sort(level.begin(), level.end(), key_less);
    }
    size_t kept = 0;
    for (size_t i = 0; i < level.size(); ++i) {
      if (kept > 0 && !key_less(level[kept - 1], level[i])) {
        TM_TRY(diag_->problem(
            error(Code::kInvalidArgument, "duplicate key \"", key_text(level[i]), "\"")));
        continue;  // keep-going: the first occurrence wins
      }
      level[kept++] = level[i];
    }
    level.resize(kept);
  }
  if (levels.empty() || levels[0].empty()) {
    diag_->warning(cat("no root key \"", start_text_,
                       "\": only end_token_id is allowed, the trie holds just the empty sequence"));
  }

  TM_ASSIGN_OR_RETURN(BfsTrieBuilder builder, BfsTrieBuilder::create(build_));
  std::vector<uint8_t> reached(n_entries, 0);
  constexpr int64_t kLeaf = -1;  // a node whose key is missing
  std::vector<int64_t> level_nodes{levels.empty() || levels[0].empty() ? kLeaf : levels[0][0]};
  std::vector<int64_t> next_nodes;
  if (level_nodes[0] != kLeaf) reached[level_nodes[0]] = 1;
  for (size_t depth = 0; !level_nodes.empty(); ++depth) {
    static const std::vector<uint32_t> kNoKeys;
    const auto &keys = depth + 1 < levels.size() ? levels[depth + 1] : kNoKeys;
    size_t j = 0;
    next_nodes.clear();
    for (const int64_t node : level_nodes) {
      if (node == kLeaf) {
        TM_TRY(builder.add_node({}, true));
        continue;
      }
      const auto e = static_cast<uint32_t>(node);
      const auto path = key_of(e);
      const auto ids = ids_of(e);
      TM_TRY(builder.add_node(ids, terminal_[e]));
      // Orders a key of length depth + 1 against path + [t].
      auto compare = [&](uint32_t key, int32_t t) {
        const auto k = key_of(key);
        for (size_t i = 0; i < depth; ++i) {
          if (k[i] != path[i]) return k[i] < path[i] ? -1 : 1;
        }
        return k[depth] < t ? -1 : k[depth] > t ? 1 : 0;
      };
      for (const int32_t t : ids) {
        while (j < keys.size() && compare(keys[j], t) < 0) ++j;
        if (j < keys.size() && compare(keys[j], t) == 0) {
          reached[keys[j]] = 1;
          next_nodes.push_back(keys[j++]);
        } else {
          next_nodes.push_back(kLeaf);
        }
      }
    }
    level_nodes.swap(next_nodes);
  }
  for (const auto &level : levels) {
    for (const uint32_t e : level) {
      if (reached[e]) continue;
      const auto key = key_of(e);
      const auto end_at = std::find(key.begin(), key.end(), config_.end_token_id);
      if (end_at != key.end()) {
        diag_->warning(cat("key \"", key_text(e), "\" is unreachable from the root \"", start_text_,
                           "\": its id ", config_.end_token_id,
                           " is end_token_id, which ends the sequence (no key after it is "
                           "ever looked up)"));
      } else {
        diag_->warning(cat("key \"", key_text(e), "\" is unreachable from the root \"", start_text_,
                           "\" (a shorter key is missing or does not list the id)"));
      }
    }
  }
  if (!diag_->first_error().ok()) return diag_->first_error();
  TM_ASSIGN_OR_RETURN(Ref<Trie> trie, builder.finish());
  if (diag_->n_warnings() > 0) {
    TM_ASSIGN_OR_RETURN(auto annotations, TrieAnnotations::make({}, diag_->n_warnings()));
    trie->set_annotations(std::move(annotations));
  }
  return trie;
}

}  // namespace treemask
