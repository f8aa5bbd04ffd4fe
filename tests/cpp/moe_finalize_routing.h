// SPDX-License-Identifier: Apache-2.0
// What the MoeFinalizeRoutingV2 / MoeFinalizeRoutingV2Grad suites share: index and value
// helpers, the error model, mismatch reports, the random routings, the layouts and the calls of
// both operators. moe_finalize_routing_test.cc holds the oracle suites (and the file comment with
// the error model), moe_finalize_routing_api_test.cc the hand-worked values, absent tensors, bad
// arguments and the workspace; two files so that the second compiles quickly
// (tests/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_finalize {

constexpr const char *kForwardName = "MoeFinalizeRoutingV2";
constexpr const char *kGradName = "MoeFinalizeRoutingV2Grad";
constexpr infiniDtype_t kF32 = INFINI_DTYPE_F32, kF16 = INFINI_DTYPE_F16, kBF16 = INFINI_DTYPE_BF16,
                        kF64 = INFINI_DTYPE_F64, kI32 = INFINI_DTYPE_I32, kI64 = INFINI_DTYPE_I64;

// ---------------------------------------------------------------- small helpers
// INT32 or INT64 elements, by the tensor's dtype.
inline int64_t indexAt(TensorBuffer &t, size_t i) {
  if (t.dtype() == kI64) {
    int64_t v;
    std::memcpy(&v, t.at(i), sizeof v);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t.at(i), sizeof v);
  return v;
}
inline void setIndex(TensorBuffer &t, size_t i, int64_t v) {
  if (t.dtype() == kI64) {
    std::memcpy(t.at(i), &v, sizeof v);
    return;
  }
  const auto w = static_cast<int32_t>(v);
  std::memcpy(t.at(i), &w, sizeof w);
}

inline std::vector<float> valuesOf(TensorBuffer *t) {
  std::vector<float> v(t ? t->numel() : 0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = t->get(i);
  return v;
}
inline std::vector<int64_t> indicesOf(TensorBuffer *t) {
  std::vector<int64_t> v(t ? t->numel() : 0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = indexAt(*t, i);
  return v;
}

inline bool isPositiveZero(TensorBuffer &t, size_t i) {
  const std::vector<char> zero(t.elementSize(), 0);
  return std::memcmp(t.at(i), zero.data(), zero.size()) == 0;
}

inline std::string str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

inline std::string shapeStr(const std::vector<size_t> &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? "," : "") + std::to_string(shape[d]);
  return s + "]";
}

// The error model of the file comment.
inline double allowed(infiniDtype_t dtype, double ops, long double terms, long double truth) {
  double e = ops * (0x1p-24 * static_cast<double>(terms) + 0x1p-149);
  if (dtype != kF32) e += ulpOf(dtype, std::fabs(static_cast<double>(truth)));
  return e;
}

// The mismatches of one output: the first few reported in full, then a count.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  ~Mismatches() {
    if (count_ > kShown) ADD_FAILURE() << what_ << ": " << count_ << " mismatches in all";
  }
  void add(const std::string &message) {
    if (count_++ < kShown) ADD_FAILURE() << what_ << " " << message;
  }
  // `where` names the element: a string, or a callable that makes it, called only on a mismatch
  // (the checks visit every element: a string built for each cost more than the check under an
  // emulator).
  template <class Where>
  void check(infiniDtype_t dtype, TensorBuffer &t, size_t i, long double truth, double tol,
             const Where &where) {
    const float got = t.get(i);
    const std::string why = compareToTruth(dtype, got, truth, tol);
    if (!why.empty()) add(nameOf(where) + ": got " + str(got) + ", " + why);
  }
  template <class Where>
  void checkZero(TensorBuffer &t, size_t i, const Where &where) {
    if (!isPositiveZero(t, i))
      add(nameOf(where) + ": got " + str(t.get(i)) + ", not +0 (row unreached)");
  }

 private:
  static const std::string &nameOf(const std::string &where) { return where; }
  template <class Where>
  static std::string nameOf(const Where &where) {
    return where();
  }
  static constexpr int kShown = 5;
  std::string what_;
  int count_ = 0;
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  template <class T>
  void shuffle(std::vector<T> &v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t state_;
};

