// The CPU's features, read once per process (CPUID) in this one place; each
// SIMD kernel picks its variant from this table on first use and keeps it
// (as simdjson picks its implementation once): the bitmask apply
// (kernels/cpu/apply.cc), the beam normalizer (kernels/cpu/beam.cc) and the
// structural validation of tries (trie/validate.cc).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

namespace treemask {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;  // from CPUID: clang's __builtin_cpu_supports does not know it
  bool avx512f = false;
};

// All false off x86-64. Thread-safe.
const CpuFeatures &cpu_features();

}  // namespace treemask
