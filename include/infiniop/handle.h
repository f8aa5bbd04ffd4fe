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

#endif /* INFINIOP_HANDLE_H */
