// The beam step kernels, built by the host compiler for the CPU emulation.
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/beam_step.cu"
