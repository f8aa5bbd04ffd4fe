// SPDX-License-Identifier: Apache-2.0
#include "core/object.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace infiniop {

namespace {
constexpr const char *kHandleKind = "handle";
constexpr const char *kTensorKind = "tensor descriptor";
}  // namespace

const char *ObjectHeader::handleKind() {
  return kHandleKind;
}
const char *ObjectHeader::tensorKind() {
  return kTensorKind;
}

// "a handle", "a tensor descriptor", "a GeluBackward descriptor".
std::string kindName(const char *kind) {
  const bool op = std::strcmp(kind, kHandleKind) && std::strcmp(kind, kTensorKind);
  return std::string("a ") + kind + (op ? " descriptor" : "");
}

bool isKind(const void *object, const char *kind, std::string *actual) {
  ObjectHeader header;
  std::memcpy(&header, object, sizeof header);
  if (header.magic != ObjectHeader::kLive || !header.kind) {
    *actual = "not a live infiniop object (never created, or destroyed)";
    return false;
  }
  if (std::strcmp(header.kind, kind) == 0) return true;
  *actual = kindName(header.kind);
  return false;
}

infiniStatus_t checkObject(const char *where, const char *name, const void *object,
                           const char *kind) {
  if (!object)
    return fail(INFINI_STATUS_NULL_POINTER, std::string(where) + ": " + name + " is NULL");
  std::string actual;
  if (!isKind(object, kind, &actual))
    return fail(INFINI_STATUS_BAD_PARAM,
                std::string(where) + ": " + name + " is " + actual + ", not " + kindName(kind));
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t checkedDescriptor(const char *op, const void *desc, OperatorDescriptor **result) {
  INFINIOP_CHECK(checkObject(op, "desc", desc, op));
  *result = static_cast<OperatorDescriptor *>(const_cast<void *>(desc));
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t descriptorWorkspaceSize(const char *op, const void *desc, size_t *size) {
  return guarded(op, [&] {
    OperatorDescriptor *base = nullptr;
    INFINIOP_CHECK(checkedDescriptor(op, desc, &base));
    if (!size) return fail(INFINI_STATUS_NULL_POINTER, std::string(op) + ": size is NULL");
    *size = base->workspace_size;
    return succeed();
  });
}

infiniStatus_t destroyDescriptor(const char *op, void *desc) {
  return guarded(op, [&] {
    OperatorDescriptor *base = nullptr;
    INFINIOP_CHECK(checkedDescriptor(op, desc, &base));
    base->destroy(base);
    return succeed();
  });
}

}  // namespace infiniop
