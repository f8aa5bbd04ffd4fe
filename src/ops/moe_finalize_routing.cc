// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and MoeFinalizeRoutingV2Grad: the C ABI, every check of the contract
// (at creation: NULLs, device, modes, dtypes, shapes; per call: pointers, overlap, workspace,
// index values, all before the kernel writes anything), and the device tables.
#include "ops/moe_finalize_routing.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/handle.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#if INFINIOP_WITH_OPENCL
#include "opencl/moe_finalize_routing.h"
#endif

namespace {
using infiniop::fail;
using infiniop::Tensor;
namespace gather = infiniop::gather;
namespace moe = infiniop::moe;

constexpr const char *kForward = "MoeFinalizeRoutingV2";
constexpr const char *kGrad = "MoeFinalizeRoutingV2Grad";

// The CPU devices' runners: their kernel function on the plan, synchronously (no streams).
template <class Runner, class Plan, class Data, void (*kernel)(const Plan &, const Data &)>
class HostRunner final : public Runner {
 public:
  explicit HostRunner(const Plan &plan) : plan_(plan) {}
  infiniStatus_t run(const Data &data, const int32_t *, void *) const override {
    kernel(plan_, data);
    return INFINI_STATUS_SUCCESS;
  }

 private:
  Plan plan_;
};
template <moe::ForwardKernel kernel>
infiniStatus_t hostForward(infiniopHandle_t, const moe::ForwardPlan &plan,
                           std::unique_ptr<moe::ForwardRunner> *runner) {
  *runner =
      std::make_unique<HostRunner<moe::ForwardRunner, moe::ForwardPlan, moe::ForwardData, kernel>>(
          plan);
  return INFINI_STATUS_SUCCESS;
}
template <moe::GradKernel kernel>
infiniStatus_t hostGrad(infiniopHandle_t, const moe::GradPlan &plan,
                        std::unique_ptr<moe::GradRunner> *runner) {
  *runner =
      std::make_unique<HostRunner<moe::GradRunner, moe::GradPlan, moe::GradData, kernel>>(plan);
  return INFINI_STATUS_SUCCESS;
}

#if INFINIOP_WITH_CPU
#define INFINIOP_MOE_CPU(host, name) host<::infiniop::cpu::name>
#else
#define INFINIOP_MOE_CPU(host, name) nullptr
#endif
#if INFINIOP_WITH_OPENCL
#define INFINIOP_MOE_OPENCL(name) ::infiniop::opencl::name
#else
#define INFINIOP_MOE_OPENCL(name) nullptr
#endif
// Indexed by infiniDevice_t: CPU, OPENCL, CPU_REFERENCE.
constexpr moe::ForwardFactory kForwardKernels[] = {
    INFINIOP_MOE_CPU(hostForward, moeFinalizeRouting), INFINIOP_MOE_OPENCL(makeMoeForwardRunner),
    hostForward<infiniop::cpu_reference::moeFinalizeRouting>};
constexpr moe::GradFactory kGradKernels[] = {
    INFINIOP_MOE_CPU(hostGrad, moeFinalizeRoutingGrad), INFINIOP_MOE_OPENCL(makeMoeGradRunner),
    hostGrad<infiniop::cpu_reference::moeFinalizeRoutingGrad>};

// An index tensor as the host checks (and the OpenCL grad inverts) it: on the CPU devices the
// data itself; on OpenCL a copy of its span, read once the work queued before on the stream is
// done (API.md lets a call wait for such a check before it writes anything).
class HostIndex {
 public:
  infiniStatus_t read(const char *op, infiniopHandle_t handle, void *stream,
                      const gather::IndexView &view, const int32_t *data) {
    base_ = data;
    if (handle->device != INFINI_DEVICE_OPENCL || !view.present || view.rows * view.cols == 0)
      return INFINI_STATUS_SUCCESS;
    // span.lowest <= 0 <= span.highest: element 0 lies at copy_[-lowest].
    copy_.resize(static_cast<size_t>(view.span.highest - view.span.lowest + 1));
    INFINIOP_CHECK(infiniop::readForCheck(op, handle, stream, data + view.span.lowest,
                                          copy_.size() * sizeof(int32_t), copy_.data()));
    base_ = copy_.data() - view.span.lowest;
    return INFINI_STATUS_SUCCESS;
  }
  // Read through the view: view.at(data(), r, c).
  const int32_t *data() const { return base_; }

