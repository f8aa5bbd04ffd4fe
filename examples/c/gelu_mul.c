// SPDX-License-Identifier: Apache-2.0
/* examples/c/gelu_mul.c: GeluMul and GeluMulBackward (erf form) on a 2 x 6 F32 input split on its
 * last dim, checked against the formulas evaluated in double precision.
 *
 *   cc gelu_mul.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
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

/* gelu(x) = x Phi(x) and gelu'(x) = Phi(x) + x phi(x), in double. */
static double phi_cdf(double x) {
  return 0.5 * erfc(-x / sqrt(2.0));
}
static double gelu(double x) {
  return x * phi_cdf(x);
}
static double gelu_derivative(double x) {
  return phi_cdf(x) + x * 0.39894228040143267794 * exp(-0.5 * x * x);
}

enum { ROWS = 2, D = 3 }; /* input is ROWS x 2D, out is ROWS x D */

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  float input[ROWS][2 * D] = {{-3.0f, -0.7f, 0.4f, 1.5f, -2.0f, 0.5f},
                              {2.2f, 0.0f, -1.1f, -0.3f, 4.0f, 1.0f}};
  float out_grad[ROWS][D] = {{1.0f, -0.5f, 2.0f}, {0.25f, 1.0f, -1.0f}};
  float out[ROWS][D], input_grad[ROWS][2 * D];

  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t input_desc = NULL, out_desc = NULL;
  infiniopGeluMulDescriptor_t gelu_mul = NULL;
  infiniopGeluMulBackwardDescriptor_t backward = NULL;
  void *workspace = NULL;
  size_t forward_size = 0, backward_size = 0;

  CHECK(infiniopCreateHandle(&handle, device, 0));
  size_t input_shape[2] = {ROWS, 2 * D}, out_shape[2] = {ROWS, D};
  CHECK(infiniopCreateTensorDescriptor(&input_desc, 2, input_shape, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateTensorDescriptor(&out_desc, 2, out_shape, NULL, INFINI_DTYPE_F32));
  /* out = gelu(input[:, :D]) * input[:, D:]; input_grad has input's shape. */
  CHECK(infiniopCreateGeluMulDescriptor(handle, &gelu_mul, out_desc, input_desc,
                                        INFINIOP_GELU_APPROXIMATE_NONE));
  CHECK(infiniopCreateGeluMulBackwardDescriptor(handle, &backward, input_desc, out_desc, input_desc,
                                                INFINIOP_GELU_APPROXIMATE_NONE));
  CHECK(infiniopGetGeluMulWorkspaceSize(gelu_mul, &forward_size));
  CHECK(infiniopGetGeluMulBackwardWorkspaceSize(backward, &backward_size));
  size_t workspace_size = forward_size > backward_size ? forward_size : backward_size;
  if (workspace_size > 0 && (workspace = malloc(workspace_size)) == NULL) goto done;
  CHECK(infiniopGeluMul(gelu_mul, workspace, workspace_size, out, input, NULL));
  CHECK(infiniopGeluMulBackward(backward, workspace, workspace_size, input_grad, out_grad, input,
                                NULL));

  int bad = 0;
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < D; ++j) {
      double x1 = input[r][j], x2 = input[r][D + j], g = out_grad[r][j];
      double want[3] = {gelu(x1) * x2, g * x2 * gelu_derivative(x1), g * gelu(x1)};
      float got[3] = {out[r][j], input_grad[r][j], input_grad[r][D + j]};
      printf("x1 %5.2f x2 %5.2f: out %10.6f, input_grad %10.6f %10.6f\n", x1, x2, got[0], got[1],
             got[2]);
      for (int i = 0; i < 3; ++i)
        if (fabs(got[i] - want[i]) > 16 * 0x1p-24 * fabs(want[i]) + 1e-7) {
          fprintf(stderr, "row %d col %d value %d: %.9g, expected %.9g\n", r, j, i, got[i],
                  want[i]);
          ++bad;
        }
    }
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  free(workspace);
  if (backward && failed(infiniopDestroyGeluMulBackwardDescriptor(backward), "destroy")) status = 1;
  if (gelu_mul && failed(infiniopDestroyGeluMulDescriptor(gelu_mul), "destroy")) status = 1;
  if (out_desc && failed(infiniopDestroyTensorDescriptor(out_desc), "destroy")) status = 1;
  if (input_desc && failed(infiniopDestroyTensorDescriptor(input_desc), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
