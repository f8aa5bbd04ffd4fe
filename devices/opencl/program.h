// SPDX-License-Identifier: Apache-2.0
// OpenCL programs and launches: each program is built once per handle (context) and variant and
// kept until the handle is destroyed; kernels are created from it per descriptor.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "infiniop/handle.h"
#include "opencl/cl.h"
#include "opencl/error.h"

namespace infiniop::opencl {

// Whether the device divides F32 correctly rounded when asked to
// (-cl-fp32-correctly-rounded-divide-sqrt), as the cpu device's division is (moe_gating.cc;
// the programs whose kernels divide add that option and -DDIVIDE_OPERATOR where it does).
bool correctlyRoundedDivide(infiniopHandle_t handle);

// The program made of `sources` (concatenated, in order) built with `options` (e.g. the dtype's
// -D flags) for the handle's device. The first request builds it, later ones share it; the
// cache owns it. A build failure is INTERNAL_ERROR with the build log in the message. With
// $INFINIOP_OPENCL_CACHE_DIR set, binaries are also kept on disk and reused across processes.
infiniStatus_t getProgram(const char *where, infiniopHandle_t handle,
                          std::initializer_list<const char *> sources, const std::string &options,
                          cl_program *program);

// A kernel of a cached program, owned by the caller (clReleaseKernel).
// The build options of an F32 division rounded to nearest even (the cpu device's), for the
// kernels' `divide` (kernels/moe_gating.cl): " -cl-fp32-correctly-rounded-divide-sqrt
// -DDIVIDE_OPERATOR" where the device divides so when asked to, else "" (divide in double).
std::string correctlyRoundedDivideOptions(infiniopHandle_t handle);

// Whether the device has double (cl_khr_fp64 among its extensions): the operators computed in
// double (the *Quant ones) refuse a device without it.
bool hasFp64(infiniopHandle_t handle);

infiniStatus_t createKernel(const char *where, cl_program program, const char *name,
                            cl_kernel *kernel);

// The work-group size to launch `kernel` with: a multiple of the kernel's preferred multiple,
// at most the kernel's (and device's) limit, about 256 where that is allowed.
infiniStatus_t workGroupSize(const char *where, infiniopHandle_t handle, cl_kernel kernel,
                             size_t *size);

// Enqueues `kernel` over exactly `items` work-items, global ids [0, items), in groups of at
// most `group` (the last few in groups of one), on `queue`; with `rows` > 1, over the 2-D grid
// (items, rows), a group never spanning two rows. Kernels need no bounds check. Nothing is
// waited for.
infiniStatus_t launch(const char *where, cl_command_queue queue, cl_kernel kernel, size_t items,
                      size_t group, size_t rows = 1);

// Sets the kernel's arguments from index `first` on, each by value (cl_mem, scalars, structs).
template <class... Args>
infiniStatus_t setArgs(const char *where, cl_kernel kernel, cl_uint first, const Args &...args) {
  cl_int code = CL_SUCCESS;
  cl_uint index = first;
  ((code == CL_SUCCESS ? (code = clSetKernelArg(kernel, index++, sizeof(Args), &args)) : 0), ...);
  if (code != CL_SUCCESS) return clFail(where, "clSetKernelArg", code);
  return INFINI_STATUS_SUCCESS;
}

// A read-only buffer of the handle's context holding `words` (a runner's plan as its kernels read
// it: shapes, strides), made once at descriptor creation; the caller releases it.
infiniStatus_t planBuffer(const char *where, infiniopHandle_t handle,
                          const std::vector<cl_long> &words, cl_mem *buffer);

// Owns a cl_kernel (released on scope exit).
class KernelRef {
 public:
  KernelRef() = default;
  explicit KernelRef(cl_kernel kernel) : kernel_(kernel) {}
  KernelRef(const KernelRef &) = delete;
  KernelRef &operator=(const KernelRef &) = delete;
  KernelRef(KernelRef &&other) noexcept : kernel_(other.kernel_) { other.kernel_ = nullptr; }
  KernelRef &operator=(KernelRef &&other) noexcept {
    std::swap(kernel_, other.kernel_);
    return *this;
  }
  ~KernelRef() {
    if (kernel_) clReleaseKernel(kernel_);
  }
  cl_kernel get() const { return kernel_; }
  cl_kernel *out() { return &kernel_; }

 private:
  cl_kernel kernel_ = nullptr;
};

// A device range as a kernel sees it: the buffer and the element index of `ptr` in it.
struct BufferArg {
  cl_mem mem;
  cl_ulong index;
};
// Resolves a view of `ptr` touching bytes [ptr + lowest_byte, ptr + end_byte) (lowest_byte <= 0
// for negative strides) to its buffer and element index; BAD_PARAM when the view is not inside
// one allocation or `ptr` is not aligned to `element_size` within it.
infiniStatus_t resolveView(const char *where, infiniopHandle_t handle, const void *ptr,
                           ptrdiff_t lowest_byte, ptrdiff_t end_byte, size_t element_size,
                           BufferArg *arg);

// Copies `bytes` of device memory at `src` to the host and waits: the data-dependent checks API.md
// allows (index values, group counts) read their data with it, after the work queued before on
// `queue`.
infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, cl_command_queue queue,
                            const void *src, size_t bytes, void *host);

}  // namespace infiniop::opencl