 private:
  std::vector<int32_t> copy_;
  const int32_t *base_ = nullptr;
};

// The checks every descriptor makes, with messages prefixed by the operator's name.
class Checker {
 public:
  explicit Checker(const char *op) : op_(op) {}

  infiniStatus_t fail(infiniStatus_t status, const std::string &what) const {
    return infiniop::fail(status, op_ + ": " + what);
  }
  infiniStatus_t required(const char *name, const void *p) const {
    return p ? INFINI_STATUS_SUCCESS
             : fail(INFINI_STATUS_NULL_POINTER, std::string(name) + " is NULL");
  }
  template <class Kernel>
  infiniStatus_t device(infiniopHandle_t handle, const Kernel (&kernels)[3]) const {
    const int device = static_cast<int>(handle->device);
    if (device < 0 || device >= 3 || !kernels[device])
      return fail(INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                  std::string("not available on device ") + infiniop::deviceName(handle->device));
    return INFINI_STATUS_SUCCESS;
  }
  // A float tensor (if present) of the call's dtype, which the first one sets.
  infiniStatus_t floating(const char *name, const Tensor *t) {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (!infiniop::isFloatStorage(t->dtype))
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE, std::string(name) + " has dtype " +
                                                      infiniop::dtypeName(t->dtype) +
                                                      "; F32, F16 or BF16 is required");
    if (dtype_ == INFINI_DTYPE_INVALID) {
      dtype_ = t->dtype;
      dtype_source_ = name;
    } else if (t->dtype != dtype_) {
      return fail(INFINI_STATUS_BAD_TENSOR_DTYPE,
                  std::string(name) + " has dtype " + infiniop::dtypeName(t->dtype) + " but " +
                      dtype_source_ + " has " + infiniop::dtypeName(dtype_));
    }
    return INFINI_STATUS_SUCCESS;
  }
  infiniStatus_t index(const char *name, const Tensor *t) const {
    if (!t) return INFINI_STATUS_SUCCESS;
    INFINIOP_CHECK(infiniop::checkTensor(op_.c_str(), name, t));
    if (t->dtype == INFINI_DTYPE_I32) return INFINI_STATUS_SUCCESS;
    return fail(
        INFINI_STATUS_BAD_TENSOR_DTYPE,
        std::string(name) + " has dtype " + infiniop::dtypeName(t->dtype) + "; I32 is required");
  }
  infiniStatus_t rank(const char *name, const Tensor *t, size_t ndim, const char *layout) const {
    if (!t || t->ndim() == ndim) return INFINI_STATUS_SUCCESS;
    return fail(
        INFINI_STATUS_BAD_TENSOR_SHAPE,
        std::string(name) + " shape " + infiniop::shapeString(t->shape) + " must be " + layout);
  }
  infiniStatus_t shape(const char *name, const Tensor *t, const std::vector<size_t> &expected,
                       const char *why) const {
    if (!t || t->shape == expected) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::string(name) + " shape " + infiniop::shapeString(t->shape) + " should be " +
                    infiniop::shapeString(expected) + " " + why);
  }
  infiniStatus_t output(const char *name, const Tensor *t) const {
    if (!t || !infiniop::hasSelfOverlap(t->shape, t->strides)) return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_STRIDES,
                std::string("output ") + name + " (shape " + infiniop::shapeString(t->shape) +
                    ", strides " + infiniop::stridesString(t->strides) +
                    ") has overlapping elements");
  }
  // Positions of expanded_row_idx are int32 values and workspace entries.
  infiniStatus_t positions(size_t tokens, size_t topk) const {
    if (topk == 0 || tokens <= static_cast<size_t>(std::numeric_limits<int32_t>::max()) / topk)
      return INFINI_STATUS_SUCCESS;
    return fail(INFINI_STATUS_BAD_TENSOR_SHAPE,
                std::to_string(tokens) + " x " + std::to_string(topk) +
                    " routed tokens exceed what INT32 indices can address");
  }
  infiniDtype_t dtype() const { return dtype_; }

 private:
  std::string op_;
  infiniDtype_t dtype_ = INFINI_DTYPE_INVALID;
  const char *dtype_source_ = "";
};

// One tensor of a call for the per-call checks: pointer and overlap.
struct Operand {
  const char *name;
  const void *data;
  bool present;  // its descriptor was given and the kernel uses it
  infiniop::ElementSpan span;
  size_t element_size;
  size_t numel;
};

