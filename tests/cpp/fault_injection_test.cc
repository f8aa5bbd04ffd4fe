// SPDX-License-Identifier: Apache-2.0
// Fault injection (issue 16 item 3): every allocation and every OpenCL call of an operator's
// create + calculate + destroy cycle is made to fail in turn, on every built device.
//
// How: this executable replaces the global operator new / new[] (plain, nothrow and
// align_val_t forms; they allocate through malloc / posix_memalign and free through free, so
// AddressSanitizer still sees every block), interposes aligned_alloc (infiniopMalloc on the CPU
// devices) and, built with the opencl device, defines the OpenCL 1.2 entry points the library
// calls (it is linked with ENABLE_EXPORTS, so the library's calls bind to these definitions,
// which forward to the ICD loader through dlsym(RTLD_NEXT)). One thread-local countdown counts
// them, but only while a library call of the cycle runs on the test's thread (lib()): gtest's
// own allocations, the OpenCL driver's allocations inside a real OpenCL call (PoCL compiles
// with LLVM) and other threads (OpenMP workers, the driver's) do not count. The N-th counted
// event fails once: operator new throws std::bad_alloc (nothrow: NULL), aligned_alloc returns
// NULL, an OpenCL call returns CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES or
// CL_MEM_OBJECT_ALLOCATION_FAILURE (through *errcode_ret where it has one). Releases are never
// failed (they free, and a failed release would be a leak of the test's making).
//
// The sweep (FaultSweep.*): for every operator (op_specs.h's small valid configurations) and
// device, for N = 0, 1, 2, ... the cycle (create handle, tensor descriptors, operator
// descriptor, workspace size, infiniopMalloc of workspace and buffers, uploads, calculate,
// download, destroy descriptor, tensor descriptors, free, destroy handle) runs with the N-th
// event failing, until a cycle completes without the injection firing. For each N: the call
// that met the failure returns a status other than SUCCESS with a message in
// infiniopGetLastError(), nothing aborts, the out-pointer of a failed create / malloc / size
// query is not written, a failed calculate leaves every output byte as poisoned (read back after
// the failure, uninjected), and the cleanup of what was created succeeds. A cycle that succeeds
// although the injection fired (only best-effort OpenCL queries may) must still produce the
// uninjected cycle's bytes. Leaks are the leak checker's (the sanitizer build runs this too).
// "Cold" sweeps create the handle inside the cycle, so program builds are injected too; the
// opencl "warm" sweeps reuse one handle whose programs are built (fast).
//
// Hostile environment (HostileEnv.*): INFINIOP_OPENCL_DEVICE values that are not a
// non-negative integer are DEVICE_NOT_FOUND with a message; INFINIOP_OPENCL_CACHE_DIR naming
// nothing, a regular file, unwritable directories, or a directory of truncated, corrupted or
// empty cached binaries still gives correct results. OMP_NUM_THREADS / INFINIOP_NUM_THREADS are
// read once per process, so tests/CMakeLists.txt runs the large cpu cases of infiniop-tests
// under each (ctest env.*).
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "infiniop.h"
#include "op_specs.h"

#if INFINIOP_FAULT_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#endif

// --- the injector ---------------------------------------------------------------------------

namespace fault {

// Zero-initialized thread-local state: no constructor runs on first use (operator new may be the
// first use, on any thread).
struct State {
  bool armed;            // the countdown runs
  bool in_library;       // a library call of the cycle runs on this thread
  int in_runtime;        // inside a real OpenCL function: the driver's own work does not count
  long countdown;        // counted events before the one that fails
  long events;           // events counted since arm()
  long cl_events;        // of which OpenCL calls
  bool fired;            // the failure was injected
  const char *fired_at;  // what failed ("operator new", "clCreateBuffer", ...)
  int launches;          // kernels the current library call enqueued (OpenCL)
  int launches_at_fire;  // of them, before the failure
};
thread_local State t;

// Whether this event fails.
bool inject(const char *what, bool opencl) {
  if (!t.armed || !t.in_library || t.in_runtime) return false;
  ++t.events;
  if (opencl) ++t.cl_events;
  if (t.countdown-- > 0) return false;
  t.armed = false;
  t.fired = true;
  t.fired_at = what;
  t.launches_at_fire = t.launches;
  // INFINIOP_FAULT_TRACE=1: the stack of every injected failure, to find the code behind a
  // reported event.
  static const bool trace = std::getenv("INFINIOP_FAULT_TRACE") != nullptr;
  if (trace) {
    void *frames[32];
    std::fprintf(stderr, "--- injected: %s\n", what);
    backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
  }
  return true;
}

// n >= 0: the n-th counted event fails (once); n < 0: count only.
void arm(long n) {
  t.countdown = n < 0 ? LONG_MAX : n;
  t.events = t.cl_events = 0;
  t.fired = false;
  t.fired_at = nullptr;
  t.armed = true;
}
void disarm() {
  t.armed = false;
}

// Runs one library call as part of the cycle (its allocations count).
template <class F>
infiniStatus_t lib(F &&f) {
  t.in_library = true;
  t.launches = 0;
  const infiniStatus_t status = f();
  t.in_library = false;
  return status;
}

void *allocate(std::size_t size, std::size_t align, bool nothrow) {
  if (inject(nothrow ? "operator new (nothrow)" : "operator new", false)) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  if (size == 0) size = 1;
  void *p = nullptr;
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__)
    p = std::malloc(size);
  else if (posix_memalign(&p, align, size) != 0)
    p = nullptr;
  if (!p && !nothrow) throw std::bad_alloc();
  return p;
}

}  // namespace fault

