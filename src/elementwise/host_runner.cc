// SPDX-License-Identifier: Apache-2.0
#include "elementwise/host_runner.h"

#include <cstring>

#include "elementwise/runner.h"
#include "elementwise/walk.h"

namespace infiniop::family {
namespace {

// The zero-fill of rows a call skips.
void zeroOutputs(const elementwise::Plan &plan, char *const *operands, size_t begin, size_t end) {
  const int inner = plan.ndim - 1;
  const size_t size = plan.element_size;
  elementwise::walkRows(plan, operands, begin, end, [&](char *const *base, size_t count) {
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

class HostRunner final : public HostRunnerBase<elementwise::Runner, Elementwise> {
 public:
  using HostRunnerBase::HostRunnerBase;
  infiniStatus_t run(const void *attributes, char *const *operands, size_t begin, size_t end,
                     bool zero_fill, void * /*stream*/) const override {
    if (zero_fill)
      zeroOutputs(plan_, operands, begin, end);
    else
      kernel_(plan_, attributes, operands, begin, end);
    return INFINI_STATUS_SUCCESS;
  }
};

}  // namespace

infiniStatus_t Elementwise::hostRunner(HostKernel *kernel, const Plan &plan,
                                       std::unique_ptr<Runner> *runner) {
  *runner = std::make_unique<HostRunner>(kernel, plan);
  return INFINI_STATUS_SUCCESS;
}

}  // namespace infiniop::family
