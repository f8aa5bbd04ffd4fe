// SPDX-License-Identifier: Apache-2.0
// Staging of test buffers through device memory, the same way on every device: each host region
// (a TensorBuffer's whole storage, guard elements included, or any other buffer) gets its own
// infiniopMalloc allocation holding a copy of its bytes, and a host address inside a region maps
// to the same offset inside its allocation. So views at offsets, negative strides, in-place
// aliasing and deliberate overlaps (an output one element into an input) stay exactly what the
// host test built, and after download() the host bytes are what the device holds: unwritten
// (poisoned) elements, guard overwrites and "a failed call writes nothing" are checked on the
// host as before. On the CPU devices infiniopMalloc is host memory and the copies are memmove;
// on OpenCL the download also waits for the work queued before it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "infiniop.h"
#include "tensor_buffer.h"

namespace infiniop_test {

class DeviceMirror {
 public:
  explicit DeviceMirror(infiniopHandle_t handle) : handle_(handle) {}
  ~DeviceMirror() {
    for (const Region &r : regions_)
      EXPECT_EQ(infiniopFree(handle_, r.device), INFINI_STATUS_SUCCESS);
    for (void *p : scratch_) EXPECT_EQ(infiniopFree(handle_, p), INFINI_STATUS_SUCCESS);
  }
  DeviceMirror(const DeviceMirror &) = delete;
  DeviceMirror &operator=(const DeviceMirror &) = delete;

  // Gives [host, host + bytes) a device copy, uploaded now, downloaded by download(). Adding a
  // region again (the same tensor as input and output) does nothing.
  void add(void *host, size_t bytes) { addRegion(static_cast<uint8_t *>(host), bytes, true); }
  void add(TensorBuffer &t) { add(t.storageBytes(), t.storage().size()); }
  void add(TensorBuffer *t) {
    if (t) add(*t);
  }
  // An input region: uploaded, never written back.
  void addInput(const void *host, size_t bytes) {
    addRegion(static_cast<uint8_t *>(const_cast<void *>(host)), bytes, false);
  }

  // Device memory of `bytes` with unspecified contents (a workspace); NULL for 0 bytes.
  void *scratch(size_t bytes) {
    if (bytes == 0) return nullptr;
    void *p = nullptr;
    EXPECT_EQ(infiniopMalloc(handle_, &p, bytes), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
    if (p) scratch_.push_back(p);
    return p;
  }

  // The device address of a host address inside (or just past) an added region; NULL stays NULL.
  void *operator()(const void *host) const {
    if (!host) return nullptr;
    const auto *h = static_cast<const uint8_t *>(host);
    for (bool past_end : {false, true})  // inside a region first, then just past one
      for (const Region &r : regions_)
        if (h >= r.host && (past_end ? h == r.host + r.bytes : h < r.host + r.bytes))
          return static_cast<uint8_t *>(r.device) + (h - r.host);
    ADD_FAILURE() << "test bug: a pointer outside every staged buffer";
    return const_cast<void *>(host);
  }
  void *operator()(TensorBuffer &t) const { return (*this)(t.data()); }
  void *operator()(TensorBuffer *t) const { return t ? (*this)(t->data()) : nullptr; }

  // Host to device, every region (after the host changed them, e.g. poison()).
  void upload() {
    for (const Region &r : regions_)
      EXPECT_EQ(infiniopMemcpyHostToDevice(handle_, r.device, r.host, r.bytes, nullptr),
                INFINI_STATUS_SUCCESS)
          << infiniopGetLastError();
  }
  // Device to host, every region but the inputs; waits for the work queued before.
  void download() {
    for (const Region &r : regions_) {
      if (!r.write_back) continue;
      EXPECT_EQ(infiniopMemcpyDeviceToHost(handle_, r.host, r.device, r.bytes, nullptr),
                INFINI_STATUS_SUCCESS)
          << infiniopGetLastError();
    }
  }

 private:
  struct Region {
    uint8_t *host;
    size_t bytes;
    void *device;
    bool write_back;
  };

  void addRegion(uint8_t *host, size_t bytes, bool write_back) {
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

  infiniopHandle_t handle_;
  std::vector<Region> regions_;
  std::vector<void *> scratch_;
};

}  // namespace infiniop_test
