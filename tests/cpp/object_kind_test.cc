// SPDX-License-Identifier: Apache-2.0
// An object of the wrong kind (another operator's descriptor, a tensor descriptor, a handle)
// given to any function that takes a descriptor, a handle or a tensor descriptor is BAD_PARAM
// with a message naming both kinds, never undefined behaviour; the object stays usable.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "infiniop.h"
#include "op_specs.h"

namespace infiniop_test {
namespace {

// The operators whose descriptors the tests pass to each other's functions, in this order (each
// gets its neighbour's); their calls are op_specs.h's.
const char *const kOperators[] = {"GeluBackward",
                                  "SwiGlu",
                                  "SwiGluBackward",
                                  "GeluMul",
                                  "GeluMulBackward",
                                  "Gelu",
                                  "GeluBackwardV2",
                                  "ClippedSwiglu",
                                  "ClippedSwigluBackward",
                                  "MoeFinalizeRoutingV2",
                                  "MoeFinalizeRoutingV2Grad",
                                  "MoeInitRoutingV2",
                                  "MoeInitRoutingV2Grad"};
constexpr size_t kOperatorCount = sizeof kOperators / sizeof kOperators[0];

// One operator's three descriptor-taking functions, given an arbitrary pointer.
struct OperatorCalls {
  const char *name;
  std::function<infiniStatus_t(void *, size_t *)> workspace;
  std::function<infiniStatus_t(void *)> calculate;  // NULL data: the kind check comes first
  std::function<infiniStatus_t(void *)> destroy;
};

const std::vector<OperatorCalls> &operatorCalls() {
  static const std::vector<OperatorCalls> calls = [] {
    std::vector<OperatorCalls> all;
    for (const char *name : kOperators) {
      const OpSpec &op = spec(name);
      const Ptrs null_data(op.slots.size(), nullptr);
      all.push_back(
          {op.name, op.workspace,
           [&op, null_data](void *d) { return op.calculate(d, nullptr, 0, null_data, nullptr); },
           op.destroy});
    }
    return all;
  }();
  return calls;
}

class ObjectKind : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(infiniopCreateHandle(&handle_, INFINI_DEVICE_CPU_REFERENCE, 0),
              INFINI_STATUS_SUCCESS);
    auto tensor = [&](std::vector<size_t> shape, infiniDtype_t dtype = INFINI_DTYPE_F32) {
      infiniopTensorDescriptor_t t = nullptr;
      EXPECT_EQ(infiniopCreateTensorDescriptor(&t, shape.size(), shape.data(), nullptr, dtype),
                INFINI_STATUS_SUCCESS);
      tensors_.push_back(t);
      return t;
    };
    const auto half = tensor({2, 4}), full = tensor({2, 8}), index = tensor({2}, INFINI_DTYPE_I32);
    const auto experts = tensor({2, 1}, INFINI_DTYPE_I64);  // (R, K) = (2, 1)
    // Each operator's tensors (NULL: absent) and attributes, in kOperators' order.
    const std::pair<Descs, Attrs> args[kOperatorCount] = {
        {{half, half, half}, {}},
        {{half, full}, {-1}},
        {{full, half, full}, {-1}},
        {{half, full}, {INFINIOP_GELU_APPROXIMATE_TANH}},
        {{full, half, full}, {INFINIOP_GELU_APPROXIMATE_NONE}},
        {{half, half}, {INFINIOP_GELU_APPROXIMATE_NONE}},
        {{half, half, half}, {INFINIOP_GELU_APPROXIMATE_TANH}},
        {{half, full, nullptr}, {-1, 1.702, 7.0, 1.0, true}},
        {{full, half, full, nullptr}, {-1, 1.702, 7.0, 1.0, false}},
        {{half, half, index, nullptr, nullptr, nullptr, nullptr, nullptr}, {0}},
        {{half, nullptr, half, index, nullptr, nullptr, nullptr, nullptr}, {0, 0, 0, 0}},
        {{half, index, nullptr, nullptr, half, experts}, {0, 0, 4, 0, 0, false}},
        {{half, half, index}, {1, 0, 0}},
    };
    for (size_t i = 0; i < kOperatorCount; ++i) {
      void *d = nullptr;
      EXPECT_EQ(spec(kOperators[i]).create(handle_, &d, args[i].first, args[i].second),
                INFINI_STATUS_SUCCESS)
          << kOperators[i] << ": " << infiniopGetLastError();
      descriptors_.push_back(d);
    }
    ASSERT_EQ(descriptors_.size(), operatorCalls().size());
  }
  void TearDown() override {
    for (size_t i = 0; i < descriptors_.size(); ++i)
      if (descriptors_[i])
        EXPECT_EQ(operatorCalls()[i].destroy(descriptors_[i]), INFINI_STATUS_SUCCESS);
    for (auto t : tensors_) infiniopDestroyTensorDescriptor(t);
    if (handle_) infiniopDestroyHandle(handle_);
  }

