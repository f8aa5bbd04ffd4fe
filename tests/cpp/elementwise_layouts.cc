// SPDX-License-Identifier: Apache-2.0
// elementwise_layouts.h's functions, compiled once into the test support library
// (tests/CMakeLists.txt).
#include "elementwise_layouts.h"

namespace infiniop_test {

const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "Strided",      "Transposed",  "Mixed", "Broadcast",
                                "Reversed",   "InPlaceInput", "InPlaceGrad", "Rank8"};
  return names[static_cast<int>(l)];
}

Views makeViews(Layout layout, size_t n, infiniDtype_t dtype) {
  const size_t r = 3;
  const auto c = static_cast<ptrdiff_t>(n), rows = static_cast<ptrdiff_t>(r);
  const std::vector<size_t> shape = {r, n};
  auto make = [&](std::vector<ptrdiff_t> strides) {
    return std::make_unique<TensorBuffer>(shape, strides, dtype);
  };
  Views v;
  switch (layout) {
    case Layout::kContiguous:
    case Layout::kInPlaceInput:
      v.out = std::make_unique<TensorBuffer>(std::vector<size_t>{r * n}, dtype);
      v.in = std::make_unique<TensorBuffer>(std::vector<size_t>{r * n}, dtype);
      v.grad = std::make_unique<TensorBuffer>(std::vector<size_t>{r * n}, dtype);
      break;
    case Layout::kStrided:
    case Layout::kInPlaceGrad:
      v.out = make({2 * c + 1, 2});
      v.in = make({c + 5, 1});
      v.grad = make({2 * c + 1, 2});
      break;
    case Layout::kTransposed:
      v.out = make({1, rows});
      v.in = make({1, rows});
      v.grad = make({1, rows});
      break;
    case Layout::kMixed:
      v.out = make({});
      v.in = make({1, rows});
      v.grad = make({-1, -(rows + 1)});
      break;
    case Layout::kBroadcast:
      v.out = make({});
      v.in = make({1, 0});
      v.grad = make({0, 1});
      break;
    case Layout::kReversed:
      v.out = make({-c, -1});
      v.in = make({-c, -1});
      v.grad = make({});
      break;
    case Layout::kRank8: {
      const std::vector<size_t> shape8 = {2, 1, 2, 3, 1, 2, 1, n};
      v.out = std::make_unique<TensorBuffer>(shape8, dtype);
      // Inputs: every dim padded, and the two outer dims swapped in memory.
      std::vector<ptrdiff_t> padded(8);
      ptrdiff_t step = 1;
      for (size_t d = 8; d-- > 0;) {
        padded[d] = step;
        step *= static_cast<ptrdiff_t>(shape8[d]) + 1;
      }
      std::swap(padded[0], padded[2]);
      v.in = std::make_unique<TensorBuffer>(shape8, padded, dtype);
      v.grad = std::make_unique<TensorBuffer>(shape8, padded, dtype);
      break;
    }
  }
  v.out_view = v.out.get();
  if (layout == Layout::kInPlaceInput) v.out_view = v.in.get();
  if (layout == Layout::kInPlaceGrad) v.out_view = v.grad.get();
  return v;
}

float specialOr(size_t i, float value, size_t period) {
  static const float specials[] = {INFINITY, -INFINITY, NAN,   1e4f,  -1e4f,  1e-40f,
                                   -1e-40f,  0.0f,      -0.0f, 20.0f, -20.0f, 1e-6f};
  if (i % period != period - 1) return value;
  return specials[(i / period) % (sizeof(specials) / sizeof(specials[0]))];
}

}  // namespace infiniop_test
