// SPDX-License-Identifier: Apache-2.0
// What the router operators' suites share (moe_gating_test.cc, moe_gating_api_test.cc): the
// five operators' calls over TensorBuffers staged through device memory, index helpers, and the
// poison / untouched checks.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_memory.h"
#include "infiniop/ops/moe_gating_top_k.h"
#include "infiniop/ops/moe_gating_top_k_grad.h"
#include "infiniop/ops/moe_gating_top_k_softmax.h"
#include "infiniop/ops/moe_gating_top_k_softmax_grad.h"
#include "infiniop/ops/moe_gating_weights.h"
#include "moe_init_routing.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_gating {

constexpr infiniDtype_t kF32 = INFINI_DTYPE_F32, kF16 = INFINI_DTYPE_F16, kBF16 = INFINI_DTYPE_BF16,
                        kI32 = INFINI_DTYPE_I32, kI64 = INFINI_DTYPE_I64, kBool = INFINI_DTYPE_BOOL;

enum class Op { kSoftmax, kSoftmaxGrad, kTopK, kTopKGrad, kWeights };

// One call: the tensors in the C function's order (NULL: a NULL descriptor) and the attributes.
//   kSoftmax:     y, expert_idx, row_idx, softmax_out, x, finished; k, renorm
//   kSoftmaxGrad: grad_x, grad_y, x, expert_idx, finished;          renorm
//   kTopK:        y, expert_idx, norm_out, x, bias;                  k ... eps
//   kTopKGrad:    grad_x, grad_y, x, expert_idx;                     norm_type, renorm, scale, eps
//   kWeights:     y, x, expert_idx;                                  norm_type, renorm, scale, eps
struct Call {
  Op op = Op::kSoftmax;
  std::vector<TensorBuffer *> t;
  int64_t k = 1, renorm = 0, k_group = 1, group_count = 1, mode = 0, norm_type = 1;
  double scale = 1.0, eps = 1e-20;
  size_t outputs() const { return op == Op::kSoftmax ? 4 : op == Op::kTopK ? 3 : 1; }
};

struct Outcome {
  infiniStatus_t create = INFINI_STATUS_INTERNAL_ERROR, calc = INFINI_STATUS_INTERNAL_ERROR;
  std::string error;
};

