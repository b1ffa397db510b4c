// TREEMASK_HD: a function callable on the host and on a CUDA device, for the
// few headers that nvcc compiles too (the plain rule, the trie's layout, the
// logit conversions); a plain inline function everywhere else.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#if defined(__CUDACC__)
#define TREEMASK_HD __host__ __device__ __forceinline__
#else
#define TREEMASK_HD inline
#endif
