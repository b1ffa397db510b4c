// Helpers shared by the extern "C" entry points: the thread-local error
// message, the catch-all guard, options-struct reading and handle casts.
// Nothing here contains decoding logic.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>
#include <type_traits>

#include "core/log.h"
#include "core/status.h"
#include "kernels/dtype.h"
#include "rules/plain_rules.h"
#include "treemask/treemask.h"
#include "trie/trie.h"

namespace treemask {
// Forward declarations: the shim converts handles without needing the
// matcher's definition, so only the files that call a matcher include it.
class Matcher;
struct ModeOptions;
}  // namespace treemask

// The core keeps its own copies of the header's pinned values (it does not
// include the C header); each copy is checked against the header here, once.
#define TREEMASK_SAME_CODE(k, v) \
  static_assert(static_cast<int32_t>(::treemask::Code::k) == (v), #v);
TREEMASK_SAME_CODE(kOk, TREEMASK_OK)
TREEMASK_SAME_CODE(kInvalidArgument, TREEMASK_ERR_INVALID_ARGUMENT)
TREEMASK_SAME_CODE(kOutOfRange, TREEMASK_ERR_OUT_OF_RANGE)
TREEMASK_SAME_CODE(kBufferTooSmall, TREEMASK_ERR_BUFFER_TOO_SMALL)
TREEMASK_SAME_CODE(kInvalidState, TREEMASK_ERR_INVALID_STATE)
TREEMASK_SAME_CODE(kOutOfMemory, TREEMASK_ERR_OUT_OF_MEMORY)
TREEMASK_SAME_CODE(kParse, TREEMASK_ERR_PARSE)
TREEMASK_SAME_CODE(kIo, TREEMASK_ERR_IO)
TREEMASK_SAME_CODE(kCorruptFile, TREEMASK_ERR_CORRUPT_FILE)
TREEMASK_SAME_CODE(kVersionMismatch, TREEMASK_ERR_VERSION_MISMATCH)
TREEMASK_SAME_CODE(kUnsupported, TREEMASK_ERR_UNSUPPORTED)
TREEMASK_SAME_CODE(kInternal, TREEMASK_ERR_INTERNAL)
#undef TREEMASK_SAME_CODE
static_assert(::treemask::kPolicyReject == TREEMASK_FAILURE_REJECT &&
              ::treemask::kPolicyFailClosed == TREEMASK_FAILURE_FAIL_CLOSED &&
              ::treemask::kPolicyStickyError == TREEMASK_FAILURE_STICKY_ERROR);
static_assert(::treemask::kStateTerminated == TREEMASK_STATE_TERMINATED &&
              ::treemask::kStateFailed == TREEMASK_STATE_FAILED && TREEMASK_STATE_ROOT == 0);
static_assert(int32_t{::treemask::kernels::kF32} == int32_t{TREEMASK_F32} &&
              int32_t{::treemask::kernels::kF16} == int32_t{TREEMASK_F16} &&
              int32_t{::treemask::kernels::kBF16} == int32_t{TREEMASK_BF16});
static_assert(static_cast<int32_t>(::treemask::log::Level::kInfo) == TREEMASK_LOG_INFO &&
              static_cast<int32_t>(::treemask::log::Level::kWarning) == TREEMASK_LOG_WARNING &&
              static_cast<int32_t>(::treemask::log::Level::kError) == TREEMASK_LOG_ERROR);

namespace treemask::capi {

// Stores "<function>: <message>" as this thread's last error. Never throws.
void set_last_error(const char *function, std::string_view message) noexcept;

// Records status as the last error of `function` and returns its code.
// Internal errors and out-of-memory failures also go to the log callback.
treemask_status fail(const char *function, const Status &status) noexcept;

// Records an exception caught at the C boundary as the last error (and
// logs it): out of memory or an internal error.
treemask_status fail_with_exception(const char *function, Code code,
                                    std::string_view what) noexcept;

template <class... Args>
treemask_status fail(const char *function, Code code, const Args &...args) noexcept {
  try {
    return fail(function, error(code, args...));
  } catch (...) {
    set_last_error(function, "out of memory while formatting an error message");
    return static_cast<treemask_status>(code);
  }
}

// Runs body (returning Status) and converts any exception into a status:
// no exception ever crosses the C ABI.
template <class Body>
treemask_status guard(const char *function, Body &&body) noexcept {
  try {
    Status s = body();
    return s.ok() ? TREEMASK_OK : fail(function, s);
  } catch (const std::bad_alloc &) {
    return fail_with_exception(function, Code::kOutOfMemory, "out of memory");
  } catch (const std::exception &e) {
    return fail_with_exception(function, Code::kInternal, e.what());
  } catch (...) {
    return fail_with_exception(function, Code::kInternal, "unknown internal error");
  }
}

// Runs a query that answers with a count or a flag and has no status to
// return: an exception (out of memory in a decoding mode's look-ahead)
// becomes `fallback` plus this thread's last error.
template <class T, class Body>
T query(const char *function, T fallback, Body &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    fail_with_exception(function, Code::kOutOfMemory, "out of memory");
  } catch (const std::exception &e) {
    fail_with_exception(function, Code::kInternal, e.what());
  } catch (...) {
    fail_with_exception(function, Code::kInternal, "unknown internal error");
  }
  return fallback;
}

// Copies a caller's options struct over `out` (which holds the defaults):
// min(struct_size, sizeof) bytes, so fields unknown to an older caller keep
// their defaults. NULL keeps every default.
//
// Maintainers: a field appended to a public options struct must start at or
// after the struct's previous sizeof (add explicit padding if needed), or an
// older caller's trailing padding would be read as the new field.
//
// In is T itself, or the stable struct an experimental T starts with (an
// extension, treemask.h "Stability tiers"): in->struct_size then says how
// much of the extension the caller's struct holds.
template <class T, class In>
Status read_options(const In *in, T &out, const char *name) {
  static_assert(std::is_standard_layout_v<T> && std::is_standard_layout_v<In>);
  static_assert(sizeof(In) <= sizeof(T) && offsetof(In, struct_size) == 0);
  if (!in) return Status::Ok();
  if (in->struct_size < sizeof(size_t)) {
    return error(Code::kInvalidArgument, name, "->struct_size is ", in->struct_size,
                 "; initialise the struct with ", name, "_init()");
  }
  const size_t n = in->struct_size < sizeof(T) ? in->struct_size : sizeof(T);
  std::memcpy(static_cast<void *>(&out), in, n);
  const size_t full = sizeof(T);  // the struct_size at offset 0, nested or not
  std::memcpy(static_cast<void *>(&out), &full, sizeof(full));
  return Status::Ok();
}

// Fills a result struct the caller sized (struct_size first, like an options
// struct): fill(value) sets the fields of a zeroed value, and at most
// out->struct_size bytes of it are copied out, so a caller compiled against
// an older header gets the fields it knows. name is the struct's type name.
template <class T, class Fill>
Status write_sized(T *out, const char *name, Fill &&fill) {
  if (out->struct_size < sizeof(size_t)) {
    return error(Code::kInvalidArgument, "out->struct_size is ", out->struct_size,
                 "; set it to sizeof(", name, ")");
  }
  T value;
  std::memset(static_cast<void *>(&value), 0, sizeof(value));
  fill(value);
  value.struct_size = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  std::memcpy(static_cast<void *>(out), &value, value.struct_size);
  return Status::Ok();
}

// Whether an array of n elements of elem_bytes each, plus `extra` more
// elements (the n + 1 offsets of a CSR array, say), can exist: a count
// near SIZE_MAX (a caller's k - 1 with k == 0) is kOutOfRange naming the
// argument before any size computation can wrap around.
Status check_count(const char *name, size_t n, size_t elem_bytes, size_t extra = 0);

// The same for n_rows rows of bitmask_row_words 32-bit words.
Status check_bitmask_rows(const char *name, size_t n_rows, size_t bitmask_row_words);

inline Trie *to_trie(treemask_trie *t) { return reinterpret_cast<Trie *>(t); }
inline const Trie *to_trie(const treemask_trie *t) { return reinterpret_cast<const Trie *>(t); }
inline treemask_trie *to_handle(Trie *t) { return reinterpret_cast<treemask_trie *>(t); }

inline Matcher *to_matcher(treemask_matcher *m) { return reinterpret_cast<Matcher *>(m); }
inline const Matcher *to_matcher(const treemask_matcher *m) {
  return reinterpret_cast<const Matcher *>(m);
}
inline treemask_matcher *to_handle(Matcher *m) { return reinterpret_cast<treemask_matcher *>(m); }

// Converts the public trie options into build options.
Status trie_build_options(const treemask_trie_options *opts, TrieBuildOptions &out);

// Converts the decoding-mode fields of the public matcher options
// (capi_modes.cc).
Status matcher_mode_options(const treemask_mode_options &opts, ModeOptions &out);

}  // namespace treemask::capi

// Returns a named argument error from inside a guard body when ptr is NULL.
#define TM_REQUIRE_ARG(ptr) \
  if ((ptr) == nullptr)     \
  return ::treemask::error(::treemask::Code::kInvalidArgument, #ptr " is NULL")
