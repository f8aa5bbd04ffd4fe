// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_HANDLE_H
#define INFINIOP_HANDLE_H

#include "../infinicore.h"

typedef struct InfiniopHandle *infiniopHandle_t;

/* device_id must be 0 for the CPU devices (there is one host). */
__INFINI_C infiniStatus_t infiniopCreateHandle(infiniopHandle_t *handle, infiniDevice_t device,
                                               int device_id);
__INFINI_C infiniStatus_t infiniopDestroyHandle(infiniopHandle_t handle);

/* The device types built into this library, in infiniDevice_t order: *count is set to how many
 * there are, and the first min(capacity, *count) are written to devices (which may be NULL when
 * capacity is 0). Bindings, tests and tools list devices with this, not from their own copies. */
__INFINI_C infiniStatus_t infiniopGetDeviceTypes(infiniDevice_t *devices, int capacity, int *count);

typedef struct {
  const char *name; /* "cpu", "opencl", "cpu_reference": static storage, the library's lifetime */
  int count;        /* device ids [0, count) can be opened here; 0 when none (e.g. no driver) */
  int host_memory;  /* 1: device pointers are host pointers (infiniopMalloc gives host memory) */
} infiniopDeviceInfo_t;

/* What this build knows of a device type. DEVICE_TYPE_NOT_SUPPORTED (with the reason in
 * infiniopGetLastError) for a type not built into this library. */
__INFINI_C infiniStatus_t infiniopGetDeviceInfo(infiniDevice_t device, infiniopDeviceInfo_t *info);

/* How the elementwise operators evaluate their F32 outputs (docs/accuracy.md, "The relaxed
 * mode"), in the spirit of oneDNN's fpmath_mode: STRICT (the default) holds each operator's
 * documented F32 bound (K <= 6); RELAXED holds a looser one (K <= 8: at most 8 ulp, or 8 u of the
 * summed terms where a gradient cancels) at less arithmetic. Both give the same bits on every cpu
 * target and on opencl. F16/BF16 outputs are correctly rounded in either mode, and the MoE
 * operators ignore it. */
typedef enum {
  INFINIOP_FPMATH_STRICT = 0,
  INFINIOP_FPMATH_RELAXED = 1,
} infiniopFpmathMode_t;

/* Sets the mode of the descriptors created on `handle` from now on; a descriptor keeps the mode
 * it was created with. BAD_PARAM for a value outside the enum (the handle's mode unchanged). */
__INFINI_C infiniStatus_t infiniopSetHandleFpmathMode(infiniopHandle_t handle,
                                                      infiniopFpmathMode_t mode);
__INFINI_C infiniStatus_t infiniopGetHandleFpmathMode(infiniopHandle_t handle,
                                                      infiniopFpmathMode_t *mode);

#endif /* INFINIOP_HANDLE_H */
