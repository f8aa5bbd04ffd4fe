// SPDX-License-Identifier: Apache-2.0
// The router operators on OpenCL (MoeGatingTopKSoftmax, MoeGatingTopK and their grads): the
// runner of kernels/moe_gating.cl, made at descriptor creation.
#pragma once

#include <memory>

#include "ops/moe_gating.h"

namespace infiniop::opencl {

// The device workspace a call needs: the forwards keep each row's p (and group scores) there.
size_t moeGatingWorkspaceBytes(const moe::RouterPlan &plan);
infiniStatus_t makeMoeGatingRunner(const char *op, infiniopHandle_t handle,
                                   const moe::RouterPlan &plan,
                                   std::unique_ptr<moe::RouterRunner> *runner);

}  // namespace infiniop::opencl
