// Runs a fuzz target's code over inputs kept on disk, without libFuzzer:
// every argument is a file or a directory of files, and each file is passed
// to LLVMFuzzerTestOneInput once. Linked with each target in every build, so
// the crash inputs the fuzzers found (regressions/<target>/) and the seeds
// stay fixed by an ordinary test. A failed check aborts, failing the test.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

namespace fs = std::filesystem;

void replay(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char **argv) {
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto &entry : fs::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto &f : files) replay(f);
      replayed += files.size();
    } else if (fs::is_regular_file(arg, ec)) {
      replay(arg);
      ++replayed;
    } else {
      std::fprintf(stderr, "error: %s is neither a file nor a directory\n", argv[i]);
      return 1;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "error: no inputs to replay\n");
    return 1;
  }
  std::printf("replayed %zu inputs, all checks passed\n", replayed);
  return 0;
}
