// SPDX-License-Identifier: Apache-2.0
// What the MoeInitRoutingV2 / MoeInitRoutingV2Grad suites share: index and byte helpers, special
// inputs, the random routings, the layouts and the calls of the four MoE operators.
// moe_init_routing_test.cc holds the oracle suites (and the file comment with the error model),
// moe_init_routing_api_test.cc the workspace and bad arguments; two files so that the second
// compiles quickly (tests/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "device_memory.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "infiniop/ops/moe_init_routing_v2_grad.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_init {

constexpr const char *kInitName = "MoeInitRoutingV2";
constexpr const char *kGradName = "MoeInitRoutingV2Grad";
constexpr infiniDtype_t kF32 = INFINI_DTYPE_F32, kF16 = INFINI_DTYPE_F16, kBF16 = INFINI_DTYPE_BF16,
                        kF64 = INFINI_DTYPE_F64, kI16 = INFINI_DTYPE_I16, kI32 = INFINI_DTYPE_I32,
                        kI64 = INFINI_DTYPE_I64;

// ---------------------------------------------------------------- small helpers
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
  } else {
    const auto w = static_cast<int32_t>(v);
    std::memcpy(t.at(i), &w, sizeof w);
  }
}
inline std::vector<int64_t> indicesOf(TensorBuffer &t) {
  std::vector<int64_t> v(t.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = indexAt(t, i);
  return v;
}
inline void setBits(TensorBuffer &t, size_t i, uint32_t bits) {  // little-endian: the low bytes
  std::memcpy(t.at(i), &bits, t.elementSize());
}
inline std::string hexOf(const char *p, size_t size) {
  std::string s = "0x";
  char buf[4];
  for (size_t b = size; b-- > 0;) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(p[b]));
    s += buf;
  }
  return s;
}
inline std::string dtypeStr(infiniDtype_t d) {
  return infiniop::dtypeName(d);
}

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

 private:
  uint64_t state_;
};

class ThreadCount {  // the OpenMP thread count for a scope (0: as set)
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// x for the bit-copy checks: signed values from near zero to large, and every fifth element a
// special bit pattern of the dtype (quiet and signalling NaNs with payloads, -0, +-inf, the
// smallest and largest subnormals, the largest finite).
inline void fillSpecial(TensorBuffer &t, uint64_t seed) {
  static const uint32_t f32[] = {0x7FC01234, 0x7F800001, 0xFFA00005, 0x80000000, 0x7F800000,
                                 0xFF800000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF};
  static const uint32_t f16[] = {0x7E01, 0x7C01, 0xFD55, 0x8000, 0x7C00,
                                 0xFC00, 0x0001, 0x83FF, 0x7BFF};
  static const uint32_t bf16[] = {0x7FC1, 0x7F81, 0xFFA5, 0x8000, 0x7F80,
                                  0xFF80, 0x0001, 0x807F, 0x7F7F};
  const uint32_t *special = t.dtype() == kF32 ? f32 : t.dtype() == kF16 ? f16 : bf16;
  for (size_t i = 0; i < t.numel(); ++i) {
    if (i % 5 == 2)
      setBits(t, i, special[(i / 5 + seed) % 9]);
    else
      t.set(i, signedValue(seed, i, i % 3 ? 3.0e4f : 7.0f));
  }
}

// Index values of `n` positions into `rows` rows: kPermutation distinct, kDuplicates half to a
// few hot rows; kDrops distinct, about a third of the positions dropped (-1).
enum class Pattern { kPermutation, kDuplicates, kDrops };
inline std::vector<int64_t> makeIndices(Pattern p, size_t n, size_t rows, Rng &rng) {
  std::vector<int64_t> v(n, -1), slots(rows);
  std::iota(slots.begin(), slots.end(), 0);
  for (size_t i = rows; i > 1; --i) std::swap(slots[i - 1], slots[rng.below(i)]);
  for (size_t i = 0, used = 0; i < n; ++i) {
    if (rows == 0 || (p == Pattern::kDrops && rng.below(3) == 0)) continue;
    if (p == Pattern::kDuplicates)
      v[i] = static_cast<int64_t>(rng.below(rng.below(2) ? std::max<size_t>(1, rows / 8) : rows));
    else if (used < rows)
      v[i] = slots[used++];
  }
  return v;
}

// ---------------------------------------------------------------- layouts
// kContiguous; kStrided: x, expert_idx and grad_x column-major, expanded_x / grad_expanded_x
// padded, 1-D tensors at stride 2 (index outputs) or 3 (counts); kReversed: every first dim runs
// backwards (a negative stride: supported, or BAD_TENSOR_STRIDES, never mis-indexed).
enum class Layout { kContiguous, kStrided, kReversed };
inline const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "Strided", "Reversed"};
  return names[static_cast<int>(l)];
}
enum class Kind { kMatrix, kExpanded, kIndex, kCounts };
inline TensorBuffer makeTensor(Layout layout, Kind kind, std::vector<size_t> shape,
                               infiniDtype_t dtype) {
  std::vector<ptrdiff_t> strides;
  if (layout == Layout::kStrided) {
    strides = kind == Kind::kMatrix     ? columnMajorStrides(shape)
              : kind == Kind::kExpanded ? paddedStrides(shape)
              : kind == Kind::kIndex    ? std::vector<ptrdiff_t>{2}
                                        : std::vector<ptrdiff_t>{3};
  } else if (layout == Layout::kReversed) {
    strides.assign(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;)
      strides[d - 1] = strides[d] * static_cast<ptrdiff_t>(std::max<size_t>(shape[d], 1));
    strides[0] = -strides[0];
  }
  return TensorBuffer(std::move(shape), std::move(strides), dtype);
}

