// SPDX-License-Identifier: Apache-2.0
#ifndef INFINIOP_RUNTIME_H
#define INFINIOP_RUNTIME_H

#include "handle.h"

/* On the CPU devices a device pointer is a host pointer and every call is synchronous;
 * stream may be NULL or a value returned by infiniopStreamCreate. */
__INFINI_C infiniStatus_t infiniopMalloc(infiniopHandle_t handle, void **ptr, size_t size);
__INFINI_C infiniStatus_t infiniopFree(infiniopHandle_t handle, void *ptr);
__INFINI_C infiniStatus_t infiniopMemcpyHostToDevice(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream);
__INFINI_C infiniStatus_t infiniopMemcpyDeviceToHost(infiniopHandle_t handle, void *dst,
                                                     const void *src, size_t size, void *stream);
__INFINI_C infiniStatus_t infiniopStreamCreate(infiniopHandle_t handle, void **stream);
__INFINI_C infiniStatus_t infiniopStreamDestroy(infiniopHandle_t handle, void *stream);
__INFINI_C infiniStatus_t infiniopStreamSynchronize(infiniopHandle_t handle, void *stream);

/* The SIMD target the cpu device dispatches to now ("AVX3", "AVX2", "SSE4", ...): the best the
 * processor supports among those compiled in. Not part of API.md's contract; for diagnostics. */
__INFINI_C const char *infiniopCpuIsaName(void);

#endif /* INFINIOP_RUNTIME_H */