void *operator new(std::size_t n) {
  return fault::allocate(n, 0, false);
}
void *operator new[](std::size_t n) {
  return fault::allocate(n, 0, false);
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  return fault::allocate(n, 0, true);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  return fault::allocate(n, 0, true);
}
void *operator new(std::size_t n, std::align_val_t a) {
  return fault::allocate(n, static_cast<std::size_t>(a), false);
}
void *operator new[](std::size_t n, std::align_val_t a) {
  return fault::allocate(n, static_cast<std::size_t>(a), false);
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return fault::allocate(n, static_cast<std::size_t>(a), true);
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return fault::allocate(n, static_cast<std::size_t>(a), true);
}
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete[](void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}

// The CPU devices' infiniopMalloc. The real one is the next definition (the sanitizer runtime's
// interceptor in the sanitizer build, else libc's).
extern "C" void *aligned_alloc(size_t alignment, size_t size) noexcept {
  if (fault::inject("aligned_alloc", false)) {
    errno = ENOMEM;
    return nullptr;
  }
  using Fn = void *(*)(size_t, size_t);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "aligned_alloc"));
  return real(alignment, size);
}

// --- OpenCL entry points --------------------------------------------------------------------

#if INFINIOP_FAULT_OPENCL
namespace fault {
std::atomic<long> g_opencl_calls{0};  // every interposed call, any thread: proves interposition

template <class Fn>
Fn realFunction(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "fault_injection_test: no %s after this executable\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}
struct InRuntime {
  InRuntime() { ++t.in_runtime; }
  ~InRuntime() { --t.in_runtime; }
};
}  // namespace fault

// Forwards to the real function with the driver's own work uncounted.
#define FAULT_FORWARD(name, ...)                                           \
  static const auto real_ = fault::realFunction<decltype(&::name)>(#name); \
  fault::InRuntime in_runtime_;                                            \
  return real_(__VA_ARGS__)
// An entry point that returns its error code.
#define FAULT_CODE(name, code, ...)              \
  ++fault::g_opencl_calls;                       \
  if (fault::inject(#name, true)) return (code); \
  FAULT_FORWARD(name, __VA_ARGS__)
// An entry point that returns an object and its error through errcode_ret.
#define FAULT_OBJECT(name, code, ...)       \
  ++fault::g_opencl_calls;                  \
  if (fault::inject(#name, true)) {         \
    if (errcode_ret) *errcode_ret = (code); \
    return nullptr;                         \
  }                                         \
  FAULT_FORWARD(name, __VA_ARGS__)
// Releases are forwarded, never failed.
#define FAULT_RELEASE(name, object) \
  ++fault::g_opencl_calls;          \
  FAULT_FORWARD(name, object)

extern "C" {
cl_int clGetPlatformIDs(cl_uint n, cl_platform_id *platforms, cl_uint *count) {
  FAULT_CODE(clGetPlatformIDs, CL_OUT_OF_HOST_MEMORY, n, platforms, count);
}
cl_int clGetPlatformInfo(cl_platform_id p, cl_platform_info what, size_t size, void *value,
                         size_t *size_ret) {
  FAULT_CODE(clGetPlatformInfo, CL_OUT_OF_HOST_MEMORY, p, what, size, value, size_ret);
}
cl_int clGetDeviceIDs(cl_platform_id p, cl_device_type type, cl_uint n, cl_device_id *devices,
                      cl_uint *count) {
  FAULT_CODE(clGetDeviceIDs, CL_OUT_OF_HOST_MEMORY, p, type, n, devices, count);
}
cl_int clGetDeviceInfo(cl_device_id d, cl_device_info what, size_t size, void *value,
                       size_t *size_ret) {
  FAULT_CODE(clGetDeviceInfo, CL_OUT_OF_HOST_MEMORY, d, what, size, value, size_ret);
}
cl_context clCreateContext(const cl_context_properties *properties, cl_uint n,
                           const cl_device_id *devices,
                           void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *),
                           void *user_data, cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateContext, CL_OUT_OF_HOST_MEMORY, properties, n, devices, notify, user_data,
               errcode_ret);
}
cl_int clReleaseContext(cl_context c) {
  FAULT_RELEASE(clReleaseContext, c);
}
cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id d,
                                      cl_command_queue_properties properties, cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateCommandQueue, CL_OUT_OF_RESOURCES, c, d, properties, errcode_ret);
}
cl_int clReleaseCommandQueue(cl_command_queue q) {
  FAULT_RELEASE(clReleaseCommandQueue, q);
}
cl_mem clCreateBuffer(cl_context c, cl_mem_flags flags, size_t size, void *host,
                      cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE, c, flags, size, host, errcode_ret);
}
cl_int clReleaseMemObject(cl_mem m) {
  FAULT_RELEASE(clReleaseMemObject, m);
}
cl_program clCreateProgramWithSource(cl_context c, cl_uint n, const char **strings,
                                     const size_t *lengths, cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateProgramWithSource, CL_OUT_OF_HOST_MEMORY, c, n, strings, lengths,
               errcode_ret);
}
cl_program clCreateProgramWithBinary(cl_context c, cl_uint n, const cl_device_id *devices,
                                     const size_t *lengths, const unsigned char **binaries,
                                     cl_int *binary_status, cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateProgramWithBinary, CL_OUT_OF_HOST_MEMORY, c, n, devices, lengths, binaries,
               binary_status, errcode_ret);
}
cl_int clBuildProgram(cl_program p, cl_uint n, const cl_device_id *devices, const char *options,
                      void(CL_CALLBACK *notify)(cl_program, void *), void *user_data) {
  FAULT_CODE(clBuildProgram, CL_OUT_OF_HOST_MEMORY, p, n, devices, options, notify, user_data);
}
cl_int clGetProgramBuildInfo(cl_program p, cl_device_id d, cl_program_build_info what, size_t size,
                             void *value, size_t *size_ret) {
  FAULT_CODE(clGetProgramBuildInfo, CL_OUT_OF_HOST_MEMORY, p, d, what, size, value, size_ret);
}
cl_int clGetProgramInfo(cl_program p, cl_program_info what, size_t size, void *value,
                        size_t *size_ret) {
  FAULT_CODE(clGetProgramInfo, CL_OUT_OF_HOST_MEMORY, p, what, size, value, size_ret);
}
cl_int clReleaseProgram(cl_program p) {
  FAULT_RELEASE(clReleaseProgram, p);
}
cl_kernel clCreateKernel(cl_program p, const char *name, cl_int *errcode_ret) {
  FAULT_OBJECT(clCreateKernel, CL_OUT_OF_HOST_MEMORY, p, name, errcode_ret);
}
cl_int clReleaseKernel(cl_kernel k) {
  FAULT_RELEASE(clReleaseKernel, k);
}
cl_int clSetKernelArg(cl_kernel k, cl_uint index, size_t size, const void *value) {
  FAULT_CODE(clSetKernelArg, CL_OUT_OF_RESOURCES, k, index, size, value);
}
cl_int clGetKernelWorkGroupInfo(cl_kernel k, cl_device_id d, cl_kernel_work_group_info what,
                                size_t size, void *value, size_t *size_ret) {
  FAULT_CODE(clGetKernelWorkGroupInfo, CL_OUT_OF_RESOURCES, k, d, what, size, value, size_ret);
}
cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *offset,
                              const size_t *global, const size_t *local, cl_uint n_wait,
                              const cl_event *wait, cl_event *event) {
  ++fault::g_opencl_calls;
  if (fault::inject("clEnqueueNDRangeKernel", true)) return CL_OUT_OF_RESOURCES;
  static const auto real =
      fault::realFunction<decltype(&::clEnqueueNDRangeKernel)>("clEnqueueNDRangeKernel");
  cl_int code;
  {
    fault::InRuntime in_runtime;
    code = real(q, k, dims, offset, global, local, n_wait, wait, event);
  }
  if (code == CL_SUCCESS) ++fault::t.launches;  // its writes may land from here on
  return code;
}
cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset,
                           size_t size, void *host, cl_uint n_wait, const cl_event *wait,
                           cl_event *event) {
  FAULT_CODE(clEnqueueReadBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE, q, m, blocking, offset, size,
             host, n_wait, wait, event);
}
cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, size_t offset,
                            size_t size, const void *host, cl_uint n_wait, const cl_event *wait,
                            cl_event *event) {
  FAULT_CODE(clEnqueueWriteBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE, q, m, blocking, offset, size,
             host, n_wait, wait, event);
}
cl_int clFinish(cl_command_queue q) {
  FAULT_CODE(clFinish, CL_OUT_OF_RESOURCES, q);
}
cl_int clFlush(cl_command_queue q) {
  FAULT_CODE(clFlush, CL_OUT_OF_RESOURCES, q);
}
}  // extern "C"
#endif  // INFINIOP_FAULT_OPENCL

