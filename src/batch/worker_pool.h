// A fixed set of worker threads owned by one batch: created once, reused by
// every call, stopped in the destructor. The calling thread always works too
// and never waits for a sleeping worker to wake: whichever thread is free
// takes the next chunk, so a job finishes as fast as the threads that are
// actually running can do it.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace treemask {

class WorkerPool {
 public:
  // Starts n_workers threads (0: every job runs on the caller's thread).
  // Throws std::system_error when a thread cannot be started.
  explicit WorkerPool(size_t n_workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool &) = delete;
  WorkerPool &operator=(const WorkerPool &) = delete;

  size_t n_workers() const { return threads_.size(); }

  // Calls task(i) for every i in [0, n), `grain` consecutive indices per
  // chunk, on the workers and the calling thread; returns when every call
  // has returned. task must not throw. One run at a time (the owner is used
  // by one thread at a time).
  template <class Task>
  void run(size_t n, size_t grain, Task &task) {
    run_chunks(
        n, grain,
        [](void *ctx, size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) (*static_cast<Task *>(ctx))(i);
        },
        &task);
  }

 private:
  using ChunkFn = void (*)(void *ctx, size_t begin, size_t end);

  void run_chunks(size_t n, size_t grain, ChunkFn fn, void *ctx);
  void work_loop(uint32_t seen);
  void shut_down();
  // Takes chunks of the open job until none is left.
  void take_chunks();

  std::vector<std::thread> threads_;

  // The open job. Written by the caller only while no worker is inside a job
  // (see run_chunks), read by workers only while inside.
  ChunkFn fn_ = nullptr;
  void *ctx_ = nullptr;
  size_t n_ = 0;
  size_t grain_ = 1;
  size_t n_chunks_ = 0;

  // Odd while a job is open, even when closed; workers wait on it.
  std::atomic<uint32_t> generation_{0};
  std::atomic<size_t> next_chunk_{0};
  std::atomic<size_t> done_chunks_{0};
  // Workers that entered the open job and may still read its fields.
  std::atomic<uint32_t> inside_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace treemask
