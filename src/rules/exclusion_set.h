// Exclusions: label ids a matcher must not produce (out-of-stock items,
// items already shown), applied without rebuilding the trie. An ExclusionSet
// is immutable and reference counted, so one set serves many matchers and
// threads; each matcher may add its own bans and an allow-subset on top
// (make_label_filter). Both keep the no-dead-end guarantee: a prefix whose
// every label is excluded is never offered (label_view.h).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/refcount.h"
#include "core/status.h"
#include "rules/label_view.h"
#include "trie/trie.h"

namespace treemask {

class ExclusionSet final : public RefCounted {
 public:
  // label_ids: the keys to ban (label ids, or terminal node ids for a trie
  // without labels). Ids that no path carries are ignored, so one catalogue
  // wide list serves every trie.
  static Result<Ref<ExclusionSet>> create(Ref<const Trie> trie, std::span<const int64_t> label_ids);

  const Trie &trie() const { return *trie_; }
  // Terminal nodes that carry a banned key, ascending.
  const std::vector<uint32_t> &terminals() const { return terminals_; }
  // The filter that blocks these terminals for matchers in the given mode;
  // built on first use, thread-safely.
  Result<std::shared_ptr<const LabelFilter>> filter(bool leaves_only) const;

 private:
  ExclusionSet(Ref<const Trie> trie, std::vector<uint32_t> terminals)
      : trie_(std::move(trie)), terminals_(std::move(terminals)) {}

  Ref<const Trie> trie_;
  std::vector<uint32_t> terminals_;
  struct Lazy {
    std::once_flag once;
    std::shared_ptr<const LabelFilter> filter;
  };
  mutable Lazy lazy_[2];
};

// The filter of one matcher: `shared` (may be null), its own `banned` keys,
// and, when `allowed` is non-null, only ends all of whose keys are in it.
// Returns null when nothing is filtered.
Result<std::shared_ptr<const LabelFilter>> make_label_filter(const Trie &trie, bool leaves_only,
                                                             const ExclusionSet *shared,
                                                             std::span<const int64_t> banned,
                                                             const std::vector<int64_t> *allowed);

}  // namespace treemask