// --- the cycle ------------------------------------------------------------------------------

namespace infiniop_test {
namespace {

constexpr uint8_t kPoison = 0xAB;

void *sentinel() {
  return reinterpret_cast<void *>(uintptr_t{0x5eed});
}

std::vector<infiniDevice_t> devicesWithHardware() {
  int count = 0;
  std::vector<infiniDevice_t> devices(8);
  EXPECT_EQ(infiniopGetDeviceTypes(devices.data(), 8, &count), INFINI_STATUS_SUCCESS);
  devices.resize(static_cast<size_t>(count));
  return devices;
}

std::string deviceName(infiniDevice_t device) {
  infiniopDeviceInfo_t info{};
  if (infiniopGetDeviceInfo(device, &info) != INFINI_STATUS_SUCCESS) return "unknown";
  return info.name;
}
bool deviceAvailable(infiniDevice_t device) {
  infiniopDeviceInfo_t info{};
  return infiniopGetDeviceInfo(device, &info) == INFINI_STATUS_SUCCESS && info.count > 0;
}

size_t elementSize(infiniDtype_t dtype) {
  return dtype == INFINI_DTYPE_I64                                 ? 8
         : dtype == INFINI_DTYPE_F16 || dtype == INFINI_DTYPE_BF16 ? 2
                                                                   : 4;
}
size_t numel(const Slot &s) {
  size_t n = 1;
  for (size_t d : s.shape) n *= d;
  return n;
}

// The host bytes of a slot: outputs poisoned, index data from the spec, float inputs varied.
std::vector<uint8_t> hostBytes(const Slot &s, size_t slot_index) {
  const size_t n = numel(s), size = elementSize(s.dtype);
  std::vector<uint8_t> bytes(n * size, kPoison);
  if (s.output) return bytes;
  for (size_t i = 0; i < n; ++i) {
    if (s.dtype == INFINI_DTYPE_I64) {
      const int64_t v = i < s.values.size() ? s.values[i] : 0;
      std::memcpy(&bytes[i * 8], &v, 8);
    } else if (s.dtype == INFINI_DTYPE_I32) {
      const int32_t v = static_cast<int32_t>(i < s.values.size() ? s.values[i] : 0);
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      const float v = 0.25f * static_cast<float>((i * 7 + slot_index * 3) % 11) - 1.2f;
      std::memcpy(&bytes[i * 4], &v, 4);
    }
  }
  return bytes;
}

// What one cycle saw.
struct Outcome {
  bool completed = false;   // every call succeeded
  bool fired = false;       // the injection fired
  std::string fired_at;     // what failed
  std::string failed_call;  // the first call that did not succeed
  long events = 0, cl_events = 0;
  int launches_before_failure = 0;  // kernels a failed calculate had enqueued before failing
  std::vector<std::vector<uint8_t>> outputs;  // the outputs' bytes after a completed cycle
};

// One create + calculate + destroy cycle of `op` with event `n` failing (n < 0: none). With
// `shared` the cycle uses it, else it creates and destroys its own handle. Every expectation
// about the failure is checked here, outside the counted calls.
Outcome runCycle(infiniDevice_t device, infiniopHandle_t shared, const OpSpec &op, long n) {
  Outcome out;
  const size_t slots = op.slots.size();
  std::vector<std::vector<uint8_t>> host(slots);
  for (size_t i = 0; i < slots; ++i) host[i] = hostBytes(op.slots[i], i);
  Descs descs(slots, nullptr);
  Ptrs buffers(slots, nullptr);
  infiniopHandle_t handle = shared;
  void *desc = nullptr, *workspace = nullptr;
  size_t workspace_size = 0;
  bool calculate_failed = false;

  // Runs one counted call; false (and the failure recorded and checked) when it fails.
  auto call = [&](const char *name, const auto &body) {
    const bool fired_before = fault::t.fired;
    const infiniStatus_t status = fault::lib(body);
    const bool fired_now = fault::t.fired && !fired_before;
    if (fired_now) out.fired_at = fault::t.fired_at;
    if (status == INFINI_STATUS_SUCCESS) {
      if (fired_now) {
        // Only what has a fallback may fail without failing the call: a nothrow new (the
        // standard library's temporary buffers, e.g. std::stable_sort's, fall back to working
        // in place) and the best-effort queries and loads of the binary cache.
        // Destroying a handle waits for its queues (clFinish) and releases everything whatever
        // that wait returned: there is nothing a caller could do with a failed destroy.
        static const std::set<std::string> tolerated = {
            "operator new (nothrow)", "clGetProgramInfo", "clCreateProgramWithBinary",
            "clGetProgramBuildInfo",  "clGetDeviceInfo",  "clGetPlatformInfo"};
        const bool destroy_wait =
            out.fired_at == "clFinish" && std::string(name) == "infiniopDestroyHandle";
        EXPECT_TRUE(tolerated.count(out.fired_at) || destroy_wait)
            << name << " returned SUCCESS although " << out.fired_at << " failed (event " << n
            << ")";
      }
      return true;
    }
    out.failed_call = name;
    const std::string message = infiniopGetLastError();
    EXPECT_TRUE(fault::t.fired) << name << " failed without an injected failure: "
                                << infiniStatusString(status) << ": " << message;
    EXPECT_TRUE(fired_now) << name << " failed after the injected failure (of " << out.fired_at
                           << ") in an earlier call that succeeded";
    EXPECT_NE(message, "") << name << " failed (" << infiniStatusString(status) << ", after "
                           << out.fired_at << " failed) with an empty message";
    return false;
  };

  fault::arm(n);
  bool ok = true;
  if (!shared) {
    infiniopHandle_t made = static_cast<infiniopHandle_t>(sentinel());
    ok = call("infiniopCreateHandle", [&] { return infiniopCreateHandle(&made, device, 0); });
    if (ok)
      handle = made;
    else
      EXPECT_EQ(made, sentinel()) << "handle out-pointer written on failure";
  }
  for (size_t i = 0; ok && i < slots; ++i) {
    if (op.slots[i].absent) continue;
    const Slot &s = op.slots[i];
    infiniopTensorDescriptor_t made = static_cast<infiniopTensorDescriptor_t>(sentinel());
    ok = call("infiniopCreateTensorDescriptor", [&] {
      return infiniopCreateTensorDescriptor(&made, s.shape.size(), s.shape.data(), nullptr,
                                            s.dtype);
    });
    if (ok)
      descs[i] = made;
    else
      EXPECT_EQ(made, sentinel()) << "tensor descriptor out-pointer written on failure";
  }
  if (ok) {
    void *made = sentinel();
    ok = call("create descriptor", [&] { return op.create(handle, &made, descs, op.attrs); });
    if (ok)
      desc = made;
    else
      EXPECT_EQ(made, sentinel()) << "descriptor out-pointer written on failure";
  }
  if (ok) {
    size_t size = 12345;
    ok = call("workspace size", [&] { return op.workspace(desc, &size); });
    if (ok)
      workspace_size = size;
    else
      EXPECT_EQ(size, 12345u) << "workspace size written on failure";
  }
  auto allocate = [&](size_t bytes, void **result) {
    void *made = sentinel();
    const bool done = call("infiniopMalloc", [&] { return infiniopMalloc(handle, &made, bytes); });
    if (done)
      *result = made;
    else
      EXPECT_EQ(made, sentinel()) << "infiniopMalloc's out-pointer written on failure";
    return done;
  };
  if (ok && workspace_size) ok = allocate(workspace_size, &workspace);
  for (size_t i = 0; ok && i < slots; ++i)
    if (descs[i]) ok = allocate(host[i].size(), &buffers[i]);
  for (size_t i = 0; ok && i < slots; ++i)
    if (buffers[i])
      ok = call("infiniopMemcpyHostToDevice", [&] {
        return infiniopMemcpyHostToDevice(handle, buffers[i], host[i].data(), host[i].size(),
                                          nullptr);
      });
  if (ok) {
    ok = call("calculate",
              [&] { return op.calculate(desc, workspace, workspace_size, buffers, nullptr); });
    calculate_failed = !ok;
    out.launches_before_failure = fault::t.launches_at_fire;
  }
  std::vector<std::vector<uint8_t>> results(slots);
  for (size_t i = 0; ok && i < slots; ++i) {
    if (!buffers[i] || !op.slots[i].output) continue;
    results[i].assign(host[i].size(), 0);
    ok = call("infiniopMemcpyDeviceToHost", [&] {
      return infiniopMemcpyDeviceToHost(handle, results[i].data(), buffers[i], results[i].size(),
                                        nullptr);
    });
  }
  if (ok && desc) {
    ok = call("destroy descriptor", [&] { return op.destroy(desc); });
    if (ok) desc = nullptr;
  }
  for (size_t i = 0; ok && i < slots; ++i) {
    if (!descs[i]) continue;
    ok = call("infiniopDestroyTensorDescriptor",
              [&] { return infiniopDestroyTensorDescriptor(descs[i]); });
    if (ok) descs[i] = nullptr;
  }
  for (size_t i = 0; ok && i < slots; ++i) {
    if (!buffers[i]) continue;
    ok = call("infiniopFree", [&] { return infiniopFree(handle, buffers[i]); });
    if (ok) buffers[i] = nullptr;
  }
  if (ok && workspace) {
    ok = call("infiniopFree", [&] { return infiniopFree(handle, workspace); });
    if (ok) workspace = nullptr;
  }
  if (ok && !shared && handle) {
    ok = call("infiniopDestroyHandle", [&] { return infiniopDestroyHandle(handle); });
    if (ok) handle = nullptr;
  }
  out.events = fault::t.events;
  out.cl_events = fault::t.cl_events;
  out.fired = fault::t.fired;
  fault::disarm();
  out.completed = ok;
  if (ok) {
    for (size_t i = 0; i < slots; ++i)
      if (op.slots[i].output) out.outputs.push_back(std::move(results[i]));
    return out;
  }

  // A failed calculate writes no output: read back, uninjected. Except where the device had
  // already accepted a kernel of the call (a later clSetKernelArg or enqueue of a multi-kernel
  // call failed): OpenCL cannot take back enqueued work, so those outputs may be written
  // (docs/devices.md); the call still fails with its status and message.
  if (calculate_failed && out.launches_before_failure == 0) {
    for (size_t i = 0; i < slots; ++i) {
      if (!buffers[i] || !op.slots[i].output) continue;
      std::vector<uint8_t> back(host[i].size(), 0);
      EXPECT_EQ(infiniopMemcpyDeviceToHost(handle, back.data(), buffers[i], back.size(), nullptr),
                INFINI_STATUS_SUCCESS)
          << infiniopGetLastError();
      EXPECT_TRUE(back == host[i]) << "`" << op.slots[i].name << "` written by the failed "
                                   << out.failed_call << " (" << out.fired_at << " failed)";
    }
  }
  // Cleanup of what exists, uninjected.
  auto cleaned = [](infiniStatus_t status) {
    EXPECT_EQ(status, INFINI_STATUS_SUCCESS) << "cleanup: " << infiniopGetLastError();
  };
  if (desc) cleaned(op.destroy(desc));
  for (auto d : descs)
    if (d) cleaned(infiniopDestroyTensorDescriptor(d));
  for (void *b : buffers)
    if (b) cleaned(infiniopFree(handle, b));
  if (workspace) cleaned(infiniopFree(handle, workspace));
  if (!shared && handle) cleaned(infiniopDestroyHandle(handle));
  return out;
}

// What a sweep saw: injection points, of which the cycle still completed (a tolerated fallback)
// and of which a failed calculate had launched kernels before (outputs not compared).
struct SweepCounts {
  long points = 0, completed = 0, after_launch = 0;
};

// Sweeps n = 0, 1, ... until a cycle completes without the injection firing.
SweepCounts sweep(infiniDevice_t device, infiniopHandle_t shared, const OpSpec &op) {
  SweepCounts counts;
  const Outcome reference = runCycle(device, shared, op, -1);
  EXPECT_TRUE(reference.completed) << "the uninjected cycle failed";
  if (!reference.completed) return counts;
  for (const auto &bytes : reference.outputs)
    EXPECT_FALSE(!bytes.empty() && std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) {
      return b == kPoison;
    })) << "the uninjected cycle wrote nothing";
  constexpr long kLimit = 20000;
  for (long n = 0; n < kLimit; ++n) {
    SCOPED_TRACE("event " + std::to_string(n));
    const Outcome o = runCycle(device, shared, op, n);
    counts.points = n;
    if (o.launches_before_failure > 0) ++counts.after_launch;
    if (o.completed) {
      EXPECT_TRUE(o.outputs == reference.outputs)
          << "a completed cycle (" << (o.fired ? o.fired_at + " failed" : "nothing failed")
          << ") differs from the uninjected one";
      if (!o.fired) return counts;
      ++counts.completed;
    }
    if (::testing::Test::HasFatalFailure()) return counts;
  }
  ADD_FAILURE() << "no cycle completed within " << kLimit << " injection points";
  return counts;
}

