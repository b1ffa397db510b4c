// The process-wide log sink behind treemask_set_log_callback. Silent by
// default; callers check enabled() before formatting, so a log event costs
// one atomic load when nobody listens.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace treemask::log {

// Values are the pinned TREEMASK_LOG_* levels of the C header.
enum class Level : int32_t { kInfo = 1, kWarning = 2, kError = 3 };

using Sink = void (*)(int32_t level, const char *message, void *user_data);

// Replaces the sink (nullptr: silent). When it returns, the old sink is
// never called again.
void set_sink(Sink sink, void *user_data) noexcept;

bool enabled() noexcept;

// Hands one line to the sink, if any. Never throws: a failure to format or
// an exception from the sink is dropped.
void emit(Level level, std::string_view message) noexcept;

// Formats with cat() only when a sink is installed.
template <class... Args>
void emit_cat(Level level, const Args &...args) noexcept {
  if (!enabled()) return;
  try {
    emit(level, cat(args...));
  } catch (...) {
    // Out of memory while formatting a log line: the line is lost.
  }
}

}  // namespace treemask::log
