/* treemask — version macros.
 *
 * Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
 *
 * The numbers here are the single source of truth: meson.build reads them and a
 * lint test checks that the project version and the soname agree with them. */
#ifndef TREEMASK_VERSION_H
#define TREEMASK_VERSION_H

#define TREEMASK_VERSION_MAJOR 0
#define TREEMASK_VERSION_MINOR 4
#define TREEMASK_VERSION_PATCH 0

/* major * 10000 + minor * 100 + patch, the value treemask_version() returns. */
#define TREEMASK_VERSION_NUMBER \
  (TREEMASK_VERSION_MAJOR * 10000 + TREEMASK_VERSION_MINOR * 100 + TREEMASK_VERSION_PATCH)

#define TREEMASK_STRINGIFY_(x) #x
#define TREEMASK_STRINGIFY(x) TREEMASK_STRINGIFY_(x)
#define TREEMASK_VERSION_STRING              \
  TREEMASK_STRINGIFY(TREEMASK_VERSION_MAJOR) \
  "." TREEMASK_STRINGIFY(TREEMASK_VERSION_MINOR) "." TREEMASK_STRINGIFY(TREEMASK_VERSION_PATCH)

#endif /* TREEMASK_VERSION_H */
