/* The stable tier of the public headers on its own: without
 * TREEMASK_EXPERIMENTAL (which the build defines for everything else) the
 * headers compile as strict C99 and declare no experimental name.
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#include <treemask/treemask.h>
#include <treemask/treemask_cuda.h>

#if defined(TREEMASK_EXPERIMENTAL) || defined(TREEMASK_STATE_ROOT) || defined(TREEMASK_FILL_FULL)
#error "experimental declarations are visible in the stable tier"
#endif

/* Experimental functions are plain identifiers here, so a declaration of our
 * own with another type compiles only if the header declared none. */
static int treemask_matcher_get_counters(void) { return 0; }
static int treemask_trie_fill_states(void) { return 0; }
static int treemask_cuda_trie_upload(void) { return 0; }

int main(void) {
  treemask_status (*fill)(treemask_matcher *, int32_t *, size_t, const treemask_fill_options *,
                          bool *) = treemask_matcher_fill_next_token_bitmask;
  treemask_status (*save)(const treemask_trie *, const char *, const treemask_save_options *) =
      treemask_trie_save;
  (void)fill;
  (void)save;
  return treemask_matcher_get_counters() + treemask_trie_fill_states() +
         treemask_cuda_trie_upload();
}