// Index values for n routed tokens (token slot i = r*K + k) into `rows` rows; drop_pad allows -1
// (a dropped token).
//  kPermutation: distinct rows in random order (drop/pad: tokens past the capacity dropped);
//  kDuplicates: half the tokens go to a few hot rows (1/64 of the rows, at least one), the rest
//               anywhere; drop/pad also drops a fifth;
//  kDrops: distinct rows, and drop/pad drops a third, so capacity rows stay unfilled.
enum class Pattern { kPermutation, kDuplicates, kDrops };
inline const char *patternName(Pattern p) {
  static const char *names[] = {"permutation", "duplicates", "drops"};
  return names[static_cast<int>(p)];
}

inline std::vector<int32_t> makeIndices(Pattern p, size_t n, size_t rows, bool drop_pad, Rng &rng) {
  std::vector<int32_t> v(n, -1);
  if (p == Pattern::kDuplicates) {
    for (int32_t &x : v) {
      if (rows == 0 || (drop_pad && rng.below(5) == 0)) continue;
      x = static_cast<int32_t>(rng.below(rng.below(2) ? std::max<size_t>(1, rows / 64) : rows));
    }
    return v;
  }
  std::vector<int32_t> slots(rows);
  std::iota(slots.begin(), slots.end(), 0);
  rng.shuffle(slots);
  size_t used = 0;
  for (int32_t &x : v) {
    if (drop_pad && p == Pattern::kDrops && rng.below(3) == 0) continue;
    if (used < rows) x = slots[used++];
  }
  return v;
}

// ---------------------------------------------------------------- layouts
// kContiguous: row-major everywhere. kTransposed: every tensor column-major (outputs included).
// kPadded: every dim padded (nothing dense; 1-D index tensors step 3). kBroadcast: float inputs
// constant along the last dim (stride 0: every row one repeated value, still distinct rows),
// expert_idx the same for every token and expanded_row_idx one value for all (stride 0), outputs
// column-major. kReversed: every tensor's first dim runs backwards (a negative stride), which
// SEMANTICS.md allows a library to reject (BAD_TENSOR_STRIDES) but never to mis-index.
enum class Layout { kContiguous, kTransposed, kPadded, kBroadcast, kReversed };
inline const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "Transposed", "Padded", "Broadcast", "Reversed"};
  return names[static_cast<int>(l)];
}
enum class Role { kOutput, kInput, kIndex };

inline std::vector<ptrdiff_t> stridesFor(Layout layout, const std::vector<size_t> &shape,
                                         Role role) {
  const size_t rank = shape.size();
  switch (layout) {
    case Layout::kTransposed:
      return columnMajorStrides(shape);
    case Layout::kPadded:
      return rank == 1 ? std::vector<ptrdiff_t>{3} : paddedStrides(shape);
    case Layout::kBroadcast: {
      if (role == Role::kOutput) return columnMajorStrides(shape);
      if (role == Role::kIndex)
        return rank == 2 ? std::vector<ptrdiff_t>{0, 1} : std::vector<ptrdiff_t>{0};
      std::vector<ptrdiff_t> strides(rank, 0);
      ptrdiff_t step = 1;
      for (size_t d = rank - 1; d-- > 0;) {
        strides[d] = step;
        step *= static_cast<ptrdiff_t>(shape[d] ? shape[d] : 1);
      }
      return strides;
    }
    case Layout::kReversed: {
      std::vector<ptrdiff_t> strides(rank);
      ptrdiff_t step = 1;
      for (size_t d = rank; d-- > 0;) {
        strides[d] = step;
        step *= static_cast<ptrdiff_t>(shape[d] ? shape[d] : 1);
      }
      strides[0] = -strides[0];
      return strides;
    }
    default:
      return {};
  }
}

// ---------------------------------------------------------------- running the operators
namespace fwd {
enum Slot { kOut, kExpandedX, kRowIdx, kX1, kX2, kBias, kScales, kExpertIdx };
}
namespace grad {
enum Slot { kGradExpandedX, kGradScales, kGradY, kRowIdx, kExpandedX, kScales, kExpertIdx, kBias };
}

// The tensors of one call in the C functions' order (NULL = NULL descriptor); `data` replaces a
// tensor's own pointer where set (NULL included).
struct Args {
  std::array<TensorBuffer *, 8> tensors{};
  std::array<std::optional<void *>, 8> data{};
  void *pointer(size_t slot) const {
    if (data[slot]) return *data[slot];
    return tensors[slot] ? tensors[slot]->data() : nullptr;
  }
  // Every tensor of the call staged in `device` (a `data` override points into one of them).
  void stage(DeviceMirror &device) const {
    for (TensorBuffer *t : tensors) device.add(t);
  }
};
struct ForwardCall : Args {
  int64_t mode = 0;
};
struct GradCall : Args {
  int64_t mode = 0, active_num = 0, expert_num = 0, expert_capacity = 0;
};

