// SPDX-License-Identifier: Apache-2.0
// Host-side view of the floating dtypes the bench uses: decode to float, encode from float,
// the spacing (ulp) at a value, and names.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "infiniop.h"

namespace bench {

size_t dtypeSize(infiniDtype_t t);       // bytes per element: 4 F32, 2 F16/BF16, 1 I8/F8
const char *dtypeName(infiniDtype_t t);  // "f32", "f16", "bf16"
// The library's own device list and facts (infiniopGetDeviceTypes, infiniopGetDeviceInfo).
std::vector<infiniDevice_t> builtDevices();
const char *deviceName(infiniDevice_t d);  // "cpu", "cpu_reference", ...
bool isHostMemory(infiniDevice_t d);
int deviceCount(infiniDevice_t d);

float decode(infiniDtype_t t, const void *p);
// Rounds to nearest even; the bench's values are finite and far from the F16 overflow.
void encode(infiniDtype_t t, void *p, float v);

// The distance between adjacent representable values of dtype t at magnitude |v| (v = 0 and
// subnormals: the smallest subnormal step).
double ulpAt(infiniDtype_t t, double v);

}  // namespace bench