// ---------------------------------------------------------------- running an operator
struct Outcome {
  infiniStatus_t status = INFINI_STATUS_INTERNAL_ERROR;
  std::string error;
  size_t workspace = 0;  // what the descriptor asked for
};

// The tensors of a call in the C function's order (NULL: NULL descriptor); `data` overrides a
// pointer (NULL included); the workspace passed is the asked size + workspace_delta, NULL where
// null_workspace.
struct Call {
  std::vector<TensorBuffer *> tensors;
  std::vector<std::optional<void *>> data = std::vector<std::optional<void *>>(8);
  int64_t attr[6] = {0, 0, 0, 0, 0, 0};  // the operator's attributes, in its order
  ptrdiff_t workspace_delta = 0;
  bool null_workspace = false;
  void *pointer(size_t s) const {
    if (data[s]) return *data[s];
    return tensors[s] ? tensors[s]->data() : nullptr;
  }
};

using Descs = std::vector<infiniopTensorDescriptor_t>;
using Ptrs = std::vector<void *>;
struct Op {
  const char *name;
  std::function<infiniStatus_t(infiniopHandle_t, void **, const Descs &, const int64_t *)> create;
  std::function<infiniStatus_t(void *, size_t *)> size;
  std::function<infiniStatus_t(void *, void *, size_t, const Ptrs &)> calc;
  std::function<infiniStatus_t(void *)> destroy;
};

// Each operator's four functions over opaque descriptors (`Op::create` gets the attributes).
template <class D>
D as(void *op) {
  return static_cast<D>(op);
}
using InitD = infiniopMoeInitRoutingV2Descriptor_t;
using GradD = infiniopMoeInitRoutingV2GradDescriptor_t;
using FinD = infiniopMoeFinalizeRoutingV2Descriptor_t;
using FinGradD = infiniopMoeFinalizeRoutingV2GradDescriptor_t;

// Attributes: active_num, expert_capacity, expert_num, drop_pad_mode, count flag, before flag.
const Op kInit = {
    kInitName,
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeInitRoutingV2Descriptor(h, reinterpret_cast<InitD *>(op), d[0], d[1],
                                                      d[2], d[3], d[4], d[5], a[0], a[1], a[2],
                                                      a[3], a[4], a[5] != 0);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeInitRoutingV2WorkspaceSize(as<InitD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeInitRoutingV2(as<InitD>(op), ws, wsz, p[0], p[1], p[2], p[3], p[4], p[5],
                                      nullptr);
    },
    [](void *op) { return infiniopDestroyMoeInitRoutingV2Descriptor(as<InitD>(op)); }};
