// SPDX-License-Identifier: Apache-2.0
// The layouts of the elementwise tests with one output and up to two same-shape inputs
// (GeluBackward, Gelu, GeluBackwardV2): strided, transposed, broadcast, reversed, in place, rank 8,
// for a row length n; and inputs with special values mixed in.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tensor_buffer.h"

namespace infiniop_test {

enum class Layout {
  kContiguous,
  kStrided,
  kTransposed,
  kMixed,
  kBroadcast,
  kReversed,
  kInPlaceInput,
  kInPlaceGrad,
  kRank8
};

const char *layoutName(Layout l);

struct Views {
  std::unique_ptr<TensorBuffer> out, in, grad;
  TensorBuffer *out_view;  // the buffer the output is written to (may be in or grad)
};

// Builds out/in/grad for a row length `n`: 2-D layouts use 3 rows of n.
Views makeViews(Layout layout, size_t n, infiniDtype_t dtype);

float specialOr(size_t i, float value, size_t period);

}  // namespace infiniop_test
