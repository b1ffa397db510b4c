/* treemask_trie_save closes the file it writes exactly once. It closed it
 * twice (once to check the write, once in its descriptor's destructor): in
 * a threaded program the second close closed whatever another thread had
 * opened under that number in between, and a vLLM server's clients saw
 * their sockets fail with EBADF while it saved compiled lists.
 *
 * The test interposes close() (the executable's definition wins over
 * libc's for libtreemask's calls) and fails if any close() during a save
 * is of a descriptor that is not open, which is what the second close of
 * the same number is when nothing reopened it. Not in the sanitizer suites
 * (their runtimes intercept close() themselves).
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "treemask/treemask.h"

static int closes_of_closed_fds;
static int closes;

int close(int fd) {
  static int (*real_close)(int);
  if (!real_close) real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  ++closes;
  if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) ++closes_of_closed_fds;
  return real_close(fd);
}

int main(void) {
  const int32_t tokens[] = {1, 2, 3, 1, 4};
  const size_t offsets[] = {0, 3, 5};
  const int32_t stops[] = {0};
  treemask_trie_options o;
  treemask_trie_options_init(&o);
  o.vocab_size = 8;
  o.stop_tokens = stops;
  o.n_stop_tokens = 1;
  treemask_trie *trie = NULL;
  if (treemask_trie_from_paths(&o, tokens, offsets, 2, NULL, &trie) != TREEMASK_OK) {
    fprintf(stderr, "from_paths: %s\n", treemask_last_error());
    return 1;
  }
  char path[64] = "/tmp/treemask-save-fds-XXXXXX";
  const int dir_fd = mkstemp(path);
  if (dir_fd < 0) return 1;
  (void)unlink(path);
  (void)close(dir_fd);
  strcat(path, ".tmtrie");
  closes = closes_of_closed_fds = 0;
  int failed = 0;
  for (int i = 0; i < 3; ++i) {
    if (treemask_trie_save(trie, path, NULL) != TREEMASK_OK) {
      fprintf(stderr, "save: %s\n", treemask_last_error());
      failed = 1;
    }
  }
  (void)unlink(path);
  treemask_trie_free(trie);
  if (closes == 0) {
    fprintf(stderr,
            "close() was never called by treemask_trie_save: the interposition did not work\n");
    return 1;
  }
  if (closes_of_closed_fds != 0) {
    fprintf(stderr,
            "treemask_trie_save closed a descriptor that was not open %d time(s) in %d closes\n",
            closes_of_closed_fds, closes);
    return 1;
  }
  printf("3 saves: %d closes, each of an open descriptor\n", closes);
  return failed;
}