  // `status` is BAD_PARAM and the message contains every one of `words`.
  static void expectBadParam(infiniStatus_t status, std::vector<std::string> words) {
    EXPECT_EQ(status, INFINI_STATUS_BAD_PARAM);
    const std::string message = infiniopGetLastError();
    for (const std::string &w : words)
      EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' not in: " << message;
  }

  infiniopHandle_t handle_ = nullptr;
  std::vector<infiniopTensorDescriptor_t> tensors_;
  std::vector<void *> descriptors_;
};

TEST_F(ObjectKind, EveryDescriptorFunctionRejectsAnotherOperatorsDescriptor) {
  const auto &calls = operatorCalls();
  for (size_t i = 0; i < calls.size(); ++i) {
    const OperatorCalls &op = calls[i];
    SCOPED_TRACE(op.name);
    void *other = descriptors_[(i + 1) % calls.size()];
    const std::string other_kind =
        std::string("a ") + calls[(i + 1) % calls.size()].name + " descriptor";
    size_t size = 12345;
    expectBadParam(op.workspace(other, &size), {op.name, other_kind});
    EXPECT_EQ(size, 12345u) << "size written on failure";
    expectBadParam(op.calculate(other), {op.name, other_kind});
    expectBadParam(op.destroy(other), {op.name, other_kind});
    // Neither object was harmed: both still answer their own functions.
    EXPECT_EQ(op.workspace(descriptors_[i], &size), INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
    EXPECT_EQ(calls[(i + 1) % calls.size()].workspace(other, &size), INFINI_STATUS_SUCCESS);
  }
}

TEST_F(ObjectKind, EveryDescriptorFunctionRejectsTensorDescriptorsAndHandles) {
  for (const OperatorCalls &op : operatorCalls()) {
    SCOPED_TRACE(op.name);
    size_t size = 0;
    for (auto [object, kind] : {std::pair<void *, const char *>{tensors_[0], "a tensor descriptor"},
                                {handle_, "a handle"}}) {
      expectBadParam(op.workspace(object, &size), {op.name, kind});
      expectBadParam(op.calculate(object), {op.name, kind});
      expectBadParam(op.destroy(object), {op.name, kind});
    }
    EXPECT_EQ(op.destroy(nullptr), INFINI_STATUS_NULL_POINTER);
  }
}

TEST_F(ObjectKind, HandleAndTensorFunctionsRejectOtherObjects) {
  auto *tensor_as_handle = reinterpret_cast<infiniopHandle_t>(tensors_[0]);
  void *p = nullptr;
  expectBadParam(infiniopMalloc(tensor_as_handle, &p, 16),
                 {"infiniopMalloc", "a tensor descriptor"});
  EXPECT_EQ(p, nullptr);
  expectBadParam(infiniopDestroyHandle(reinterpret_cast<infiniopHandle_t>(descriptors_[1])),
                 {"a SwiGlu descriptor", "not a handle"});
  expectBadParam(
      infiniopDestroyTensorDescriptor(reinterpret_cast<infiniopTensorDescriptor_t>(handle_)),
      {"a handle", "not a tensor descriptor"});
  // An operator's create given a handle where a tensor descriptor belongs, and the reverse.
  const auto tensor_of = [](void *object) {
    return reinterpret_cast<infiniopTensorDescriptor_t>(object);
  };
  const OpSpec &swiglu = spec("SwiGlu");
  void *op = nullptr;
  expectBadParam(swiglu.create(handle_, &op, {tensors_[0], tensor_of(handle_)}, {-1}),
                 {"SwiGlu", "x descriptor is a handle"});
  expectBadParam(swiglu.create(tensor_as_handle, &op, {tensors_[0], tensors_[1]}, {-1}),
                 {"SwiGlu", "handle is a tensor descriptor"});
  EXPECT_EQ(op, nullptr);
  void *moe = nullptr;
  expectBadParam(spec("MoeFinalizeRoutingV2")
                     .create(handle_, &moe,
                             {tensors_[0], tensors_[0], tensors_[2], nullptr, nullptr, nullptr,
                              tensor_of(descriptors_[0]), nullptr},
                             {0}),
                 {"MoeFinalizeRoutingV2", "scales is a GeluBackward descriptor"});
  EXPECT_EQ(moe, nullptr);
}

}  // namespace
}  // namespace infiniop_test
