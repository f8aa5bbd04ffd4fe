// SPDX-License-Identifier: Apache-2.0
/* A C program that only sees the installed headers and library. */
#include <infiniop.h>
#include <stdio.h>

int main(void) {
  infiniopHandle_t handle;
  if (infiniopCreateHandle(&handle, INFINI_DEVICE_CPU, 0) != INFINI_STATUS_SUCCESS) return 1;
  size_t shape[1] = {3};
  infiniopTensorDescriptor_t t;
  infiniopCreateTensorDescriptor(&t, 1, shape, NULL, INFINI_DTYPE_F32);
  infiniopGeluBackwardDescriptor_t op;
  if (infiniopCreateGeluBackwardDescriptor(handle, &op, t, t, t) != INFINI_STATUS_SUCCESS) return 2;
  infiniopDestroyTensorDescriptor(t);
  float x[3] = {-1, 0, 1}, dy[3] = {1, 1, 1}, dx[3];
  if (infiniopGeluBackward(op, NULL, 0, dx, x, dy, NULL) != INFINI_STATUS_SUCCESS) return 3;
  infiniopDestroyGeluBackwardDescriptor(op);
  infiniopDestroyHandle(handle);
  printf("%.6f %.6f %.6f\n", dx[0], dx[1], dx[2]);
  return dx[1] == 0.5f ? 0 : 4;
}
