// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 on OpenCL: the runner of kernels/moe_init_routing.cl, made at descriptor
// creation.
#pragma once

#include "ops/moe_init_routing.h"

namespace infiniop::opencl {

// The device workspace a call needs: the host's sort is staged there.
size_t moeInitWorkspaceBytes(const moe::InitPlan &plan);
infiniStatus_t makeMoeInitRunner(infiniopHandle_t handle, const moe::InitPlan &plan,
                                 std::unique_ptr<moe::InitRunner> *runner);

}  // namespace infiniop::opencl
