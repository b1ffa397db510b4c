// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "core/log.h"

#include <atomic>
#include <mutex>

namespace treemask::log {

namespace {

// The sink is called with the lock held: set_sink then cannot return while
// the old sink still runs, so its user_data may be freed right after. The
// mutex is recursive because a sink may call treemask (and so log, or even
// replace itself) on the same thread.
struct SinkSlot {
  std::recursive_mutex mu;
  Sink sink = nullptr;
  void *user_data = nullptr;
};

SinkSlot &slot() {
  static SinkSlot s;  // constructed on first use, never before main's callers
  return s;
}

std::atomic<bool> g_enabled{false};

}  // namespace

void set_sink(Sink sink, void *user_data) noexcept {
  SinkSlot &s = slot();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  s.sink = sink;
  s.user_data = user_data;
  g_enabled.store(sink != nullptr, std::memory_order_release);
}

bool enabled() noexcept { return g_enabled.load(std::memory_order_acquire); }

void emit(Level level, std::string_view message) noexcept {
  if (!enabled()) return;
  try {
    // The sink gets a NUL-terminated copy in which quoted input cannot end
    // the string early or break the line.
    const std::string line = escape_control(message);
    SinkSlot &s = slot();
    std::lock_guard<std::recursive_mutex> lock(s.mu);
    if (s.sink) s.sink(static_cast<int32_t>(level), line.c_str(), s.user_data);
  } catch (...) {
    // A sink that throws, or no memory for the copy: the line is lost.
  }
}

}  // namespace treemask::log
