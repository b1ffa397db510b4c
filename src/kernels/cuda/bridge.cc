// Host side of the CUDA bridge (compiled by the C++ compiler against the CUDA
// runtime API, which is linked statically): device and pointer checks, the
// device trie's memory, and kernel launches through launch.h.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/bridge.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace treemask::cuda {

struct DeviceTrie {
  int device = -1;
  void *memory = nullptr;
  launch::TrieView view;
};

namespace {

// The arrays the plain rule reads (trie/layout.h: kPlain and kDerived); a
// device never reads the host-only ones or a vocabulary.
bool on_device_kind(ArrayKind kind) {
  return kind == ArrayKind::kPlain || kind == ArrayKind::kDerived;
}

Code code_for(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return Code::kOutOfMemory;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch: return Code::kUnsupported;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle: return Code::kInvalidArgument;
    // Mostly sticky context errors left by earlier work, or capture misuse.
    default: return Code::kInvalidState;
  }
}

// Describes a failed runtime call and clears the runtime's (non-sticky)
// last error, so the next call starts clean.
Status cuda_error(cudaError_t e, const char *what) {
  cudaGetLastError();
  return error(code_for(e), what, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
               ")");
}

Status launched(int result, const char *kernel) {
  const auto e = static_cast<cudaError_t>(result);
  if (e == cudaSuccess) return Status::Ok();
  return cuda_error(e, kernel);
}

// The device and pointer queries of a call that may be part of a stream
// capture (an engine capturing its decode step in a CUDA graph). They are
// pure queries, but a global-mode capture rejects every call the driver
// deems potentially unsafe, so they run with this thread in relaxed capture
// mode, which permits them; launches are captured as in any mode.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() {
    if (cudaThreadExchangeStreamCaptureMode(&saved_) != cudaSuccess) {
      cudaGetLastError();
      restore_ = false;
    }
  }
  ~RelaxedCaptureMode() {
    if (restore_ && cudaThreadExchangeStreamCaptureMode(&saved_) != cudaSuccess) {
      cudaGetLastError();
    }
  }
  RelaxedCaptureMode(const RelaxedCaptureMode &) = delete;
  RelaxedCaptureMode &operator=(const RelaxedCaptureMode &) = delete;

 private:
  cudaStreamCaptureMode saved_ = cudaStreamCaptureModeRelaxed;
  bool restore_ = true;
};

// Whether kernels can run on each device, probed once: 0 = not probed,
// 1 = yes, 2 = no (no image for its architecture).
constexpr int kMaxProbedDevices = 64;
std::atomic<int8_t> g_device_runs_kernels[kMaxProbedDevices];

// "CUDA 12.8" of a version as the runtime encodes it (1000 * major + 10 *
// minor).
std::string cuda_version(int v) { return cat("CUDA ", v / 1000, ".", v % 1000 / 10); }

// What the runtime's "the driver is insufficient" means here, from the two
// versions it reports: no driver at all, a driver older than the runtime
// linked into the library, or (both read fine) a driver that is new enough
// yet refused, which is another problem than its age.
std::string driver_problem() {
  int driver = 0, runtime = 0;
  const bool read = cudaDriverGetVersion(&driver) == cudaSuccess;
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  if (!read || driver <= 0) {
    return "no NVIDIA driver is loaded (libcuda.so.1 is absent, or is not a working driver)";
  }
  if (driver < runtime) {
    return cat("the NVIDIA driver supports ", cuda_version(driver), ", older than the ",
               cuda_version(runtime), " runtime linked into libtreemask needs (update the driver)");
  }
  return cat("the NVIDIA driver supports ", cuda_version(driver), ", new enough for the ",
             cuda_version(runtime),
             " runtime linked into libtreemask, yet the runtime refused it (a kernel module "
             "that does not match libcuda.so.1, or a CUDA compatibility package's libcuda.so.1 "
             "on the library path for a GPU it does not support?)");
}

