// Fuzz target: RTP-LLM's JSON prefix dictionary. The input is the file;
// its size picks whether RTP-LLM's default start / end ids may fill in
// missing fields, so both paths get inputs.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "fuzz/loader_harness.h"
#include "sources/rtp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = reinterpret_cast<const char *>(data);
  const treemask_trie_options o = testutil::trie_options(1 << 17);
  treemask_rtp_options rtp;
  treemask_rtp_options_init(&rtp);
  rtp.rtp_llm_defaults = size % 2 == 1;
  treemask::RtpOptions internal;
  internal.build.vocab_size = o.vocab_size;
  if (rtp.rtp_llm_defaults) {
    internal.start_token_id = treemask::kRtpDefaultStartToken;
    internal.end_token_id = treemask::kRtpDefaultEndToken;
  }
  const fuzz::LoaderDoors doors{
      "treemask_trie_from_rtp_json",
      "treemask_trie_from_rtp_json_file",
      {TREEMASK_ERR_PARSE, TREEMASK_ERR_OUT_OF_RANGE, TREEMASK_ERR_INVALID_ARGUMENT}};
  testutil::TrieHandle trie(fuzz::load_through_every_door(
      data, size, doors,
      [&](treemask_trie **out) { return treemask_trie_from_rtp_json(&o, &rtp, text, size, out); },
      [&](const char *path, treemask_trie **out) {
        return treemask_trie_from_rtp_json_file(&o, &rtp, path, out);
      },
      [&](treemask::Diagnostics &diag) {
        return treemask::load_rtp_json(internal, {text, size}, diag);
      }));
  return 0;
}
