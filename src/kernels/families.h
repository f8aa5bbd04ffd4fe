// SPDX-License-Identifier: Apache-2.0
// Every kernel family of kernels/list.h (namespace family): what its plan and host kernels are
// and how a host device runs them. Devices build their kernel tables from the list and these.
// Adding a family adds its header here.
#pragma once

#include "elementwise/host_runner.h"
#include "ops/dequant_swiglu_quant.h"
#include "ops/gated_quant.h"
#include "ops/moe_aux_loss.h"
#include "ops/moe_counts.h"
#include "ops/moe_finalize_routing.h"
#include "ops/moe_gating.h"
#include "ops/moe_init_routing.h"
#include "ops/moe_z_loss.h"
