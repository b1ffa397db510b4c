// A test tool for the xgrammar oracle (tests/python/test_strings_xgrammar.py):
// builds a string-set trie over a vocabulary and replays token sequences
// through it, writing the row at every state and what each token did, so
// that Python can compare them with xgrammar's without a C API.
//
//   strings_replay VOCAB STRINGS PREFIX_HEX STOPS SEQUENCES OUT
//
// VOCAB: "TMVOCAB1", vocab_size u32, n u32, flags[n], offsets[n + 1] u64,
// bytes. STRINGS: n u32, then per string len u32 and its bytes. PREFIX_HEX:
// the prefix's bytes in hex ("-" for none). STOPS: comma-separated ids.
// SEQUENCES: n u32, then per sequence len u32 and its int32 tokens.
// OUT, per sequence: per token, the row of the state before it (row words
// u32 each), then what the token did (u8: 0 advanced, 1 terminated,
// 2 rejected); after the last token, if the sequence did not end, the row
// of the state reached. A rejected token ends the sequence. All little-endian.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "strings/string_trie.h"
#include "strings/vocab.h"

namespace {

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "strings_replay: %s\n", what.c_str());
  std::exit(2);
}

std::string slurp(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Reader {
  const std::string &data;
  size_t at = 0;
  template <class T>
  T get() {
    if (at + sizeof(T) > data.size()) fail("truncated input");
    T v;
    std::memcpy(&v, data.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string bytes(size_t n) {
    if (at + n > data.size()) fail("truncated input");
    at += n;
    return data.substr(at - n, n);
  }
};

}  // namespace

int main(int argc, char **argv) {
  if (argc != 7) fail("usage: strings_replay VOCAB STRINGS PREFIX_HEX STOPS SEQUENCES OUT");
  const std::string vocab_file = slurp(argv[1]);
  Reader v{vocab_file};
  if (v.bytes(8) != "TMVOCAB1") fail("not a vocabulary dump");
  const auto vocab_size = v.get<uint32_t>();
  const auto n_tokens = v.get<uint32_t>();
  const std::string flags = v.bytes(n_tokens);
  std::vector<uint64_t> offsets(n_tokens + size_t{1});
  for (auto &o : offsets) o = v.get<uint64_t>();
  const std::string token_bytes = v.bytes(offsets.back());
  treemask::VocabSpec spec;
  spec.bytes = {reinterpret_cast<const uint8_t *>(token_bytes.data()), token_bytes.size()};
  spec.offsets = offsets;
  spec.flags = {reinterpret_cast<const uint8_t *>(flags.data()), flags.size()};
  spec.vocab_size = static_cast<int32_t>(vocab_size);
  auto vocab = treemask::build_vocab(spec);
  if (!vocab.ok()) fail(vocab.status().message());

  const std::string strings_file = slurp(argv[2]);
  Reader s{strings_file};
  std::string all;
  std::vector<uint64_t> string_offsets{0};
  for (uint32_t n = s.get<uint32_t>(); n > 0; --n) {
    all += s.bytes(s.get<uint32_t>());
    string_offsets.push_back(all.size());
  }
  treemask::StringTrieOptions opts;
  const std::string hex = argv[3];
  for (size_t i = 0; hex != "-" && i + 1 < hex.size(); i += 2) {
    opts.prefix.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  std::stringstream stops(argv[4]);
  for (std::string id; std::getline(stops, id, ',');) opts.stop_tokens.push_back(std::stoi(id));
  auto trie = treemask::build_string_trie(
      vocab.take_value(), opts,
      {{reinterpret_cast<const uint8_t *>(all.data()), all.size()}, string_offsets});
  if (!trie.ok()) fail(trie.status().message());
  const auto t = trie.take_value();

  const std::string seq_file = slurp(argv[5]);
  Reader q{seq_file};
  std::ofstream out(argv[6], std::ios::binary);
  std::vector<uint32_t> row(t->row_words());
  const auto write_row = [&](uint32_t node) {
    t->write_allowed_row(node, t->stop_tokens(), row.data(), row.size());
    out.write(reinterpret_cast<const char *>(row.data()),
              static_cast<std::streamsize>(row.size() * 4));
  };
  for (uint32_t n = q.get<uint32_t>(); n > 0; --n) {
    uint32_t node = 0;
    bool ended = false;
    const auto len = q.get<uint32_t>();
    for (uint32_t i = 0; i < len; ++i) {
      const auto token = q.get<int32_t>();
      if (ended) continue;
      write_row(node);
      const treemask::TokenStep step = t->step_token(node, token);
      const auto kind = static_cast<uint8_t>(step.kind == treemask::TokenStep::kAdvanced     ? 0
                                             : step.kind == treemask::TokenStep::kTerminated ? 1
                                                                                             : 2);
      out.put(static_cast<char>(kind));
      if (kind == 0) node = step.node;
      ended = kind != 0;
    }
    if (!ended) write_row(node);
  }
  return out ? 0 : 2;
}