// The current device, if the runtime has one that can run the kernels.
Result<int> usable_device() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    const bool driver = e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary;
    return error(Code::kUnsupported, "no usable CUDA device",
                 driver ? ": " + driver_problem() : std::string(),
                 " (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")");
  }
  if (count <= 0) return error(Code::kUnsupported, "no CUDA device is visible");
  int device = -1;
  e = cudaGetDevice(&device);
  if (e != cudaSuccess) return cuda_error(e, "cudaGetDevice");
  if (device < 0 || device >= kMaxProbedDevices) return device;
  int8_t runs = g_device_runs_kernels[device].load(std::memory_order_relaxed);
  if (runs == 0) {
    const auto probed = static_cast<cudaError_t>(launch::probe_kernel_image());
    if (probed == cudaSuccess) {
      runs = 1;
    } else if (probed == cudaErrorNoKernelImageForDevice ||
               probed == cudaErrorInvalidDeviceFunction ||
               probed == cudaErrorUnsupportedPtxVersion) {
      runs = 2;
    } else {
      return cuda_error(probed, "looking up treemask's kernels");  // not cached: may pass later
    }
    g_device_runs_kernels[device].store(runs, std::memory_order_relaxed);
  }
  if (runs == 2) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    cudaGetLastError();
    return error(Code::kUnsupported, "CUDA device ", device, " (compute capability ", major, ".",
                 minor,
                 ") cannot run treemask's kernels: the library was not built for it "
                 "(meson option gpu_archs)");
  }
  return device;
}

// Kernels may only touch memory the device can address: device memory of
// `device`, managed memory, or mapped pinned host memory.
Status check_pointer(const void *p, const char *name, int device) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return error(Code::kInvalidArgument, name, " is not memory the CUDA device can use ",
                 "(cudaPointerGetAttributes: ", cudaGetErrorName(e), ")");
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      if (a.device != device) {
        return error(Code::kInvalidArgument, name, " is memory of CUDA device ", a.device,
                     " but the current device is ", device,
                     "; make its device current (cudaSetDevice) first");
      }
      return Status::Ok();
    case cudaMemoryTypeManaged: return Status::Ok();
    case cudaMemoryTypeHost:
      if (a.devicePointer == p) return Status::Ok();
      return error(Code::kInvalidArgument, name,
                   " is pinned host memory that the device cannot address at the same pointer; "
                   "pass its device pointer (cudaHostGetDevicePointer)");
    default:
      return error(Code::kInvalidArgument, name,
                   " is host memory; pass device memory of the current CUDA device (", device, ")");
  }
}

// The logits with vector_ok set: 16-byte accesses where data and the stride
// allow them.
launch::Logits with_vectors(launch::Logits l) {
  const size_t bytes = kernels::dtype_bytes(l.dtype);
  l.vector_ok = reinterpret_cast<uintptr_t>(l.data) % 16 == 0 && (l.row_stride * bytes) % 16 == 0;
  if (l.source) {
    l.vector_ok = l.vector_ok && reinterpret_cast<uintptr_t>(l.source) % 16 == 0 &&
                  (l.source_stride * bytes) % 16 == 0;
  }
  return l;
}

// Each device's multiprocessor count, asked once (0 = not asked yet).
std::atomic<int> g_device_sms[kMaxProbedDevices];

launch::DeviceShape device_shape(int device) {
  int sms = device >= 0 && device < kMaxProbedDevices
                ? g_device_sms[device].load(std::memory_order_relaxed)
                : 0;
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();
      sms = 0;
    } else if (device >= 0 && device < kMaxProbedDevices) {
      g_device_sms[device].store(sms, std::memory_order_relaxed);
    }
  }
  // Several resident blocks per SM hide the latency of the first loads.
  launch::DeviceShape shape;
  shape.target_blocks = std::max(1, sms) * 4;
  return shape;
}

// The row indices, when given, are device memory.
Status check_indices(const launch::Rows &rows, int device) {
  if (rows.indices && rows.n_active > 0) TM_TRY(check_pointer(rows.indices, "indices", device));
  return Status::Ok();
}

size_t align_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

Status check_device_trie(const DeviceTrie &trie, int device) {
  if (trie.device != device) {
    return error(Code::kInvalidArgument, "dev_trie was uploaded to CUDA device ", trie.device,
                 " but the current device is ", device,
                 "; make that device current (cudaSetDevice) or upload the trie there");
  }
  return Status::Ok();
}

Status check_step(const StepArg &step, int device) {
  TM_TRY(check_device_trie(*step.trie, device));
  TM_TRY(check_pointer(step.states, "states", device));
  if (step.tokens) TM_TRY(check_pointer(step.tokens, "tokens", device));
  if (step.accepted) TM_TRY(check_pointer(step.accepted, "accepted", device));
  return Status::Ok();
}

}  // namespace

bool built() { return true; }

bool available() { return usable_device().ok(); }

Status apply_bitmask(const launch::Logits &logits, const launch::Rows &rows, const int32_t *bitmask,
                     size_t bitmask_row_words, Pointers pointers, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  if (pointers == Pointers::kQuery) {
    TM_TRY(check_pointer(logits.data, "logits", device));
    TM_TRY(check_pointer(bitmask, "bitmask", device));
    TM_TRY(check_indices(rows, device));
  }
  return launched(
      launch::apply_bitmask(with_vectors(logits), rows, reinterpret_cast<const uint32_t *>(bitmask),
                            bitmask_row_words, stream),
      "launching the bitmask apply kernel");
}