// NULL data pointers, then outputs (the first `num_outputs`) overlapping anything else.
infiniStatus_t checkOperands(const char *op, const std::vector<Operand> &operands,
                             size_t num_outputs) {
  std::vector<gather::Extent> extents;
  for (const Operand &o : operands) {
    if (!o.present) {
      extents.push_back({o.name, nullptr, {}, 0, 0});
      continue;
    }
    if (!o.data && o.numel > 0)
      return fail(INFINI_STATUS_NULL_POINTER, std::string(op) + ": " + o.name + " pointer is NULL");
    if (o.numel > 0 && !infiniop::isAligned(o.data, o.element_size))
      return fail(
          INFINI_STATUS_BAD_PARAM,
          std::string(op) + ": " + infiniop::misalignedMessage(o.name, o.data, o.element_size));
    extents.push_back({o.name, o.data, o.span, o.element_size, o.numel});
  }
  return gather::checkNoOverlap(op, extents.data(), extents.size(), num_outputs);
}

template <class View>
Operand floatOperand(const char *name, const void *data, const View &view, size_t element_size,
                     size_t numel) {
  return {name, data, view.present, view.span, element_size, numel};
}

// ---- forward ----

struct ForwardDescriptor : infiniop::OperatorDescriptor {
  ForwardDescriptor() : OperatorDescriptor(kForward) {}
  std::unique_ptr<moe::ForwardRunner> runner;
  moe::ForwardPlan plan;
  bool drop_pad;  // modes 1 and 3: -1 is a dropped token
};

infiniStatus_t createForward(infiniopHandle_t handle,
                             infiniopMoeFinalizeRoutingV2Descriptor_t *desc_ptr, const Tensor *out,
                             const Tensor *expanded_x, const Tensor *row_index, const Tensor *x1,
                             const Tensor *x2, const Tensor *bias, const Tensor *scales,
                             const Tensor *expert_index, int64_t mode) {
  Checker check(kForward);
  INFINIOP_CHECK(check.required("desc_ptr", desc_ptr));
  INFINIOP_CHECK(infiniop::checkHandle(kForward, handle));
  INFINIOP_CHECK(check.required("out descriptor", out));
  INFINIOP_CHECK(check.required("expanded_x descriptor", expanded_x));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.device(handle, kForwardKernels));
  if (mode < 0 || mode > 3)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "drop_pad_mode " + std::to_string(mode) + " is not 0, 1, 2 or 3");
  if (x2 && !x1) return check.fail(INFINI_STATUS_BAD_PARAM, "x2 is given without x1");
  if (bias && !expert_index)
    return check.fail(INFINI_STATUS_BAD_PARAM, "bias is given without expert_idx");
  for (auto [name, t] : {std::pair{"out", out},
                         {"expanded_x", expanded_x},
                         {"x1", x1},
                         {"x2", x2},
                         {"bias", bias},
                         {"scales", scales}})
    INFINIOP_CHECK(check.floating(name, t));
  INFINIOP_CHECK(check.index("expanded_row_idx", row_index));
  INFINIOP_CHECK(check.index("expert_idx", expert_index));

  const bool drop_pad = mode == 1 || mode == 3;
  INFINIOP_CHECK(check.rank("out", out, 2, "(R, H)"));
  INFINIOP_CHECK(check.rank("scales", scales, 2, "(R, K)"));
  INFINIOP_CHECK(check.rank("expanded_row_idx", row_index, 1, "(R*K)"));
  INFINIOP_CHECK(check.rank("bias", bias, 2, "(E, H)"));
  INFINIOP_CHECK(check.rank(
      "expanded_x", expanded_x, drop_pad ? 3 : 2,
      drop_pad ? "(E, C, H) in drop_pad_mode 1 and 3" : "(R*K, H) in drop_pad_mode 0 and 2"));
  const size_t R = out->shape[0], H = out->shape[1];
  const size_t K = scales ? scales->shape[1] : 1;
  INFINIOP_CHECK(check.positions(R, K));
  INFINIOP_CHECK(check.shape("scales", scales, {R, K}, "(R, K), R from out"));
  INFINIOP_CHECK(check.shape("x1", x1, {R, H}, "(out's shape)"));
  INFINIOP_CHECK(check.shape("x2", x2, {R, H}, "(out's shape)"));
  INFINIOP_CHECK(check.shape("expanded_row_idx", row_index, {R * K},
                             scales ? "(R*K, K from scales)" : "(R: without scales K = 1)"));
  INFINIOP_CHECK(check.shape("expert_idx", expert_index, {R, K}, "(R, K)"));
  const size_t experts = drop_pad ? expanded_x->shape[0] : (bias ? bias->shape[0] : 0);
  if (drop_pad) {
    INFINIOP_CHECK(check.shape("expanded_x", expanded_x, {experts, expanded_x->shape[1], H},
                               "(E, C, H), H from out"));
    INFINIOP_CHECK(check.shape("bias", bias, {experts, H}, "(E, H), E from expanded_x"));
  } else {
    INFINIOP_CHECK(check.shape("expanded_x", expanded_x, {R * K, H}, "(R*K, H)"));
    INFINIOP_CHECK(check.shape("bias", bias, {experts, H}, "(E, H), H from out"));
  }
  INFINIOP_CHECK(check.output("out", out));

  auto desc = std::make_unique<ForwardDescriptor>();
  desc->handle = handle;
  desc->drop_pad = drop_pad;
  moe::ForwardPlan &plan = desc->plan;
  plan.dtype = check.dtype();
  plan.tokens = R;
  plan.topk = K;
  plan.hidden = H;
  plan.out = gather::rowView(out);
  plan.expanded_x = gather::rowView(expanded_x);
  plan.x1 = gather::rowView(x1);
  plan.x2 = gather::rowView(x2);
  plan.bias = gather::rowView(bias);
  plan.scales = gather::tableView(scales);
  plan.row_index = gather::flatIndexView(row_index, R, K, /*column_major=*/mode <= 1);
  plan.expert_index = gather::tableIndexView(bias ? expert_index : nullptr);
  INFINIOP_CHECK(kForwardKernels[handle->device](handle, plan, &desc->runner));
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

