// The JSON entry points of a library built without simdjson (-Djson=disabled):
// each says so instead of failing obscurely. The TSV form still works.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "sources/rtp.h"

namespace treemask {

namespace {
Status no_json() {
  return error(
      Code::kUnsupported,
      "treemask was built without the JSON loader (simdjson); rebuild with -Djson=enabled");
}
}  // namespace

Result<Ref<Trie>> load_rtp_json(const RtpOptions &, std::string_view, Diagnostics &) {
  return no_json();
}
Result<Ref<Trie>> load_rtp_json_file(const RtpOptions &, const std::string &, Diagnostics &) {
  return no_json();
}
Result<Ref<Trie>> load_jsonl_paths(const TrieBuildOptions &, std::string_view, Diagnostics &,
                                   const ProgressFn &) {
  return no_json();
}

}  // namespace treemask