Status apply_candidates(const launch::Logits &logits, const launch::Rows &rows,
                        const int32_t *row_offsets, const int32_t *candidates, size_t n_candidates,
                        void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_pointer(logits.data, "logits", device));
  TM_TRY(check_pointer(row_offsets, "row_offsets", device));
  if (n_candidates > 0) TM_TRY(check_pointer(candidates, "candidates", device));
  TM_TRY(check_indices(rows, device));
  return launched(launch::apply_candidates(with_vectors(logits), rows, row_offsets, candidates,
                                           n_candidates, device_shape(device), stream),
                  "launching the candidate apply kernel");
}

Result<DeviceTrie *> upload_trie(const Trie &trie, void *stream) {
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  // The arrays the plain rule reads (trie/layout.h: kPlain and kDerived),
  // each at a 256-byte aligned offset of one allocation. They hold together
  // (every trie is validated when built or loaded, trie/validate.cc), so the
  // kernels follow them without bounds checks.
  constexpr size_t kAlign = 256;
  TrieArrays on_device = trie.arrays();
  size_t total = 0;
  for_each_array(on_device, [&](const ArrayInfo &info, const auto *) {
    if (on_device_kind(info.kind)) total += align_up(std::max<uint64_t>(info.bytes(), 1), kAlign);
  });

  auto dt = std::make_unique<DeviceTrie>();
  dt->device = device;
  cudaError_t e = cudaMalloc(&dt->memory, total);
  if (e != cudaSuccess) return cuda_error(e, cat("cudaMalloc of ", total, " bytes").c_str());
  auto *base = static_cast<char *>(dt->memory);
  const auto s = static_cast<cudaStream_t>(stream);
  size_t at = 0;
  for_each_array(on_device, [&](const ArrayInfo &info, auto &p) {
    if (!on_device_kind(info.kind)) return;
    using T = std::remove_cvref_t<decltype(*p)>;
    if (e == cudaSuccess && info.bytes() > 0) {
      e = cudaMemcpyAsync(base + at, p, info.bytes(), cudaMemcpyHostToDevice, s);
    }
    p = reinterpret_cast<const T *>(base + at);
    at += align_up(std::max<uint64_t>(info.bytes(), 1), kAlign);
  });
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    Status failed = cuda_error(e, "copying the trie to the device");
    cudaFree(dt->memory);
    cudaGetLastError();
    return failed;
  }
  dt->view = on_device;  // the plain rule's part: device pointers only
  return dt.release();
}

void free_trie(DeviceTrie *trie) {
  if (!trie) return;
  // Nothing can be reported from here; a failure leaves a leak, not a crash.
  if (cudaFree(trie->memory) != cudaSuccess) cudaGetLastError();
  delete trie;
}

int32_t trie_vocab_size(const DeviceTrie &trie) { return trie.view.vocab_size; }

Status advance_fill_bitmask(const StepArg &step, int32_t *bitmask, size_t bitmask_row_words,
                            void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_step(step, device));
  TM_TRY(check_pointer(bitmask, "bitmask", device));
  return launched(launch::advance_fill_bitmask(step.trie->view, step.states, step.tokens,
                                               step.n_rows, step.failure_policy, step.accepted,
                                               reinterpret_cast<uint32_t *>(bitmask),
                                               bitmask_row_words, stream),
                  "launching the advance + fill kernel");
}

Status advance_mask_logits(const StepArg &step, const launch::Logits &logits, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_step(step, device));
  TM_TRY(check_pointer(logits.data, "logits", device));
  if (step.tokens) {
    TM_TRY(launched(launch::advance(step.trie->view, step.states, step.tokens, step.n_rows,
                                    step.failure_policy, step.accepted, stream),
                    "launching the advance kernel"));
  }
  launch::Logits masked = logits;
  masked.vocab_size = step.trie->view.vocab_size;
  return launched(
      launch::mask_logits_from_states(step.trie->view, step.states, step.n_rows,
                                      with_vectors(masked), device_shape(device), stream),
      "launching the logits mask kernel");
}

Status advance_states(const StepArg &step, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_step(step, device));
  return launched(launch::advance(step.trie->view, step.states, step.tokens, step.n_rows,
                                  step.failure_policy, step.accepted, stream),
                  "launching the advance kernel");
}