// --- the sweep tests ------------------------------------------------------------------------

using SweepParam = std::tuple<infiniDevice_t, size_t, bool>;  // device, operator, cold

class FaultSweep : public ::testing::TestWithParam<SweepParam> {};

// One handle per device for the warm sweeps, its programs built by the first (uninjected) cycle;
// destroyed after the last test (a leak for the leak checker otherwise).
class WarmHandles : public ::testing::Environment {
 public:
  static infiniopHandle_t get(infiniDevice_t device) {
    for (auto &entry : handles())
      if (entry.first == device) return entry.second;
    infiniopHandle_t h = nullptr;
    if (infiniopCreateHandle(&h, device, 0) != INFINI_STATUS_SUCCESS) h = nullptr;
    handles().emplace_back(device, h);
    return h;
  }
  void TearDown() override {
    for (auto &entry : handles()) {
      if (entry.second) {
        EXPECT_EQ(infiniopDestroyHandle(entry.second), INFINI_STATUS_SUCCESS);
      }
    }
    handles().clear();
  }

 private:
  static std::vector<std::pair<infiniDevice_t, infiniopHandle_t>> &handles() {
    static std::vector<std::pair<infiniDevice_t, infiniopHandle_t>> all;
    return all;
  }
};
::testing::Environment *const warm_handles = ::testing::AddGlobalTestEnvironment(new WarmHandles);

