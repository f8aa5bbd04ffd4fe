// SPDX-License-Identifier: Apache-2.0
#include "numeric.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace bench {

size_t dtypeSize(infiniDtype_t t) {
  return t == INFINI_DTYPE_F32 ? 4 : t == INFINI_DTYPE_I8 || t == INFINI_DTYPE_F8 ? 1 : 2;
}

const char *dtypeName(infiniDtype_t t) {
  switch (t) {
    case INFINI_DTYPE_F32:
      return "f32";
    case INFINI_DTYPE_F16:
      return "f16";
    case INFINI_DTYPE_BF16:
      return "bf16";
    default:
      return "?";
  }
}

std::vector<infiniDevice_t> builtDevices() {
  int count = 0;
  infiniopGetDeviceTypes(nullptr, 0, &count);
  std::vector<infiniDevice_t> devices(static_cast<size_t>(count));
  infiniopGetDeviceTypes(devices.data(), count, &count);
  return devices;
}

namespace {
infiniopDeviceInfo_t info(infiniDevice_t d) {
  infiniopDeviceInfo_t i{"?", 0, 1};
  infiniopGetDeviceInfo(d, &i);
  return i;
}
}  // namespace

const char *deviceName(infiniDevice_t d) {
  return info(d).name;
}
bool isHostMemory(infiniDevice_t d) {
  return info(d).host_memory != 0;
}
int deviceCount(infiniDevice_t d) {
  return info(d).count;
}

float decode(infiniDtype_t t, const void *p) {
  if (t == INFINI_DTYPE_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (t == INFINI_DTYPE_BF16) {
    const uint32_t u = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float mag = e == 0x1f ? (m ? NAN : INFINITY)
              : e == 0  ? std::ldexp(static_cast<float>(m), -24)
                        : std::ldexp(static_cast<float>(m | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

void encode(infiniDtype_t t, void *p, float v) {
  if (t == INFINI_DTYPE_F32) {
    std::memcpy(p, &v, 4);
    return;
  }
  uint16_t h;
  if (t == INFINI_DTYPE_BF16) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (finite inputs only)
    h = static_cast<uint16_t>(u >> 16);
  } else {
    // F16: scale the magnitude so that rint() rounds at the F16 ulp of its binade.
    const float a = std::fabs(v);
    const int e = a == 0 ? -14 : std::max(std::ilogb(a), -14);
    const long q = std::lrint(std::ldexp(a, 10 - e));  // 11-bit significand, maybe 2^11
    const long bits = e == -14 && q < 0x400 ? q : (long{e + 15} << 10) + (q - 0x400);
    h = static_cast<uint16_t>(std::min<long>(bits, 0x7c00) | (std::signbit(v) ? 0x8000 : 0));
  }
  std::memcpy(p, &h, 2);
}

double ulpAt(infiniDtype_t t, double v) {
  const int mantissa = t == INFINI_DTYPE_F16 ? 10 : t == INFINI_DTYPE_BF16 ? 7 : 23;
  const int min_exp = t == INFINI_DTYPE_F16 ? -14 : -126;
  const int e = v == 0 ? min_exp : std::max(std::ilogb(v), min_exp);
  return std::ldexp(1.0, e - mantissa);
}

}  // namespace bench
