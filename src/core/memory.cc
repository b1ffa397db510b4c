// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "core/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace treemask {

namespace {

// The first line of a small file, "" when it cannot be read.
std::string first_line(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "re");
  if (!f) return {};
  char buf[4096];
  std::string line = std::fgets(buf, sizeof buf, f) ? buf : "";
  std::fclose(f);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

// A decimal number of bytes, or 0 for "max", an empty file or anything else
// (no limit known).
uint64_t number(const std::string &text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::strtoull(text.c_str(), nullptr, 10);
}

// Keeps the smaller of m and bytes (> 0; 0 means nothing was read).
void take(AvailableMemory &m, uint64_t bytes, const char *limit) {
  if (bytes > 0 && (m.bytes == 0 || bytes < m.bytes)) m = {bytes, limit};
}

// MemAvailable of /proc/meminfo (kB), 0 when absent.
uint64_t mem_available() {
  std::FILE *f = std::fopen("/proc/meminfo", "re");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

// Headroom under the memory cgroups of this process: its group and every
// ancestor, for cgroup v2 (the "0::" line of /proc/self/cgroup) and v1 (the
// "memory" controller's line). A group without a limit adds nothing.
void cgroup_headroom(AvailableMemory &m) {
  std::FILE *f = std::fopen("/proc/self/cgroup", "re");
  if (!f) return;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) {
    std::string line = buf;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string group = line.substr(b + 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    std::string base, limit_file, usage_file;
    if (v2) {
      base = "/sys/fs/cgroup";
      limit_file = "memory.max";
      usage_file = "memory.current";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      base = "/sys/fs/cgroup/memory";
      limit_file = "memory.limit_in_bytes";
      usage_file = "memory.usage_in_bytes";
    } else {
      continue;
    }
    // The group and its ancestors up to the mount's root (at most 32).
    for (int depth = 0; depth < 32; ++depth) {
      const std::string dir = base + (group == "/" ? "" : group) + "/";
      const uint64_t limit = number(first_line(dir + limit_file));
      // v1 reports "no limit" as a huge page-rounded number.
      if (limit > 0 && limit < (uint64_t{1} << 60)) {
        const uint64_t used = number(first_line(dir + usage_file));
        take(m, limit > used ? limit - used : 1, "the memory cgroup's limit");
      }
      if (group.empty() || group == "/") break;
      const size_t slash = group.rfind('/');
      group = slash == 0 || slash == std::string::npos ? "/" : group.substr(0, slash);
    }
  }
  std::fclose(f);
}

// Headroom under RLIMIT_AS: the limit less the address space in use
// (/proc/self/statm's first field, in pages).
uint64_t address_space_headroom() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 0;
  unsigned long long pages = 0;
  if (std::FILE *f = std::fopen("/proc/self/statm", "re")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t used = pages * static_cast<uint64_t>(page > 0 ? page : 4096);
  const uint64_t limit = lim.rlim_cur;
  return limit > used ? limit - used : 1;  // 1: at the limit (0 would mean unknown)
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory m;
  if (const uint64_t avail = mem_available()) {
    take(m, avail, "the system's available memory");
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      take(m, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page),
           "the machine's physical memory");
    }
  }
  cgroup_headroom(m);
  take(m, address_space_headroom(), "the address-space limit (RLIMIT_AS)");
  return m;
}

}  // namespace treemask
