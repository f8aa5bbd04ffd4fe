// SPDX-License-Identifier: Apache-2.0
// What the core and a device say to each other about one operator, whatever its family: a plan
// (validated at descriptor creation, immutable after) names its kernel, and a device's kernel
// table turns it into a runner. A family (elementwise, the MoE gathers, the routers, ...) derives
// its plan from Plan and its runner interface from Runner, adding what a call passes; neither
// this file nor core/device.h changes when a family is added.
#pragma once

#include <cstddef>
#include <memory>

#include "infinicore.h"
#include "infiniop/handle.h"

namespace infiniop {

enum class KernelId : int;  // the list: kernels/list.h

struct Plan {
  KernelId kernel{};
};

// Made once at descriptor creation (a device may build or fetch a program then) and run by every
// calculate through its family's interface.
class Runner {
 public:
  virtual ~Runner() = default;
  // Bytes of workspace each call needs on top of what the operator itself asks for.
  virtual size_t workspaceSize() const { return 0; }
};

// One entry of a device's kernel table: the runner of `plan` (whose kernel selects the entry).
// `op` starts every message. May refuse a plan it cannot run (a status and a message).
using RunnerFactory = infiniStatus_t (*)(const char *op, infiniopHandle_t handle, const Plan &plan,
                                         std::unique_ptr<Runner> *runner);

}  // namespace infiniop
