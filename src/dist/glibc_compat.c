/* treemask — glibc interfaces newer than the wheel's manylinux floor, on the
 * older ones glibc still exports (see glibc_compat.py).
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * Linked only into the wheel's libraries (meson option glibc_max). Every
 * reference to NAME goes to __wrap_NAME (-Wl,--wrap=NAME). glibc_compat.py
 * compiles this file once per NAME with -DTREEMASK_COMPAT_NAME, each object
 * a member of an archive, so a library imports only what the functions it
 * uses call. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/stat.h>

/* glibc 2.33 made stat & co. real functions; before, they were inline calls
 * of __xstat & co. with the structure's version (1 on x86_64), which glibc
 * keeps exporting. */
#define TREEMASK_STAT_VER 1
extern int __xstat(int, const char *, struct stat *);
extern int __fxstat(int, int, struct stat *);
extern int __lxstat(int, const char *, struct stat *);
extern int __fxstatat(int, int, const char *, struct stat *, int);
extern int __xstat64(int, const char *, struct stat64 *);
extern int __fxstat64(int, int, struct stat64 *);
extern int __lxstat64(int, const char *, struct stat64 *);
extern int __fxstatat64(int, int, const char *, struct stat64 *, int);

#define HIDDEN __attribute__((visibility("hidden")))
#ifdef TREEMASK_COMPAT_stat
HIDDEN int __wrap_stat(const char *p, struct stat *b) { return __xstat(TREEMASK_STAT_VER, p, b); }
#endif
#ifdef TREEMASK_COMPAT_fstat
HIDDEN int __wrap_fstat(int fd, struct stat *b) { return __fxstat(TREEMASK_STAT_VER, fd, b); }
#endif
#ifdef TREEMASK_COMPAT_lstat
HIDDEN int __wrap_lstat(const char *p, struct stat *b) { return __lxstat(TREEMASK_STAT_VER, p, b); }
#endif
#ifdef TREEMASK_COMPAT_fstatat
HIDDEN int __wrap_fstatat(int d, const char *p, struct stat *b, int f) {
  return __fxstatat(TREEMASK_STAT_VER, d, p, b, f);
}
#endif
#ifdef TREEMASK_COMPAT_stat64
HIDDEN int __wrap_stat64(const char *p, struct stat64 *b) {
  return __xstat64(TREEMASK_STAT_VER, p, b);
}
#endif
#ifdef TREEMASK_COMPAT_fstat64
HIDDEN int __wrap_fstat64(int fd, struct stat64 *b) { return __fxstat64(TREEMASK_STAT_VER, fd, b); }
#endif
#ifdef TREEMASK_COMPAT_lstat64
HIDDEN int __wrap_lstat64(const char *p, struct stat64 *b) {
  return __lxstat64(TREEMASK_STAT_VER, p, b);
}
#endif
#ifdef TREEMASK_COMPAT_fstatat64
HIDDEN int __wrap_fstatat64(int d, const char *p, struct stat64 *b, int f) {
  return __fxstatat64(TREEMASK_STAT_VER, d, p, b, f);
}
#endif

/* glibc 2.32's "this process has one thread" flag lets libstdc++ skip
 * atomics; 0 (never single-threaded) keeps them, always correct. */
#ifdef TREEMASK_COMPAT___libc_single_threaded
HIDDEN char __wrap___libc_single_threaded = 0;
#endif

/* glibc 2.36's arc4random (std::random_device) on getrandom (glibc 2.25). */
#ifdef TREEMASK_COMPAT_arc4random
HIDDEN uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v && errno == EINTR) {
  }
  return v;
}
#endif
