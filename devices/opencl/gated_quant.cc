// SPDX-License-Identifier: Apache-2.0
// TEMPORARY: SwiGluQuant and GeluMulQuant on OpenCL are being written; refused until then.
#include "core/error.h"
#include "opencl/kernel_table.h"

namespace infiniop::opencl {
infiniStatus_t makeGatedQuantRunner(const char *op, infiniopHandle_t, const Plan &,
                                    std::unique_ptr<Runner> *) {
  return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string(op) + ": not yet on opencl");
}
}  // namespace infiniop::opencl
