// SPDX-License-Identifier: Apache-2.0
// An object of the wrong kind (another operator's descriptor, a tensor descriptor, a handle)
// given to any function that takes a descriptor, a handle or a tensor descriptor is BAD_PARAM
// with a message naming both kinds, never undefined behaviour; the object stays usable.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "infiniop.h"

namespace infiniop_test {
namespace {

// One operator's three descriptor-taking functions, given an arbitrary pointer.
struct OperatorCalls {
  const char *name;
  std::function<infiniStatus_t(void *, size_t *)> workspace;
  std::function<infiniStatus_t(void *)> calculate;  // NULL data: the kind check comes first
  std::function<infiniStatus_t(void *)> destroy;
};

template <class D>
D as(void *p) {
  return reinterpret_cast<D>(p);
}

const std::vector<OperatorCalls> &operatorCalls() {
  static const std::vector<OperatorCalls> calls = {
      {"GeluBackward",
       [](void *d, size_t *s) {
         return infiniopGetGeluBackwardWorkspaceSize(as<infiniopGeluBackwardDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopGeluBackward(as<infiniopGeluBackwardDescriptor_t>(d), nullptr, 0, nullptr,
                                     nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyGeluBackwardDescriptor(as<infiniopGeluBackwardDescriptor_t>(d));
       }},
      {"SwiGlu",
       [](void *d, size_t *s) {
         return infiniopGetSwiGluWorkspaceSize(as<infiniopSwiGluDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopSwiGlu(as<infiniopSwiGluDescriptor_t>(d), nullptr, 0, nullptr, nullptr,
                               nullptr);
       },
       [](void *d) { return infiniopDestroySwiGluDescriptor(as<infiniopSwiGluDescriptor_t>(d)); }},
      {"SwiGluBackward",
       [](void *d, size_t *s) {
         return infiniopGetSwiGluBackwardWorkspaceSize(as<infiniopSwiGluBackwardDescriptor_t>(d),
                                                       s);
       },
       [](void *d) {
         return infiniopSwiGluBackward(as<infiniopSwiGluBackwardDescriptor_t>(d), nullptr, 0,
                                       nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroySwiGluBackwardDescriptor(as<infiniopSwiGluBackwardDescriptor_t>(d));
       }},
      {"GeluMul",
       [](void *d, size_t *s) {
         return infiniopGetGeluMulWorkspaceSize(as<infiniopGeluMulDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopGeluMul(as<infiniopGeluMulDescriptor_t>(d), nullptr, 0, nullptr, nullptr,
                                nullptr);
       },
       [](void *d) {
         return infiniopDestroyGeluMulDescriptor(as<infiniopGeluMulDescriptor_t>(d));
       }},
      {"GeluMulBackward",
       [](void *d, size_t *s) {
         return infiniopGetGeluMulBackwardWorkspaceSize(as<infiniopGeluMulBackwardDescriptor_t>(d),
                                                        s);
       },
       [](void *d) {
         return infiniopGeluMulBackward(as<infiniopGeluMulBackwardDescriptor_t>(d), nullptr, 0,
                                        nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyGeluMulBackwardDescriptor(
             as<infiniopGeluMulBackwardDescriptor_t>(d));
       }},
      {"Gelu",
       [](void *d, size_t *s) {
         return infiniopGetGeluWorkspaceSize(as<infiniopGeluDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopGelu(as<infiniopGeluDescriptor_t>(d), nullptr, 0, nullptr, nullptr,
                             nullptr);
       },
       [](void *d) { return infiniopDestroyGeluDescriptor(as<infiniopGeluDescriptor_t>(d)); }},
      {"GeluBackwardV2",
       [](void *d, size_t *s) {
         return infiniopGetGeluBackwardV2WorkspaceSize(as<infiniopGeluBackwardV2Descriptor_t>(d),
                                                       s);
       },
       [](void *d) {
         return infiniopGeluBackwardV2(as<infiniopGeluBackwardV2Descriptor_t>(d), nullptr, 0,
                                       nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyGeluBackwardV2Descriptor(as<infiniopGeluBackwardV2Descriptor_t>(d));
       }},
      {"ClippedSwiglu",
       [](void *d, size_t *s) {
         return infiniopGetClippedSwigluWorkspaceSize(as<infiniopClippedSwigluDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopClippedSwiglu(as<infiniopClippedSwigluDescriptor_t>(d), nullptr, 0, nullptr,
                                      nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyClippedSwigluDescriptor(as<infiniopClippedSwigluDescriptor_t>(d));
       }},
      {"ClippedSwigluBackward",
       [](void *d, size_t *s) {
         return infiniopGetClippedSwigluBackwardWorkspaceSize(
             as<infiniopClippedSwigluBackwardDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopClippedSwigluBackward(as<infiniopClippedSwigluBackwardDescriptor_t>(d),
                                              nullptr, 0, nullptr, nullptr, nullptr, nullptr,
                                              nullptr);
       },
       [](void *d) {
         return infiniopDestroyClippedSwigluBackwardDescriptor(
             as<infiniopClippedSwigluBackwardDescriptor_t>(d));
       }},
      {"MoeFinalizeRoutingV2",
       [](void *d, size_t *s) {
         return infiniopGetMoeFinalizeRoutingV2WorkspaceSize(
             as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopMoeFinalizeRoutingV2(as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d),
                                             nullptr, 0, nullptr, nullptr, nullptr, nullptr,
                                             nullptr, nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyMoeFinalizeRoutingV2Descriptor(
             as<infiniopMoeFinalizeRoutingV2Descriptor_t>(d));
       }},
      {"MoeFinalizeRoutingV2Grad",
       [](void *d, size_t *s) {
         return infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopMoeFinalizeRoutingV2Grad(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d), nullptr, 0, nullptr, nullptr,
             nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(
             as<infiniopMoeFinalizeRoutingV2GradDescriptor_t>(d));
       }},
      {"MoeInitRoutingV2",
       [](void *d, size_t *s) {
         return infiniopGetMoeInitRoutingV2WorkspaceSize(
             as<infiniopMoeInitRoutingV2Descriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopMoeInitRoutingV2(as<infiniopMoeInitRoutingV2Descriptor_t>(d), nullptr, 0,
                                         nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                         nullptr);
       },
       [](void *d) {
         return infiniopDestroyMoeInitRoutingV2Descriptor(
             as<infiniopMoeInitRoutingV2Descriptor_t>(d));
       }},
      {"MoeInitRoutingV2Grad",
       [](void *d, size_t *s) {
         return infiniopGetMoeInitRoutingV2GradWorkspaceSize(
             as<infiniopMoeInitRoutingV2GradDescriptor_t>(d), s);
       },
       [](void *d) {
         return infiniopMoeInitRoutingV2Grad(as<infiniopMoeInitRoutingV2GradDescriptor_t>(d),
                                             nullptr, 0, nullptr, nullptr, nullptr, nullptr);
       },
       [](void *d) {
         return infiniopDestroyMoeInitRoutingV2GradDescriptor(
             as<infiniopMoeInitRoutingV2GradDescriptor_t>(d));
       }},
  };
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
    void *d = nullptr;
    auto made = [&](infiniStatus_t status) {
      EXPECT_EQ(status, INFINI_STATUS_SUCCESS) << infiniopGetLastError();
      descriptors_.push_back(d);
    };
    made(infiniopCreateGeluBackwardDescriptor(
        handle_, reinterpret_cast<infiniopGeluBackwardDescriptor_t *>(&d), half, half, half));
    made(infiniopCreateSwiGluDescriptor(handle_, reinterpret_cast<infiniopSwiGluDescriptor_t *>(&d),
                                        half, full, -1));
    made(infiniopCreateSwiGluBackwardDescriptor(
        handle_, reinterpret_cast<infiniopSwiGluBackwardDescriptor_t *>(&d), full, half, full, -1));
    made(infiniopCreateGeluMulDescriptor(handle_,
                                         reinterpret_cast<infiniopGeluMulDescriptor_t *>(&d), half,
                                         full, INFINIOP_GELU_APPROXIMATE_TANH));
    made(infiniopCreateGeluMulBackwardDescriptor(
        handle_, reinterpret_cast<infiniopGeluMulBackwardDescriptor_t *>(&d), full, half, full,
        INFINIOP_GELU_APPROXIMATE_NONE));
    made(infiniopCreateGeluDescriptor(handle_, reinterpret_cast<infiniopGeluDescriptor_t *>(&d),
                                      half, half, INFINIOP_GELU_APPROXIMATE_NONE));
    made(infiniopCreateGeluBackwardV2Descriptor(
        handle_, reinterpret_cast<infiniopGeluBackwardV2Descriptor_t *>(&d), half, half, half,
        INFINIOP_GELU_APPROXIMATE_TANH));
    made(infiniopCreateClippedSwigluDescriptor(
        handle_, reinterpret_cast<infiniopClippedSwigluDescriptor_t *>(&d), half, full, nullptr, -1,
        1.702f, 7.0f, 1.0f, true));
    made(infiniopCreateClippedSwigluBackwardDescriptor(
        handle_, reinterpret_cast<infiniopClippedSwigluBackwardDescriptor_t *>(&d), full, half,
        full, nullptr, -1, 1.702f, 7.0f, 1.0f, false));
    made(infiniopCreateMoeFinalizeRoutingV2Descriptor(
        handle_, reinterpret_cast<infiniopMoeFinalizeRoutingV2Descriptor_t *>(&d), half, half,
        index, nullptr, nullptr, nullptr, nullptr, nullptr, 0));
    made(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
        handle_, reinterpret_cast<infiniopMoeFinalizeRoutingV2GradDescriptor_t *>(&d), half,
        nullptr, half, index, nullptr, nullptr, nullptr, nullptr, 0, 0, 0, 0));
    const auto experts = tensor({2, 1}, INFINI_DTYPE_I64);  // (R, K) = (2, 1)
    made(infiniopCreateMoeInitRoutingV2Descriptor(
        handle_, reinterpret_cast<infiniopMoeInitRoutingV2Descriptor_t *>(&d), half, index, nullptr,
        nullptr, half, experts, 0, 0, 4, 0, 0, false));
    made(infiniopCreateMoeInitRoutingV2GradDescriptor(
        handle_, reinterpret_cast<infiniopMoeInitRoutingV2GradDescriptor_t *>(&d), half, half,
        index, 1, 0, 0));
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
  infiniopSwiGluDescriptor_t op = nullptr;
  expectBadParam(
      infiniopCreateSwiGluDescriptor(handle_, &op, tensors_[0],
                                     reinterpret_cast<infiniopTensorDescriptor_t>(handle_), -1),
      {"SwiGlu", "x descriptor is a handle"});
  expectBadParam(
      infiniopCreateSwiGluDescriptor(tensor_as_handle, &op, tensors_[0], tensors_[1], -1),
      {"SwiGlu", "handle is a tensor descriptor"});
  EXPECT_EQ(op, nullptr);
  infiniopMoeFinalizeRoutingV2Descriptor_t moe = nullptr;
  expectBadParam(
      infiniopCreateMoeFinalizeRoutingV2Descriptor(
          handle_, &moe, tensors_[0], tensors_[0], tensors_[2], nullptr, nullptr, nullptr,
          reinterpret_cast<infiniopTensorDescriptor_t>(descriptors_[0]), nullptr, 0),
      {"MoeFinalizeRoutingV2", "scales is a GeluBackward descriptor"});
  EXPECT_EQ(moe, nullptr);
}

}  // namespace
}  // namespace infiniop_test
