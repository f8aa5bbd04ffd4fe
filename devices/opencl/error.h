// SPDX-License-Identifier: Apache-2.0
// OpenCL error codes as statuses: every failed OpenCL call becomes a status and a message naming
// the call and the error ("clCreateBuffer: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)").
#pragma once

#include <string>

#include "infinicore.h"
#include "opencl/cl.h"

namespace infiniop::opencl {

// "CL_OUT_OF_RESOURCES", ...; "CL_UNKNOWN_ERROR" for a code no header of 1.2 to 3.0 names.
const char *clErrorName(cl_int code);

// The status a failed OpenCL call maps to.
infiniStatus_t clStatus(cl_int code);

// Records "<where>: <call>: <NAME> (<code>)" as the last error and returns clStatus(code).
infiniStatus_t clFail(const std::string &where, const char *call, cl_int code);

}  // namespace infiniop::opencl

// Returns early from the enclosing function when the OpenCL call `expr` does not succeed.
#define INFINIOP_CL_CHECK(where, call, expr)                                 \
  do {                                                                       \
    const cl_int infiniop_cl_code_ = (expr);                                 \
    if (infiniop_cl_code_ != CL_SUCCESS)                                     \
      return ::infiniop::opencl::clFail((where), (call), infiniop_cl_code_); \
  } while (0)
