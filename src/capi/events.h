// Log events of the C API's trie sources (see "Logging" in treemask.h):
// what was loaded or saved, and the problems a loader tolerated.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "sources/diagnostics.h"
#include "trie/trie.h"

namespace treemask::capi {

// "<verb> <source>: N paths, M nodes, X bytes" at INFO.
void log_trie_event(std::string_view verb, std::string_view source, const Trie &trie) noexcept;

// Each kept warning of diag as "<source>: <warning>" at WARNING, then one
// line counting those not kept.
void log_warnings(std::string_view source, const Diagnostics &diag) noexcept;

}  // namespace treemask::capi
