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
  ~DeviceMirror();
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
  void *scratch(size_t bytes);

  // The device address of a host address inside (or just past) an added region; NULL stays NULL.
  void *operator()(const void *host) const;
  void *operator()(TensorBuffer &t) const {
    return empty_as_null_ && t.numel() == 0 ? nullptr : (*this)(t.data());
  }
  void *operator()(TensorBuffer *t) const { return t ? (*this)(*t) : nullptr; }
  // From now on a tensor of no elements gives NULL (which the C ABI allows), not its address.
  void passEmptyAsNull(bool on) { empty_as_null_ = on; }

  // Host to device, every region (after the host changed them, e.g. poison()).
  void upload();
  // Device to host, every region but the inputs; waits for the work queued before.
  void download();

 private:
  struct Region {
    uint8_t *host;
    size_t bytes;
    void *device;
    bool write_back;
  };

  void addRegion(uint8_t *host, size_t bytes, bool write_back);

  infiniopHandle_t handle_;
  std::vector<Region> regions_;
  std::vector<void *> scratch_;
  bool empty_as_null_ = false;
};

}  // namespace infiniop_test
