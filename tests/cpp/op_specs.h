// SPDX-License-Identifier: Apache-2.0
// Every operator of the C API as data: its tensors in the API's order, a small valid
// configuration (shapes (R, H) = (2, 4), K = 1, index data that routes every row) and its four
// functions behind one signature, so that a test can drive every operator with one loop (the
// bad-input table, the concurrency test, the fault-injection sweep, the object-kind test). The
// signatures (functions, slots and their flags, attributes) are tests/common/operators.h's; the
// configurations are op_specs.cc's.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "infiniop.h"
#include "tensor_buffer.h"

namespace infiniop_test {

// One tensor argument of an operator, in the API's order.
struct Slot {
  const char *name;
  std::vector<size_t> shape;
  infiniDtype_t dtype;
  bool output;
  bool nullable;                // the descriptor may be NULL
  std::vector<int64_t> values;  // index data (written as the slot's integer dtype)
  bool absent = false;          // passed as a NULL descriptor (unused in this configuration)
};

using Attrs = std::vector<double>;
using Descs = std::vector<infiniopTensorDescriptor_t>;
using Ptrs = std::vector<void *>;

struct OpSpec {
  const char *name;
  std::vector<Slot> slots;
  Attrs attrs;
  std::function<infiniStatus_t(infiniopHandle_t, void **, const Descs &, const Attrs &)> create;
  std::function<infiniStatus_t(void *, size_t *)> workspace;
  // calculate(descriptor, workspace, workspace_size, data pointers in slot order, stream)
  std::function<infiniStatus_t(void *, void *, size_t, const Ptrs &, void *)> calculate;
  std::function<infiniStatus_t(void *)> destroy;
};

constexpr auto F32 = INFINI_DTYPE_F32;
constexpr auto I32 = INFINI_DTYPE_I32;
constexpr auto I64 = INFINI_DTYPE_I64;
constexpr auto BOOL = INFINI_DTYPE_BOOL;

// Every operator with a small valid configuration (shapes (R, H) = (2, 4), K = 1).
const std::vector<OpSpec> &specs();

const OpSpec &spec(const std::string &name);

size_t slotIndex(const OpSpec &op, const std::string &name);

// Writes a slot's index data (its `values`) into an I32, I64 or BOOL buffer, in logical order.
void writeValues(TensorBuffer &b, const std::vector<int64_t> &values);

}  // namespace infiniop_test
