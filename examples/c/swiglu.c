// SPDX-License-Identifier: Apache-2.0
/* examples/c/swiglu.c: SwiGlu and SwiGluBackward on a 3 x 8 F32 input split on its last dim,
 * checked against the formulas evaluated in double precision.
 *
 *   cc swiglu.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
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

enum { ROWS = 3, D = 4 }; /* x is ROWS x 2D, y is ROWS x D */

/* Elements farther from the reference than 16 F32 ulps of their magnitude plus 1e-6 of the
 * array's largest (the scale at which a difference of terms cancels). */
static int mismatches(const char *name, const float *got, const double *want, int n) {
  double largest = 0;
  for (int i = 0; i < n; ++i) largest = fmax(largest, fabs(want[i]));
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (fabs(got[i] - want[i]) > 16 * 0x1p-24 * fabs(want[i]) + 1e-6 * largest) {
      fprintf(stderr, "%s[%d] = %.9g, expected %.9g\n", name, i, got[i], want[i]);
      ++bad;
    }
  return bad;
}

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  float x[ROWS][2 * D], y[ROWS][D], y_grad[ROWS][D], x_grad[ROWS][2 * D];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < 2 * D; ++j) x[r][j] = (float)((r * 2 * D + j) % 11 - 5) * 0.75f;
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < D; ++j) y_grad[r][j] = 1.0f - 0.25f * (float)(r + j);

  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t x_desc = NULL, y_desc = NULL;
  infiniopSwiGluDescriptor_t swiglu = NULL;
  infiniopSwiGluBackwardDescriptor_t backward = NULL;
  void *workspace = NULL;
  size_t forward_size = 0, backward_size = 0;

  CHECK(infiniopCreateHandle(&handle, device, 0));
  size_t x_shape[2] = {ROWS, 2 * D}, y_shape[2] = {ROWS, D};
  CHECK(infiniopCreateTensorDescriptor(&x_desc, 2, x_shape, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateTensorDescriptor(&y_desc, 2, y_shape, NULL, INFINI_DTYPE_F32));
  /* dim = -1: x1 = x[:, :D], x2 = x[:, D:]; y = silu(x1) * x2. */
  CHECK(infiniopCreateSwiGluDescriptor(handle, &swiglu, y_desc, x_desc, -1));
  /* The backward: x_grad (x's shape) from y_grad (y's shape) and x. */
  CHECK(infiniopCreateSwiGluBackwardDescriptor(handle, &backward, x_desc, y_desc, x_desc, -1));
  /* The operator descriptors keep what they need of the tensor descriptors. */
  CHECK(infiniopDestroyTensorDescriptor(x_desc));
  x_desc = NULL;
  CHECK(infiniopDestroyTensorDescriptor(y_desc));
  y_desc = NULL;

  CHECK(infiniopGetSwiGluWorkspaceSize(swiglu, &forward_size));
  CHECK(infiniopGetSwiGluBackwardWorkspaceSize(backward, &backward_size));
  size_t workspace_size = forward_size > backward_size ? forward_size : backward_size;
  if (workspace_size > 0 && (workspace = malloc(workspace_size)) == NULL) goto done;
  CHECK(infiniopSwiGlu(swiglu, workspace, workspace_size, y, x, NULL));
  CHECK(infiniopSwiGluBackward(backward, workspace, workspace_size, x_grad, y_grad, x, NULL));

  double want_y[ROWS][D], want_x_grad[ROWS][2 * D];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < D; ++j) {
      double x1 = x[r][j], x2 = x[r][D + j], s = 1 / (1 + exp(-x1));
      want_y[r][j] = x1 * s * x2;
      want_x_grad[r][j] = y_grad[r][j] * x2 * (s + x1 * s * (1 - s));
      want_x_grad[r][D + j] = y_grad[r][j] * x1 * s;
    }
  for (int r = 0; r < ROWS; ++r) {
    printf("y[%d] =", r);
    for (int j = 0; j < D; ++j) printf(" %10.6f", y[r][j]);
    printf("\n");
  }
  int bad = mismatches("y", &y[0][0], &want_y[0][0], ROWS * D) +
            mismatches("x_grad", &x_grad[0][0], &want_x_grad[0][0], ROWS * 2 * D);
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  free(workspace);
  if (backward && failed(infiniopDestroySwiGluBackwardDescriptor(backward), "destroy")) status = 1;
  if (swiglu && failed(infiniopDestroySwiGluDescriptor(swiglu), "destroy")) status = 1;
  if (y_desc && failed(infiniopDestroyTensorDescriptor(y_desc), "destroy")) status = 1;
  if (x_desc && failed(infiniopDestroyTensorDescriptor(x_desc), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
