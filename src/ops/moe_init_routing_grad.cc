// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2Grad: the C ABI, the descriptor and its checks. grad_x[r] sums the K rows of
// grad_expanded_x that position r*K + k was copied to: MoeFinalizeRoutingV2's forward in row
// layout with weight 1 and nothing else added, so it runs on that operator's runner (an F32
// sum in increasing k, rounded once, the same bits for any thread count).
#include "infiniop/ops/moe_init_routing_v2_grad.h"
#include "ops/moe_checks.h"

namespace {
using namespace infiniop::moe_checks;  // NOLINT: its helpers, fail, Tensor, gather, moe

constexpr const char *kInitGrad = "MoeInitRoutingV2Grad";

struct InitGradDescriptor : infiniop::OperatorDescriptor {
  InitGradDescriptor() : OperatorDescriptor(kInitGrad) {}
  std::unique_ptr<moe::ForwardRunner> runner;
  moe::ForwardPlan plan;
  int64_t lowest = 0, highest = 0;  // the valid index values: [lowest, highest)
};

infiniStatus_t createInitGrad(infiniopHandle_t handle,
                              infiniopMoeInitRoutingV2GradDescriptor_t *desc_ptr,
                              const Tensor *grad_x, const Tensor *grad_expanded_x,
                              const Tensor *row_index, int64_t topk, int64_t mode,
                              int64_t active_num) {
  Checker check(kInitGrad);
  INFINIOP_CHECK(check.opening(desc_ptr, handle));
  INFINIOP_CHECK(check.required("grad_x descriptor", grad_x));
  INFINIOP_CHECK(check.required("grad_expanded_x descriptor", grad_expanded_x));
  INFINIOP_CHECK(check.required("expanded_row_idx descriptor", row_index));
  INFINIOP_CHECK(check.device(handle, infiniop::KernelId::moe_init_routing_grad));
  if (topk <= 0)
    return check.fail(INFINI_STATUS_BAD_PARAM, "top_k " + std::to_string(topk) + " must be > 0");
  bool drop_pad = false;
  INFINIOP_CHECK(check.dropPadMode(mode, &drop_pad));
  if (!drop_pad && active_num < 0)
    return check.fail(INFINI_STATUS_BAD_PARAM,
                      "active_num " + std::to_string(active_num) + " is negative");
  INFINIOP_CHECK(check.floating("grad_x", grad_x));
  INFINIOP_CHECK(check.floating("grad_expanded_x", grad_expanded_x));
  INFINIOP_CHECK(check.index("expanded_row_idx", row_index));
  INFINIOP_CHECK(check.rank("grad_x", grad_x, 2, "(R, H)"));
  INFINIOP_CHECK(check.rank("expanded_row_idx", row_index, 1, "(R*top_k)"));
  const size_t R = grad_x->shape[0], H = grad_x->shape[1], K = static_cast<size_t>(topk);
  if (K > std::numeric_limits<int32_t>::max())
    return check.fail(INFINI_STATUS_BAD_PARAM, "top_k " + std::to_string(topk) + " is too large");
  INFINIOP_CHECK(check.positions(R, K));
  INFINIOP_CHECK(check.shape("expanded_row_idx", row_index, {R * K}, "(R*top_k)"));
  const size_t RK = R * K;
  if (drop_pad) {
    INFINIOP_CHECK(
        check.rank("grad_expanded_x", grad_expanded_x, 3, "(E, C, H) in drop_pad_mode 1"));
    INFINIOP_CHECK(check.shape("grad_expanded_x", grad_expanded_x,
                               {grad_expanded_x->shape[0], grad_expanded_x->shape[1], H},
                               "(E, C, H), H from grad_x"));
    INFINIOP_CHECK(check.slots(grad_expanded_x->shape[0], grad_expanded_x->shape[1]));
  } else {
    const auto active = static_cast<size_t>(active_num);
    INFINIOP_CHECK(check.shape("grad_expanded_x", grad_expanded_x,
                               {active > 0 && active < RK ? active : RK, H},
                               "(A, H), A = active_num if 0 < active_num < R*top_k, else R*top_k"));
  }
  INFINIOP_CHECK(check.output("grad_x", grad_x));

  auto desc = std::make_unique<InitGradDescriptor>();
  desc->handle = handle;
  moe::ForwardPlan &plan = desc->plan;
  plan.dtype = plan.scales_dtype = check.dtype();
  plan.tokens = R;
  plan.topk = K;
  plan.hidden = H;
  plan.out = gather::rowView(grad_x);
  plan.expanded_x = gather::rowView(grad_expanded_x);
  plan.row_index = gather::flatIndexView(row_index, R, K, /*column_major=*/false);
  desc->lowest = drop_pad ? -1 : 0;
  desc->highest = static_cast<int64_t>(drop_pad ? plan.expanded_x.rows : RK);
  plan.kernel = infiniop::KernelId::moe_init_routing_grad;
  INFINIOP_CHECK(handle->device->runner(kInitGrad, handle, plan, &desc->runner));
  infiniop::publishDescriptor(desc_ptr, desc.release());
  return infiniop::succeed();
}

infiniStatus_t runInitGrad(const InitGradDescriptor *desc, const moe::ForwardData &data,
                           void *stream) {
  const moe::ForwardPlan &p = desc->plan;
  const size_t bytes = infiniop::dtypeSize(p.dtype), H = p.hidden;
  const std::vector<Operand> operands = {
      floatOperand("grad_x", data.out, p.out, bytes, p.tokens * H),
      floatOperand("grad_expanded_x", data.expanded_x, p.expanded_x, bytes, p.expanded_x.rows * H),
      indexOperand("expanded_row_idx", data.row_index, p.row_index),
  };
  INFINIOP_CHECK(checkOperands(kInitGrad, operands, 1));
  HostIndex row_index;
  INFINIOP_CHECK(row_index.read(kInitGrad, desc->handle, stream, p.row_index, data.row_index));
  INFINIOP_CHECK(gather::checkIndexRange(kInitGrad, "expanded_row_idx", p.row_index,
                                         row_index.data(), desc->lowest, desc->highest));
  if (p.tokens * H == 0) return infiniop::succeed();
  INFINIOP_CHECK(desc->runner->run(data, row_index.data(), stream));
  return infiniop::succeed();
}

}  // namespace

