// Speculative decoding: accepting a run of draft tokens in one call, and the
// masks of every position of a draft (a chain or a tree) without changing the
// matcher. The idea follows xgrammar/SGLang's draft-tree traversal: the row
// of a draft node is the mask of the state reached by the path to it, and a
// node whose token its parent's row forbids gets an all-zero row (it can
// never be verified, and neither can anything below it).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstring>

#include "matcher/matcher.h"

namespace treemask {

Status Matcher::accept_tokens(std::span<const int32_t> tokens, size_t *n_accepted,
                              std::string *why) {
  *n_accepted = 0;
  if (phase() == Phase::kFailed) return failed_state_error();
  for (int32_t token : tokens) {
    // Later tokens could only be stop or pad tokens that change nothing;
    // stopping here keeps *n_accepted equal to the accepts rollback can undo.
    if (is_terminated()) break;
    bool accepted = false;
    TM_TRY(accept(token, &accepted, why, false));
    if (!accepted) break;
    ++*n_accepted;
  }
  return Status::Ok();
}

Status Matcher::fill_draft(std::span<const int32_t> tokens, const int32_t *parents, uint32_t *rows,
                           size_t bitmask_row_words, size_t *n_valid) const {
  const size_t words = trie_->row_words();
  if (bitmask_row_words < words) {
    return error(Code::kBufferTooSmall, "bitmask_row_words is ", bitmask_row_words, ", vocab_size ",
                 trie_->vocab_size(), " needs ", words);
  }
  if (phase() == Phase::kFailed) return failed_state_error();
  const size_t n = tokens.size();
  for (size_t i = 0; parents && i < n; ++i) {
    if (parents[i] < -1 || parents[i] >= static_cast<int64_t>(i)) {
      return error(Code::kInvalidArgument, "parents[", i, "] = ", parents[i],
                   "; a draft node's parent must be -1 (the current state) or an earlier node");
    }
  }
  // states[k]: the state of row k (a copy of the value, stepped), or empty
  // when row k cannot be reached.
  auto write = [&](const ModeState &s, uint32_t *row) {
    write_row(*trie_, allowed(s, std::nullopt), stop_tokens(), row);
    std::memset(row + words, 0, (bitmask_row_words - words) * sizeof(uint32_t));
  };
  std::vector<std::optional<ModeState>> states(n + 1);
  states[0].emplace(state_);
  write(*states[0], rows);
  size_t valid = 1;
  for (size_t i = 0; i < n; ++i) {
    const size_t from = parents ? static_cast<size_t>(parents[i] + 1) : i;
    uint32_t *row = rows + (i + 1) * bitmask_row_words;
    std::memset(row, 0, bitmask_row_words * sizeof(uint32_t));
    if (!states[from]) continue;
    ModeState next = *states[from];
    TM_ASSIGN_OR_RETURN(const Step r, step(next, tokens[i]));
    if (r == Step::kRejected) continue;
    write(next, row);
    ++valid;
    states[i + 1].emplace(std::move(next));
    // A chain never looks back: keep only the newest state.
    if (!parents) states[i].reset();
  }
  if (n_valid) *n_valid = valid;
  return Status::Ok();
}

Status Matcher::accept_forced(int32_t *out, size_t cap, size_t *n_accepted) {
  *n_accepted = 0;
  if (phase() == Phase::kFailed) return failed_state_error();
  std::vector<int32_t> chain(forced_tokens(nullptr, 0));
  forced_tokens(chain.data(), chain.size());
  for (int32_t token : chain) {
    bool accepted = false;
    std::string why;
    TM_TRY(accept(token, &accepted, &why, true));
    if (!accepted) return error(Code::kInternal, "a forced token was rejected: ", why);
    if (*n_accepted < cap) out[*n_accepted] = token;
    ++*n_accepted;
  }
  return Status::Ok();
}

}  // namespace treemask
