// SPDX-License-Identifier: Apache-2.0
// device_memory.h's DeviceMirror, compiled once into the test support library
// (tests/CMakeLists.txt).
#include "device_memory.h"

namespace infiniop_test {

DeviceMirror::~DeviceMirror() {
  for (const Region &r : regions_)
    EXPECT_EQ(infiniopFree(handle_, r.device), INFINI_STATUS_SUCCESS);
  for (void *p : scratch_) EXPECT_EQ(infiniopFree(handle_, p), INFINI_STATUS_SUCCESS);
}

void *DeviceMirror::scratch(size_t bytes) {
  if (bytes == 0) return nullptr;
  void *p = nullptr;
  EXPECT_EQ(infiniopMalloc(handle_, &p, bytes), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  if (p) scratch_.push_back(p);
  return p;
}

void *DeviceMirror::operator()(const void *host) const {
  if (!host) return nullptr;
  const auto *h = static_cast<const uint8_t *>(host);
  for (bool past_end : {false, true})  // inside a region first, then just past one
    for (const Region &r : regions_)
      if (h >= r.host && (past_end ? h == r.host + r.bytes : h < r.host + r.bytes))
        return static_cast<uint8_t *>(r.device) + (h - r.host);
  ADD_FAILURE() << "test bug: a pointer outside every staged buffer";
  return const_cast<void *>(host);
}

void DeviceMirror::upload() {
  for (const Region &r : regions_)
    EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, r.device, r.host, r.bytes, nullptr),
              INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
}

void DeviceMirror::download() {
  for (const Region &r : regions_) {
    if (!r.write_back) continue;
    EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, r.host, r.device, r.bytes, nullptr),
              INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
  }
}

void DeviceMirror::addRegion(uint8_t *host, size_t bytes, bool write_back) {
  if (!host) return;
  for (Region &r : regions_) {
    if (r.host == host && r.bytes == bytes) {
      r.write_back = r.write_back || write_back;
      return;
    }
    if (host < r.host + r.bytes && r.host < host + bytes) {
      ADD_FAILURE() << "test bug: staged buffers overlap on the host";
      return;
    }
  }
  Region r{host, bytes, nullptr, write_back};
  EXPECT_EQ(infiniopMalloc(handle_, &r.device, bytes), INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  if (!r.device) return;
  EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, r.device, host, bytes, nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  regions_.push_back(r);
}

}  // namespace infiniop_test
