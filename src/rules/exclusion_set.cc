// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "rules/exclusion_set.h"

#include <algorithm>

#include "rules/mode_index.h"
#include "rules/trie_rules.h"

namespace treemask {

namespace {

// Terminal nodes carrying any of keys, ascending and distinct.
Result<std::vector<uint32_t>> terminals_with_keys(const Trie &trie, std::span<const int64_t> keys) {
  std::vector<uint32_t> out;
  for (int64_t key : keys) {
    for_each_terminal_with_key(trie, key, [&](uint32_t node) { out.push_back(node); });
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Result<Ref<ExclusionSet>> ExclusionSet::create(Ref<const Trie> trie,
                                               std::span<const int64_t> label_ids) {
  if (!trie) return error(Code::kInvalidArgument, "trie is NULL");
  // Exclusions act through the label phase's per-node counts of token
  // paths (a string set would be built without the excluded strings).
  TM_TRY(check_supported(*trie, TrieFeature::kDecodingModes, "an exclusion set"));
  TM_ASSIGN_OR_RETURN(std::vector<uint32_t> terminals, terminals_with_keys(*trie, label_ids));
  return Ref<ExclusionSet>::adopt(new ExclusionSet(std::move(trie), std::move(terminals)));
}

Result<std::shared_ptr<const LabelFilter>> ExclusionSet::filter(bool leaves_only) const {
  Lazy &lazy = lazy_[leaves_only ? 1 : 0];
  std::call_once(lazy.once, [&] {
    lazy.filter =
        LabelFilter::blocking(*trie_, node_stats(*trie_, leaves_only), nullptr, terminals_);
  });
  return lazy.filter;
}

Result<std::shared_ptr<const LabelFilter>> make_label_filter(const Trie &trie, bool leaves_only,
                                                             const ExclusionSet *shared,
                                                             std::span<const int64_t> banned,
                                                             const std::vector<int64_t> *allowed) {
  std::shared_ptr<const LabelFilter> base;
  if (shared) {
    if (&shared->trie() != &trie) {
      return error(Code::kInvalidArgument,
                   "the exclusion set was created for another trie than the matcher's");
    }
    TM_ASSIGN_OR_RETURN(base, shared->filter(leaves_only));
  }
  TM_ASSIGN_OR_RETURN(std::vector<uint32_t> banned_ends, terminals_with_keys(trie, banned));
  // No filter (a clear, the one filter call a string-set trie takes): no
  // node statistics either, which walk token paths.
  if (!allowed && banned_ends.empty()) return base;
  const NodeStats *stats = &node_stats(trie, leaves_only);
  if (!allowed) return LabelFilter::blocking(trie, *stats, std::move(base), std::move(banned_ends));
  std::vector<int64_t> subset = *allowed;
  std::sort(subset.begin(), subset.end());
  TM_ASSIGN_OR_RETURN(std::vector<uint32_t> candidates, terminals_with_keys(trie, subset));
  std::vector<uint32_t> ends;
  for (uint32_t node : candidates) {
    if (stats->dist[node] != 0) continue;  // not an end in this mode
    if (std::binary_search(banned_ends.begin(), banned_ends.end(), node)) continue;
    if (base && base->info(node, *stats).dist != 0) continue;
    bool all_keys_allowed = true;
    for_each_key(trie, node, [&](int64_t key) {
      all_keys_allowed &= std::binary_search(subset.begin(), subset.end(), key);
    });
    if (all_keys_allowed) ends.push_back(node);
  }
  return LabelFilter::allowing(trie, std::move(ends));
}

}  // namespace treemask
