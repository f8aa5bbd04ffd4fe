// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and its grad on OpenCL: runners holding the kernels of
// devices/opencl/kernels/moe_finalize_routing.cl, made at descriptor creation.
#pragma once

#include "ops/moe_finalize_routing.h"

namespace infiniop::opencl {

// `op` starts its messages (MoeInitRoutingV2Grad runs on it too).
infiniStatus_t makeMoeForwardRunner(const char *op, infiniopHandle_t handle,
                                    const moe::ForwardPlan &plan,
                                    std::unique_ptr<moe::ForwardRunner> *runner);
// The grad needs gather::inverseWorkspaceBytes(rows, R*K) bytes of device workspace, where it
// uploads the inversion of expanded_row_idx.
infiniStatus_t makeMoeGradRunner(infiniopHandle_t handle, const moe::GradPlan &plan,
                                 std::unique_ptr<moe::GradRunner> *runner);

}  // namespace infiniop::opencl
