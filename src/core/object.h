// SPDX-License-Identifier: Apache-2.0
// What every object the C API hands out begins with, and the base of the operator descriptors.
// The public types are opaque pointers that C casts freely; the header lets a function given
// the wrong kind of object (another operator's descriptor, a tensor descriptor, a handle) say
// so with BAD_PARAM instead of reading it as its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "infiniop/handle.h"

namespace infiniop {

// Trivially copyable, first in its object: read with memcpy from any pointer the API was given.
struct ObjectHeader {
  static constexpr uint64_t kLive = 0x706f696e69666e69;  // "infiniop" in little-endian bytes
  uint64_t magic = kLive;
  const char *kind;  // handleKind(), tensorKind(), or the operator's name

  static const char *handleKind();  // "handle"
  static const char *tensorKind();  // "tensor descriptor"
};

// An operator descriptor: its kind (the operator's name, which also prefixes its messages), the
// handle it was created on and the workspace it needs, fixed at creation. Operators derive from
// it; the public pointer is the address of this base, which has no virtual functions so that
// the header is at its start.
struct OperatorDescriptor {
  explicit OperatorDescriptor(const char *op) : header{ObjectHeader::kLive, op} {}
  OperatorDescriptor(const OperatorDescriptor &) = delete;
  OperatorDescriptor &operator=(const OperatorDescriptor &) = delete;
  ~OperatorDescriptor() { header.magic = 0; }

  const char *name() const { return header.kind; }

  ObjectHeader header;
  infiniopHandle_t handle = nullptr;
  size_t workspace_size = 0;
  void (*destroy)(OperatorDescriptor *) = nullptr;  // deletes the derived object
};

// Whether `object` (non-NULL) is a live object of `kind`; else `*actual` says what it is, for
// a message ("a tensor descriptor", "a SwiGlu descriptor", "not a live infiniop object ...").
bool isKind(const void *object, const char *kind, std::string *actual);

// NULL_POINTER for a NULL `object`, BAD_PARAM for anything but a live object of `kind`, each
// with a message "<where>: <name> is ..., not a <kind>[ descriptor]". Allocates nothing when the
// object is one: destroy and size queries cannot fail for want of memory.
infiniStatus_t checkObject(const char *where, const char *name, const void *object,
                           const char *kind);

// The operator descriptor behind `desc` when it is one of operator `op`'s: NULL is
// NULL_POINTER, anything else BAD_PARAM, each with a message.
infiniStatus_t checkedDescriptor(const char *op, const void *desc, OperatorDescriptor **result);

template <class Derived>
infiniStatus_t unwrapDescriptor(const char *op, const void *desc, Derived **result) {
  OperatorDescriptor *base = nullptr;
  const infiniStatus_t status = checkedDescriptor(op, desc, &base);
  if (status == INFINI_STATUS_SUCCESS) *result = static_cast<Derived *>(base);
  return status;
}

// Hands a new descriptor out through desc_ptr (checked non-NULL by the caller), recording how
// it is destroyed.
template <class Public, class Derived>
void publishDescriptor(Public *desc_ptr, Derived *desc) {
  desc->destroy = [](OperatorDescriptor *base) { delete static_cast<Derived *>(base); };
  *desc_ptr = reinterpret_cast<Public>(static_cast<OperatorDescriptor *>(desc));
}

// The get-workspace-size and destroy functions of every operator.
infiniStatus_t descriptorWorkspaceSize(const char *op, const void *desc, size_t *size);
infiniStatus_t destroyDescriptor(const char *op, void *desc);

}  // namespace infiniop

// Defines infiniopGet<Name>WorkspaceSize and infiniopDestroy<Name>Descriptor (the C ABI's names
// for descriptor type infiniop<Name>Descriptor_t), the same two functions for every operator; `op`
// names it in messages. At file scope.
#define INFINIOP_DESCRIPTOR_QUERIES(Name, op)                                                      \
  extern "C" infiniStatus_t infiniopGet##Name##WorkspaceSize(infiniop##Name##Descriptor_t desc,    \
                                                             size_t *size) {                       \
    return ::infiniop::descriptorWorkspaceSize(op, desc, size);                                    \
  }                                                                                                \
  extern "C" infiniStatus_t infiniopDestroy##Name##Descriptor(infiniop##Name##Descriptor_t desc) { \
    return ::infiniop::destroyDescriptor(op, desc);                                                \
  }
