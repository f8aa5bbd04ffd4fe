// SPDX-License-Identifier: Apache-2.0
// What every program of the opencl device shares. (elementwise.cc runs the elementwise family's
// plans with kernels/elementwise.cl compiled around the operator's functor source.)
#pragma once

#include "infinicore.h"

namespace infiniop::opencl {

// The build options that select a storage dtype in storage.cl (-DSTORAGE_F32, ...).
const char *storageOption(infiniDtype_t dtype);

}  // namespace infiniop::opencl
