// treemask demo: constrained generation over a real semantic-ID catalogue
// (MiniOneRec, Industrial_and_Scientific) with seeded random logits. Beam
// search and sampling run through the public C API as an engine would:
// fill a bitmask row, apply it, pick tokens among the allowed ones, accept.
// Every generated item is checked against the catalogue; the mask cost per
// step is printed. `./dev demo` builds and runs it.
//
// Only the public header is used, so this file can be copied into an engine.
// The catalogue format ({"<item>": ["<a_236>", "<b_231>", "<c_226>"], ...})
// is read by the small parser below; code "<L_N>" becomes token
// kBaseVocab + level * kCodebook + N, as MiniOneRec adds its codes to
// Qwen2.5's vocabulary.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "treemask/treemask.h"

namespace {

constexpr int kExitOk = 0, kExitBadInput = 1, kExitUsage = 2;

const char *const kUsage = "usage: demo [--catalogue FILE.index.json] [--seed N] [--samples N]\n";
const char *const kHelp =
    "Runs constrained generation over a semantic-ID catalogue (default: the bundled\n"
    "MiniOneRec Industrial_and_Scientific index): beam search and sampling with\n"
    "seeded random logits through the treemask C API. Prints every generated\n"
    "item, checks that it is in the catalogue, and times the mask per step.\n"
    "Exit status: 0 every item is in the catalogue, 1 otherwise or bad input, 2 usage.\n";

template <class... T>
std::string cat(const T &...parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

void print_error(const std::string &message) {
  std::fprintf(stderr, "demo: error: %s\n", message.c_str());
}

std::string with_commas(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

constexpr int32_t kBaseVocab = 151936;  // Qwen2.5's embedding rows
constexpr int32_t kCodebook = 256;
constexpr int32_t kStopToken = 151645;  // <|im_end|>
constexpr int kBeams = 4;
constexpr const char *kCatalogue =
    TREEMASK_EXAMPLES_DATA "/minionerec/Industrial_and_Scientific.index.json";

using Clock = std::chrono::steady_clock;
double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Catalogue {
  std::vector<std::string> items;  // in file order
  std::vector<int32_t> tokens;     // item i: tokens[offsets[i] .. offsets[i + 1])
  std::vector<size_t> offsets{0};
};

// The catalogue's JSON: one object of item -> array of code strings. Every
// error names the byte offset (and the item, once known).
class CatalogueParser {
 public:
  explicit CatalogueParser(std::string_view text) : s_(text) {}

  std::optional<Catalogue> parse(std::string &error) {
    Catalogue c;
    if (!expect('{', error)) return std::nullopt;
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        std::string item, code;
        if (!string(item, error) || !expect(':', error) || !expect('[', error)) return {};
        int level = 0;
        while (peek() != ']') {
          if (level > 0 && !expect(',', error)) return {};
          const size_t at = pos_;
          if (!string(code, error)) return {};
          const auto token = code_token(code, level);
          if (!token) {
            error = cat("byte ", at, ": item \"", item, "\" code ", level, " is \"", code,
                        "\", expected \"<", static_cast<char>('a' + std::min(level, 25)),
                        "_N>\" with N < ", kCodebook);
            return std::nullopt;
          }
          c.tokens.push_back(*token);
          ++level;
        }
        ++pos_;  // ]
        if (level == 0) {
          error = cat("byte ", pos_, ": item \"", item, "\" has no codes");
          return std::nullopt;
        }
        c.items.push_back(std::move(item));
        c.offsets.push_back(c.tokens.size());
        if (peek() == '}') {
          ++pos_;
          break;
        }
        if (!expect(',', error)) return std::nullopt;
      }
    }
    if (peek() != '\0') {
      error = cat("byte ", pos_, ": unexpected data after the catalogue object");
      return std::nullopt;
    }
    return c;
  }

 private:
  // The next non-space character ('\0' at the end), not consumed.
  char peek() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_])) ++pos_;
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool expect(char c, std::string &error) {
    if (peek() == c) {
      ++pos_;
      return true;
    }
    error = cat("byte ", pos_, ": expected '", c, "'");
    return false;
  }
  // A JSON string; escapes keep the escaped character (item names and codes
  // are plain ASCII in every published catalogue).
  bool string(std::string &out, std::string &error) {
    if (!expect('"', error)) return false;
    out.clear();
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) {
      error = cat("byte ", pos_, ": unterminated string");
      return false;
    }
    ++pos_;
    return true;
  }
  // "<a_236>" at level 0 -> kBaseVocab + 236.
  static std::optional<int32_t> code_token(const std::string &code, int level) {
    if (level > 25 || code.size() < 5 || code[0] != '<' || code[1] != 'a' + level ||
        code[2] != '_' || code.back() != '>') {
      return std::nullopt;
    }
    int32_t n = -1;
    const char *first = code.data() + 3, *last = code.data() + code.size() - 1;
    const auto [ptr, ec] = std::from_chars(first, last, n);
    if (ec != std::errc() || ptr != last || n < 0 || n >= kCodebook) return std::nullopt;
    return kBaseVocab + level * kCodebook + n;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string sid_text(const std::vector<int32_t> &tokens) {
  std::string out;
  for (int32_t t : tokens) {
    if (t < kBaseVocab) continue;
    const int32_t level = (t - kBaseVocab) / kCodebook, code = (t - kBaseVocab) % kCodebook;
    out += cat("<", static_cast<char>('a' + level), "_", code, ">");
  }
  return out;
}

// What one decode step costs the engine for one row.
struct MaskTimes {
  std::vector<double> fill_us, apply_us;
  void add(double fill, double apply) {
    fill_us.push_back(fill);
    apply_us.push_back(apply);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

class Demo {
 public:
  Demo(const Catalogue &cat, uint64_t seed) : catalogue_(cat), rng_(seed) {
    vocab_ = kBaseVocab + 3 * kCodebook;
    words_ = treemask_bitmask_words(vocab_);
    mask_.resize(words_);
    logits_.resize(static_cast<size_t>(vocab_));
    for (size_t i = 0; i + 1 < cat.offsets.size(); ++i) {
      known_.insert({cat.tokens.begin() + static_cast<ptrdiff_t>(cat.offsets[i]),
                     cat.tokens.begin() + static_cast<ptrdiff_t>(cat.offsets[i + 1])});
    }
  }
  ~Demo() { treemask_trie_free(trie_); }

  bool build() {
    treemask_trie_options o;
    treemask_trie_options_init(&o);
    o.vocab_size = vocab_;
    o.stop_tokens = &kStopToken;
    o.n_stop_tokens = 1;
    const auto t0 = Clock::now();
    // Labels default to the path index = the item's position in the file.
    if (treemask_trie_from_paths(&o, catalogue_.tokens.data(), catalogue_.offsets.data(),
                                 catalogue_.items.size(), nullptr, &trie_) != TREEMASK_OK) {
      print_error(treemask_last_error());
      return false;
    }
    const double ms = micros(Clock::now() - t0) / 1000;
    treemask_trie_stats s;
    s.struct_size = sizeof(s);
    if (treemask_trie_get_stats(trie_, &s) != TREEMASK_OK) return fail();
    std::printf("catalogue  %s items, %s distinct semantic IDs (3 codes of %d)\n",
                with_commas(catalogue_.items.size()).c_str(), with_commas(known_.size()).c_str(),
                kCodebook);
    std::printf("vocab      %s = Qwen2.5's %s + %d codebook tokens; stop token %d (<|im_end|>)\n",
                with_commas(static_cast<uint64_t>(vocab_)).c_str(), with_commas(kBaseVocab).c_str(),
                3 * kCodebook, kStopToken);
    std::printf("trie       %s nodes, %s terminals, %.1f bytes/edge, built in %.2f ms\n\n",
                with_commas(s.n_nodes).c_str(), with_commas(s.n_terminals).c_str(),
                double(s.bytes) / double(s.n_edges), ms);
    return true;
  }

  // A few untimed masked steps from the root first: the first one pays for
  // the mask and logits buffers' first touch and the apply kernel's choice
  // of SIMD variant (milliseconds, once per process), which is not the cost
  // of a step.
  bool warm_up() {
    treemask_matcher *m = nullptr;
    if (treemask_matcher_create(trie_, nullptr, &m) != TREEMASK_OK) return fail();
    MaskTimes discarded;
    for (int i = 0; i < 3; ++i) masked_step(m, discarded);
    treemask_matcher_free(m);
    return true;
  }

  bool beam_search() {
    if (!warm_up()) return false;
    std::printf("beam search: %d beams, random logits (after 3 untimed warm-up steps)\n", kBeams);
    struct Beam {
      treemask_matcher *m;
      std::vector<int32_t> tokens;
      double score;
    };
    std::vector<Beam> beams(1);
    if (treemask_matcher_create(trie_, nullptr, &beams[0].m) != TREEMASK_OK) return fail();
    beams[0].score = 0;
    for (int step = 1;
         std::any_of(beams.begin(), beams.end(),
                     [](const Beam &b) { return !treemask_matcher_is_terminated(b.m); });
         ++step) {
      struct Candidate {
        size_t beam;
        int32_t token;  // -1: a finished beam carried over
        double score;
      };
      std::vector<Candidate> candidates;
      MaskTimes times;
      for (size_t b = 0; b < beams.size(); ++b) {
        if (treemask_matcher_is_terminated(beams[b].m)) {
          candidates.push_back({b, -1, beams[b].score});
          continue;
        }
        const double log_z = masked_step(beams[b].m, times);
        for (int32_t t : allowed(beams[b].m)) {
          candidates.push_back({b, t, beams[b].score + logits_[static_cast<size_t>(t)] - log_z});
        }
      }
      const size_t keep = std::min<size_t>(kBeams, candidates.size());
      std::partial_sort(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(keep),
                        candidates.end(),
                        [](const Candidate &x, const Candidate &y) { return x.score > y.score; });
      std::vector<Beam> next;
      for (size_t i = 0; i < keep; ++i) {
        const Candidate &c = candidates[i];
        Beam nb{nullptr, beams[c.beam].tokens, c.score};
        // Beam reordering: a clone shares the history copy-on-write.
        if (treemask_matcher_clone(beams[c.beam].m, &nb.m) != TREEMASK_OK) return fail();
        if (c.token >= 0) {
          bool accepted = false;
          if (treemask_matcher_accept_token(nb.m, c.token, &accepted) != TREEMASK_OK || !accepted) {
            return fail();
          }
          if (c.token != kStopToken) nb.tokens.push_back(c.token);
        }
        next.push_back(std::move(nb));
      }
      for (Beam &b : beams) treemask_matcher_free(b.m);
      beams = std::move(next);
      std::printf("  step %d: %zu rows, fill %.1f us/row, apply %.1f us/row (median)\n", step,
                  times.fill_us.size(), median(times.fill_us), median(times.apply_us));
      all_times_.fill_us.insert(all_times_.fill_us.end(), times.fill_us.begin(),
                                times.fill_us.end());
      all_times_.apply_us.insert(all_times_.apply_us.end(), times.apply_us.begin(),
                                 times.apply_us.end());
    }
    for (size_t i = 0; i < beams.size(); ++i) {
      char score[32];
      std::snprintf(score, sizeof(score), "log p %.2f", beams[i].score);
      report(cat("beam ", i + 1), beams[i].m, beams[i].tokens, score);
      treemask_matcher_free(beams[i].m);
    }
    return true;
  }

  bool sample(int n) {
    std::printf("\nsampling: %d sequences, random logits\n", n);
    for (int i = 0; i < n; ++i) {
      treemask_matcher *m = nullptr;
      if (treemask_matcher_create(trie_, nullptr, &m) != TREEMASK_OK) return fail();
      std::vector<int32_t> tokens;
      MaskTimes times;
      while (!treemask_matcher_is_terminated(m)) {
        const double log_z = masked_step(m, times);
        // Inverse-CDF sampling over the allowed tokens (the rest are -inf).
        double u = std::uniform_real_distribution<double>(0, 1)(rng_), acc = 0;
        const auto options = allowed(m);
        int32_t pick = options.back();
        for (int32_t t : options) {
          acc += std::exp(logits_[static_cast<size_t>(t)] - log_z);
          if (u <= acc) {
            pick = t;
            break;
          }
        }
        bool accepted = false;
        if (treemask_matcher_accept_token(m, pick, &accepted) != TREEMASK_OK || !accepted) {
          return fail();
        }
        if (pick != kStopToken) tokens.push_back(pick);
      }
      char fill[32];
      std::snprintf(fill, sizeof(fill), "fill %.1f us/step", median(times.fill_us));
      report(cat("sample ", i + 1), m, tokens, fill);
      all_times_.fill_us.insert(all_times_.fill_us.end(), times.fill_us.begin(),
                                times.fill_us.end());
      all_times_.apply_us.insert(all_times_.apply_us.end(), times.apply_us.begin(),
                                 times.apply_us.end());
      treemask_matcher_free(m);
    }
    return true;
  }

  int summary() const {
    std::printf(
        "\nmask per step (%zu rows of %s tokens): fill median %.1f us, apply median %.1f "
        "us\n",
        all_times_.fill_us.size(), with_commas(static_cast<uint64_t>(vocab_)).c_str(),
        median(all_times_.fill_us), median(all_times_.apply_us));
    if (missing_ > 0) {
      std::printf("FAILED: %d generated item(s) are not in the catalogue\n", missing_);
      return kExitBadInput;
    }
    std::printf("all %d generated items are in the catalogue\n", generated_);
    return kExitOk;
  }

 private:
  bool fail() {
    print_error(cat("unexpected failure: ", treemask_last_error()));
    return false;
  }

  std::vector<int32_t> allowed(treemask_matcher *m) {
    std::vector<int32_t> out(treemask_matcher_next_tokens(m, nullptr, 0));
    treemask_matcher_next_tokens(m, out.data(), out.size());
    return out;
  }

  // Draws logits, fills and applies the mask as an engine would, and returns
  // log(sum(exp(logit))) over the unmasked tokens.
  double masked_step(treemask_matcher *m, MaskTimes &times) {
    std::normal_distribution<float> normal(0.f, 3.f);
    for (float &x : logits_) x = normal(rng_);
    const auto t0 = Clock::now();
    bool need_apply = true;
    if (treemask_matcher_fill_next_token_bitmask(m, mask_.data(), words_, nullptr, &need_apply) !=
        TREEMASK_OK) {
      print_error(cat("fill failed: ", treemask_last_error()));
      std::exit(1);
    }
    const auto t1 = Clock::now();
    if (need_apply) apply_mask();
    const auto t2 = Clock::now();
    times.add(micros(t1 - t0), micros(t2 - t1));
    double max = -std::numeric_limits<double>::infinity(), sum = 0;
    for (float x : logits_) max = std::max<double>(max, x);
    for (float x : logits_) sum += std::exp(double(x) - max);
    return max + std::log(sum);
  }

  // The CPU masking an engine does with the row: the library's apply kernel
  // (-inf where the bit is 0).
  void apply_mask() {
    const size_t width = logits_.size();
    if (treemask_cpu_apply_token_bitmask(logits_.data(), TREEMASK_F32, 1, width, width,
                                         mask_.data(), words_, 1, vocab_, nullptr,
                                         0) != TREEMASK_OK) {
      print_error(cat("apply failed: ", treemask_last_error()));
      std::exit(1);
    }
  }

  void report(const std::string &who, treemask_matcher *m, const std::vector<int32_t> &tokens,
              const std::string &extra) {
    std::vector<int64_t> labels(treemask_matcher_label_ids(m, nullptr, 0));
    treemask_matcher_label_ids(m, labels.data(), labels.size());
    std::string items;
    for (int64_t l : labels) {
      items += cat(items.empty() ? "" : ",", catalogue_.items[static_cast<size_t>(l)]);
    }
    const bool in_catalogue = known_.count(tokens) > 0;
    ++generated_;
    missing_ += in_catalogue ? 0 : 1;
    std::printf("  %-9s %-24s item %-12s %-16s in catalogue: %s\n", who.c_str(),
                sid_text(tokens).c_str(), items.c_str(), extra.c_str(),
                in_catalogue ? "yes" : "NO");
  }

  const Catalogue &catalogue_;
  std::mt19937_64 rng_;
  std::set<std::vector<int32_t>> known_;
  int32_t vocab_ = 0;
  size_t words_ = 0;
  std::vector<int32_t> mask_;
  std::vector<float> logits_;
  treemask_trie *trie_ = nullptr;
  MaskTimes all_times_;
  int generated_ = 0, missing_ = 0;
};

}  // namespace

int main(int argc, char **argv) {
  std::string catalogue = kCatalogue;
  uint64_t seed = 42;
  int samples = 8;
  // Whole decimal numbers only: strtoull would read "x" as 0 and "-1" as 2^64 - 1.
  auto parse = [](const char *flag, const char *text, auto &out, auto max) {
    const size_t n = std::strlen(text);
    const auto [ptr, ec] = std::from_chars(text, text + n, out);
    bool negative = false;
    if constexpr (std::is_signed_v<std::decay_t<decltype(out)>>) negative = out < 0;
    if (ec != std::errc() || ptr != text + n || negative || out > max) {
      print_error(cat("--", flag, " expects a whole number in [0, ", max, "], got \"", text, "\""));
      std::fputs(kUsage, stderr);
      return false;
    }
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n%s", kUsage, kHelp);
      return kExitOk;
    }
    const bool takes_value = arg == "--catalogue" || arg == "--seed" || arg == "--samples";
    if (!takes_value || i + 1 >= argc) {
      print_error(takes_value ? cat(arg, " needs a value") : cat("unknown argument \"", arg, "\""));
      std::fputs(kUsage, stderr);
      return kExitUsage;
    }
    const char *value = argv[++i];
    if (arg == "--catalogue") catalogue = value;
    if (arg == "--seed" && !parse("seed", value, seed, std::numeric_limits<uint64_t>::max())) {
      return kExitUsage;
    }
    if (arg == "--samples" && !parse("samples", value, samples, 1000000)) return kExitUsage;
  }
  std::printf("treemask demo: constrained generation over a real semantic-ID catalogue\n");
  std::printf("data       %s (seed %llu)\n", catalogue.c_str(),
              static_cast<unsigned long long>(seed));
  std::ifstream in(catalogue, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    print_error(cat("cannot read \"", catalogue, "\": ", std::strerror(errno)));
    return kExitBadInput;
  }
  std::string error;
  const std::string json = text.str();
  auto parsed = CatalogueParser(json).parse(error);
  if (!parsed) {
    print_error(cat("\"", catalogue, "\": ", error));
    return kExitBadInput;
  }
  Demo demo(*parsed, seed);
  if (!demo.build() || !demo.beam_search() || !demo.sample(samples)) return kExitBadInput;
  return demo.summary();
}
