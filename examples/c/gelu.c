// SPDX-License-Identifier: Apache-2.0
/* examples/c/gelu.c: Gelu (erf and tanh), GeluBackward and GeluBackwardV2 on eight F32 values,
 * checked against the formulas evaluated in double precision.
 *
 *   cc gelu.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
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

/* The references, in double: gelu and its derivative, erf and tanh forms. */
static const double kSqrt2OverPi = 0.79788456080286535588, kCubic = 0.044715,
                    kInvSqrt2Pi = 0.39894228040143267794;
static double gelu_erf(double x) {
  return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}
static double gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
}
static double dgelu_erf(double x) {
  return 0.5 * (1 + erf(x / sqrt(2.0))) + x * kInvSqrt2Pi * exp(-0.5 * x * x);
}
static double dgelu_tanh(double x) {
  double t = tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kCubic * x * x);
}

/* Counts the elements of got farther from want than 16 F32 ulps of their magnitude. */
static int mismatches(const char *name, const float *got, const double *want, int n) {
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (fabs(got[i] - want[i]) > 16 * 0x1p-24 * fabs(want[i]) + 1e-30) {
      fprintf(stderr, "%s[%d] = %.9g, expected %.9g\n", name, i, got[i], want[i]);
      ++bad;
    }
  }
  return bad;
}

enum { N = 8 };

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  float x[N] = {-4.0f, -2.0f, -0.5f, 0.0f, 0.25f, 1.0f, 2.5f, 6.0f};
  float dy[N] = {1.0f, -1.0f, 0.5f, 2.0f, 1.0f, -0.25f, 1.0f, 3.0f};
  float y_erf[N], y_tanh[N], dx_tanh[N], dx_erf[N];
  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t t = NULL;
  infiniopGeluDescriptor_t gelu = NULL, gelu_tanh_op = NULL;
  infiniopGeluBackwardDescriptor_t backward = NULL;
  infiniopGeluBackwardV2Descriptor_t backward_v2 = NULL;
  void *workspace = NULL;
  size_t workspace_size = 0;

  CHECK(infiniopCreateHandle(&handle, device, 0));
  /* One descriptor serves every tensor here: all are 1-D, N elements, F32, contiguous. */
  size_t shape[1] = {N};
  CHECK(infiniopCreateTensorDescriptor(&t, 1, shape, NULL, INFINI_DTYPE_F32));
  CHECK(infiniopCreateGeluDescriptor(handle, &gelu, t, t, INFINIOP_GELU_APPROXIMATE_NONE));
  CHECK(infiniopCreateGeluDescriptor(handle, &gelu_tanh_op, t, t, INFINIOP_GELU_APPROXIMATE_TANH));
  /* GeluBackward is the tanh form; GeluBackwardV2 takes the approximation. */
  CHECK(infiniopCreateGeluBackwardDescriptor(handle, &backward, t, t, t));
  CHECK(infiniopCreateGeluBackwardV2Descriptor(handle, &backward_v2, t, t, t,
                                               INFINIOP_GELU_APPROXIMATE_NONE));

  /* One workspace, as large as the largest any of them asks for (0 bytes on the CPU devices). */
  size_t sizes[4];
  CHECK(infiniopGetGeluWorkspaceSize(gelu, &sizes[0]));
  CHECK(infiniopGetGeluWorkspaceSize(gelu_tanh_op, &sizes[1]));
  CHECK(infiniopGetGeluBackwardWorkspaceSize(backward, &sizes[2]));
  CHECK(infiniopGetGeluBackwardV2WorkspaceSize(backward_v2, &sizes[3]));
  for (int i = 0; i < 4; ++i)
    if (sizes[i] > workspace_size) workspace_size = sizes[i];
  if (workspace_size > 0 && (workspace = malloc(workspace_size)) == NULL) goto done;

  CHECK(infiniopGelu(gelu, workspace, workspace_size, y_erf, x, NULL));
  CHECK(infiniopGelu(gelu_tanh_op, workspace, workspace_size, y_tanh, x, NULL));
  CHECK(infiniopGeluBackward(backward, workspace, workspace_size, dx_tanh, x, dy, NULL));
  CHECK(infiniopGeluBackwardV2(backward_v2, workspace, workspace_size, dx_erf, x, dy, NULL));

  double want_y_erf[N], want_y_tanh[N], want_dx_tanh[N], want_dx_erf[N];
  for (int i = 0; i < N; ++i) {
    want_y_erf[i] = gelu_erf(x[i]);
    want_y_tanh[i] = gelu_tanh(x[i]);
    want_dx_tanh[i] = dy[i] * dgelu_tanh(x[i]);
    want_dx_erf[i] = dy[i] * dgelu_erf(x[i]);
  }
  printf("%8s %12s %12s %12s %12s\n", "x", "gelu", "gelu_tanh", "dx (tanh)", "dx (erf)");
  for (int i = 0; i < N; ++i)
    printf("%8g %12.7g %12.7g %12.7g %12.7g\n", x[i], y_erf[i], y_tanh[i], dx_tanh[i], dx_erf[i]);
  int bad = mismatches("gelu", y_erf, want_y_erf, N) +
            mismatches("gelu_tanh", y_tanh, want_y_tanh, N) +
            mismatches("gelu_backward", dx_tanh, want_dx_tanh, N) +
            mismatches("gelu_backward_v2", dx_erf, want_dx_erf, N);
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  free(workspace);
  if (backward_v2 && failed(infiniopDestroyGeluBackwardV2Descriptor(backward_v2), "destroy"))
    status = 1;
  if (backward && failed(infiniopDestroyGeluBackwardDescriptor(backward), "destroy")) status = 1;
  if (gelu_tanh_op && failed(infiniopDestroyGeluDescriptor(gelu_tanh_op), "destroy")) status = 1;
  if (gelu && failed(infiniopDestroyGeluDescriptor(gelu), "destroy")) status = 1;
  if (t && failed(infiniopDestroyTensorDescriptor(t), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
