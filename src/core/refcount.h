// Intrusive reference counting for objects shared through the C API (a trie
// is shared by its C handles and by every matcher that follows it).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace treemask {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted &) = delete;
  RefCounted &operator=(const RefCounted &) = delete;

  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference (the caller deletes).
  bool release() const { return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  uint64_t ref_count() const { return refs_.load(std::memory_order_relaxed); }

 protected:
  ~RefCounted() = default;

 private:
  mutable std::atomic<uint64_t> refs_{1};
};

// An owning pointer to a RefCounted T (T must be final or have a virtual
// destructor). Adopts the initial reference of a freshly created object.
template <class T>
class Ref {
 public:
  Ref() = default;
  static Ref adopt(T *p) { return Ref(p); }
  static Ref share(T *p) {
    if (p) p->retain();
    return Ref(p);
  }
  Ref(const Ref &o) : p_(o.p_) {
    if (p_) p_->retain();
  }
  Ref(Ref &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref &operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_ && p_->release()) delete p_;
  }
  T *get() const { return p_; }
  T *operator->() const { return p_; }
  T &operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // Gives up ownership of the reference without releasing it.
  T *leak() { return std::exchange(p_, nullptr); }

 private:
  explicit Ref(T *p) : p_(p) {}
  T *p_ = nullptr;
};

}  // namespace treemask
