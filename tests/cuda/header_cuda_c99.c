/* treemask_cuda.h must compile as strict C99 on its own
 * (-std=c99 -Wall -Wextra -Werror -pedantic) with no CUDA header anywhere:
 * streams are void *, device buffers plain pointers. Copyright 2026 The
 * treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#include <treemask/treemask_cuda.h>
#include <treemask/treemask_cuda.h> /* include guards */

#ifdef __CUDA_RUNTIME_H__
#error "treemask_cuda.h pulled in a CUDA header"
#endif

int main(void) {
  treemask_status (*step)(const treemask_cuda_trie *, uint32_t *, const int32_t *, size_t, int32_t,
                          uint8_t *, int32_t *, size_t, void *) =
      treemask_cuda_trie_advance_fill_bitmask;
  (void)step;
  treemask_cuda_trie_free(NULL);
  return TREEMASK_OK;
}
