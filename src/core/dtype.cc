// SPDX-License-Identifier: Apache-2.0
#include "core/dtype.h"

namespace infiniop {

size_t dtypeSize(infiniDtype_t dtype) {
  switch (dtype) {
    case INFINI_DTYPE_BYTE:
    case INFINI_DTYPE_BOOL:
    case INFINI_DTYPE_I8:
    case INFINI_DTYPE_U8:
    case INFINI_DTYPE_F8:
      return 1;
    case INFINI_DTYPE_I16:
    case INFINI_DTYPE_U16:
    case INFINI_DTYPE_F16:
    case INFINI_DTYPE_BF16:
    case INFINI_DTYPE_C16:
      return 2;
    case INFINI_DTYPE_I32:
    case INFINI_DTYPE_U32:
    case INFINI_DTYPE_F32:
    case INFINI_DTYPE_C32:
      return 4;
    case INFINI_DTYPE_I64:
    case INFINI_DTYPE_U64:
    case INFINI_DTYPE_F64:
    case INFINI_DTYPE_C64:
      return 8;
    case INFINI_DTYPE_C128:
      return 16;
    case INFINI_DTYPE_INVALID:
      break;
  }
  return 0;
}

const char *dtypeName(infiniDtype_t dtype) {
  static const char *const names[] = {"INVALID", "BYTE", "BOOL", "I8",  "I16",  "I32", "I64",
                                      "U8",      "U16",  "U32",  "U64", "F8",   "F16", "F32",
                                      "F64",     "C16",  "C32",  "C64", "C128", "BF16"};
  const int i = static_cast<int>(dtype);
  return i >= 0 && i < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[i] : "UNKNOWN";
}

}  // namespace infiniop
