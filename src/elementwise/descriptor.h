// Elementwise operator descriptors: validated once at creation, immutable afterwards.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/handle.h"
#include "core/tensor.h"
#include "elementwise/plan.h"

namespace infiniop::elementwise {

// One tensor of the C call. With split_dim >= 0 it supplies two operands: its first and second
// half along that (already normalized) dim.
struct UserTensor {
  const char *name;
  infiniopTensorDescriptor_t tensor;
  int split_dim = -1;
};

class Descriptor {
 public:
  // Validates everything the C API promises (NULLs, device, dtypes, shapes, output overlap) and
  // builds the plan. `attributes` is copied; it must be trivially copyable.
  static infiniStatus_t create(infiniopHandle_t handle, const char *op_name,
                               const KernelTable &kernels,
                               std::initializer_list<UserTensor> outputs,
                               std::initializer_list<UserTensor> inputs, Descriptor **result,
                               const void *attributes = nullptr, size_t attributes_size = 0);

  // Checks pointers and aliasing, then runs the device kernel. Pointers are in UserTensor order.
  infiniStatus_t calculate(size_t workspace_size, std::initializer_list<void *> outputs,
                           std::initializer_list<const void *> inputs) const;

  const char *name() const { return op_name_; }
  const Plan &plan() const { return plan_; }

 private:
  struct Layout {  // a user tensor as the aliasing checks need it
    std::string name;
    std::vector<size_t> shape;
    std::vector<ptrdiff_t> strides;
    ptrdiff_t lowest_byte = 0, end_byte = 0;  // address range relative to the data pointer
    bool empty = false;
  };

  const char *op_name_ = "";
  Kernel kernel_ = nullptr;
  Plan plan_;
  std::vector<Layout> layouts_;  // outputs, then inputs
  int num_user_outputs_ = 0;
  alignas(16) unsigned char attributes_[kMaxAttributeBytes] = {};
};

// The public descriptor types are opaque handles to Descriptor.
template <class Public>
Descriptor *unwrap(Public desc) {
  return reinterpret_cast<Descriptor *>(desc);
}

// The C ABI functions shared by every elementwise operator (typed wrappers are one line each).
infiniStatus_t workspaceSize(const char *op_name, const Descriptor *desc, size_t *size);
infiniStatus_t destroy(const char *op_name, Descriptor *desc);
// Creates and stores into *desc_ptr (checked for NULL) the public handle type.
template <class Public>
infiniStatus_t createInto(Public *desc_ptr, infiniopHandle_t handle, const char *op_name,
                          const KernelTable &kernels, std::initializer_list<UserTensor> outputs,
                          std::initializer_list<UserTensor> inputs,
                          const void *attributes = nullptr, size_t attributes_size = 0);
infiniStatus_t calculate(const char *op_name, const Descriptor *desc, size_t workspace_size,
                         std::initializer_list<void *> outputs,
                         std::initializer_list<const void *> inputs);

infiniStatus_t failNullDescriptorPointer(const char *op_name);

template <class Public>
infiniStatus_t createInto(Public *desc_ptr, infiniopHandle_t handle, const char *op_name,
                          const KernelTable &kernels, std::initializer_list<UserTensor> outputs,
                          std::initializer_list<UserTensor> inputs, const void *attributes,
                          size_t attributes_size) {
  if (!desc_ptr) return failNullDescriptorPointer(op_name);
  Descriptor *desc = nullptr;
  const infiniStatus_t status = Descriptor::create(handle, op_name, kernels, outputs, inputs, &desc,
                                                   attributes, attributes_size);
  if (status == INFINI_STATUS_SUCCESS) *desc_ptr = reinterpret_cast<Public>(desc);
  return status;
}

}  // namespace infiniop::elementwise