infiniStatus_t runForward(const ForwardDescriptor *desc, size_t workspace_size,
                          const moe::ForwardData &data, void *stream) {
  (void)workspace_size;  // none is needed
  const moe::ForwardPlan &p = desc->plan;
  const size_t bytes = infiniop::dtypeSize(p.dtype);
  const size_t RK = p.tokens * p.topk, H = p.hidden;
  const std::vector<Operand> operands = {
      floatOperand("out", data.out, p.out, bytes, p.tokens * H),
      floatOperand("expanded_x", data.expanded_x, p.expanded_x, bytes, p.expanded_x.rows * H),
      {"expanded_row_idx", data.row_index, true, p.row_index.span, 4, RK},
      floatOperand("x1", data.x1, p.x1, bytes, p.tokens * H),
      floatOperand("x2", data.x2, p.x2, bytes, p.tokens * H),
      floatOperand("bias", data.bias, p.bias, bytes, p.bias.rows * H),
      floatOperand("scales", data.scales, p.scales, bytes, RK),
      {"expert_idx", data.expert_index, p.expert_index.present, p.expert_index.span, 4, RK},
  };
  INFINIOP_CHECK(checkOperands(kForward, operands, 1));
  // The index data is checked whenever it exists, even where there is nothing to compute.
  HostIndex row_index, expert_index;
  INFINIOP_CHECK(row_index.read(kForward, desc->handle, stream, p.row_index, data.row_index));
  INFINIOP_CHECK(gather::checkIndexRange(kForward, "expanded_row_idx", p.row_index,
                                         row_index.data(), desc->drop_pad ? -1 : 0,
                                         static_cast<int64_t>(p.expanded_x.rows)));
  INFINIOP_CHECK(
      expert_index.read(kForward, desc->handle, stream, p.expert_index, data.expert_index));
  if (p.expert_index.present)
    INFINIOP_CHECK(gather::checkIndexRange(kForward, "expert_idx", p.expert_index,
                                           expert_index.data(), 0,
                                           static_cast<int64_t>(p.bias.rows)));
  if (p.tokens * H == 0) return infiniop::succeed();
  INFINIOP_CHECK(desc->runner->run(data, row_index.data(), stream));
  return infiniop::succeed();
}

// ---- grad ----

struct GradDescriptor : infiniop::OperatorDescriptor {
  GradDescriptor() : OperatorDescriptor(kGrad) {}
  std::unique_ptr<moe::GradRunner> runner;
  moe::GradPlan plan;
  bool drop_pad;
};

