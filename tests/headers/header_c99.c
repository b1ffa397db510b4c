/* The public header must compile as strict C99 on its own
 * (-std=c99 -Wall -Wextra -Werror -pedantic) and need nothing beyond
 * <stdint.h>, <stddef.h> and <stdbool.h>. Copyright 2026 The treemask Authors.
 * SPDX-License-Identifier: Apache-2.0 */
#include <treemask/treemask.h>
#include <treemask/treemask.h> /* include guards */

/* Every option struct starts with struct_size. */
typedef char trie_opts_starts_with_size[offsetof(treemask_trie_options, struct_size) == 0 ? 1 : -1];
typedef char
    matcher_opts_starts_with_size[offsetof(treemask_matcher_options, struct_size) == 0 ? 1 : -1];

int main(void) {
  treemask_status (*create)(treemask_trie *, const treemask_matcher_options *,
                            treemask_matcher **) = treemask_matcher_create;
  (void)create;
  return TREEMASK_OK;
}
