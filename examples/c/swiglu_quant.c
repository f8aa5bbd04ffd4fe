// SPDX-License-Identifier: Apache-2.0
/* examples/c/swiglu_quant.c: SwiGluQuant on a 4 x 512 BF16 input, FP8 E4M3 per group of 128
 * with dynamic F32 scales (DeepSeek-V3's activation quantization), checked against the formulas
 * evaluated in double precision: each scale is amax / 448 of its group, rounded to F32, and each
 * byte dequantizes to within half an FP8 step of the exact value.
 *
 *   cc swiglu_quant.c $(pkg-config --cflags --libs infiniop) -lm && ./a.out [cpu|cpu_reference]
 *
 * Exit status 0 when every value matches, 1 otherwise (or when a call fails), 2 for an unknown
 * device (example_device.h, beside this file). */
#include <infiniop.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "example_device.h"

static int failed(infiniStatus_t status, const char *call) {
  if (status == INFINI_STATUS_SUCCESS) return 0;
  fprintf(stderr, "%s\n  -> %s: %s\n", call, infiniStatusString(status), infiniopGetLastError());
  return 1;
}
#define CHECK(call)                       \
  do {                                    \
    if (failed((call), #call)) goto done; \
  } while (0)

enum { ROWS = 4, H = 256, GROUP = 128, GROUPS = H / GROUP }; /* x is ROWS x 2H */

/* BF16 <-> float by the bits (a BF16 is the high half of an F32). */
static uint16_t bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16); /* the values below are exact in BF16 */
}
static double fromBf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
/* The value of an e4m3fn byte (bias 7, 3 mantissa bits, subnormals k 2^-9; 0x7F is NaN). */
static double fromFp8(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m, -9);
  return b & 0x80 ? -v : v;
}

int main(int argc, char **argv) {
  infiniDevice_t device;
  if (!example_device(argc, argv, &device)) return EXAMPLE_USAGE_ERROR;

  static uint16_t x[ROWS][2 * H];
  static uint8_t y[ROWS][H];
  static float scale[ROWS][GROUPS];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < 2 * H; ++j) x[r][j] = bf16((float)((r * 37 + j * 11) % 41 - 20) * 0.25f);

  int status = 1;
  infiniopHandle_t handle = NULL;
  infiniopTensorDescriptor_t x_desc = NULL, y_desc = NULL, scale_desc = NULL;
  infiniopSwiGluQuantDescriptor_t quant = NULL;

  CHECK(infiniopCreateHandle(&handle, device, 0));
  size_t x_shape[2] = {ROWS, 2 * H}, y_shape[2] = {ROWS, H}, scale_shape[2] = {ROWS, GROUPS};
  CHECK(infiniopCreateTensorDescriptor(&x_desc, 2, x_shape, NULL, INFINI_DTYPE_BF16));
  CHECK(infiniopCreateTensorDescriptor(&y_desc, 2, y_shape, NULL, INFINI_DTYPE_F8));
  CHECK(infiniopCreateTensorDescriptor(&scale_desc, 2, scale_shape, NULL, INFINI_DTYPE_F32));
  /* y = silu(x1) * x2 quantized to FP8 per group of 128 columns, scale = amax / 448 (dynamic);
   * no smooth scales, no group_index; activate_left 1: the activation on x's first half. */
  CHECK(infiniopCreateSwiGluQuantDescriptor(handle, &quant, y_desc, scale_desc, x_desc, NULL, NULL,
                                            1, INFINIOP_QUANT_DYNAMIC, GROUP,
                                            INFINIOP_QUANT_SCALE_F32));
  CHECK(infiniopSwiGluQuant(quant, NULL, 0, y, scale, x, NULL, NULL, NULL));

  int bad = 0;
  for (int r = 0; r < ROWS; ++r)
    for (int g = 0; g < GROUPS; ++g) {
      double z[GROUP], amax = 0;
      for (int j = 0; j < GROUP; ++j) {
        const int c = g * GROUP + j;
        const double x1 = fromBf16(x[r][c]), x2 = fromBf16(x[r][H + c]);
        z[j] = x1 / (1 + exp(-x1)) * x2;
        amax = fmax(amax, fabs(z[j]));
      }
      if (scale[r][g] != (float)(amax / 448)) {
        fprintf(stderr, "scale[%d][%d] = %.9g, expected %.9g\n", r, g, scale[r][g], amax / 448);
        ++bad;
      }
      for (int j = 0; j < GROUP; ++j) {
        /* Half an FP8 step at |z / s|: 2^-4 of it in the normal binades, 2^-10 below 2^-6. */
        const double v = z[j] / scale[r][g], got = fromFp8(y[r][g * GROUP + j]);
        const double half_step = fmax(fabs(v) * 0x1p-4, 0x1p-10);
        if (fabs(got - v) > half_step) {
          fprintf(stderr, "y[%d][%d] = %g, expected %g\n", r, g * GROUP + j, got, v);
          ++bad;
        }
      }
    }
  printf("scale[0] = %g %g; y[0][0..3] = 0x%02x 0x%02x 0x%02x 0x%02x\n", scale[0][0], scale[0][1],
         y[0][0], y[0][1], y[0][2], y[0][3]);
  printf("%s\n", bad ? "MISMATCH" : "all values match");
  status = bad != 0;

done:
  if (quant && failed(infiniopDestroySwiGluQuantDescriptor(quant), "destroy")) status = 1;
  if (scale_desc && failed(infiniopDestroyTensorDescriptor(scale_desc), "destroy")) status = 1;
  if (y_desc && failed(infiniopDestroyTensorDescriptor(y_desc), "destroy")) status = 1;
  if (x_desc && failed(infiniopDestroyTensorDescriptor(x_desc), "destroy")) status = 1;
  if (handle && failed(infiniopDestroyHandle(handle), "destroy")) status = 1;
  return status;
}
