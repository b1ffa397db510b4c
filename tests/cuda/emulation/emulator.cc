// The CPU emulation of the CUDA runtime declared in cuda_runtime_api.h and
// cuda_runtime.h. Single-threaded: the programs that use it call CUDA from
// one thread.
//
// Besides running kernels it enforces what the real runtime would reject
// and a CPU run would otherwise let pass: device allocations are filled
// with garbage and fenced with guard bytes (an out-of-bounds write is
// reported at cudaFree), pointer attributes tell host memory from device
// memory, and a synchronising or allocating call during a global-mode
// stream capture invalidates the capture.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include <ucontext.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cuda_runtime.h"

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};
struct CUstream_st {
  CUgraph_st *capture = nullptr;  // non-null while capturing
  bool global_mode = false;
  bool invalidated = false;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point at;
};

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// ---- capture bookkeeping ----------------------------------------------------

std::vector<CUstream_st *> g_capturing;

bool global_capture_active() {
  for (CUstream_st *s : g_capturing) {
    if (s->global_mode) return true;
  }
  return false;
}

// This thread's capture mode: relaxed permits potentially unsafe calls.
thread_local cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

// A call the real runtime forbids while a global-mode capture is running
// (unless this thread is in relaxed mode): the capture is invalidated and
// the call fails.
bool forbidden_during_capture() {
  if (!global_capture_active() || t_capture_mode == cudaStreamCaptureModeRelaxed) return false;
  for (CUstream_st *s : g_capturing) s->invalidated = true;
  fail(cudaErrorStreamCaptureUnsupported);
  return true;
}

void enqueue(cudaStream_t stream, std::function<void()> work) {
  if (stream && stream->capture) {
    stream->capture->nodes.push_back(std::move(work));
  } else {
    work();
  }
}

// ---- memory -----------------------------------------------------------------

constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuard = 0xA5;

struct Allocation {
  size_t size;
  cudaMemoryType type;
};
std::map<uintptr_t, Allocation> g_allocations;  // by user pointer
size_t g_pointer_queries = 0;                   // cudaPointerGetAttributes calls

const std::pair<const uintptr_t, Allocation> *find_allocation(const void *p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(at);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  return at < it->first + it->second.size ? &*it : nullptr;
}

cudaError_t allocate(void **ptr, size_t size, cudaMemoryType type) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  auto *raw = static_cast<unsigned char *>(std::malloc(size + 2 * kGuardBytes));
  if (!raw) return fail(cudaErrorMemoryAllocation);
  std::memset(raw, kGuard, kGuardBytes);
  std::memset(raw + kGuardBytes, 0xCD, size);  // device memory starts as garbage
  std::memset(raw + kGuardBytes + size, kGuard, kGuardBytes);
  *ptr = raw + kGuardBytes;
  g_allocations[reinterpret_cast<uintptr_t>(*ptr)] = {size, type};
  return cudaSuccess;
}

cudaError_t release(void *ptr, cudaMemoryType type) {
  if (!ptr) return cudaSuccess;
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.type != type) return fail(cudaErrorInvalidValue);
  auto *raw = static_cast<unsigned char *>(ptr) - kGuardBytes;
  const size_t size = it->second.size;
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (raw[i] != kGuard || raw[kGuardBytes + size + i] != kGuard) {
      std::fprintf(stderr,
                   "CUDA emulation: a kernel or copy wrote outside the %zu-byte allocation at %p\n",
                   size, ptr);
      std::abort();
    }
  }
  g_allocations.erase(it);
  std::free(raw);
  return cudaSuccess;
}

// ---- kernels ----------------------------------------------------------------

// Fibers: a stack each, and a context switch. On x86-64 the switch is a few
// instructions (ucontext's swapcontext makes a system call per switch,
// which made the emulated tests spend most of their time in the kernel).
#if defined(__x86_64__)
extern "C" void treemask_emulation_switch(void **save_sp, void *load_sp);
asm(R"(
  .pushsection .text
  .globl treemask_emulation_switch
  .hidden treemask_emulation_switch
  .type treemask_emulation_switch, @function
treemask_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size treemask_emulation_switch, .-treemask_emulation_switch
  .popsection
)");

