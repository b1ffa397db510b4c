// The check of a failure policy value (TREEMASK_FAILURE_*), once for every
// entry point that takes one: the matcher, the state arrays and their CUDA
// twins.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "core/status.h"
#include "rules/plain_rules.h"

namespace treemask {

inline Status check_failure_policy(int32_t policy) {
  if (policy >= kPolicyReject && policy <= kPolicyStickyError) return Status::Ok();
  return error(Code::kInvalidArgument, "unknown failure_policy ", policy,
               " (expected 0 = REJECT, 1 = FAIL_CLOSED, 2 = STICKY_ERROR)");
}

}  // namespace treemask
