// SPDX-License-Identifier: Apache-2.0
// One operator at one shape and dtype on one device: its tensors allocated and filled, its
// descriptor created; run() times well, check() compares with cpu_reference. On a device with
// its own memory (opencl) the tensors also live in infiniopMalloc memory, uploaded once, and
// run() waits for the call to finish.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "infiniop.h"
#include "ops.h"

namespace bench {

struct CheckResult {
  bool passed = false;
  size_t checked = 0;     // output elements compared
  size_t stride = 1;      // every stride-th element (or row, for split operators); 1: all
  size_t bad = 0;         // elements beyond the tolerance
  double max_ulp = 0;     // largest |got - want| in ulps of the output's largest |want|
  std::string first_bad;  // where the first element beyond the tolerance is, and its values
  std::string error;      // non-empty: the reference could not run
};

class Case {
 public:
  // Returns null and sets *error (status name and the library's message) on failure. The
  // descriptor is created in `fpmath` mode (infiniopSetHandleFpmathMode); the inputs are
  // uniform over [-input_bound, input_bound).
  static std::unique_ptr<Case> create(const OpInfo &op, infiniDevice_t device, infiniDtype_t dtype,
                                      const std::vector<size_t> &shape, infiniopFpmathMode_t fpmath,
                                      std::string *error, float input_bound = 10.0f);
  ~Case();

  // One call to completion: on opencl the enqueue and infiniopStreamSynchronize(handle, NULL).
  infiniStatus_t run();
  // Seconds that creating the operator's descriptor took (on opencl: the program build).
  double createSeconds() const { return create_s_; }
  // Compares with cpu_reference on at most about `budget` output elements: the whole output if
  // it is that small, else every k-th element (k odd, so that every SIMD lane gets checked) or,
  // for operators that split the last dim, every k-th row.
  CheckResult check(size_t budget);

  size_t elements() const;  // output elements written per call
  size_t bytes() const;     // every input read once + every output written once

  // The same two counts for `op` at shape `shape` in `dtype`, before creating it.
  static size_t elementsOf(const OpInfo &op, const std::vector<size_t> &shape);
  static size_t bytesOf(const OpInfo &op, infiniDtype_t dtype, const std::vector<size_t> &shape);

 private:
  struct Tensor {
    std::vector<size_t> shape;
    size_t count = 0;
    size_t element_size = 0;
    std::unique_ptr<char, void (*)(void *)> data{nullptr, nullptr};  // host memory
    void *device = nullptr;  // infiniopMalloc memory on opencl; null: `data` is the device's
    size_t bytes() const { return count * element_size; }
  };
  Case(const OpInfo &op, infiniDtype_t dtype, std::vector<size_t> shape);
  // On opencl: device memory for every tensor and the workspace, with the host data uploaded.
  infiniStatus_t upload();
  // On opencl: copies the outputs back into their host data.
  infiniStatus_t download();
  static void *pointer(Tensor &t) { return t.device ? t.device : t.data.get(); }
  static std::vector<size_t> shapeOf(Extent e, std::vector<size_t> base);
  Tensor allocate(Extent e, std::vector<size_t> shape) const;
  infiniDtype_t dtypeOf(Extent e) const { return extentDtype(e, dtype_); }
  // Creates the operator on `handle` for the case's tensors with shape `base`.
  infiniStatus_t bindOn(infiniopHandle_t handle, const std::vector<size_t> &base, Bound *bound);

  const OpInfo &op_;
  infiniDtype_t dtype_;
  std::vector<size_t> shape_;
  infiniopHandle_t handle_ = nullptr;
  bool own_memory_ = false;  // the device has its own memory (opencl): tensors are uploaded
  double create_s_ = 0;
  std::vector<Tensor> outs_, ins_;
  Bound bound_;
  Tensor workspace_;
};

std::string shapeText(const std::vector<size_t> &shape);  // "4096x4096"

}  // namespace bench