infiniStatus_t createGrad(infiniopHandle_t handle,
                          infiniopMoeFinalizeRoutingV2GradDescriptor_t *desc_ptr,
                          const Tensor *grad_expanded_x, const Tensor *grad_scales,
                          const Tensor *grad_y, const Tensor *row_index, const Tensor *expanded_x,
                          const Tensor *scales, const Tensor *expert_index, const Tensor *bias,
                          int64_t mode, int64_t active_num, int64_t expert_num,
                          int64_t expert_capacity) {
  Checker check(kGrad);
  INFINIOP_CHECK(check.required("desc_ptr", desc_ptr));
  INFINIOP_CHECK(infiniop::checkHandle(kGrad, handle));
  INFINIOP_CHECK(check.required("grad_expanded_x descriptor", grad_expanded_x));
  INFINIOP_CHECK(check.required("grad_y descriptor", grad_y));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.device(handle, kGradKernels));
  if (mode != 0 && mode != 1)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "drop_pad_mode " + std::to_string(mode) + " is not 0 or 1");
  const bool drop_pad = mode == 1;
  if (!drop_pad && active_num < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "active_num " + std::to_string(active_num) + " is negative");
  if (drop_pad && (expert_num <= 0 || expert_capacity <= 0))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "expert_num " + std::to_string(expert_num) + " and expert_capacity " +
                          std::to_string(expert_capacity) + " must be > 0 in drop_pad_mode 1");
  if (drop_pad && expert_num > std::numeric_limits<int32_t>::max() / expert_capacity + 1)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "expert_num x expert_capacity exceeds what INT32 indices can address");
  if (scales && !expanded_x)
    return check.fail(INFINI_STATUS_BAD_PARAM, "scales are given without expanded_x");
  if (bias && !expert_index)
    return check.fail(INFINI_STATUS_BAD_PARAM, "bias is given without expert_idx");
  // grad_scales is written only with scales; without them it is ignored, whatever it is.
  if (!scales) grad_scales = nullptr;
  for (auto [name, t] : {std::pair{"grad_y", grad_y},
                         {"grad_expanded_x", grad_expanded_x},
                         {"grad_scales", grad_scales},
                         {"expanded_x", expanded_x},
                         {"scales", scales},
                         {"bias", bias}})
    INFINIOP_CHECK(check.floating(name, t));
  INFINIOP_CHECK(check.index("expanded_row_idx", row_index));
  INFINIOP_CHECK(check.index("expert_idx", expert_index));

  INFINIOP_CHECK(check.rank("grad_y", grad_y, 2, "(R, H)"));
  INFINIOP_CHECK(check.rank("scales", scales, 2, "(R, K)"));
  INFINIOP_CHECK(check.rank("expanded_row_idx", row_index, 1, "(R*K)"));
  const size_t R = grad_y->shape[0], H = grad_y->shape[1];
  const size_t K = scales ? scales->shape[1] : 1;
  INFINIOP_CHECK(check.positions(R, K));
  INFINIOP_CHECK(check.shape("scales", scales, {R, K}, "(R, K), R from grad_y"));
  INFINIOP_CHECK(check.shape("grad_scales", grad_scales, {R, K}, "(scales' shape)"));
  INFINIOP_CHECK(check.shape("expanded_row_idx", row_index, {R * K},
                             scales ? "(R*K, K from scales)" : "(R: without scales K = 1)"));
  INFINIOP_CHECK(check.shape("expert_idx", expert_index, {R, K}, "(R, K)"));
  std::vector<size_t> expanded_shape;
  if (drop_pad) {
    expanded_shape = {static_cast<size_t>(expert_num), static_cast<size_t>(expert_capacity), H};
  } else {
    const size_t RK = R * K;
    const auto active = static_cast<size_t>(active_num);
    expanded_shape = {active > 0 && active < RK ? active : RK, H};
  }
  const char *why = drop_pad ? "(expert_num, expert_capacity, H)"
                             : "(rows, H), rows = active_num if 0 < active_num < R*K, else R*K";
  INFINIOP_CHECK(check.shape("grad_expanded_x", grad_expanded_x, expanded_shape, why));
  INFINIOP_CHECK(check.shape("expanded_x", expanded_x, expanded_shape, why));
  INFINIOP_CHECK(check.rank("bias", bias, 2, "(E, H)"));
  if (bias) {
    const size_t experts = drop_pad ? expanded_shape[0] : bias->shape[0];
    INFINIOP_CHECK(check.shape("bias", bias, {experts, H},
                               drop_pad ? "(expert_num, H)" : "(E, H), H from grad_y"));
  }
  INFINIOP_CHECK(check.output("grad_expanded_x", grad_expanded_x));
  INFINIOP_CHECK(check.output("grad_scales", grad_scales));

  auto desc = std::make_unique<GradDescriptor>();
  desc->handle = handle;
  desc->drop_pad = drop_pad;
  moe::GradPlan &plan = desc->plan;
  plan.dtype = check.dtype();
  plan.tokens = R;
  plan.topk = K;
  plan.hidden = H;
  plan.grad_expanded_x = gather::rowView(grad_expanded_x);
  plan.grad_y = gather::rowView(grad_y);
  plan.expanded_x = gather::rowView(scales ? expanded_x : nullptr);
  plan.bias = gather::rowView(bias);
  plan.scales = gather::tableView(scales);
  plan.grad_scales = gather::tableView(grad_scales);
  plan.row_index = gather::flatIndexView(row_index, R, K, /*column_major=*/false);
  plan.expert_index = gather::tableIndexView(bias ? expert_index : nullptr);
  if (handle->device == INFINI_DEVICE_CPU || handle->device == INFINI_DEVICE_OPENCL)
    plan.workspace_size = gather::inverseWorkspaceBytes(plan.grad_expanded_x.rows, R * K);
  INFINIOP_CHECK(kGradKernels[handle->device](handle, plan, &desc->runner));
  desc->workspace_size = plan.workspace_size;
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

