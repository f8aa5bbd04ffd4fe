// SPDX-License-Identifier: Apache-2.0
// What the ClippedSwiglu / ClippedSwigluBackward suites share: attributes, group_index tensors,
// the calls of both operators, the long-double oracle (clipped_swiglu_test.cc's file comment has
// the tolerances), the layouts and one case checked whole. clipped_swiglu_oracle_test.cc runs the
// cases over every dim, split, group_index, layout and size; clipped_swiglu_test.cc everything
// else (tests/CMakeLists.txt compiles it quickly).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "accuracy.h"
#include "clipped_swiglu_truth.h"
#include "device_param.h"
#include "device_memory.h"
#include "infiniop/ops/clipped_swiglu.h"
#include "infiniop/ops/clipped_swiglu_backward.h"
#include "tensor_buffer.h"

namespace infiniop_test::clipped_swiglu {

using Attrs = ClippedSwigluAttrs;
using Truth = ClippedSwigluTruth;
inline Truth oracle(infiniDtype_t dtype, float A, float B, float dy, const Attrs &at) {
  return clippedSwigluTruth(dtype, A, B, dy, at);
}

inline std::string attrsName(const Attrs &at) {
  return "dim=" + std::to_string(at.dim) + " alpha=" + std::to_string(at.alpha) +
         " limit=" + std::to_string(at.limit) + " bias=" + std::to_string(at.bias) +
         (at.interleaved ? " interleaved" : " halves") +
         (at.clamp_mode ? " clamp_mode=" + std::to_string(at.clamp_mode) : "");
}

// The create calls: clamp_mode 0 by the original functions (what bindings call), any other by V2.
inline infiniStatus_t createForward(infiniopHandle_t h, infiniopClippedSwigluDescriptor_t *op,
                                    infiniopTensorDescriptor_t y, infiniopTensorDescriptor_t x,
                                    infiniopTensorDescriptor_t groups, const Attrs &at) {
  if (at.clamp_mode == 0)
    return infiniopCreateClippedSwigluDescriptor(h, op, y, x, groups, at.dim, at.alpha, at.limit,
                                                 at.bias, at.interleaved);
  return infiniopCreateClippedSwigluV2Descriptor(h, op, y, x, groups, at.dim, at.alpha, at.limit,
                                                 at.bias, at.interleaved, at.clamp_mode);
}
inline infiniStatus_t createBackward(infiniopHandle_t h,
                                     infiniopClippedSwigluBackwardDescriptor_t *op,
                                     infiniopTensorDescriptor_t x_grad,
                                     infiniopTensorDescriptor_t y_grad,
                                     infiniopTensorDescriptor_t x,
                                     infiniopTensorDescriptor_t groups, const Attrs &at) {
  if (at.clamp_mode == 0)
    return infiniopCreateClippedSwigluBackwardDescriptor(
        h, op, x_grad, y_grad, x, groups, at.dim, at.alpha, at.limit, at.bias, at.interleaved);
  return infiniopCreateClippedSwigluBackwardV2Descriptor(h, op, x_grad, y_grad, x, groups, at.dim,
                                                         at.alpha, at.limit, at.bias,
                                                         at.interleaved, at.clamp_mode);
}

// A 1-D (or, for the error tests, any-shape) group_index with its own storage; strided views
// carry a negative filler between the counts, which a library ignoring the stride would reject.
class GroupIndex {
 public:
  static GroupIndex counts(const std::vector<int64_t> &values, ptrdiff_t stride = 1) {
    GroupIndex g;
    g.shape_ = {values.size()};
    g.strides_ = {stride};
    g.storage_.assign(values.empty() ? 1 : values.size() * static_cast<size_t>(stride), -7);
    for (size_t i = 0; i < values.size(); ++i)
      g.storage_[i * static_cast<size_t>(stride)] = values[i];
    return g;
  }
  GroupIndex &withShape(std::vector<size_t> shape) {
    shape_ = std::move(shape);
    strides_.assign(shape_.size(), 1);
    for (size_t d = shape_.size(); d-- > 1;)
      strides_[d - 1] = strides_[d] * static_cast<ptrdiff_t>(shape_[d]);
    return *this;
  }
  GroupIndex &withDtype(infiniDtype_t dtype) {
    dtype_ = dtype;
    return *this;
  }
  GroupIndex &withNullData() {
    null_data_ = true;
    return *this;
  }
  infiniopTensorDescriptor_t descriptor() const {
    infiniopTensorDescriptor_t desc = nullptr;
    infiniopCreateTensorDescriptor(&desc, shape_.size(), shape_.data(), strides_.data(), dtype_);
    return desc;
  }
  const void *data() const { return null_data_ ? nullptr : storage_.data(); }
  // Uploads the counts (an input) to `device`.
  void stage(DeviceMirror &device) const {
    device.addInput(storage_.data(), storage_.size() * sizeof(int64_t));
  }

