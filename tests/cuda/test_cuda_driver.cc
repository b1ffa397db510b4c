// What the library says when the CUDA runtime refuses the driver
// (cudaErrorInsufficientDriver), against the CPU emulation of the runtime,
// which can report any driver version (TREEMASK_EMULATE_DRIVER): no driver,
// a driver older than the runtime, and one new enough that was refused all
// the same. The message says which, with the versions it read; it never
// calls a new enough driver too old.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/test_util.h"
#include "treemask/treemask_cuda.h"

namespace {

int g_failures = 0;

void expect_message(const char *driver, const char *want, const char *unwanted) {
  setenv("TREEMASK_EMULATE_DRIVER", driver, 1);
  testutil::TrieHandle trie;
  if (testutil::make_trie({{1, 2}}, 8, {0}, trie) != TREEMASK_OK) {
    std::printf("cannot build a trie: %s\n", treemask_last_error());
    ++g_failures;
    return;
  }
  treemask_cuda_trie *device = nullptr;
  const treemask_status s = treemask_cuda_trie_upload(trie.p, nullptr, &device);
  const std::string message = treemask_last_error();
  const bool ok = s == TREEMASK_ERR_UNSUPPORTED && !device &&
                  message.find(want) != std::string::npos &&
                  message.find("no usable CUDA device: ") != std::string::npos &&
                  (!unwanted || message.find(unwanted) == std::string::npos);
  if (!ok) {
    ++g_failures;
    std::printf("driver %s: status %d, message \"%s\": wanted \"%s\"%s%s\n", driver, s,
                message.c_str(), want, unwanted ? " and not " : "", unwanted ? unwanted : "");
  }
  if (treemask_cuda_available()) {
    ++g_failures;
    std::printf("driver %s: treemask_cuda_available() is true\n", driver);
  }
}

}  // namespace

int main() {
  expect_message("0", "no NVIDIA driver is loaded", nullptr);
  expect_message("12080", "the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 runtime",
                 nullptr);
  expect_message("13000", "the NVIDIA driver supports CUDA 13.0, new enough for the CUDA 13.0",
                 "older");
  expect_message("13020", "supports CUDA 13.2, new enough", "older");
  unsetenv("TREEMASK_EMULATE_DRIVER");
  if (g_failures) return 1;
  std::printf("the driver's diagnosis names what it read, in all 4 cases\n");
  return 0;
}