infiniStatus_t runGrad(const GradDescriptor *desc, size_t workspace_size, const moe::GradData &data,
                       void *stream) {
  const moe::GradPlan &p = desc->plan;
  const size_t bytes = infiniop::dtypeSize(p.dtype);
  const size_t RK = p.tokens * p.topk, H = p.hidden;
  const size_t expanded_numel = p.grad_expanded_x.rows * H;
  const std::vector<Operand> operands = {
      floatOperand("grad_expanded_x", data.grad_expanded_x, p.grad_expanded_x, bytes,
                   expanded_numel),
      floatOperand("grad_scales", data.grad_scales, p.grad_scales, bytes, RK),
      floatOperand("grad_y", data.grad_y, p.grad_y, bytes, p.tokens * H),
      {"expanded_row_idx", data.row_index, true, p.row_index.span, 4, RK},
      floatOperand("expanded_x", data.expanded_x, p.expanded_x, bytes, expanded_numel),
      floatOperand("scales", data.scales, p.scales, bytes, RK),
      {"expert_idx", data.expert_index, p.expert_index.present, p.expert_index.span, 4, RK},
      floatOperand("bias", data.bias, p.bias, bytes, p.bias.rows * H),
      {"the workspace",
       data.workspace,
       p.workspace_size > 0,
       {0, static_cast<ptrdiff_t>(p.workspace_size) - 1},
       1,
       p.workspace_size},
  };
  if (workspace_size < p.workspace_size)
    return fail(INFINI_STATUS_INSUFFICIENT_WORKSPACE,
                std::string(kGrad) + ": workspace of " + std::to_string(workspace_size) +
                    " bytes; " + std::to_string(p.workspace_size) + " are needed");
  INFINIOP_CHECK(checkOperands(kGrad, operands, 2));
  // The index data is checked whenever it exists, even where there is nothing to compute.
  HostIndex row_index, expert_index;
  INFINIOP_CHECK(row_index.read(kGrad, desc->handle, stream, p.row_index, data.row_index));
  INFINIOP_CHECK(gather::checkIndexRange(
      kGrad, "expanded_row_idx", p.row_index, row_index.data(), desc->drop_pad ? -1 : 0,
      static_cast<int64_t>(desc->drop_pad ? p.grad_expanded_x.rows : RK)));
  INFINIOP_CHECK(expert_index.read(kGrad, desc->handle, stream, p.expert_index, data.expert_index));
  if (p.expert_index.present)
    INFINIOP_CHECK(gather::checkIndexRange(kGrad, "expert_idx", p.expert_index, expert_index.data(),
                                           0, static_cast<int64_t>(p.bias.rows)));
  if (expanded_numel == 0 && (!p.grad_scales.present || RK == 0)) return infiniop::succeed();
  INFINIOP_CHECK(desc->runner->run(data, row_index.data(), stream));
  return infiniop::succeed();
}

}  // namespace