struct Context {
  void *sp = nullptr;
};
void switch_to(Context &save, Context &load) { treemask_emulation_switch(&save.sp, load.sp); }
// Prepares `c` so that switching to it calls entry() on the given stack.
void prepare(Context &c, char *stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto *slots = reinterpret_cast<void **>(top);
  slots[-1] = nullptr;                               // entry's return address: never used
  slots[-2] = reinterpret_cast<void *>(entry);       // popped by `ret`; entry sees rsp % 16 == 8
  for (int i = 3; i <= 8; ++i) slots[-i] = nullptr;  // rbp rbx r12 r13 r14 r15
  c.sp = &slots[-8];
}
#else
struct Context {
  ucontext_t uc;
};
void switch_to(Context &save, Context &load) { swapcontext(&save.uc, &load.uc); }
void prepare(Context &c, char *stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

struct Fiber {
  Context context;
  std::unique_ptr<char[]> stack;
  bool done = false;
  bool at_barrier = false;  // waiting in __syncthreads
  bool at_warp_op = false;  // waiting for its warp's lanes at a warp-synchronous call
  uint64_t barriers = 0;    // __syncthreads calls so far
  uint64_t warp_ops = 0;    // warp-synchronous calls so far
};

// The values a warp's lanes deposit at a warp-synchronous call. Two sets,
// by the parity of the call's number: a released lane may reach its next
// call (and deposit) before a slower lane of the same warp has read the
// previous call's values, but never two calls ahead of it.
struct Warp {
  uint64_t values[2][32];
  unsigned arrived = 0;
};

constexpr size_t kFiberStackBytes = 256 * 1024;
Context g_scheduler;
std::vector<Fiber> g_fibers;
std::vector<Warp> g_warps;
unsigned g_block_threads = 0;
Fiber *g_running = nullptr;
unsigned g_running_index = 0;
const std::function<void()> *g_kernel = nullptr;

[[noreturn]] void fiber_main() {
  (*g_kernel)();
  g_running->done = true;
  switch_to(g_running->context, g_scheduler);  // never resumed
  std::abort();
}

[[noreturn]] void undefined_on_gpu(const char *what) {
  std::fprintf(stderr, "CUDA emulation: in block (%u, %u, %u), %s (undefined on a GPU)\n",
               blockIdx.x, blockIdx.y, blockIdx.z, what);
  std::abort();
}

// Runs every runnable fiber of the block until none is: each stops at a
// barrier, at a warp call its warp has not completed, or at its end.
void run_runnable(unsigned n_threads) {
  for (bool ran = true; ran;) {
    ran = false;
    for (unsigned i = 0; i < n_threads; ++i) {
      Fiber &f = g_fibers[i];
      if (f.done || f.at_barrier || f.at_warp_op) continue;
      threadIdx =
          dim3(i % blockDim.x, (i / blockDim.x) % blockDim.y, i / (blockDim.x * blockDim.y));
      g_running = &f;
      g_running_index = i;
      switch_to(g_scheduler, f.context);
      ran = true;
    }
  }
}

void run_block(unsigned n_threads) {
  if (g_fibers.size() < n_threads) g_fibers.resize(n_threads);
  g_warps.assign((n_threads + 31) / 32, Warp{});
  g_block_threads = n_threads;
  for (unsigned i = 0; i < n_threads; ++i) {
    Fiber &f = g_fibers[i];
    if (!f.stack) f.stack.reset(new char[kFiberStackBytes]);
    prepare(f.context, f.stack.get(), kFiberStackBytes, fiber_main);
    f.done = f.at_barrier = f.at_warp_op = false;
    f.barriers = f.warp_ops = 0;
  }
  for (;;) {
    run_runnable(n_threads);
    // Every live thread now waits at a barrier (or the block is stuck).
    bool any_live = false;
    uint64_t barrier = 0;
    for (unsigned i = 0; i < n_threads; ++i) {
      const Fiber &f = g_fibers[i];
      if (f.done) continue;
      if (f.at_warp_op) {
        undefined_on_gpu(
            "a lane waits at a warp-synchronous call that another lane of its warp "
            "never reaches (it exited or waits at __syncthreads)");
      }
      if (any_live && f.barriers != barrier) {
        undefined_on_gpu("threads reached different __syncthreads() calls");
      }
      barrier = f.barriers;
      any_live = true;
    }
    if (!any_live) return;
    for (unsigned i = 0; i < n_threads; ++i) g_fibers[i].at_barrier = false;
  }
}

void run_grid(dim3 grid, dim3 block, const std::function<void()> &kernel) {
  gridDim = grid;
  blockDim = block;
  g_kernel = &kernel;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = dim3(x, y, z);
        run_block(block.x * block.y * block.z);
      }
    }
  }
  g_kernel = nullptr;
}

}  // namespace

