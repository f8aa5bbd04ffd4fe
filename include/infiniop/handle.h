// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_HANDLE_H
#define INFINIOP_HANDLE_H

#include "../infinicore.h"

typedef struct InfiniopHandle *infiniopHandle_t;

/* device_id must be 0 for the CPU devices (there is one host). */
__INFINI_C infiniStatus_t infiniopCreateHandle(infiniopHandle_t *handle, infiniDevice_t device,
                                               int device_id);
__INFINI_C infiniStatus_t infiniopDestroyHandle(infiniopHandle_t handle);

#endif /* INFINIOP_HANDLE_H */