// Attributes: top_k, drop_pad_mode, active_num.
const Op kGrad = {
    kGradName,
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeInitRoutingV2GradDescriptor(h, reinterpret_cast<GradD *>(op), d[0],
                                                          d[1], d[2], a[0], a[1], a[2]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeInitRoutingV2GradWorkspaceSize(as<GradD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeInitRoutingV2Grad(as<GradD>(op), ws, wsz, p[0], p[1], p[2], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeInitRoutingV2GradDescriptor(as<GradD>(op)); }};
// Attribute: drop_pad_mode.
const Op kFinalize = {
    "MoeFinalizeRoutingV2",
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeFinalizeRoutingV2Descriptor(
          h, reinterpret_cast<FinD *>(op), d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], a[0]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeFinalizeRoutingV2WorkspaceSize(as<FinD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeFinalizeRoutingV2(as<FinD>(op), ws, wsz, p[0], p[1], p[2], p[3], p[4], p[5],
                                          p[6], p[7], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeFinalizeRoutingV2Descriptor(as<FinD>(op)); }};
// Attributes: drop_pad_mode, active_num, expert_num, expert_capacity.
const Op kFinalizeGrad = {
    "MoeFinalizeRoutingV2Grad",
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeFinalizeRoutingV2GradDescriptor(h, reinterpret_cast<FinGradD *>(op),
                                                              d[0], d[1], d[2], d[3], d[4], d[5],
                                                              d[6], d[7], a[0], a[1], a[2], a[3]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(as<FinGradD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeFinalizeRoutingV2Grad(as<FinGradD>(op), ws, wsz, p[0], p[1], p[2], p[3],
                                              p[4], p[5], p[6], p[7], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(as<FinGradD>(op)); }};

// Creates the descriptor (tensor descriptors destroyed right after), stages every tensor in
// device memory, calls with the workspace asked for (adjusted as the call says), downloads.
inline Outcome run(infiniopHandle_t h, const Op &op, const Call &c) {
  Descs d(c.tensors.size(), nullptr);
  for (size_t s = 0; s < d.size(); ++s) d[s] = c.tensors[s] ? c.tensors[s]->descriptor() : nullptr;
  void *desc = nullptr;
  void *const unset = &desc;
  desc = unset;
  Outcome o;
  o.status = op.create(h, &desc, d, c.attr);
  o.error = infiniopGetLastError();
  for (auto t : d)
    if (t) infiniopDestroyTensorDescriptor(t);
  if (o.status != INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(desc, unset) << "a failed create wrote the descriptor pointer";
    return o;
  }
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(op.size(desc, &o.workspace), INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  for (TensorBuffer *t : c.tensors) device.add(t);
  void *workspace = device.scratch(o.workspace + 64);
  Ptrs p(c.tensors.size());
  for (size_t s = 0; s < p.size(); ++s) p[s] = device(c.pointer(s));
  o.status =
      op.calc(desc, c.null_workspace ? nullptr : workspace,
              static_cast<size_t>(static_cast<ptrdiff_t>(o.workspace) + c.workspace_delta), p);
  o.error = infiniopGetLastError();
  device.download();
  if (o.status == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  return o;
}

// `got` must hold exactly `want`'s bytes (views and guards); else the first differing element.
inline void expectBytes(TensorBuffer &got, TensorBuffer &want, const std::string &what) {
  if (got.storage() == want.storage()) return;
  for (size_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(got.at(i), want.at(i), want.elementSize()) != 0) {
      ADD_FAILURE() << what << " element " << i << ": got " << hexOf(got.at(i), got.elementSize())
                    << ", want " << hexOf(want.at(i), want.elementSize());
      return;
    }
  ADD_FAILURE() << what << ": a byte outside the view (a guard) was written";
}

}  // namespace infiniop_test::moe_init