TEST_P(FaultSweep, EveryFailureIsAStatusAMessageAndNoWrite) {
  const auto [device, index, cold] = GetParam();
  if (!deviceAvailable(device)) GTEST_SKIP() << deviceName(device) << ": no device here";
  const OpSpec &op = specs()[index];
  infiniopHandle_t shared = nullptr;
  if (!cold) {
    shared = WarmHandles::get(device);
    ASSERT_NE(shared, nullptr) << infiniopGetLastError();
  }
  const auto start = std::chrono::steady_clock::now();
  const SweepCounts counts = sweep(device, shared, op);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ faults   ] " << deviceName(device) << " " << op.name
            << (cold ? " (cold handle)" : " (warm handle)") << ": " << counts.points
            << " injection points (" << counts.completed << " with a fallback, "
            << counts.after_launch << " after a kernel launch), " << seconds << " s\n";
  EXPECT_GT(counts.points, 0);
}

std::vector<SweepParam> sweepParams() {
  std::vector<SweepParam> params;
  for (infiniDevice_t device : devicesWithHardware())
    for (size_t i = 0; i < specs().size(); ++i) {
      if (device != INFINI_DEVICE_OPENCL) {
        params.emplace_back(device, i, true);
        continue;
      }
      // opencl: every operator on a handle whose programs are built (its descriptor, kernel,
      // argument, enqueue and copy calls), and the handle creation and program build (the same
      // code for every program, about 30 ms a cycle) with an elementwise and a MoE operator.
      const std::string name = specs()[i].name;
      if (name == "GeluBackward" || name == "MoeFinalizeRoutingV2Grad")
        params.emplace_back(device, i, true);
      params.emplace_back(device, i, false);
    }
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, FaultSweep, ::testing::ValuesIn(sweepParams()),
                         [](const ::testing::TestParamInfo<SweepParam> &info) {
                           return deviceName(std::get<0>(info.param)) + "_" +
                                  specs()[std::get<1>(info.param)].name +
                                  (std::get<2>(info.param) ? "_cold" : "_warm");
                         });