namespace cuda_emulation {

cudaError_t launch(dim3 grid, dim3 block, cudaStream_t stream, std::function<void()> kernel) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
    return fail(cudaErrorInvalidValue);
  }
  enqueue(stream, [grid, block, kernel = std::move(kernel)] { run_grid(grid, block, kernel); });
  return cudaSuccess;
}

void syncthreads() {
  ++g_running->barriers;
  g_running->at_barrier = true;
  switch_to(g_running->context, g_scheduler);
}

unsigned lane_id() { return g_running_index % 32; }

unsigned lanes_in_warp() { return std::min(32u, g_block_threads - g_running_index / 32 * 32); }

size_t pointer_queries() { return g_pointer_queries; }

const uint64_t *warp_exchange(unsigned mask, uint64_t value) {
  const unsigned lanes = lanes_in_warp();
  const unsigned whole = lanes >= 32 ? ~0u : (1u << lanes) - 1u;
  if ((mask & whole) != whole) undefined_on_gpu("a warp-synchronous call names a partial mask");
  Fiber &self = *g_running;
  const unsigned first = g_running_index / 32 * 32;
  Warp &w = g_warps[g_running_index / 32];
  const uint64_t op = self.warp_ops++;
  uint64_t *values = w.values[op & 1];
  values[lane_id()] = value;
  if (++w.arrived < lanes) {
    self.at_warp_op = true;
    switch_to(self.context, g_scheduler);  // resumed once the last lane arrives
    return values;
  }
  // The last lane: every lane must be at this same call.
  w.arrived = 0;
  for (unsigned i = first; i < first + lanes; ++i) {
    if (g_fibers[i].warp_ops != self.warp_ops) {
      undefined_on_gpu("lanes of a warp reached different warp-synchronous calls");
    }
    g_fibers[i].at_warp_op = false;
  }
  return values;
}

}  // namespace cuda_emulation

// ---- the runtime API --------------------------------------------------------

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    default: return "cudaError (emulated)";
  }
}

const char *cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

cudaError_t cudaDriverGetVersion(int *version) {
  const char *driver = std::getenv("TREEMASK_EMULATE_DRIVER");
  *version = driver ? std::atoi(driver) : CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (std::getenv("TREEMASK_EMULATE_DRIVER")) {
    *count = 0;
    return fail(cudaErrorInsufficientDriver);
  }
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  *count = visible && !*visible ? 0 : 1;
  return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 4; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  std::snprintf(prop->name, sizeof prop->name, "treemask CPU emulation");
  prop->multiProcessorCount = 4;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  return forbidden_during_capture() ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  return allocate(ptr, size, cudaMemoryTypeDevice);
}
cudaError_t cudaFree(void *ptr) { return release(ptr, cudaMemoryTypeDevice); }
cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return allocate(ptr, size, cudaMemoryTypeHost);
}
cudaError_t cudaFreeHost(void *ptr) { return release(ptr, cudaMemoryTypeHost); }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes, const void *ptr) {
  ++g_pointer_queries;
  if (!attributes) return fail(cudaErrorInvalidValue);
  const auto *a = find_allocation(ptr);
  attributes->type = a ? a->second.type : cudaMemoryTypeUnregistered;
  attributes->device = a ? 0 : -2;
  attributes->devicePointer = a ? const_cast<void *>(ptr) : nullptr;
  attributes->hostPointer =
      a && a->second.type == cudaMemoryTypeHost ? const_cast<void *>(ptr) : nullptr;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind,
                            cudaStream_t stream) {
  enqueue(stream, [=] { std::memmove(dst, src, count); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
  if (forbidden_during_capture()) return cudaErrorStreamCaptureUnsupported;
  std::memset(ptr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream) {
  enqueue(stream, [=] { std::memset(ptr, value, count); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if ((stream && stream->capture) || forbidden_during_capture()) {
    if (stream && stream->capture) stream->invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode) {
  std::swap(*mode, t_capture_mode);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream || stream->capture) return fail(cudaErrorStreamCaptureUnsupported);
  stream->capture = new CUgraph_st;
  stream->global_mode = mode == cudaStreamCaptureModeGlobal;
  stream->invalidated = false;
  g_capturing.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  if (!stream || !stream->capture) return fail(cudaErrorStreamCaptureUnmatched);
  std::erase(g_capturing, stream);
  CUgraph_st *captured = std::exchange(stream->capture, nullptr);
  if (stream->invalidated) {
    delete captured;
    *graph = nullptr;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = captured;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidValue);
  for (const auto &node : exec->nodes) enqueue(stream, node);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  enqueue(stream, [event] { event->at = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}
