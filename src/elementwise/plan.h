// SPDX-License-Identifier: Apache-2.0
// The device-independent half of the elementwise framework.
//
// An elementwise operator sees "operands": outputs first, then inputs, each a strided view over
// one common iteration shape. An operand is a whole user tensor or one half of it along a dim
// (SwiGLU's x1 and x2 are the two halves of x). At descriptor creation the operands are folded
// into a Plan: dims of size 1 dropped, dims ordered by the first output's strides, adjacent dims
// merged wherever every operand allows it. Kernels then walk the plan as rows of its innermost
// dim, so a contiguous tensor is one row and needs no index arithmetic at all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kernel.h"
#include "infinicore.h"
#include "infiniop/tensor_descriptor.h"

namespace infiniop::elementwise {

constexpr int kMaxOperands = 8;
constexpr int kMaxDims = INFINIOP_MAX_NDIM;

struct Plan : ::infiniop::Plan {
  infiniDtype_t dtype = INFINI_DTYPE_INVALID;
  size_t element_size = 0;
  int num_outputs = 0, num_inputs = 0;  // operands [0, num_outputs) are outputs
  size_t numel = 0;
  int ndim = 1;  // >= 1; dim ndim-1 is the inner (row) dim
  size_t shape[kMaxDims] = {};
  ptrdiff_t strides[kMaxOperands][kMaxDims] = {};  // in elements
  // Operand k reads or writes user pointer source[k], displaced by offset[k] elements.
  int source[kMaxOperands] = {};
  ptrdiff_t offset[kMaxOperands] = {};
  bool inner_contiguous = false;  // every operand has stride 1 along the inner dim
  // Every operand has stride 1 along the inner dim except interleaved pairs: operands k, k+1
  // marked kPairFirst/kPairSecond that take turns in one stride-1 run (stride 2, adjacent
  // offsets), as ClippedSwiglu's A and B do. Set only when some pair exists.
  bool inner_paired = false;
  enum Role : unsigned char { kAlone, kPairFirst, kPairSecond };
  Role role[kMaxOperands] = {};
  // F32 outputs in the relaxed mode (infiniopFpmathMode_t): kernels that have a relaxed
  // evaluation take it; set only for F32 plans.
  bool relaxed = false;

  int numOperands() const { return num_outputs + num_inputs; }
  size_t rowLength() const { return shape[ndim - 1]; }
};

// What an operator's attributes look like to a kernel: a small trivially-copyable struct.
constexpr size_t kMaxAttributeBytes = 64;

}  // namespace infiniop::elementwise