#if INFINIOP_FAULT_OPENCL
// The interposition engages: a cycle on opencl counts OpenCL calls, and failing the first one
// fails handle creation.
TEST(FaultInjection, OpenclCallsAreInterposed) {
  if (!deviceAvailable(INFINI_DEVICE_OPENCL)) GTEST_SKIP() << "no OpenCL device here";
  const long before = fault::g_opencl_calls.load();
  const Outcome o = runCycle(INFINI_DEVICE_OPENCL, nullptr, specs()[0], -1);
  EXPECT_TRUE(o.completed);
  EXPECT_GT(o.cl_events, 0);
  EXPECT_GT(fault::g_opencl_calls.load(), before);
  std::cout << "[ faults   ] an opencl cycle: " << o.events << " events, " << o.cl_events
            << " of them OpenCL calls\n";
}
#endif

// The replaced operator new and aligned_alloc count: every device's cycle has events.
TEST(FaultInjection, AllocationsAreCounted) {
  for (infiniDevice_t device : devicesWithHardware()) {
    if (!deviceAvailable(device)) continue;
    SCOPED_TRACE(deviceName(device));
    const Outcome o = runCycle(device, nullptr, specs()[0], -1);
    EXPECT_TRUE(o.completed);
    EXPECT_GT(o.events, o.cl_events);
  }
}