namespace {

// The pointer names are literals: a call that passes its checks builds no
// string (the processor step's host time is the figure that matters).
Status check_token_rows(const launch::TokenRows &rows, bool is_prev, int device) {
  if (rows.n_rows == 0) return Status::Ok();
  if (rows.n_tokens > 0) {
    TM_TRY(check_pointer(rows.tokens, is_prev ? "prev->tokens" : "rows->tokens", device));
  }
  TM_TRY(check_pointer(rows.states, is_prev ? "prev->states" : "rows->states", device));
  TM_TRY(check_pointer(rows.keys, is_prev ? "prev->keys" : "rows->keys", device));
  if (!is_prev && rows.copy_to && rows.n_tokens > 0) {
    TM_TRY(check_pointer(rows.copy_to, "rows->copy_to", device));
  }
  return Status::Ok();
}

// The rows' checks and whether prev is read (a prev of another length is
// never read, so its arrays need no check).
Result<bool> check_follow(const DeviceTrie &trie, const launch::TokenRows *prev,
                          const launch::TokenRows &rows, int device,
                          Pointers pointers = Pointers::kQuery) {
  TM_TRY(check_device_trie(trie, device));
  const bool use_prev = prev && prev->n_rows > 0 && prev->n_tokens + 1 == rows.n_tokens;
  if (pointers == Pointers::kQuery) {
    TM_TRY(check_token_rows(rows, false, device));
    if (use_prev) TM_TRY(check_token_rows(*prev, true, device));
  }
  return use_prev;
}

}  // namespace

Status follow_rows(const DeviceTrie &trie, const launch::TokenRows *prev,
                   const launch::TokenRows &rows, int32_t failure_policy, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_ASSIGN_OR_RETURN(const bool use_prev, check_follow(trie, prev, rows, device));
  return launched(
      launch::follow_rows(trie.view, use_prev ? prev : nullptr, rows, failure_policy, stream),
      "launching the follow-rows kernel");
}

Status follow_rows_mask_logits(const DeviceTrie &trie, const launch::TokenRows *prev,
                               const launch::TokenRows &rows, int32_t failure_policy,
                               int32_t finished_token, const launch::Logits &logits,
                               Pointers pointers, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_ASSIGN_OR_RETURN(const bool use_prev, check_follow(trie, prev, rows, device, pointers));
  if (pointers == Pointers::kQuery) {
    TM_TRY(check_pointer(logits.data, "logits", device));
    if (logits.source) TM_TRY(check_pointer(logits.source, "scores", device));
  }
  launch::Logits masked = logits;
  masked.vocab_size = trie.view.vocab_size;
  return launched(launch::follow_rows_mask_logits(
                      trie.view, use_prev ? prev : nullptr, rows, failure_policy, finished_token,
                      with_vectors(masked), device_shape(device), stream),
                  "launching the follow-rows + mask kernel");
}

namespace {

// The candidate key layout of a step, or an error when beam and token do
// not fit together in 32 bits.
Result<launch::KeyLayout> key_layout(size_t beam_width, int32_t vocab_size) {
  const uint32_t beam_bits = launch::bits_for(beam_width - 1);
  const uint32_t token_bits = launch::bits_for(static_cast<uint64_t>(vocab_size - 1));
  if (beam_bits + token_bits > 32) {
    return error(Code::kInvalidArgument, "beam_width ", beam_width, " with the trie's vocab_size ",
                 vocab_size, " is too large for the device beam step: (beam_width - 1) and ",
                 "(vocab_size - 1) must fit in 32 bits together");
  }
  launch::KeyLayout k;
  k.token_bits = token_bits;
  k.beam_max = static_cast<uint32_t>((uint64_t{1} << beam_bits) - 1);
  k.token_max = static_cast<uint32_t>((uint64_t{1} << token_bits) - 1);
  return k;
}

}  // namespace

Result<size_t> beam_workspace_bytes(size_t n_requests, size_t beam_width) {
  if (beam_width < 1 || beam_width > launch::kMaxBeamWidth) {
    return error(Code::kInvalidArgument, "beam_width ", beam_width, " is outside [1, ",
                 launch::kMaxBeamWidth, "] (the device beam step's limit)");
  }
  // Per request an arrival counter of 4 bytes (first, so that a test can
  // find them), then per slot beam_width keys of 8 bytes, then per slot
  // beam_width next states of 4.
  size_t slots = 0, head = 0, lists = 0, bytes = 0;
  if (__builtin_mul_overflow(n_requests, beam_width, &slots) ||
      __builtin_mul_overflow(n_requests, size_t{4}, &head) || head > SIZE_MAX - 8 ||
      __builtin_mul_overflow(slots, beam_width * 12, &lists) ||
      __builtin_add_overflow(align_up(head, 8), lists, &bytes) || bytes > size_t{INT64_MAX}) {
    return error(Code::kInvalidArgument, "n_requests ", n_requests, " x beam_width ", beam_width,
                 " needs a workspace too large to address");
  }
  return bytes;
}

