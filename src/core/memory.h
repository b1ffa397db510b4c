// How much memory this process can still get: what a large allocation is
// checked against before it is made, so that an impossible size fails with
// a clear error instead of being granted by the kernel's overcommit and
// ending the process later (the OOM killer).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace treemask {

struct AvailableMemory {
  uint64_t bytes = 0;      // 0: unknown (nothing could be read)
  const char *limit = "";  // which limit gave it, for messages
};

// The least of: the system's available memory (/proc/meminfo MemAvailable,
// else physical memory), the headroom under this process's memory cgroup
// (v2 memory.max - memory.current, or v1 limit - usage, for its own group
// and each ancestor) and under its address-space limit (RLIMIT_AS). Reads a
// few small files: call it before large allocations, not per step.
// Thread-safe.
AvailableMemory available_memory();

}  // namespace treemask
