// SPDX-License-Identifier: Apache-2.0
#include "elementwise/runner.h"

#include <cstring>

#include "core/handle.h"
#include "elementwise/walk.h"
#if INFINIOP_WITH_OPENCL
#include "opencl/elementwise.h"
#endif

namespace infiniop::elementwise {
namespace {

// The zero-fill of rows a call skips, for devices whose memory the host addresses directly.
void zeroOutputsOnHost(const Plan &plan, char *const *operands, size_t begin, size_t end) {
  const int inner = plan.ndim - 1;
  const size_t size = plan.element_size;
  walkRows(plan, operands, begin, end, [&](char *const *base, size_t count) {
    for (int k = 0; k < plan.num_outputs; ++k) {
      const ptrdiff_t step = plan.strides[k][inner] * static_cast<ptrdiff_t>(size);
      if (step == static_cast<ptrdiff_t>(size)) {
        std::memset(base[k], 0, count * size);
        continue;
      }
      for (size_t i = 0; i < count; ++i)
        std::memset(base[k] + static_cast<ptrdiff_t>(i) * step, 0, size);
    }
  });
}

// cpu and cpu_reference: the kernel runs on the calling thread(s) and is done on return.
class HostRunner final : public Runner {
 public:
  HostRunner(Kernel kernel, const Plan &plan) : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const void *attributes, char *const *operands, size_t begin, size_t end,
                     bool zero_fill, void * /*stream*/) const override {
    if (zero_fill)
      zeroOutputsOnHost(plan_, operands, begin, end);
    else
      kernel_(plan_, attributes, operands, begin, end);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  Kernel kernel_;
  Plan plan_;
};

}  // namespace

bool hasKernel(const KernelTable &kernels, infiniDevice_t device) {
  switch (device) {
    case INFINI_DEVICE_CPU:
      return kernels.cpu != nullptr;
    case INFINI_DEVICE_OPENCL:
      return kernels.opencl != nullptr;
    case INFINI_DEVICE_CPU_REFERENCE:
      return kernels.cpu_reference != nullptr;
    default:
      return false;
  }
}

infiniStatus_t makeRunner(const char *op, infiniopHandle_t handle, const KernelTable &kernels,
                          const Plan &plan, std::unique_ptr<Runner> *runner) {
#if INFINIOP_WITH_OPENCL
  if (handle->device == INFINI_DEVICE_OPENCL)
    return opencl::makeElementwiseRunner(op, handle, kernels.opencl, plan, runner);
#else
  (void)op;
  (void)plan;
#endif
  *runner = std::make_unique<HostRunner>(
      handle->device == INFINI_DEVICE_CPU ? kernels.cpu : kernels.cpu_reference, plan);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::elementwise