 private:
  std::vector<int64_t> storage_;
  std::vector<size_t> shape_;
  std::vector<ptrdiff_t> strides_;
  infiniDtype_t dtype_ = INFINI_DTYPE_I64;
  bool null_data_ = false;
};

// The message of the last failed call (destroying descriptors afterwards succeeds, which clears
// infiniopGetLastError()).
inline std::string last_error;

inline infiniStatus_t runForward(infiniopHandle_t h, TensorBuffer &y, TensorBuffer &x,
                                 const GroupIndex *groups, const Attrs &at) {
  auto yd = y.descriptor(), xd = x.descriptor();
  auto gd = groups ? groups->descriptor() : nullptr;
  infiniopClippedSwigluDescriptor_t op = nullptr;
  infiniStatus_t s = createForward(h, &op, yd, xd, gd, at);
  last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  if (gd) infiniopDestroyTensorDescriptor(gd);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace_size = 0;
  EXPECT_EQ(infiniopGetClippedSwigluWorkspaceSize(op, &workspace_size), INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  device.add(y);
  device.add(x);
  if (groups) groups->stage(device);
  void *workspace = device.scratch(workspace_size);  // staging of non-flat interleaved rows
  s = infiniopClippedSwiglu(op, workspace, workspace_size, device(y), device(x),
                            device(groups ? groups->data() : nullptr), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  if (s == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(last_error, "");
  }
  infiniopDestroyClippedSwigluDescriptor(op);
  return s;
}

inline infiniStatus_t runBackward(infiniopHandle_t h, TensorBuffer &x_grad, void *x_grad_data,
                                  TensorBuffer &y_grad, TensorBuffer &x, const GroupIndex *groups,
                                  const Attrs &at) {
  auto gd = x_grad.descriptor(), yd = y_grad.descriptor(), xd = x.descriptor();
  auto id = groups ? groups->descriptor() : nullptr;
  infiniopClippedSwigluBackwardDescriptor_t op = nullptr;
  infiniStatus_t s = createBackward(h, &op, gd, yd, xd, id, at);
  last_error = infiniopGetLastError();
  infiniopDestroyTensorDescriptor(gd);
  infiniopDestroyTensorDescriptor(yd);
  infiniopDestroyTensorDescriptor(xd);
  if (id) infiniopDestroyTensorDescriptor(id);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace_size = 0;
  EXPECT_EQ(infiniopGetClippedSwigluBackwardWorkspaceSize(op, &workspace_size),
            INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);  // x_grad_data may lie in x (in place, or overlapping)
  device.add(x_grad);
  device.add(y_grad);
  device.add(x);
  if (groups) groups->stage(device);
  void *workspace = device.scratch(workspace_size);  // staging of non-flat interleaved rows
  s = infiniopClippedSwigluBackward(op, workspace, workspace_size, device(x_grad_data),
                                    device(y_grad), device(x),
                                    device(groups ? groups->data() : nullptr), nullptr);
  last_error = infiniopGetLastError();
  device.download();
  if (s == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(last_error, "");
  }
  infiniopDestroyClippedSwigluBackwardDescriptor(op);
  return s;
}

inline bool isPositiveZero(TensorBuffer &t, size_t i) {
  const std::vector<char> zero(t.elementSize(), 0);
  return std::memcmp(t.at(i), zero.data(), zero.size()) == 0;
}

// ---------------------------------------------------------------- one case, checked whole
enum class Layout { kContiguous, kColumnMajor, kMixed, kInPlace };
inline const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "ColumnMajor", "Mixed", "InPlace"};
  return names[static_cast<int>(l)];
}

// Strides of a split tensor (x, x_grad) whose merged row, dims [d, rank), stays one strided row
// of step `step`, while the rows themselves (dims [0, d)) are laid out column-major, with `pad`
// elements between consecutive rows.
inline std::vector<ptrdiff_t> rowStrides(const std::vector<size_t> &shape, size_t d, ptrdiff_t step,
                                         ptrdiff_t pad) {
  std::vector<ptrdiff_t> strides(shape.size());
  ptrdiff_t unit = step;
  for (size_t k = shape.size(); k-- > d;) {
    strides[k] = unit;
    unit *= static_cast<ptrdiff_t>(shape[k]);
  }
  unit += pad;
  for (size_t k = 0; k < d; ++k) {
    strides[k] = unit;
    unit *= static_cast<ptrdiff_t>(shape[k]);
  }
  return strides;
}

// Strides of x, y, y_grad and x_grad.
// Halves split: ColumnMajor transposes everything; Mixed: x transposed, y and x_grad padded (row
// strides that nothing merges), y_grad contiguous; InPlace: x padded and x_grad is x itself, y
// and y_grad transposed.
// Interleaved split (SEMANTICS: any strides), one layout per way the library can pair the
// elements of a merged row (docs/architecture.md): ColumnMajor: x rows one strided row (step 2)
// but the rows transposed and padded, x_grad likewise with step 1, y and y_grad transposed;
// Mixed: x transposed, y and y_grad contiguous, x_grad padded; InPlace: x transposed and x_grad
// is x itself, y and y_grad padded (no tensor has flat rows).
struct Strides {
  std::vector<ptrdiff_t> x, y, dy, dx;
};
inline Strides stridesFor(Layout layout, bool interleaved, size_t d,
                          const std::vector<size_t> &full, const std::vector<size_t> &half) {
  switch (layout) {
    case Layout::kColumnMajor:
      if (interleaved)
        return {rowStrides(full, d, 2, 1), columnMajorStrides(half), columnMajorStrides(half),
                rowStrides(full, d, 1, 0)};
      return {columnMajorStrides(full), columnMajorStrides(half), columnMajorStrides(half),
              columnMajorStrides(full)};
    case Layout::kMixed:
      if (interleaved) return {columnMajorStrides(full), {}, {}, paddedStrides(full)};
      return {columnMajorStrides(full), paddedStrides(half), {}, paddedStrides(full)};
    case Layout::kInPlace:
      if (interleaved)
        return {columnMajorStrides(full), paddedStrides(half), paddedStrides(half), {}};
      return {paddedStrides(full), columnMajorStrides(half), columnMajorStrides(half), {}};
    default:
      return {};
  }
}

enum class Groups { kNone, kLess, kEqual, kMore, kHuge, kZeros, kEmpty, kEmptyNull, kStrided };
inline const char *groupsName(Groups g) {
  static const char *names[] = {"none",  "less",  "equal",      "more",   "huge",
                                "zeros", "empty", "empty+NULL", "strided"};
  return names[static_cast<int>(g)];
}

// The group_index of each kind for `pre` rows, and the rows it activates.
inline GroupIndex groupsFor(Groups kind, size_t pre, size_t *active) {
  const auto p = static_cast<int64_t>(pre);
  *active = pre;
  switch (kind) {
    case Groups::kLess:  // sum = pre / 2
      *active = pre / 2;
      return GroupIndex::counts({p / 4, 0, p / 2 - p / 4});
    case Groups::kEqual:
      return GroupIndex::counts({p - 1, 1});
    case Groups::kMore:
      return GroupIndex::counts({p, 3});
    case Groups::kHuge:  // the sum overflows int64
      return GroupIndex::counts({INT64_MAX, INT64_MAX, 1});
    case Groups::kZeros:
      *active = 0;
      return GroupIndex::counts({0, 0, 0});
    case Groups::kEmpty:
      *active = 0;
      return GroupIndex::counts({});
    case Groups::kEmptyNull:  // an empty group_index may come with a NULL pointer
      *active = 0;
      return GroupIndex::counts({}).withNullData();
    case Groups::kStrided:  // stride 2, sum = pre - 1 (>= 0)
      *active = pre ? pre - 1 : 0;
      return GroupIndex::counts({p ? p - 1 : 0, 0}, 2);
    default:
      return GroupIndex::counts({});
  }
}

// The special inputs: infinities, NaN, huge and subnormal values, zeros, +-limit and the floats
// beyond, the far left, and the gate's boundary and the float past it (clamp_mode 1; 1 else).
inline std::vector<float> specialValues(float limit, int64_t clamp_mode) {
  const float edge = clamp_mode == 1 ? gateBoundary(limit) : 1.0f;
  return {INFINITY,
          -INFINITY,
          NAN,
          1e4f,
          -1e4f,
          1e-40f,
          -1e-40f,
          0.0f,
          -0.0f,
          limit,
          -limit,
          std::nextafter(limit, INFINITY),
          std::nextafter(-limit, -INFINITY),
          1.0f,
          -1.5f,
          -100.0f,
          -60.0f,
          90.0f,
          edge,
          std::nextafter(edge, INFINITY)};
}

// Inputs: uniform over [-range, range] with a share near 0, and every 13th value special.
inline float inputValue(size_t i, float value, float limit, int64_t clamp_mode = 0) {
  if (i % 13 != 12) return value;
  const std::vector<float> specials = specialValues(limit, clamp_mode);
  return specials[(i / 13) % specials.size()];
}

struct Case {
  std::vector<size_t> shape;  // x's
  Attrs attrs;
  Groups groups = Groups::kNone;
};

inline std::string caseName(const Case &c) {
  std::string s = "x shape [";
  for (size_t k = 0; k < c.shape.size(); ++k) s += (k ? "," : "") + std::to_string(c.shape[k]);
  return s + "] " + attrsName(c.attrs) + " groups=" + groupsName(c.groups);
}

inline void checkCase(infiniopHandle_t h, infiniDtype_t dtype, Layout layout, const Case &c,
                      uint64_t seed) {
  SCOPED_TRACE(caseName(c));
  const Attrs &at = c.attrs;
  const size_t rank = c.shape.size();
  const size_t d = static_cast<size_t>(at.dim < 0 ? at.dim + static_cast<int64_t>(rank) : at.dim);
  std::vector<size_t> full = c.shape, half = c.shape;
  half[d] /= 2;
  size_t pre = 1, numel = 1;
  for (size_t k = 0; k < rank; ++k) {
    if (k < d) pre *= full[k];
    numel *= full[k];
  }
  const size_t L = numel / pre, P = L / 2;  // merged row length, pairs per row
  const Strides st = stridesFor(layout, at.interleaved, d, full, half);
  TensorBuffer x(full, st.x, dtype), y(half, st.y, dtype), dy(half, st.dy, dtype),
      dx(full, st.dx, dtype);
  const float range = std::isfinite(at.limit) ? 2 * at.limit : 10.0f;
  x.fill([&](size_t i) {
    return inputValue(i, signedValue(seed, i, range), at.limit, at.clamp_mode);
  });
  dy.fill([&](size_t i) {
    return i % 31 == 30 ? (i % 2 ? INFINITY : -INFINITY) : signedValue(seed + 1, i, 4.0f);
  });
  std::vector<float> xs(numel), dys(numel / 2);
  for (size_t i = 0; i < numel; ++i) xs[i] = x.get(i);
  for (size_t i = 0; i < numel / 2; ++i) dys[i] = dy.get(i);
  size_t active = pre;
  const GroupIndex groups = groupsFor(c.groups, pre, &active);
  const GroupIndex *gi = c.groups == Groups::kNone ? nullptr : &groups;

  // Logical indices of A and B for pair j of merged row p.
  const auto indexA = [&](size_t p, size_t j) { return p * L + (at.interleaved ? 2 * j : j); };
  const auto indexB = [&](size_t p, size_t j) {
    return p * L + (at.interleaved ? 2 * j + 1 : P + j);
  };
  int failures = 0;
  const auto fail = [&](const char *what, size_t p, size_t j, float got, const std::string &why) {
    if (failures++ < 5)
      ADD_FAILURE() << what << " row " << p << " pair " << j << " A=" << xs[indexA(p, j)]
                    << " B=" << xs[indexB(p, j)] << " dy=" << dys[p * P + j] << " got=" << got
                    << ": " << why;
  };
  const auto check = [&](const char *what, size_t p, size_t j, float got, long double truth,
                         double tol) {
    const std::string problem = compareToTruth(dtype, got, truth, tol);
    if (!problem.empty()) fail(what, p, j, got, problem);
  };

  // Pairs checked: every one, or every checkStride-th (device_param.h) of a large output.
  const size_t stride = checkStride(active * P);
  std::vector<Truth> truths(active * P);  // of the computed rows, by pair
  for (size_t q = 0; q < truths.size(); q += stride)
    truths[q] = oracle(dtype, xs[indexA(q / P, q % P)], xs[indexB(q / P, q % P)], dys[q], at);

  y.poison();
  ASSERT_EQ(runForward(h, y, x, gi, at), INFINI_STATUS_SUCCESS) << last_error;
  for (size_t p = 0; p < pre; ++p)
    for (size_t j = 0; j < P; ++j) {
      const size_t q = p * P + j;
      if (p >= active) {
        if (!isPositiveZero(y, q)) fail("y (past the group sum)", p, j, y.get(q), "not +0");
        continue;
      }
      if (q % stride != 0) continue;
      check("y", p, j, y.get(q), truths[q].y, truths[q].tol_y);
    }

  TensorBuffer &out = layout == Layout::kInPlace ? x : dx;
  if (layout != Layout::kInPlace) dx.poison();
  ASSERT_EQ(runBackward(h, out, out.data(), dy, x, gi, at), INFINI_STATUS_SUCCESS) << last_error;
  for (size_t p = 0; p < pre; ++p)
    for (size_t j = 0; j < P; ++j) {
      const size_t ia = indexA(p, j), ib = indexB(p, j);
      if (p >= active) {
        if (!isPositiveZero(out, ia)) fail("dA (past the group sum)", p, j, out.get(ia), "not +0");
        if (!isPositiveZero(out, ib)) fail("dB (past the group sum)", p, j, out.get(ib), "not +0");
        continue;
      }
      if ((p * P + j) % stride != 0) continue;
      const Truth &t = truths[p * P + j];
      if (t.dA_masked) {
        if (out.get(ia) != 0) fail("dA (masked)", p, j, out.get(ia), "not exactly 0");
      } else {
        check("dA", p, j, out.get(ia), t.dA, t.tol_dA);
      }
      if (t.dB_masked) {
        if (out.get(ib) != 0) fail("dB (masked)", p, j, out.get(ib), "not exactly 0");
      } else {
        check("dB", p, j, out.get(ib), t.dB, t.tol_dB);
      }
    }
}

}  // namespace infiniop_test::clipped_swiglu
