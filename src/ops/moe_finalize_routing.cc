// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2: the C ABI, the descriptor and its checks (shared ones in ops/moe_checks.h),
// all made before the kernel writes anything.
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "ops/moe_checks.h"

namespace {
using namespace infiniop::moe_checks;  // NOLINT: its helpers, fail, Tensor, gather, moe

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
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("out descriptor", out));
  INFINIOP_CHECK(check.required("expanded_x descriptor", expanded_x));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_finalize_routing));
  if (mode < 0 || mode > 3)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "drop_pad_mode " + std::to_string(mode) + " is not 0, 1, 2 or 3");
  if (x2 && !x1) return check.fail(INFINI_STATUS_BAD_PARAM, "x2 is given without x1");
  if (bias && !expert_index)
    return check.fail(INFINI_STATUS_BAD_PARAM, "bias is given without expert_idx");
  for (auto [name, t] :
       {std::pair{"out", out}, {"expanded_x", expanded_x}, {"x1", x1}, {"x2", x2}, {"bias", bias}})
    INFINIOP_CHECK(check.floating(name, t));
  INFINIOP_CHECK(check.scales("scales", scales));
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
    INFINIOP_CHECK(check.slots(experts, expanded_x->shape[1]));
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
  plan.scales_dtype = check.scalesDtype();
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
  plan.kernel = infiniop::KernelId::moe_finalize_routing;
  INFINIOP_CHECK(handle->device->runner(kForward, handle, plan, &desc->runner));
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
      indexOperand("expanded_row_idx", data.row_index, p.row_index),
      floatOperand("x1", data.x1, p.x1, bytes, p.tokens * H),
      floatOperand("x2", data.x2, p.x2, bytes, p.tokens * H),
      floatOperand("bias", data.bias, p.bias, bytes, p.bias.rows * H),
      floatOperand("scales", data.scales, p.scales, infiniop::dtypeSize(p.scales_dtype), RK),
      indexOperand("expert_idx", data.expert_index, p.expert_index),
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

INFINIOP_DESCRIPTOR_QUERIES(MoeFinalizeRoutingV2, kForward)

extern "C" infiniStatus_t infiniopMoeFinalizeRoutingV2(
    infiniopMoeFinalizeRoutingV2Descriptor_t desc, void *workspace, size_t workspace_size,
    void *out, const void *expanded_x, const void *expanded_row_idx, const void *x1, const void *x2,
    const void *bias, const void *scales, const void *expert_idx, void *stream) {
  (void)workspace;
  ForwardDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kForward, desc, &d));
  return infiniop::guarded(kForward, [&] {
    return runForward(d, workspace_size,
                      {out, expanded_x, x1, x2, bias, scales, expanded_row_idx, expert_idx},
                      stream);
  });
}
