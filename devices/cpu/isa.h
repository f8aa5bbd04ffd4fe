// SPDX-License-Identifier: Apache-2.0
// The cpu device's dispatch cap, INFINIOP_CPU_ISA (docs/devices.md).
#pragma once

#include "infinicore.h"

namespace infiniop::cpu {

// SUCCESS, or BAD_PARAM with a message listing the valid names when INFINIOP_CPU_ISA named no
// target of this build: then no cpu handle is created, so nothing runs at a target the user did
// not ask for.
infiniStatus_t checkIsaCap(const char *where);

}  // namespace infiniop::cpu
