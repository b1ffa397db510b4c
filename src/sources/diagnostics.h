// How loaders report problems: stop at the first error (the library's
// default), or keep going and collect every error and warning (what
// `treemask check` shows). Warnings (unknown fields, unreachable keys) never
// stop a load; they are counted, and the first few are kept as text.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace treemask {

class Diagnostics {
 public:
  explicit Diagnostics(bool keep_going = false, size_t max_kept = 200)
      : keep_going_(keep_going), max_kept_(max_kept) {}

  // Records an error. Returns it when loading stops at the first error;
  // otherwise OK, and the caller skips the bad item and goes on.
  Status problem(Status s) {
    if (first_error_.ok()) first_error_ = s;
    ++n_errors_;
    if (errors_.size() < max_kept_) errors_.push_back(s.message());
    return keep_going_ ? Status::Ok() : std::move(s);
  }

  void warning(std::string message) {
    ++n_warnings_;
    if (warnings_.size() < max_kept_) warnings_.push_back(std::move(message));
  }

  bool keep_going() const { return keep_going_; }
  uint64_t n_errors() const { return n_errors_; }
  uint64_t n_warnings() const { return n_warnings_; }
  const std::vector<std::string> &errors() const { return errors_; }
  const std::vector<std::string> &warnings() const { return warnings_; }
  // OK, or the first error recorded (what a keep-going load finally returns).
  const Status &first_error() const { return first_error_; }

 private:
  bool keep_going_;
  size_t max_kept_;
  uint64_t n_errors_ = 0;
  uint64_t n_warnings_ = 0;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  Status first_error_;
};

// Called now and then while a large input is parsed: bytes done, bytes total.
using ProgressFn = std::function<void(uint64_t, uint64_t)>;

}  // namespace treemask
