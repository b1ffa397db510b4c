// The public header must compile as C++ (here C++11, strict) with extern "C"
// linkage. Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <treemask/treemask.h>

#include <type_traits>

static_assert(std::is_same<treemask_status, int32_t>::value, "treemask_status is int32_t");
static_assert(TREEMASK_OK == 0, "TREEMASK_OK is 0");

int main() {
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  return o.struct_size == sizeof(o) ? 0 : 1;
}
