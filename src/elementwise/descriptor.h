// SPDX-License-Identifier: Apache-2.0
// Elementwise operator descriptors: validated once at creation, immutable afterwards.
#pragma once

#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/handle.h"
#include "core/object.h"
#include "core/tensor.h"
#include "elementwise/plan.h"
#include "elementwise/runner.h"
#include "core/kernel.h"

namespace infiniop::elementwise {

// One tensor of the C call. With split_dim >= 0 it supplies two operands, A and B: its first
// and second half along that (already normalized) dim, or with `interleaved` the even and odd
// elements of each row merged from dims [split_dim, ndim) (ClippedSwiglu's split), against
// which every unsplit tensor is the merged row of results.
struct UserTensor {
  const char *name;
  infiniopTensorDescriptor_t tensor;
  int split_dim = -1;
  bool interleaved = false;
};

// Whatever an operator adds to its tensors at creation.
struct Options {
  const void *attributes = nullptr;  // copied; trivially copyable, the functor's layout
  size_t attributes_size = 0;
  // >= 0: dims [0, row_dim) of the iteration shape count as rows, and calculate may be asked to
  // run only the first of them and zero-fill the rest of the outputs (ClippedSwiglu's
  // group_index). The plan then keeps the logical dim order so the first rows come first.
  int row_dim = -1;
};

// Given the number of rows, says how many of them to compute (after every pointer check, before
// any write); may fail (e.g. a bad count in the data).
using ActiveRows = std::function<infiniStatus_t(size_t rows, size_t *active)>;

class Descriptor : public OperatorDescriptor {
 public:
  explicit Descriptor(const char *op) : OperatorDescriptor(op) {
    destroy = [](OperatorDescriptor *base) { delete static_cast<Descriptor *>(base); };
  }

  // Validates everything the C API promises (NULLs, device, dtypes, shapes, output overlap) and
  // builds the plan. `attributes` is copied; it must be trivially copyable.
  static infiniStatus_t create(infiniopHandle_t handle, const char *op_name, KernelId kernel,
                               std::initializer_list<UserTensor> outputs,
                               std::initializer_list<UserTensor> inputs, Descriptor **result,
                               const Options &options = {});

  // Checks pointers and aliasing, then runs the device kernel on `stream` (where the device has
  // queues: enqueues it). Pointers are in UserTensor order. With `active_rows` (row_dim given at
  // creation) only that many leading rows are computed and the outputs' other rows are set to zero.
  infiniStatus_t calculate(void *workspace, size_t workspace_size,
                           std::initializer_list<void *> outputs,
                           std::initializer_list<const void *> inputs, void *stream,
                           const ActiveRows &active_rows = nullptr) const;

  const Plan &plan() const { return plan_; }

 private:
  struct Layout {  // a user tensor as the aliasing checks need it
    std::string name;
    std::vector<size_t> shape;
    std::vector<ptrdiff_t> strides;
    ptrdiff_t lowest_byte = 0, end_byte = 0;  // address range relative to the data pointer
    bool empty = false;
  };

  std::unique_ptr<Runner> runner_;
  Plan plan_;
  size_t rows_ = 1;  // with Options::row_dim: rows of the iteration shape
  // A tensor the kernel sees in a contiguous workspace buffer (an interleaved split whose merged
  // dims are not one strided row), and the plan that copies it in (input) or out (output).
  struct Staging {
    int user;
    size_t offset;  // bytes into the workspace
    bool output;
    size_t numel;
    std::unique_ptr<Runner> copy;  // operands: destination, source
  };
  std::vector<Staging> staging_;
  std::vector<Layout> layouts_;  // outputs, then inputs
  int num_user_outputs_ = 0;
  alignas(16) unsigned char attributes_[kMaxAttributeBytes] = {};
};

// The C ABI functions shared by every elementwise operator (typed wrappers are one line each;
// get-workspace-size and destroy are core/object.h's, as for every operator). `desc` is the
// public pointer, checked to be an `op_name` descriptor. createInto creates and stores into
// *desc_ptr (checked for NULL) the public handle type.
template <class Public>
infiniStatus_t createInto(Public *desc_ptr, infiniopHandle_t handle, const char *op_name,
                          KernelId kernel, std::initializer_list<UserTensor> outputs,
                          std::initializer_list<UserTensor> inputs, const Options &options = {});
infiniStatus_t calculate(const char *op_name, const void *desc, void *workspace,
                         size_t workspace_size, std::initializer_list<void *> outputs,
                         std::initializer_list<const void *> inputs, void *stream,
                         const ActiveRows &active_rows = nullptr);

infiniStatus_t failNullDescriptorPointer(const char *op_name);

template <class Public>
infiniStatus_t createInto(Public *desc_ptr, infiniopHandle_t handle, const char *op_name,
                          KernelId kernel, std::initializer_list<UserTensor> outputs,
                          std::initializer_list<UserTensor> inputs, const Options &options) {
  if (!desc_ptr) return failNullDescriptorPointer(op_name);
  Descriptor *desc = nullptr;
  const infiniStatus_t status =
      Descriptor::create(handle, op_name, kernel, outputs, inputs, &desc, options);
  if (status == INFINI_STATUS_SUCCESS) publishDescriptor(desc_ptr, desc);
  return status;
}

}  // namespace infiniop::elementwise
