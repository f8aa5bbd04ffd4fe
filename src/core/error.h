// SPDX-License-Identifier: Apache-2.0
// Status plus thread-local message: every public entry point reports failures through fail().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "infinicore.h"

namespace infiniop {

// Records `message` as this thread's last error and returns `status`.
infiniStatus_t fail(infiniStatus_t status, std::string message);
// Clears the last error and returns SUCCESS: the tail of every successful public call.
infiniStatus_t succeed();

// BAD_PARAM ("<where>: x pointer 0x... is not aligned to its 4-byte elements") unless a data
// pointer is aligned to its element size, as every pointer to tensor data must be.
infiniStatus_t checkAligned(const char *where, const char *name, const void *p,
                            size_t element_size);

// Runs a public entry point body: converts escaping C++ exceptions into statuses, because none
// may cross the C ABI.
template <class Body>
infiniStatus_t guarded(const char *where, Body &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(INFINI_STATUS_INTERNAL_ERROR, std::string(where) + ": out of host memory");
  } catch (const std::exception &e) {
    return fail(INFINI_STATUS_INTERNAL_ERROR, std::string(where) + ": " + e.what());
  } catch (...) {
    return fail(INFINI_STATUS_INTERNAL_ERROR, std::string(where) + ": unknown exception");
  }
}

}  // namespace infiniop

// Returns early from the enclosing function when `expr` is not SUCCESS.
#define INFINIOP_CHECK(expr)                                                \
  do {                                                                      \
    const infiniStatus_t infiniop_status_ = (expr);                         \
    if (infiniop_status_ != INFINI_STATUS_SUCCESS) return infiniop_status_; \
  } while (0)