// The tensor descriptors of a call; destroyed right after the operator descriptor is created
// (which must keep its own copies).
class Descriptors {
 public:
  explicit Descriptors(const Args &a) {
    for (size_t s = 0; s < d_.size(); ++s)
      d_[s] = a.tensors[s] ? a.tensors[s]->descriptor() : nullptr;
  }
  ~Descriptors() {
    for (auto d : d_)
      if (d) infiniopDestroyTensorDescriptor(d);
  }
  infiniopTensorDescriptor_t operator[](size_t s) const { return d_[s]; }

 private:
  std::array<infiniopTensorDescriptor_t, 8> d_{};
};

struct Outcome {
  infiniStatus_t status = INFINI_STATUS_INTERNAL_ERROR;
  std::string error;  // infiniopGetLastError() after the failing (or last) call
};

inline Outcome runForward(infiniopHandle_t h, const ForwardCall &c) {
  infiniopMoeFinalizeRoutingV2Descriptor_t op = nullptr;
  const auto unset = reinterpret_cast<infiniopMoeFinalizeRoutingV2Descriptor_t>(&op);
  op = unset;
  Outcome o;
  {
    const Descriptors d(c);
    o.status = infiniopCreateMoeFinalizeRoutingV2Descriptor(h, &op, d[0], d[1], d[2], d[3], d[4],
                                                            d[5], d[6], d[7], c.mode);
    o.error = infiniopGetLastError();
  }
  if (o.status != INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(op, unset) << "a failed create wrote the descriptor pointer";
    return o;
  }
  EXPECT_EQ(o.error, "");
  size_t workspace_size = 1;
  EXPECT_EQ(infiniopGetMoeFinalizeRoutingV2WorkspaceSize(op, &workspace_size),
            INFINI_STATUS_SUCCESS);
  EXPECT_EQ(workspace_size, 0u) << "the forward needs no workspace";
  DeviceMirror device(h);
  c.stage(device);
  const auto at = [&](size_t slot) { return device(c.pointer(slot)); };
  o.status = infiniopMoeFinalizeRoutingV2(op, nullptr, 0, at(0), at(1), at(2), at(3), at(4), at(5),
                                          at(6), at(7), nullptr);
  o.error = infiniopGetLastError();
  device.download();
  if (o.status == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2Descriptor(op), INFINI_STATUS_SUCCESS);
  return o;
}

// With the workspace the descriptor asks for (NULL when it asks for none).
inline Outcome runGrad(infiniopHandle_t h, const GradCall &c) {
  infiniopMoeFinalizeRoutingV2GradDescriptor_t op = nullptr;
  const auto unset = reinterpret_cast<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(&op);
  op = unset;
  Outcome o;
  {
    const Descriptors d(c);
    o.status = infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
        h, &op, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], c.mode, c.active_num, c.expert_num,
        c.expert_capacity);
    o.error = infiniopGetLastError();
  }
  if (o.status != INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(op, unset) << "a failed create wrote the descriptor pointer";
    return o;
  }
  EXPECT_EQ(o.error, "");
  size_t workspace_size = 0;
  EXPECT_EQ(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(op, &workspace_size),
            INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  c.stage(device);
  const auto at = [&](size_t slot) { return device(c.pointer(slot)); };
  o.status =
      infiniopMoeFinalizeRoutingV2Grad(op, device.scratch(workspace_size), workspace_size, at(0),
                                       at(1), at(2), at(3), at(4), at(5), at(6), at(7), nullptr);
  o.error = infiniopGetLastError();
  device.download();
  if (o.status == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(op), INFINI_STATUS_SUCCESS);
  return o;
}

inline TensorBuffer *ptr(std::optional<TensorBuffer> &t) {
  return t ? &*t : nullptr;
}

// Sets the OpenMP thread count for a scope (0: leave it), restoring it after.
class ThreadCount {
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount &) = delete;
  ThreadCount &operator=(const ThreadCount &) = delete;

 private:
  int saved_;
};

}  // namespace infiniop_test::moe_finalize
