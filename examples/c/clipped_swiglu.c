// SPDX-License-Identifier: Apache-2.0
/* examples/c/clipped_swiglu.c: ClippedSwiglu and ClippedSwigluBackward (GPT-OSS: interleaved gate
 * and up columns, alpha 1.702, limit 7, bias 1) on a 4 x 6 F32 input whose group_index covers the
 * first 3 rows, checked against the formulas evaluated in double precision.
 *
 *   cc clipped_swiglu.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
 *
 * On the CPU devices a device pointer is a host pointer, so the arrays are passed as they are.
 * Exit status 0 when every value matches, 1 otherwise (or when a call fails), 2 for an
 * unknown device (example_device.h, beside this file). */
#include <infiniop.h>
#include <math.h>
#include <stdbool.h>
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

enum { TOKENS = 4, D = 3, EXPERTS = 2 }; /* x is TOKENS x 2D (a, b interleaved), y TOKENS x D */
static const float kAlpha = 1.702f, kLimit = 7.0f, kBias = 1.0f;

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  /* Even columns are the gate (A, clipped above at 7), odd ones the up projection (B, clipped
   * to [-7, 7]); some values lie beyond the limit. */
  float x[TOKENS][2 * D] = {{-1.5f, 0.5f, 8.0f, -2.0f, 0.3f, 9.0f},
                            {2.0f, -8.5f, -0.25f, 1.0f, 7.0f, 3.0f},
                            {0.75f, 6.5f, -4.0f, -7.0f, 1.25f, 0.0f},
                            {5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f}};
  float y_grad[TOKENS][D] = {
      {1.0f, -0.5f, 2.0f}, {0.25f, 1.0f, -1.0f}, {1.5f, 0.5f, -2.0f}, {1.0f, 1.0f, 1.0f}};
  /* Tokens per expert: 1 + 2 = 3 rows are computed, the 4th is zero-filled. */
  int64_t group_index[EXPERTS] = {1, 2};
  float y[TOKENS][D], x_grad[TOKENS][2 * D];

  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t x_desc = NULL, y_desc = NULL, group_desc = NULL;
  infiniopClippedSwigluDescriptor_t op = NULL;
  infiniopClippedSwigluBackwardDescriptor_t backward = NULL;
  void *workspace = NULL;
  size_t forward_size = 0, backward_size = 0;

  CHECK(infiniopCreateHandle(&handle, device, 0));
  size_t x_shape[2] = {TOKENS, 2 * D}, y_shape[2] = {TOKENS, D}, group_shape[1] = {EXPERTS};
  CHECK(infiniopCreateTensorDescriptor(&x_desc, 2, x_shape, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateTensorDescriptor(&y_desc, 2, y_shape, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateTensorDescriptor(&group_desc, 1, group_shape, NULL, INFINI_DTYPE_I64));
  CHECK(infiniopCreateClippedSwigluDescriptor(handle, &op, y_desc, x_desc, group_desc,
                                              /*dim=*/-1, kAlpha, kLimit, kBias,
                                              /*interleaved=*/true));
  CHECK(infiniopCreateClippedSwigluBackwardDescriptor(handle, &backward, x_desc /* x_grad */,
                                                      y_desc /* y_grad */, x_desc, group_desc, -1,
                                                      kAlpha, kLimit, kBias, true));
  CHECK(infiniopGetClippedSwigluWorkspaceSize(op, &forward_size));
  CHECK(infiniopGetClippedSwigluBackwardWorkspaceSize(backward, &backward_size));
  size_t workspace_size = forward_size > backward_size ? forward_size : backward_size;
  if (workspace_size > 0 && (workspace = malloc(workspace_size)) == NULL) goto done;
  CHECK(infiniopClippedSwiglu(op, workspace, workspace_size, y, x, group_index, NULL));
  CHECK(infiniopClippedSwigluBackward(backward, workspace, workspace_size, x_grad, y_grad, x,
                                      group_index, NULL));

  int bad = 0;
  for (int r = 0; r < TOKENS; ++r) {
    printf("y[%d] =", r);
    for (int j = 0; j < D; ++j) {
      double A = x[r][2 * j], B = x[r][2 * j + 1], g = y_grad[r][j];
      double a = fmin(A, kLimit), b = fmax(-kLimit, fmin(B, kLimit));
      double s = 1 / (1 + exp(-kAlpha * a));
      double want[3] = {a * s * (b + kBias),
                        A <= kLimit ? g * (b + kBias) * s * (1 + kAlpha * a * (1 - s)) : 0,
                        -kLimit <= B && B <= kLimit ? g * a * s : 0};
      if (r >= group_index[0] + group_index[1]) want[0] = want[1] = want[2] = 0; /* past the sum */
      float got[3] = {y[r][j], x_grad[r][2 * j], x_grad[r][2 * j + 1]};
      printf(" %10.6f", got[0]);
      for (int i = 0; i < 3; ++i)
        if (fabs(got[i] - want[i]) > 16 * 0x1p-24 * fabs(want[i]) + 1e-6) {
          fprintf(stderr, "\nrow %d col %d value %d: %.9g, expected %.9g", r, j, i, got[i],
                  want[i]);
          ++bad;
        }
    }
    printf("\n");
  }
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  free(workspace);
  if (backward && failed(infiniopDestroyClippedSwigluBackwardDescriptor(backward), "destroy"))
    status = 1;
  if (op && failed(infiniopDestroyClippedSwigluDescriptor(op), "destroy")) status = 1;
  if (group_desc && failed(infiniopDestroyTensorDescriptor(group_desc), "destroy")) status = 1;
  if (y_desc && failed(infiniopDestroyTensorDescriptor(y_desc), "destroy")) status = 1;
  if (x_desc && failed(infiniopDestroyTensorDescriptor(x_desc), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
