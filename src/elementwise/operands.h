// SPDX-License-Identifier: Apache-2.0
// From an elementwise operator's user tensors to a Plan: operands (a split tensor gives two),
// the iteration shape, and the folded dims. Used by Descriptor::create (descriptor.cc).
#pragma once

#include <string>
#include <vector>

#include "elementwise/descriptor.h"
#include "elementwise/plan.h"

namespace infiniop::elementwise {

// One strided view over the iteration shape: the user pointer `source`, displaced by `offset`
// elements.
struct Operand {
  std::string name;
  int source;
  std::vector<size_t> shape;
  std::vector<ptrdiff_t> strides;
  ptrdiff_t offset;
};

// Expands a user tensor into operands, halving a split one.
infiniStatus_t addOperands(const char *op, const UserTensor &user, int source,
                           std::vector<Operand> &operands);

// The operands of a call with interleaved splits, the iteration shape, and which user tensors
// must be staged through a contiguous workspace buffer.
infiniStatus_t addInterleavedOperands(const char *op, const std::vector<UserTensor> &users,
                                      std::vector<Operand> &operands,
                                      std::vector<size_t> &iteration_shape,
                                      std::vector<bool> &staged);

// The plan of `operands` over `iteration_shape`: dims folded, interleaved pairs marked.
Plan buildPlan(infiniDtype_t dtype, const std::vector<Operand> &operands, int num_user_outputs,
               const std::vector<size_t> &iteration_shape, bool keep_order);

}  // namespace infiniop::elementwise