extern "C" infiniStatus_t infiniopCreateMoeInitRoutingV2GradDescriptor(
    infiniopHandle_t handle, infiniopMoeInitRoutingV2GradDescriptor_t *desc_ptr,
    infiniopTensorDescriptor_t grad_x, infiniopTensorDescriptor_t grad_expanded_x,
    infiniopTensorDescriptor_t expanded_row_idx, int64_t top_k, int64_t drop_pad_mode,
    int64_t active_num) {
  return infiniop::guarded(kInitGrad, [&] {
    return createInitGrad(handle, desc_ptr, grad_x, grad_expanded_x, expanded_row_idx, top_k,
                          drop_pad_mode, active_num);
  });
}

INFINIOP_DESCRIPTOR_QUERIES(MoeInitRoutingV2Grad, kInitGrad)

extern "C" infiniStatus_t infiniopMoeInitRoutingV2Grad(
    infiniopMoeInitRoutingV2GradDescriptor_t desc, void *workspace, size_t workspace_size,
    void *grad_x, const void *grad_expanded_x, const void *expanded_row_idx, void *stream) {
  (void)workspace;  // none is needed
  (void)workspace_size;
  InitGradDescriptor *d = nullptr;
  INFINIOP_CHECK(infiniop::unwrapDescriptor(kInitGrad, desc, &d));
  return infiniop::guarded(kInitGrad, [&] {
    return runInitGrad(
        d, {grad_x, grad_expanded_x, nullptr, nullptr, nullptr, nullptr, expanded_row_idx, nullptr},
        stream);
  });
}