Status beam_step(const BeamArg &step, void *stream) {
  const RelaxedCaptureMode relaxed;
  TM_ASSIGN_OR_RETURN(const size_t needed, beam_workspace_bytes(step.n_requests, step.beam_width));
  if (step.workspace_bytes < needed) {
    return error(Code::kBufferTooSmall, "workspace_bytes ", step.workspace_bytes,
                 " is too small: ", step.n_requests, " x ", step.beam_width, " slots need ", needed,
                 " (treemask_cuda_beam_workspace_size)");
  }
  if (reinterpret_cast<uintptr_t>(step.workspace) % 8 != 0) {
    return error(Code::kInvalidArgument, "workspace must be 8-byte aligned");
  }
  TM_ASSIGN_OR_RETURN(const launch::KeyLayout layout,
                      key_layout(step.beam_width, step.trie->view.vocab_size));
  if (step.n_requests == 0) return Status::Ok();
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_device_trie(*step.trie, device));
  if (step.pointers == Pointers::kQuery) {
    TM_TRY(check_pointer(step.logits.data, "logits data", device));
    TM_TRY(check_pointer(step.state.states, "states", device));
    TM_TRY(check_pointer(step.state.scores, "scores", device));
    TM_TRY(check_pointer(step.state.parents, "parents", device));
    TM_TRY(check_pointer(step.state.tokens, "tokens", device));
    TM_TRY(check_pointer(step.workspace, "workspace", device));
    if (step.n_bad_rows) TM_TRY(check_pointer(step.n_bad_rows, "n_bad_rows", device));
  }
  const size_t n_slots = step.n_requests * step.beam_width;
  launch::BeamWorkspace ws;
  ws.arrived = static_cast<uint32_t *>(step.workspace);
  ws.keys = reinterpret_cast<uint64_t *>(static_cast<char *>(step.workspace) +
                                         align_up(step.n_requests * 4, 8));
  ws.next = reinterpret_cast<uint32_t *>(ws.keys + n_slots * step.beam_width);
  launch::DeviceShape shape = device_shape(device);
  // A benchmark's switch (launch.h), read per step so that one process can
  // time both ways; only the beam step reads it.
  if (const char *floor = std::getenv("TREEMASK_CUDA_BEAM_FLOOR")) {
    if (std::strcmp(floor, "subset") == 0) shape.beam_floor = launch::BeamFloor::kSubset;
    if (std::strcmp(floor, "lane") == 0) shape.beam_floor = launch::BeamFloor::kLane;
  }
  return launched(launch::beam_step(step.trie->view, step.logits, layout, step.n_requests,
                                    static_cast<uint32_t>(step.beam_width), step.state, ws,
                                    step.n_bad_rows, shape, stream),
                  "launching the beam step kernel");
}

Status trie_topk(const TopkArg &topk, void *stream) {
  const RelaxedCaptureMode relaxed;
  if (topk.k > launch::kMaxBeamWidth) {
    return error(Code::kInvalidArgument, "k ", topk.k, " is larger than ", launch::kMaxBeamWidth,
                 " (the device top-k's limit)");
  }
  TM_ASSIGN_OR_RETURN(const launch::KeyLayout layout, key_layout(1, topk.trie->view.vocab_size));
  if (topk.n_rows == 0) return Status::Ok();
  TM_ASSIGN_OR_RETURN(const int device, usable_device());
  TM_TRY(check_device_trie(*topk.trie, device));
  TM_TRY(check_pointer(topk.states, "states", device));
  TM_TRY(check_pointer(topk.out_counts, "out_counts", device));
  if (topk.k > 0) {
    TM_TRY(check_pointer(topk.logits.data, "logits data", device));
    TM_TRY(check_pointer(topk.out_tokens, "out_tokens", device));
    TM_TRY(check_pointer(topk.out_scores, "out_scores", device));
  }
  if (topk.n_bad_rows) TM_TRY(check_pointer(topk.n_bad_rows, "n_bad_rows", device));
  return launched(launch::trie_topk(topk.trie->view, topk.logits, layout, topk.states, topk.n_rows,
                                    static_cast<uint32_t>(topk.k), topk.out_tokens, topk.out_scores,
                                    topk.out_counts, topk.n_bad_rows, stream),
                  "launching the top-k kernel");
}

}  // namespace treemask::cuda
