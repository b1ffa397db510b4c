// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "batch/worker_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TM_CPU_RELAX() _mm_pause()
#else
#define TM_CPU_RELAX() std::this_thread::yield()
#endif

namespace treemask {

namespace {

// Spinning this long before sleeping keeps back-to-back jobs (one decode
// step's fill then accept) from paying a futex wake each; short enough not to
// steal a shared core for long.
constexpr int kSpinIterations = 2000;

// Waits until `value` differs from `old` and returns the new value.
template <class T>
T wait_for_change(const std::atomic<T> &value, T old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    TM_CPU_RELAX();
  }
  T now;
  while ((now = value.load(std::memory_order_acquire)) == old) value.wait(old);
  return now;
}

}  // namespace

WorkerPool::WorkerPool(size_t n_workers) {
  threads_.reserve(n_workers);
  try {
    // Workers start from the generation of now, not from whatever they load
    // once running: a thread scheduled late must still see a later change
    // (the first job, or the stop of a pool freed right away).
    const uint32_t start = generation_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n_workers; ++i) {
      threads_.emplace_back([this, start] { work_loop(start); });
    }
  } catch (...) {
    shut_down();
    throw;
  }
}

WorkerPool::~WorkerPool() { shut_down(); }

void WorkerPool::shut_down() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(2, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto &t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::take_chunks() {
  size_t finished = 0;
  for (;;) {
    const size_t chunk = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= n_chunks_) break;
    const size_t begin = chunk * grain_;
    fn_(ctx_, begin, begin + grain_ < n_ ? begin + grain_ : n_);
    ++finished;
  }
  if (finished == 0) return;
  const size_t done = done_chunks_.fetch_add(finished, std::memory_order_acq_rel) + finished;
  if (done == n_chunks_) done_chunks_.notify_all();
}

void WorkerPool::work_loop(uint32_t seen) {
  for (;;) {
    const uint32_t g = wait_for_change(generation_, seen);
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    if ((g & 1u) == 0) continue;  // the job closed before this thread woke
    // Enter, then re-check that the job is still open: paired with the
    // caller's close-then-count in run_chunks (both seq_cst), either the
    // caller sees this thread inside or this thread sees the job closed.
    inside_.fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == g) take_chunks();
    if (inside_.fetch_sub(1, std::memory_order_seq_cst) == 1) inside_.notify_all();
  }
}

void WorkerPool::run_chunks(size_t n, size_t grain, ChunkFn fn, void *ctx) {
  if (grain == 0) grain = 1;
  if (threads_.empty() || n <= grain) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain;
  n_chunks_ = (n + grain - 1) / grain;
  next_chunk_.store(0, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // open: odd
  generation_.notify_all();

  take_chunks();
  size_t done;
  while ((done = done_chunks_.load(std::memory_order_acquire)) != n_chunks_) {
    wait_for_change(done_chunks_, done);
  }
  generation_.fetch_add(1, std::memory_order_seq_cst);  // closed: even
  uint32_t inside;
  while ((inside = inside_.load(std::memory_order_seq_cst)) != 0) {
    wait_for_change(inside_, inside);
  }
}

}  // namespace treemask
