// Status and Result: how the core reports failure without throwing across
// modules. A fallible function returns Status or Result<T>; callers propagate
// with TM_TRY / TM_ASSIGN_OR_RETURN. Only the C shim turns a Status into a
// treemask_status code plus the thread-local message.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace treemask {

// Values are the pinned TREEMASK_* codes of the C header (checked against it
// in capi/shim.h).
enum class Code : int32_t {
  kOk = 0,
  kInvalidArgument = 1,
  kOutOfRange = 2,
  kBufferTooSmall = 3,
  kInvalidState = 4,
  kOutOfMemory = 5,
  kParse = 6,
  kIo = 7,
  kCorruptFile = 8,
  kVersionMismatch = 9,
  kUnsupported = 10,
  kInternal = 11,
};

// OK is a code and a null pointer, so creating, moving and destroying an OK
// status on a hot path (one per accepted token, one per filled row) costs
// about nothing; only errors allocate their message.
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message)
      : code_(code), message_(std::make_unique<std::string>(std::move(message))) {}
  Status(const Status &o)
      : code_(o.code_),
        message_(o.message_ ? std::make_unique<std::string>(*o.message_) : nullptr) {}
  Status(Status &&) noexcept = default;
  Status &operator=(const Status &o) {
    if (this != &o) *this = Status(o);
    return *this;
  }
  Status &operator=(Status &&) noexcept = default;

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string &message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  Code code_ = Code::kOk;
  std::unique_ptr<std::string> message_;
};

// A value or an error Status. Deliberately small: no exceptions, no variant.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
  Status take_status() { return std::move(status_); }
  T &value() { return *value_; }
  const T &value() const { return *value_; }
  T take_value() { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

// Appends each argument's decimal / text form to one string. Used for error
// messages only (never on a hot path that succeeds).
namespace detail {
inline void append(std::string &out, std::string_view s) { out.append(s); }
inline void append(std::string &out, const char *s) { out.append(s); }
inline void append(std::string &out, const std::string &s) { out.append(s); }
inline void append(std::string &out, char c) { out.push_back(c); }
inline void append(std::string &out, bool b) { out.append(b ? "true" : "false"); }
template <class N, class = std::enable_if_t<std::is_arithmetic_v<N>>>
void append(std::string &out, N n) {
  out.append(std::to_string(n));
}
}  // namespace detail

// An unsigned value that cat() writes in hexadecimal with a 0x prefix
// (flags, magic numbers): cat("flags ", Hex{0x10}) is "flags 0x10".
struct Hex {
  uint64_t value;
};

namespace detail {
inline void append(std::string &out, Hex h) {
  static const char kDigits[] = "0123456789abcdef";
  char buf[16];
  size_t n = 0;
  uint64_t v = h.value;
  do {
    buf[n++] = kDigits[v & 15];
    v >>= 4;
  } while (v != 0);
  out.append("0x");
  while (n > 0) out.push_back(buf[--n]);
}
}  // namespace detail

template <class... Args>
std::string cat(const Args &...args) {
  std::string out;
  (detail::append(out, args), ...);
  return out;
}

template <class... Args>
Status error(Code code, const Args &...args) {
  return Status(code, cat(args...));
}

// text with its control bytes written as escapes (\n, \r, \t, \xNN), so a
// message that quotes raw input (a key, a line, a list element) stays one
// printable line and an embedded NUL cannot cut a C string short.
inline std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7F) {
      out.push_back(ch);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else {
      static const char kHex[] = "0123456789abcdef";
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace treemask

#define TM_CONCAT_INNER_(a, b) a##b
#define TM_CONCAT_(a, b) TM_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it failed.
#define TM_TRY(expr)                                 \
  do {                                               \
    ::treemask::Status tm_try_status_ = (expr);      \
    if (!tm_try_status_.ok()) return tm_try_status_; \
  } while (0)

#define TM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.take_status();        \
  lhs = tmp.take_value()

// `TM_ASSIGN_OR_RETURN(auto x, make_x());` declares x or returns the error.
#define TM_ASSIGN_OR_RETURN(lhs, expr) \
  TM_ASSIGN_OR_RETURN_IMPL_(TM_CONCAT_(tm_result_, __LINE__), lhs, expr)
