// SPDX-License-Identifier: Apache-2.0
/* examples/c/moe.c: a mixture-of-experts layer's routing, forward and backward, with the expert
 * computation done by hand: MoeInitRoutingV2 (dispatch) -> "experts" -> MoeFinalizeRoutingV2
 * (combine), then MoeFinalizeRoutingV2Grad -> the experts' backward -> MoeInitRoutingV2Grad.
 * R = 4 tokens, top K = 2 of E = 3 experts, hidden size H = 3, F32 rows, INT32 indices, dropless
 * (drop_pad_mode 0). Expert e multiplies its rows by e + 1, so every result has a closed form,
 * which the program computes in plain C to check the library.
 *
 *   cc moe.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
 *
 * On the CPU devices a device pointer is a host pointer, so the arrays are passed as they are.
 * Exit status 0 when every value matches, 1 otherwise (or when a call fails), 2 for an
 * unknown device (example_device.h, beside this file). */
#include <infiniop.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_device.h"

/* Prints a failed call with its status and the library's reason; nonzero on failure. */
static int failed(infiniStatus_t status, const char *call) {
  if (status == INFINI_STATUS_SUCCESS) return 0;
  fprintf(stderr, "%s\n  -> %s: %s\n", call, infiniStatusString(status), infiniopGetLastError());
  return 1;
}
#define CHECK(call)                       \
  do {                                    \
    if (failed((call), #call)) goto done; \
  } while (0)

enum { R = 4, K = 2, E = 3, H = 3 };

static int differs(const char *what, int i, double got, double want) {
  if (fabs(got - want) <= 1e-5 * fabs(want) + 1e-6) return 0;
  fprintf(stderr, "%s[%d] = %.9g, expected %.9g\n", what, i, got, want);
  return 1;
}

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  /* Inputs: the tokens, the router's choices and weights, a residual, a per-expert bias, and
   * the gradient of the layer's output. */
  float x[R][H], x1[R][H], bias[E][H], grad_y[R][H];
  int32_t expert_idx[R][K] = {{2, 0}, {0, 1}, {2, 1}, {1, 0}};
  float scales[R][K] = {{0.75f, 0.25f}, {0.5f, 0.5f}, {0.125f, 0.875f}, {0.6f, 0.4f}};
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < H; ++j) {
      x[r][j] = (float)(r * H + j) * 0.5f - 2.0f;
      x1[r][j] = (float)(j - r);
      grad_y[r][j] = 1.0f - 0.25f * (float)(r + 2 * j);
    }
  for (int e = 0; e < E; ++e)
    for (int j = 0; j < H; ++j) bias[e][j] = 0.1f * (float)(e + 1) * (float)(j + 1);

  /* Outputs and intermediates. */
  float expanded_x[R * K][H], expert_out[R * K][H], out[R][H];
  float grad_expert_out[R * K][H], grad_scales[R][K], grad_expanded_x[R * K][H], grad_x[R][H];
  int32_t expanded_row_idx[R * K], cumsum[E];

  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t x_d = NULL, ei_d = NULL, ex_d = NULL, idx_d = NULL, cnt_d = NULL,
                             sc_d = NULL, bias_d = NULL;
  infiniopMoeInitRoutingV2Descriptor_t init = NULL;
  infiniopMoeFinalizeRoutingV2Descriptor_t finalize = NULL;
  infiniopMoeFinalizeRoutingV2GradDescriptor_t finalize_grad = NULL;
  infiniopMoeInitRoutingV2GradDescriptor_t init_grad = NULL;
  void *workspace = NULL;
  size_t workspace_size = 0, sizes[4];

  CHECK(infiniopCreateHandle(&handle, device, 0));
  size_t rh[2] = {R, H}, rk[2] = {R, K}, rkh[2] = {R * K, H}, n[1] = {R * K}, e[1] = {E},
         eh[2] = {E, H};
  CHECK(infiniopCreateTensorDescriptor(&x_d, 2, rh, NULL, INFINI_DTYPE_F32));   /* x, x1, grads */
  CHECK(infiniopCreateTensorDescriptor(&ei_d, 2, rk, NULL, INFINI_DTYPE_I32));  /* expert_idx */
  CHECK(infiniopCreateTensorDescriptor(&ex_d, 2, rkh, NULL, INFINI_DTYPE_F32)); /* R*K rows */
  CHECK(infiniopCreateTensorDescriptor(&idx_d, 1, n, NULL, INFINI_DTYPE_I32));
  CHECK(infiniopCreateTensorDescriptor(&cnt_d, 1, e, NULL, INFINI_DTYPE_I32));
  CHECK(infiniopCreateTensorDescriptor(&sc_d, 2, rk, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateTensorDescriptor(&bias_d, 2, eh, NULL, INFINI_DTYPE_F32));

  /* Dispatch: expanded_x holds the R*K token copies sorted by expert (stable), cumsum[e] ends
   * expert e's rows, expanded_row_idx[r*K + k] is where copy (r, k) went. */
  CHECK(infiniopCreateMoeInitRoutingV2Descriptor(
      handle, &init, ex_d, idx_d, cnt_d, NULL /* before-capacity counts */, x_d, ei_d,
      /*active_num=*/0, /*expert_capacity=*/0, /*expert_num=*/E, /*drop_pad_mode=*/0,
      /*expert_tokens_count_or_cumsum_flag=*/1, /*expert_tokens_before_capacity_flag=*/false));
  /* Combine: out[r] = x1[r] + sum_k scales[r][k] * (expert_out[idx[r*K + k]] + bias[e]).
   * drop_pad_mode 2 reads the index in the row layout r*K + k, as the Init wrote it. */
  CHECK(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle, &finalize, x_d, ex_d, idx_d, x_d,
                                                     NULL /* x2 */, bias_d, sc_d, ei_d,
                                                     /*drop_pad_mode=*/2));
  /* Its gradient (row layout: mode 0 here) with respect to expert_out and scales. */
  CHECK(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
      handle, &finalize_grad, ex_d, sc_d /* grad_scales */, x_d /* grad_y */, idx_d, ex_d, sc_d,
      ei_d, bias_d, /*drop_pad_mode=*/0, /*active_num=*/0, /*expert_num=*/E,
      /*expert_capacity=*/0));
  /* The Init's gradient: grad_x[r] = sum_k grad_expanded_x[idx[r*K + k]]. */
  CHECK(infiniopCreateMoeInitRoutingV2GradDescriptor(handle, &init_grad, x_d, ex_d, idx_d,
                                                     /*top_k=*/K, /*drop_pad_mode=*/0,
                                                     /*active_num=*/0));

  CHECK(infiniopGetMoeInitRoutingV2WorkspaceSize(init, &sizes[0]));
  CHECK(infiniopGetMoeFinalizeRoutingV2WorkspaceSize(finalize, &sizes[1]));
  CHECK(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(finalize_grad, &sizes[2]));
  CHECK(infiniopGetMoeInitRoutingV2GradWorkspaceSize(init_grad, &sizes[3]));
  for (int i = 0; i < 4; ++i)
    if (sizes[i] > workspace_size) workspace_size = sizes[i];
  if (workspace_size > 0 && (workspace = malloc(workspace_size)) == NULL) goto done;

  /* Forward. */
  CHECK(infiniopMoeInitRoutingV2(init, workspace, workspace_size, expanded_x, expanded_row_idx,
                                 cumsum, NULL, x, expert_idx, NULL));
  for (int ex = 0; ex < E; ++ex) /* expert ex's rows are [cumsum[ex - 1], cumsum[ex]) */
    for (int row = ex ? cumsum[ex - 1] : 0; row < cumsum[ex]; ++row)
      for (int j = 0; j < H; ++j) expert_out[row][j] = (float)(ex + 1) * expanded_x[row][j];
  CHECK(infiniopMoeFinalizeRoutingV2(finalize, workspace, workspace_size, out, expert_out,
                                     expanded_row_idx, x1, NULL, bias, scales, expert_idx, NULL));

  /* Backward. */
  CHECK(infiniopMoeFinalizeRoutingV2Grad(finalize_grad, workspace, workspace_size, grad_expert_out,
                                         grad_scales, grad_y, expanded_row_idx, expert_out, scales,
                                         expert_idx, bias, NULL));
  for (int ex = 0; ex < E; ++ex)
    for (int row = ex ? cumsum[ex - 1] : 0; row < cumsum[ex]; ++row)
      for (int j = 0; j < H; ++j)
        grad_expanded_x[row][j] = (float)(ex + 1) * grad_expert_out[row][j];
  CHECK(infiniopMoeInitRoutingV2Grad(init_grad, workspace, workspace_size, grad_x, grad_expanded_x,
                                     expanded_row_idx, NULL));

  /* The checks. The Init's sort: copy p = r*K + k goes to its rank among the copies ordered by
   * (expert, p); cumsum counts the copies of experts 0..e. */
  int bad = 0, next[E] = {0};
  for (int p = 0; p < R * K; ++p) ++next[expert_idx[p / K][p % K]];
  for (int ex = 0, total = 0; ex < E; ++ex) {
    total += next[ex];
    bad += differs("cumsum", ex, cumsum[ex], total);
    next[ex] = total - next[ex]; /* the first rank of expert ex */
  }
  for (int p = 0; p < R * K; ++p)
    bad += differs("expanded_row_idx", p, expanded_row_idx[p], next[expert_idx[p / K][p % K]]++);
  for (int p = 0; p < R * K; ++p)
    for (int j = 0; j < H; ++j)
      bad += differs("expanded_x", p * H + j, expanded_x[expanded_row_idx[p]][j], x[p / K][j]);
  /* With expert e = expert_idx[r][k] and w = scales[r][k]:
   *   out[r] = x1[r] + sum_k w ((e + 1) x[r] + bias[e]),
   *   grad_scales[r][k] = ((e + 1) x[r] + bias[e]) . grad_y[r],
   *   grad_x[r] = sum_k w (e + 1) grad_y[r]. */
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < H; ++j) {
      double want_out = x1[r][j], want_grad_x = 0;
      for (int k = 0; k < K; ++k) {
        int ex = expert_idx[r][k];
        want_out += scales[r][k] * ((ex + 1.0) * x[r][j] + bias[ex][j]);
        want_grad_x += scales[r][k] * (ex + 1.0) * grad_y[r][j];
      }
      bad += differs("out", r * H + j, out[r][j], want_out);
      bad += differs("grad_x", r * H + j, grad_x[r][j], want_grad_x);
    }
    for (int k = 0; k < K; ++k) {
      int ex = expert_idx[r][k];
      double want = 0;
      for (int j = 0; j < H; ++j) want += ((ex + 1.0) * x[r][j] + bias[ex][j]) * grad_y[r][j];
      bad += differs("grad_scales", r * K + k, grad_scales[r][k], want);
    }
    printf(
        "token %d: experts %d, %d -> rows %d, %d; out %9.5f %9.5f %9.5f; grad_x %9.5f %9.5f "
        "%9.5f\n",
        r, expert_idx[r][0], expert_idx[r][1], expanded_row_idx[r * K], expanded_row_idx[r * K + 1],
        out[r][0], out[r][1], out[r][2], grad_x[r][0], grad_x[r][1], grad_x[r][2]);
  }
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  free(workspace);
  if (init_grad && failed(infiniopDestroyMoeInitRoutingV2GradDescriptor(init_grad), "destroy"))
    status = 1;
  if (finalize_grad &&
      failed(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(finalize_grad), "destroy"))
    status = 1;
  if (finalize && failed(infiniopDestroyMoeFinalizeRoutingV2Descriptor(finalize), "destroy"))
    status = 1;
  if (init && failed(infiniopDestroyMoeInitRoutingV2Descriptor(init), "destroy")) status = 1;
  infiniopTensorDescriptor_t descs[7] = {x_d, ei_d, ex_d, idx_d, cnt_d, sc_d, bias_d};
  for (int i = 0; i < 7; ++i)
    if (descs[i] && failed(infiniopDestroyTensorDescriptor(descs[i]), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
