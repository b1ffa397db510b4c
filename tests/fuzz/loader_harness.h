// The part every loader fuzzer shares. One input goes through three doors:
// the C API from memory, the C API from a file (a memfd), and the internal
// loader in keep-going mode (what `treemask check` runs). They must agree:
// the same status, the same message (the file form prefixes the path), and
// the keep-going run's first problem is the error the first two stopped at.
// A trie that loads is then walked by exercise_trie.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/test_util.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/mem_file.h"
#include "fuzz/trie_checks.h"
#include "sources/diagnostics.h"
#include "trie/trie.h"

namespace fuzz {

// treemask_last_error() without its "function: " prefix.
inline std::string last_message(const char *function) {
  const std::string e = treemask_last_error();
  const std::string prefix = std::string(function) + ": ";
  FUZZ_CHECK(e.rfind(prefix, 0) == 0);
  return e.substr(prefix.size());
}

struct LoaderDoors {
  const char *memory_function;
  const char *file_function;
  // The statuses malformed input may give.
  std::initializer_list<treemask_status> expected_errors;
};

// from_memory(treemask_trie **), from_file(const char *path, treemask_trie **),
// keep_going(treemask::Diagnostics &) -> Result<Ref<Trie>>. Returns the trie
// loaded from memory (null when the input is rejected); the caller frees it.
template <class FromMemory, class FromFile, class KeepGoing>
treemask_trie *load_through_every_door(const uint8_t *data, size_t size, const LoaderDoors &doors,
                                       FromMemory &&from_memory, FromFile &&from_file,
                                       KeepGoing &&keep_going) {
  treemask_trie *trie = nullptr;
  const treemask_status status = from_memory(&trie);
  std::string message;
  if (status != TREEMASK_OK) {
    FUZZ_CHECK(trie == nullptr);
    bool expected = false;
    for (treemask_status e : doors.expected_errors) expected |= status == e;
    if (!expected) std::fprintf(stderr, "%s\n", treemask_last_error());
    FUZZ_CHECK(expected);
    message = last_message(doors.memory_function);
    FUZZ_CHECK(!message.empty());
  }

  {
    MemFile file(data, size);
    testutil::TrieHandle from_disk;
    const treemask_status file_status = from_file(file.path(), &from_disk.p);
    FUZZ_CHECK(file_status == status);
    if (status != TREEMASK_OK) {
      FUZZ_CHECK(last_message(doors.file_function) ==
                 std::string("\"") + file.path() + "\": " + message);
    } else {
      treemask_trie_stats a, b;
      a.struct_size = b.struct_size = sizeof(a);
      FUZZ_CHECK(treemask_trie_get_stats(trie, &a) == TREEMASK_OK);
      FUZZ_CHECK(treemask_trie_get_stats(from_disk.p, &b) == TREEMASK_OK);
      FUZZ_CHECK(a.n_nodes == b.n_nodes && a.n_terminals == b.n_terminals &&
                 a.n_warnings == b.n_warnings && a.bytes == b.bytes);
    }
  }

  treemask::Diagnostics diag(/*keep_going=*/true);
  auto all = keep_going(diag);
  FUZZ_CHECK(all.ok() == (status == TREEMASK_OK));
  if (!all.ok()) {
    // The C API escapes control bytes; the internal messages are raw.
    const std::string first = treemask::escape_control(
        diag.errors().empty() ? all.status().message() : diag.errors().front());
    if (first != message) {
      std::fprintf(stderr, "stop at first: %s\nkeep going:    %s\n", message.c_str(),
                   first.c_str());
    }
    FUZZ_CHECK(first == message);
  } else {
    treemask_trie_stats stats;
    stats.struct_size = sizeof(stats);
    FUZZ_CHECK(treemask_trie_get_stats(trie, &stats) == TREEMASK_OK);
    FUZZ_CHECK(all.value()->n_nodes() == stats.n_nodes);
  }
  if (trie) exercise_trie(trie, /*sound=*/true);
  return trie;
}

}  // namespace fuzz