// Creates the descriptor, stages every tensor in device memory, calls with the workspace asked
// for, downloads, destroys. A failed create skips the call (calc stays INTERNAL_ERROR).
inline Outcome run(infiniopHandle_t h, const Call &c) {
  std::vector<infiniopTensorDescriptor_t> d(c.t.size(), nullptr);
  for (size_t s = 0; s < d.size(); ++s) d[s] = c.t[s] ? c.t[s]->descriptor() : nullptr;
  void *desc = nullptr;
  Outcome o;
  switch (c.op) {
    case Op::kSoftmax:
      o.create = infiniopCreateMoeGatingTopKSoftmaxDescriptor(
          h, reinterpret_cast<infiniopMoeGatingTopKSoftmaxDescriptor_t *>(&desc), d[0], d[1], d[2],
          d[3], d[4], d[5], c.k, c.renorm);
      break;
    case Op::kSoftmaxGrad:
      o.create = infiniopCreateMoeGatingTopKSoftmaxGradDescriptor(
          h, reinterpret_cast<infiniopMoeGatingTopKSoftmaxGradDescriptor_t *>(&desc), d[0], d[1],
          d[2], d[3], d[4], c.renorm);
      break;
    case Op::kTopK:
      o.create = infiniopCreateMoeGatingTopKDescriptor(
          h, reinterpret_cast<infiniopMoeGatingTopKDescriptor_t *>(&desc), d[0], d[1], d[2], d[3],
          d[4], c.k, c.k_group, c.group_count, c.mode, c.renorm, c.norm_type, c.scale, c.eps);
      break;
    case Op::kTopKGrad:
      o.create = infiniopCreateMoeGatingTopKGradDescriptor(
          h, reinterpret_cast<infiniopMoeGatingTopKGradDescriptor_t *>(&desc), d[0], d[1], d[2],
          d[3], c.norm_type, c.renorm, c.scale, c.eps);
      break;
    case Op::kWeights:
      o.create = infiniopCreateMoeGatingWeightsDescriptor(
          h, reinterpret_cast<infiniopMoeGatingWeightsDescriptor_t *>(&desc), d[0], d[1], d[2],
          c.norm_type, c.renorm, c.scale, c.eps);
      break;
  }
  o.error = infiniopGetLastError();
  for (auto t : d)
    if (t) infiniopDestroyTensorDescriptor(t);
  if (o.create != INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(desc, nullptr) << "a failed create wrote the descriptor pointer";
    return o;
  }
  size_t ws = 0;
  DeviceMirror dev(h);
  for (TensorBuffer *t : c.t) dev.add(t);
  std::vector<void *> p(c.t.size());
  for (size_t s = 0; s < p.size(); ++s) p[s] = dev(c.t[s]);
  switch (c.op) {
    case Op::kSoftmax: {
      auto op = static_cast<infiniopMoeGatingTopKSoftmaxDescriptor_t>(desc);
      EXPECT_EQ(infiniopGetMoeGatingTopKSoftmaxWorkspaceSize(op, &ws), INFINI_STATUS_SUCCESS);
      o.calc = infiniopMoeGatingTopKSoftmax(op, dev.scratch(ws), ws, p[0], p[1], p[2], p[3], p[4],
                                            p[5], nullptr);
      o.error = infiniopGetLastError();
      infiniopDestroyMoeGatingTopKSoftmaxDescriptor(op);
      break;
    }
    case Op::kSoftmaxGrad: {
      auto op = static_cast<infiniopMoeGatingTopKSoftmaxGradDescriptor_t>(desc);
      EXPECT_EQ(infiniopGetMoeGatingTopKSoftmaxGradWorkspaceSize(op, &ws), INFINI_STATUS_SUCCESS);
      o.calc = infiniopMoeGatingTopKSoftmaxGrad(op, dev.scratch(ws), ws, p[0], p[1], p[2], p[3],
                                                p[4], nullptr);
      o.error = infiniopGetLastError();
      infiniopDestroyMoeGatingTopKSoftmaxGradDescriptor(op);
      break;
    }
    case Op::kTopK: {
      auto op = static_cast<infiniopMoeGatingTopKDescriptor_t>(desc);
      EXPECT_EQ(infiniopGetMoeGatingTopKWorkspaceSize(op, &ws), INFINI_STATUS_SUCCESS);
      o.calc =
          infiniopMoeGatingTopK(op, dev.scratch(ws), ws, p[0], p[1], p[2], p[3], p[4], nullptr);
      o.error = infiniopGetLastError();
      infiniopDestroyMoeGatingTopKDescriptor(op);
      break;
    }
    case Op::kTopKGrad: {
      auto op = static_cast<infiniopMoeGatingTopKGradDescriptor_t>(desc);
      EXPECT_EQ(infiniopGetMoeGatingTopKGradWorkspaceSize(op, &ws), INFINI_STATUS_SUCCESS);
      o.calc = infiniopMoeGatingTopKGrad(op, dev.scratch(ws), ws, p[0], p[1], p[2], p[3], nullptr);
      o.error = infiniopGetLastError();
      infiniopDestroyMoeGatingTopKGradDescriptor(op);
      break;
    }
    case Op::kWeights: {
      auto op = static_cast<infiniopMoeGatingWeightsDescriptor_t>(desc);
      EXPECT_EQ(infiniopGetMoeGatingWeightsWorkspaceSize(op, &ws), INFINI_STATUS_SUCCESS);
      o.calc = infiniopMoeGatingWeights(op, dev.scratch(ws), ws, p[0], p[1], p[2], nullptr);
      o.error = infiniopGetLastError();
      infiniopDestroyMoeGatingWeightsDescriptor(op);
      break;
    }
  }
  dev.download();
  if (o.calc == INFINI_STATUS_SUCCESS) EXPECT_EQ(o.error, "");
  return o;
}

using moe_init::indexAt;  // moe_init_routing.h
using moe_init::setIndex;
inline void setBool(TensorBuffer &t, size_t i, bool v) {
  *t.at(i) = static_cast<char>(v ? 1 : 0);
}
inline bool boolAt(TensorBuffer &t, size_t i) {
  return *t.at(i) != 0;
}

// Every byte of the storage (views and guards) set to 0xA5: a value no operator writes (an F32
// -2.9e-16 or so, index -1515870811), so an element left unwritten shows.
inline void poison(TensorBuffer *t) {
  if (t) std::memset(t->storageBytes(), 0xA5, t->storage().size());
}
inline bool untouched(TensorBuffer *t) {
  if (!t) return true;
  for (uint8_t b : t->storage())
    if (b != 0xA5) return false;
  return true;
}

}  // namespace infiniop_test::moe_gating