extern "C" infiniStatus_t infiniopCreateMoeFinalizeRoutingV2Descriptor(
    infiniopHandle_t handle, infiniopMoeFinalizeRoutingV2Descriptor_t *desc_ptr,
    infiniopTensorDescriptor_t out_desc, infiniopTensorDescriptor_t expanded_x_desc,
    infiniopTensorDescriptor_t expanded_row_idx_desc, infiniopTensorDescriptor_t x1_desc,
    infiniopTensorDescriptor_t x2_desc, infiniopTensorDescriptor_t bias_desc,
    infiniopTensorDescriptor_t scales_desc, infiniopTensorDescriptor_t expert_idx_desc,
    int64_t drop_pad_mode) {
  return infiniop::guarded(kForward, [&] {
    return createForward(handle, desc_ptr, out_desc, expanded_x_desc, expanded_row_idx_desc,
                         x1_desc, x2_desc, bias_desc, scales_desc, expert_idx_desc, drop_pad_mode);
  });
}

extern "C" infiniStatus_t infiniopGetMoeFinalizeRoutingV2WorkspaceSize(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc, size_t *size) {
  return infiniop::descriptorWorkspaceSize(kForward, desc, size);
}

extern "C" infiniStatus_t infiniopMoeFinalizeRoutingV2(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *out, const void *expanded_x, const void *expanded_row_idx, const void *x1, const void *x2,
    const void *bias, const void *scales, const void *expert_idx, void *stream) {
  (void)workspace;
  ForwardDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kForward, desc, &d));
  return infiniop::guarded(kForward, [&] {
    return runForward(
        d, workspace_size,
        {out, expanded_x, x1, x2, bias, scales, static_cast<const int32_t *>(expanded_row_idx),
         static_cast<const int32_t *>(expert_idx)},
        stream);
  });
}

extern "C" infiniStatus_t infiniopDestroyMoeFinalizeRoutingV2Descriptor(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc) {
  return infiniop::destroyDescriptor(kForward, desc);
}

extern "C" infiniStatus_t infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
    infiniopHandle_t handle, infiniopMoeFinalizeRoutingV2GradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_expanded_x_desc, infiniopTensorDescriptor_t grad_scales_desc,
    infiniopTensorDescriptor_t grad_y_desc, infiniopTensorDescriptor_t expanded_row_idx_desc,
    infiniopTensorDescriptor_t expanded_x_desc, infiniopTensorDescriptor_t scales_desc,
    infiniopTensorDescriptor_t expert_idx_desc, infiniopTensorDescriptor_t bias_desc,
    int64_t drop_pad_mode, int64_t active_num, int64_t expert_num, int64_t expert_capacity) {
  return infiniop::guarded(kGrad, [&] {
    return createGrad(handle, desc_ptr, grad_expanded_x_desc, grad_scales_desc, grad_y_desc,
                      expanded_row_idx_desc, expanded_x_desc, scales_desc, expert_idx_desc,
                      bias_desc, drop_pad_mode, active_num, expert_num, expert_capacity);
  });
}

extern "C" infiniStatus_t infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc, size_t *size) {
  return infiniop::descriptorWorkspaceSize(kGrad, desc, size);
}

extern "C" infiniStatus_t infiniopMoeFinalizeRoutingV2Grad(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_expanded_x, void *grad_scales, const void *grad_y, const void *expanded_row_idx,
    const void *expanded_x, const void *scales, const void *expert_idx, const void *bias,
    void *stream) {
  GradDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kGrad, desc, &d));
  return infiniop::guarded(kGrad, [&] {
    return runGrad(d, workspace_size,
                   {grad_expanded_x, d->plan.grad_scales.present ? grad_scales : nullptr, grad_y,
                    expanded_x, scales, bias, static_cast<const int32_t *>(expanded_row_idx),
                    static_cast<const int32_t *>(expert_idx), workspace},
                   stream);
  });
}

extern "C" infiniStatus_t infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(
    infiniopMoeFinalizeRoutingV2GradDescriptor_t desc) {
  return infiniop::destroyDescriptor(kGrad, desc);
}
