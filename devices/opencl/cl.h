// SPDX-License-Identifier: Apache-2.0
// The one place that includes the OpenCL header: every file of the device targets the 1.2 API,
// so nothing newer (SVM, clCreateCommandQueueWithProperties) can slip in.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
