// SPDX-License-Identifier: Apache-2.0
/* infinicore.h: status, dtype and device enums shared by every infiniop header.
 * The numeric values are part of the ABI (see shared/specs/API.md): never renumber. */
#ifndef INFINICORE_H
#define INFINICORE_H

#if defined(_WIN32)
#define INFINIOP_API __declspec(dllexport)
#else
#define INFINIOP_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define INFINIOP_EXTERN_C extern "C"
#else
#define INFINIOP_EXTERN_C
#endif

#define __INFINI_C INFINIOP_EXTERN_C INFINIOP_API

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  INFINI_STATUS_SUCCESS = 0,
  INFINI_STATUS_INTERNAL_ERROR = 1,
  INFINI_STATUS_NOT_IMPLEMENTED = 2,
  INFINI_STATUS_BAD_PARAM = 3,
  INFINI_STATUS_NULL_POINTER = 4,
  INFINI_STATUS_DEVICE_TYPE_NOT_SUPPORTED = 5,
  INFINI_STATUS_DEVICE_NOT_FOUND = 6,
  INFINI_STATUS_DEVICE_NOT_INITIALIZED = 7,
  INFINI_STATUS_DEVICE_ARCHITECTURE_NOT_SUPPORTED = 8,
  INFINI_STATUS_BAD_TENSOR_DTYPE = 10,
  INFINI_STATUS_BAD_TENSOR_SHAPE = 11,
  INFINI_STATUS_BAD_TENSOR_STRIDES = 12,
  INFINI_STATUS_INSUFFICIENT_WORKSPACE = 13,
} infiniStatus_t;

typedef enum {
  INFINI_DTYPE_INVALID = 0,
  INFINI_DTYPE_BYTE = 1,
  INFINI_DTYPE_BOOL = 2,
  INFINI_DTYPE_I8 = 3,
  INFINI_DTYPE_I16 = 4,
  INFINI_DTYPE_I32 = 5,
  INFINI_DTYPE_I64 = 6,
  INFINI_DTYPE_U8 = 7,
  INFINI_DTYPE_U16 = 8,
  INFINI_DTYPE_U32 = 9,
  INFINI_DTYPE_U64 = 10,
  INFINI_DTYPE_F8 = 11,
  INFINI_DTYPE_F16 = 12,
  INFINI_DTYPE_F32 = 13,
  INFINI_DTYPE_F64 = 14,
  INFINI_DTYPE_C16 = 15,
  INFINI_DTYPE_C32 = 16,
  INFINI_DTYPE_C64 = 17,
  INFINI_DTYPE_C128 = 18,
  INFINI_DTYPE_BF16 = 19,
} infiniDtype_t;

typedef enum {
  INFINI_DEVICE_CPU = 0,           /* optimized CPU: Highway SIMD, runtime ISA dispatch, OpenMP */
  INFINI_DEVICE_OPENCL = 1,        /* any OpenCL 1.2+ device */
  INFINI_DEVICE_CPU_REFERENCE = 2, /* plain scalar C++, single thread: the readable oracle */
} infiniDevice_t;

/* "INFINI_STATUS_BAD_PARAM", ...; "INFINI_STATUS_UNKNOWN" for a value outside the enum. */
__INFINI_C const char *infiniStatusString(infiniStatus_t status);

/* Thread-local, human-readable reason for the last failure on this thread; "" after a success.
 * The pointer stays valid until the next infiniop call on the same thread. */
__INFINI_C const char *infiniopGetLastError(void);

#endif /* INFINICORE_H */
