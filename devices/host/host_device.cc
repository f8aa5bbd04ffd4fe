// SPDX-License-Identifier: Apache-2.0
#include "host/host_device.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "core/handle.h"
#include "elementwise/runner.h"
#include "elementwise/walk.h"
#include "gather/inverse.h"

namespace infiniop::host {
namespace {

constexpr size_t kAlignment = 64;  // a cache line: every SIMD width up to AVX-512

struct State final : DeviceState {
  ~State() override {
    for (void *p : allocations) std::free(p);
    for (void *s : streams) delete static_cast<char *>(s);
  }
  std::mutex mutex;  // guards the two tables
  std::unordered_set<void *> allocations;
  std::unordered_set<void *> streams;  // CPU work is synchronous: a stream is a validated token
};

infiniStatus_t checkStream(const char *where, infiniopHandle_t handle, void *stream) {
  if (!stream) return INFINI_STATUS_SUCCESS;
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.count(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        std::string(where) + ": stream was not created by infiniopStreamCreate on this handle");
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t copy(const char *where, infiniopHandle_t handle, void *dst, const void *src,
                    size_t size, void *stream) {
  INFINIOP_CHECK(checkStream(where, handle, stream));
  if (size) std::memmove(dst, src, size);
  return succeed();
}

// The zero-fill of rows a call skips.
void zeroOutputs(const elementwise::Plan &plan, char *const *operands, size_t begin, size_t end) {
  const int inner = plan.ndim - 1;
  const size_t size = plan.element_size;
  elementwise::walkRows(plan, operands, begin, end, [&](char *const *base, size_t count) {
    for (int k = 0; k < plan.num_outputs; ++k) {
      const ptrdiff_t step = plan.strides[k][inner] * static_cast<ptrdiff_t>(size);
      if (step == static_cast<ptrdiff_t>(size)) {
        std::memset(base[k], 0, count * size);
        continue;
      }
      for (size_t i = 0; i < count; ++i)
        std::memset(base[k] + static_cast<ptrdiff_t>(i) * step, 0, size);
    }
  });
}

// The kernel runs on the calling thread(s) and is done on return.
class ElementwiseRunner final : public elementwise::Runner {
 public:
  ElementwiseRunner(elementwise::Kernel kernel, const elementwise::Plan &plan)
      : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const void *attributes, char *const *operands, size_t begin, size_t end,
                     bool zero_fill, void * /*stream*/) const override {
    if (zero_fill)
      zeroOutputs(plan_, operands, begin, end);
    else
      kernel_(plan_, attributes, operands, begin, end);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  elementwise::Kernel kernel_;
  elementwise::Plan plan_;
};

// A MoE kernel function on its plan, synchronously (host memory: the index data is read in
// place, so the host copy is not needed).
template <class Runner, class Plan, class Data>
class MoeRunner final : public Runner {
 public:
  using Kernel = void (*)(const Plan &, const Data &);
  MoeRunner(Kernel kernel, const Plan &plan) : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const Data &data, const void *, void *) const override {
    kernel_(plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  Kernel kernel_;
  Plan plan_;
};

// MoeInitRoutingV2: the index outputs from the host's sort, then the device's rows.
class InitRunner final : public moe::InitRunner {
 public:
  InitRunner(moe::InitKernel kernel, const moe::InitPlan &plan) : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const moe::InitData &data, const moe::InitRouting &routing,
                     void *) const override {
    moe::writeInitIndices(plan_, data, routing);
    kernel_(plan_, data, routing);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  moe::InitKernel kernel_;
  moe::InitPlan plan_;
};

// The router operators: one kernel for the four (plan.kind), synchronously.
class RouterRunner final : public moe::RouterRunner {
 public:
  RouterRunner(moe::RouterKernel kernel, const moe::RouterPlan &plan)
      : kernel_(kernel), plan_(plan) {}
  infiniStatus_t run(const moe::RouterData &data, void *) const override {
    kernel_(plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  moe::RouterKernel kernel_;
  moe::RouterPlan plan_;
};

}  // namespace

infiniStatus_t HostDevice::open(const char *where, int device_id,
                                std::unique_ptr<DeviceState> *state) const {
  if (device_id != 0)
    return fail(
        INFINI_STATUS_DEVICE_NOT_FOUND,
        std::string(where) + ": " + name + " has only device 0, not " + std::to_string(device_id));
  *state = std::make_unique<State>();
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::malloc(infiniopHandle_t handle, void **ptr, size_t size) const {
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < size) return fail(INFINI_STATUS_BAD_PARAM, "infiniopMalloc: size overflows");
  void *p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p)
    return fail(INFINI_STATUS_INTERNAL_ERROR,
                "infiniopMalloc: out of host memory for " + std::to_string(size) + " bytes");
  State &s = stateOf<State>(handle);
  try {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocations.insert(p);
  } catch (...) {
    std::free(p);
    throw;
  }
  *ptr = p;
  return succeed();
}

infiniStatus_t HostDevice::free(infiniopHandle_t handle, void *ptr) const {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.allocations.erase(ptr))
    return fail(INFINI_STATUS_BAD_PARAM,
                "infiniopFree: pointer was not returned by infiniopMalloc on this handle");
  std::free(ptr);
  return succeed();
}

infiniStatus_t HostDevice::memcpyHostToDevice(infiniopHandle_t handle, void *dst, const void *src,
                                              size_t size, void *stream) const {
  return copy("infiniopMemcpyHostToDevice", handle, dst, src, size, stream);
}

infiniStatus_t HostDevice::memcpyDeviceToHost(infiniopHandle_t handle, void *dst, const void *src,
                                              size_t size, void *stream) const {
  return copy("infiniopMemcpyDeviceToHost", handle, dst, src, size, stream);
}

infiniStatus_t HostDevice::streamCreate(infiniopHandle_t handle, void **stream) const {
  State &s = stateOf<State>(handle);
  auto token = std::make_unique<char>();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.streams.insert(token.get());
  *stream = token.release();
  return succeed();
}

infiniStatus_t HostDevice::streamDestroy(infiniopHandle_t handle, void *stream) const {
  State &s = stateOf<State>(handle);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.streams.erase(stream))
    return fail(
        INFINI_STATUS_BAD_PARAM,
        "infiniopStreamDestroy: stream was not created by infiniopStreamCreate on this handle");
  delete static_cast<char *>(stream);
  return succeed();
}

infiniStatus_t HostDevice::streamSynchronize(infiniopHandle_t handle, void *stream) const {
  INFINIOP_CHECK(checkStream("infiniopStreamSynchronize", handle, stream));
  return succeed();
}

infiniStatus_t HostDevice::readForCheck(const char *, infiniopHandle_t, void *, const void *src,
                                        size_t bytes, void *host) const {
  if (bytes) std::memcpy(host, src, bytes);
  return INFINI_STATUS_SUCCESS;
}

bool HostDevice::supports(KernelId id) const {
  const int index = static_cast<int>(id);
  if (index < kElementwiseKernelCount) return kernels_.elementwise[index] != nullptr;
  switch (id) {
    case KernelId::moe_finalize_routing:
    case KernelId::moe_init_routing_grad:  // the forward with weight 1
      return kernels_.moe_forward != nullptr;
    case KernelId::moe_finalize_routing_grad:
      return kernels_.moe_grad != nullptr;
    case KernelId::moe_gating_top_k_softmax:
    case KernelId::moe_gating_top_k_softmax_grad:
    case KernelId::moe_gating_top_k:
    case KernelId::moe_gating_top_k_grad:
      return kernels_.router != nullptr;
    default:
      return kernels_.moe_init != nullptr;
  }
}

infiniStatus_t HostDevice::elementwiseRunner(const char *, infiniopHandle_t, KernelId id,
                                             const elementwise::Plan &plan,
                                             std::unique_ptr<elementwise::Runner> *runner) const {
  *runner = std::make_unique<ElementwiseRunner>(kernels_.elementwise[static_cast<int>(id)], plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::moeForwardRunner(const char *, infiniopHandle_t,
                                            const moe::ForwardPlan &plan,
                                            std::unique_ptr<moe::ForwardRunner> *runner) const {
  *runner = std::make_unique<MoeRunner<moe::ForwardRunner, moe::ForwardPlan, moe::ForwardData>>(
      kernels_.moe_forward, plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::moeGradRunner(const char *, infiniopHandle_t, const moe::GradPlan &plan,
                                         size_t *workspace_size,
                                         std::unique_ptr<moe::GradRunner> *runner) const {
  *workspace_size =
      kernels_.moe_grad_inverts
          ? gather::inverseWorkspaceBytes(plan.grad_expanded_x.rows, plan.tokens * plan.topk)
          : 0;
  *runner = std::make_unique<MoeRunner<moe::GradRunner, moe::GradPlan, moe::GradData>>(
      kernels_.moe_grad, plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::moeInitRunner(const char *, infiniopHandle_t, const moe::InitPlan &plan,
                                         size_t *workspace_size,
                                         std::unique_ptr<moe::InitRunner> *runner) const {
  *workspace_size = 0;
  *runner = std::make_unique<InitRunner>(kernels_.moe_init, plan);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t HostDevice::moeGatingRunner(const char *, infiniopHandle_t,
                                           const moe::RouterPlan &plan, size_t *workspace_size,
                                           std::unique_ptr<moe::RouterRunner> *runner) const {
  *workspace_size = 0;
  *runner = std::make_unique<RouterRunner>(kernels_.router, plan);
  return INFINI_STATUS_SUCCESS;
}
}  // namespace infiniop::host
