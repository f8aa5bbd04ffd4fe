// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2Grad: the C ABI, the descriptor and its checks (shared ones in
// ops/moe_checks.h), all made before the kernel writes anything.
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "ops/moe_checks.h"

namespace {
using namespace infiniop::moe_checks;  // NOLINT: its helpers, fail, Tensor, gather, moe

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
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("grad_expanded_x descriptor", grad_expanded_x));
  INFINIOP_CHECK(check.required("grad_y descriptor", grad_y));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_finalize_routing_grad));
  bool drop_pad = false;
  INFINIOP_CHECK(check.dropPadMode(mode, &drop_pad));
  if (!drop_pad && active_num < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "active_num " + std::to_string(active_num) + " is negative");
  if (drop_pad && (expert_num <= 0 || expert_capacity <= 0))
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "expert_num " + std::to_string(expert_num) + " and expert_capacity " +
                          std::to_string(expert_capacity) + " must be > 0 in drop_pad_mode 1");
  if (drop_pad && expert_num > std::numeric_limits<int32_t>::max() / expert_capacity + 1)
    return check.fail(
        INFINI_STATUS_BAD_PARAM,
        "expert_num x expert_capacity exceeds the 2^31 - 1 slots index values may address");
  if (scales && !expanded_x)
    return check.fail(INFINI_STATUS_BAD_PARAM, "scales are given without expanded_x");
  if (bias && !expert_index)
    return check.fail(INFINI_STATUS_BAD_PARAM, "bias is given without expert_idx");
  // grad_scales is written only with scales; without them it is ignored, whatever it is.
  if (!scales) grad_scales = nullptr;
  for (auto [name, t] : {std::pair{"grad_y", grad_y},
                         {"grad_expanded_x", grad_expanded_x},
                         {"expanded_x", expanded_x},
                         {"bias", bias}})
    INFINIOP_CHECK(check.floating(name, t));
  INFINIOP_CHECK(check.scales("scales", scales));
  INFINIOP_CHECK(check.scales("grad_scales", grad_scales));
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
  plan.kernel = infiniop::KernelId::moe_finalize_routing_grad;
  plan.dtype = check.dtype();
  plan.scales_dtype = check.scalesDtype();
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
  INFINIOP_CHECK(handle->device->runner(kGrad, handle, plan, &desc->runner));
  desc->workspace_size = desc->runner->workspaceSize();
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

infiniStatus_t runGrad(const GradDescriptor *desc, size_t workspace_size, const moe::GradData &data,
                       void *stream) {
  const moe::GradPlan &p = desc->plan;
  const size_t needed = desc->workspace_size;
  const size_t bytes = infiniop::dtypeSize(p.dtype);
  const size_t scale_bytes = infiniop::dtypeSize(p.scales_dtype);
  const size_t RK = p.tokens * p.topk, H = p.hidden;
  const size_t expanded_numel = p.grad_expanded_x.rows * H;
  const std::vector<Operand> operands = {
      floatOperand("grad_expanded_x", data.grad_expanded_x, p.grad_expanded_x, bytes,
                   expanded_numel),
      floatOperand("grad_scales", data.grad_scales, p.grad_scales, scale_bytes, RK),
      floatOperand("grad_y", data.grad_y, p.grad_y, bytes, p.tokens * H),
      indexOperand("expanded_row_idx", data.row_index, p.row_index),
      floatOperand("expanded_x", data.expanded_x, p.expanded_x, bytes, expanded_numel),
      floatOperand("scales", data.scales, p.scales, scale_bytes, RK),
      indexOperand("expert_idx", data.expert_index, p.expert_index),
      floatOperand("bias", data.bias, p.bias, bytes, p.bias.rows * H),
      workspaceOperand(data.workspace, needed),
  };
  INFINIOP_CHECK(checkWorkspaceSize(kGrad, workspace_size, needed));
  INFINIOP_CHECK(checkOperands(kGrad, operands, 2, /*last_is_workspace=*/true));
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

INFINIOP_DESCRIPTOR_QUERIES(MoeFinalizeRoutingV2Grad, kGrad)

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
                    expanded_x, scales, bias, expanded_row_idx, expert_idx, workspace},
                   stream);
  });
}