// --- hostile environment --------------------------------------------------------------------

class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    const char *old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

bool isBuilt(infiniDevice_t device) {
  for (infiniDevice_t d : devicesWithHardware())
    if (d == device) return true;
  return false;
}

TEST(HostileEnv, OpenclDeviceNotAnIndexIsDeviceNotFound) {
  if (!isBuilt(INFINI_DEVICE_OPENCL)) GTEST_SKIP() << "built without opencl";
  for (const char *value :
       {"abc", "-1", "1e3", "99999999999999999999999", " 0", "+0", "0x1", "0 ", "1000000"}) {
    SCOPED_TRACE(std::string("INFINIOP_OPENCL_DEVICE='") + value + "'");
    ScopedEnv env("INFINIOP_OPENCL_DEVICE", value);
    infiniopHandle_t h = static_cast<infiniopHandle_t>(sentinel());
    EXPECT_EQ(std::string(infiniStatusString(infiniopCreateHandle(&h, INFINI_DEVICE_OPENCL, 0))),
              "INFINI_STATUS_DEVICE_NOT_FOUND");
    EXPECT_NE(std::string(infiniopGetLastError()), "");
    EXPECT_EQ(h, sentinel());
    if (h != sentinel() && h) infiniopDestroyHandle(h);
  }
  if (!deviceAvailable(INFINI_DEVICE_OPENCL)) return;
  ScopedEnv env("INFINIOP_OPENCL_DEVICE", "0");
  infiniopHandle_t h = nullptr;
  EXPECT_EQ(infiniopCreateHandle(&h, INFINI_DEVICE_OPENCL, 5), INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  if (h) {
    EXPECT_EQ(infiniopDestroyHandle(h), INFINI_STATUS_SUCCESS);
  }
}

// An elementwise and a MoE operator (two programs) on a fresh opencl handle, built under the
// current environment, uninjected; their outputs.
std::vector<std::vector<std::vector<uint8_t>>> someOperatorsOnOpencl() {
  std::vector<std::vector<std::vector<uint8_t>>> outputs;
  infiniopHandle_t h = nullptr;
  EXPECT_EQ(infiniopCreateHandle(&h, INFINI_DEVICE_OPENCL, 0), INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  if (!h) return outputs;
  for (const OpSpec &op : specs()) {
    if (std::string(op.name) != "GeluBackward" && std::string(op.name) != "MoeInitRoutingV2")
      continue;
    SCOPED_TRACE(op.name);
    const Outcome o = runCycle(INFINI_DEVICE_OPENCL, h, op, -1);
    EXPECT_TRUE(o.completed);
    outputs.push_back(o.outputs);
  }
  EXPECT_EQ(infiniopDestroyHandle(h), INFINI_STATUS_SUCCESS);
  return outputs;
}

std::string makeTempDir() {
  char name[] = "/tmp/infiniop-faults-XXXXXX";
  const char *made = mkdtemp(name);
  EXPECT_NE(made, nullptr);
  return made ? made : "/tmp";
}
std::vector<std::string> binFiles(const std::string &dir) {
  std::vector<std::string> files;
  if (DIR *d = opendir(dir.c_str())) {
    while (const dirent *e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0)
        files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  return files;
}
void removeTree(const std::string &dir) {
  for (const std::string &f : binFiles(dir)) std::remove(f.c_str());
  rmdir(dir.c_str());
}

TEST(HostileEnv, OpenclCacheDirThatCannotBeUsed) {
  if (!deviceAvailable(INFINI_DEVICE_OPENCL)) GTEST_SKIP() << "no OpenCL device here";
  std::vector<std::vector<std::vector<uint8_t>>> expected;
  {
    ScopedEnv env("INFINIOP_OPENCL_CACHE_DIR", nullptr);
    expected = someOperatorsOnOpencl();
  }
  const std::string dir = makeTempDir();
  const std::string file = dir + "/a-regular-file";
  std::ofstream(file) << "not a directory";
  const std::string readonly = dir + "/read-only";
  mkdir(readonly.c_str(), 0555);  // still writable as root (CI): /proc/self below is not
  // A directory nobody may create files in, root included (CI runs as root, where 0555 does not
  // stop writes), and paths that name nothing or a file.
  for (const std::string &value :
       {std::string("/nonexistent/infiniop-cache"), file, readonly, std::string("/proc/self"),
        std::string("/dev/null"), std::string(4000, 'x')}) {
    SCOPED_TRACE("INFINIOP_OPENCL_CACHE_DIR=" + value.substr(0, 60));
    ScopedEnv env("INFINIOP_OPENCL_CACHE_DIR", value.c_str());
    EXPECT_TRUE(someOperatorsOnOpencl() == expected);
  }
  removeTree(readonly);
  std::remove(file.c_str());
  rmdir(dir.c_str());
}

// A cache directory whose binaries are truncated, corrupted or empty: each is rebuilt from source
// (or, where the driver loads it, still gives the same results), and nothing crashes.
TEST(HostileEnv, OpenclCacheDirWithBrokenBinaries) {
  if (!deviceAvailable(INFINI_DEVICE_OPENCL)) GTEST_SKIP() << "no OpenCL device here";
  const std::string dir = makeTempDir();
  ScopedEnv env("INFINIOP_OPENCL_CACHE_DIR", dir.c_str());
  const auto expected = someOperatorsOnOpencl();  // fills the cache
  const std::vector<std::string> files = binFiles(dir);
  ASSERT_FALSE(files.empty()) << "no binary was cached in " << dir;
  std::vector<std::vector<char>> originals;
  for (const std::string &f : files) {
    std::ifstream in(f, std::ios::binary);
    originals.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto rewrite = [&](const char *what, auto change) {
    SCOPED_TRACE(what);
    for (size_t i = 0; i < files.size(); ++i) {
      std::vector<char> bytes = originals[i];
      change(bytes);
      std::ofstream(files[i], std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    EXPECT_TRUE(someOperatorsOnOpencl() == expected);
  };
  rewrite("truncated to half", [](std::vector<char> &b) { b.resize(b.size() / 2); });
  rewrite("truncated to 16 bytes",
          [](std::vector<char> &b) { b.resize(std::min<size_t>(16, b.size())); });
  rewrite("empty", [](std::vector<char> &b) { b.clear(); });
  rewrite("header corrupted", [](std::vector<char> &b) {
    for (size_t i = 0; i < b.size() && i < 64; ++i) b[i] = static_cast<char>(b[i] ^ 0x5A);
  });
  rewrite("middle corrupted", [](std::vector<char> &b) {
    for (size_t i = b.size() / 3; i < b.size() / 3 + 256 && i < b.size(); ++i)
      b[i] = static_cast<char>(0xFF - b[i]);
  });
  rewrite("garbage", [](std::vector<char> &b) {
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 131 + 7);
  });
  removeTree(dir);
}

}  // namespace
}  // namespace infiniop_test
