// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 and MoeInitRoutingV2Grad conformance, the calls themselves (the oracle suites
// are moe_init_routing_test.cc): the workspace, and bad arguments (status, a message naming the
// operator, every buffer untouched) on every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "moe_init_routing.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_init {
namespace {

// ---------------------------------------------------------------- workspace
// The Init asks for none on the CPU devices; where it asks for some (opencl), one byte less is
// INSUFFICIENT_WORKSPACE, NULL with the size NULL_POINTER, nothing written, and a larger one the
// same result. The grad asks for none anywhere.
TEST_P(DeviceTest, MoeInitRoutingV2Workspace) {
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    const size_t R = 5, K = 2, H = 7, E = 3;
    TensorBuffer x({R, H}, kF32), expert({R, K}, kI32), row({R * K}, kI32), counts({E}, kI64),
        ex(mode ? std::vector<size_t>{E, 2, H} : std::vector<size_t>{R * K, H}, kF32);
    x.fill([](size_t i) { return signedValue(1, i, 5.0f); });
    for (size_t i = 0; i < R * K; ++i) setIndex(expert, i, static_cast<int64_t>(i * 7 % E));
    Call call;
    call.tensors = {&ex, &row, mode ? nullptr : &counts, mode ? &counts : nullptr, &x, &expert};
    const int64_t a[] = {0, 2, static_cast<int64_t>(E), mode, mode ? 0 : 2, mode};
    std::copy(std::begin(a), std::end(a), call.attr);
    ex.poison();
    Outcome o = run(handle(), kInit, call);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    const std::vector<uint8_t> good_ex = ex.storage(), good_row = row.storage(),
                               good_counts = counts.storage();
    if (!isDeviceMemory(GetParam())) {
      EXPECT_EQ(o.workspace, 0u) << "no workspace on the CPU devices";
    }
    if (o.workspace > 0) {
      for (int variant = 0; variant < 2; ++variant) {
        ex.poison();
        std::memset(row.storageBytes(), 0xAB, row.storage().size());
        std::memset(counts.storageBytes(), 0xAB, counts.storage().size());
        const auto ex0 = ex.storage(), row0 = row.storage(), counts0 = counts.storage();
        call.workspace_delta = variant == 0 ? -1 : 0;
        call.null_workspace = variant == 1;
        o = run(handle(), kInit, call);
        EXPECT_EQ(o.status,
                  variant == 0 ? INFINI_STATUS_INSUFFICIENT_WORKSPACE : INFINI_STATUS_NULL_POINTER);
        EXPECT_NE(o.error.find(kInitName), std::string::npos) << o.error;
        EXPECT_TRUE(ex.storage() == ex0 && row.storage() == row0 && counts.storage() == counts0)
            << "written";
      }
    }
    call.workspace_delta = 64, call.null_workspace = false;
    ex.poison();
    o = run(handle(), kInit, call);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    EXPECT_TRUE(ex.storage() == good_ex && row.storage() == good_row &&
                counts.storage() == good_counts)
        << "the result depends on the workspace size";
  }
}

// ---------------------------------------------------------------- bad arguments
class Buffers {  // every buffer of a bad-argument test: "nothing written" covers them all
 public:
  TensorBuffer &make(std::vector<size_t> shape, infiniDtype_t dtype = kF32,
                     std::vector<ptrdiff_t> strides = {}) {
    TensorBuffer &t = all_.emplace_back(std::move(shape), std::move(strides), dtype);
    if (infiniop::isFloatStorage(dtype))
      t.fill([&](size_t i) { return signedValue(all_.size(), i, 2.0f); });
    return t;
  }
  TensorBuffer &indices(std::vector<size_t> shape, const std::vector<int64_t> &values,
                        infiniDtype_t dtype = kI32) {
    TensorBuffer &t = make(std::move(shape), dtype);
    for (size_t i = 0; i < t.numel(); ++i) setIndex(t, i, values[i % values.size()]);
    return t;
  }
  std::vector<std::vector<uint8_t>> snapshot() const {
    std::vector<std::vector<uint8_t>> s;
    for (const TensorBuffer &t : all_) s.push_back(t.storage());
    return s;
  }

 private:
  std::deque<TensorBuffer> all_;
};

using Change = std::function<void(Call &)>;
struct BadCase {
  infiniStatus_t status;
  std::string what;
  int64_t mode;
  Change change;
};
Change use(size_t slot, TensorBuffer *t) {
  return [slot, t](Call &c) { c.tensors[slot] = t; };
}
Change pointTo(size_t slot, void *p) {
  return [slot, p](Call &c) { c.data[slot] = p; };
}
Change attr(size_t i, int64_t v) {
  return [i, v](Call &c) { c.attr[i] = v; };
}
Change both(Change a, Change b) {
  return [a, b](Call &c) {
    a(c);
    b(c);
  };
}

void expectFailures(Buffers &b, const std::function<Call(int64_t)> &valid,
                    const std::vector<BadCase> &cases, infiniopHandle_t h, const Op &op) {
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("valid call, mode " + std::to_string(mode));
    const Outcome o = run(h, op, valid(mode));
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  }
  for (const BadCase &bad : cases) {
    SCOPED_TRACE(bad.what + " (mode " + std::to_string(bad.mode) + ")");
    Call call = valid(bad.mode);
    bad.change(call);
    const auto before = b.snapshot();
    const Outcome o = run(h, op, call);
    EXPECT_EQ(o.status, bad.status) << infiniStatusString(o.status) << ": " << o.error;
    EXPECT_NE(o.error.find(op.name), std::string::npos) << "message \"" << o.error << "\"";
    EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
  }
}

// The handle, the descriptor pointer, the operator descriptor: NULL_POINTER, nothing written.
void expectNullHandles(infiniopHandle_t h, const Op &op, const Call &c, Buffers &b) {
  const auto before = b.snapshot();
  const auto expectNull = [&](infiniStatus_t s, const char *what) {
    EXPECT_EQ(s, INFINI_STATUS_NULL_POINTER) << what;
    EXPECT_NE(std::string(infiniopGetLastError()).find(op.name), std::string::npos)
        << what << ": \"" << infiniopGetLastError() << "\"";
  };
  Descs d;
  for (TensorBuffer *t : c.tensors) d.push_back(t ? t->descriptor() : nullptr);
  void *desc = nullptr;
  expectNull(op.create(nullptr, &desc, d, c.attr), "NULL handle");
  EXPECT_EQ(desc, nullptr);
  expectNull(op.create(h, nullptr, d, c.attr), "NULL descriptor pointer");
  size_t size = 0;
  expectNull(op.size(nullptr, &size), "workspace size of NULL");
  DeviceMirror device(h);
  Ptrs p;
  for (TensorBuffer *t : c.tensors) {
    device.add(t);
    p.push_back(device(t));
  }
  expectNull(op.calc(nullptr, nullptr, 0, p), "calculate with NULL");
  expectNull(op.destroy(nullptr), "destroy NULL");
  ASSERT_EQ(op.create(h, &desc, d, c.attr), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  expectNull(op.size(desc, nullptr), "NULL size pointer");
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  for (auto t : d)
    if (t) infiniopDestroyTensorDescriptor(t);
  device.download();
  EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
}

TEST_P(DeviceTest, MoeInitRoutingV2BadArguments) {
  // Valid: R = 4, K = 2, H = 5, E = 3; mode 0: expanded_x (8, 5) and counts (flag 2); mode 1:
  // C = 3, expanded_x (3, 3, 5) and before_capacity (flag true).
  enum { kEx, kRow, kCounts, kBefore, kX, kExpert };
  enum { kActive, kCapacity, kExperts, kMode, kFlag, kBeforeFlag };
  Buffers b;
  const std::vector<int64_t> experts = {0, 1, 2, 0, 1, 2, 0, 1};
  TensorBuffer &ex = b.make({8, 5}), &ex3 = b.make({3, 3, 5}), &row = b.indices({8}, {0}),
               &counts = b.indices({3}, {0}, kI64), &before = b.indices({3}, {0}),
               &x = b.make({4, 5}), &expert = b.indices({4, 2}, experts);
  TensorBuffer &scratch32 = b.indices({4, 2}, experts),
               &scratch64 = b.indices({4, 2}, experts, kI64);
  const auto valid = [&](int64_t mode) {
    Call c;
    c.tensors = {mode == 1 ? &ex3 : &ex, &row, &counts, &before, &x, &expert};
    const int64_t a[] = {0, 3, 3, mode, 2, 1};
    std::copy(std::begin(a), std::end(a), c.attr);
    return c;
  };
  const auto u = [](size_t slot, TensorBuffer &t) { return use(slot, &t); };
  const auto none = [](size_t slot) { return use(slot, nullptr); };
  const auto expertBad = [&](size_t pos, int64_t v, bool wide) {
    TensorBuffer *s = wide ? &scratch64 : &scratch32;
    return Change([=](Call &c) {
      for (size_t i = 0; i < 8; ++i) setIndex(*s, i, i == pos ? v : experts[i]);
      c.tensors[kExpert] = s;
    });
  };
  const auto f32 = [](TensorBuffer &t, size_t offset) {
    return static_cast<void *>(static_cast<float *>(t.data()) + offset);
  };
  TensorBuffer &ex5 = b.make({5, 5});
  const std::vector<BadCase> cases = {
      // NULL descriptors and pointers
      {INFINI_STATUS_NULL_POINTER, "expanded_x descriptor NULL", 0, none(kEx)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 1, none(kRow)},
      {INFINI_STATUS_NULL_POINTER, "x descriptor NULL", 0, none(kX)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx descriptor NULL", 1, none(kExpert)},
      {INFINI_STATUS_NULL_POINTER, "expanded_x NULL", 0, pointTo(kEx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 1, pointTo(kRow, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "counts NULL", 0, pointTo(kCounts, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "before_capacity NULL", 1, pointTo(kBefore, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "x NULL", 0, pointTo(kX, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx NULL", 1, pointTo(kExpert, nullptr)},
      // attributes
      {INFINI_STATUS_BAD_PARAM, "mode 2", 2, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "expert_num 0", 0, attr(kExperts, 0)},
      {INFINI_STATUS_BAD_PARAM, "expert_num -3", 1, attr(kExperts, -3)},
      {INFINI_STATUS_BAD_PARAM, "count flag 3", 0, attr(kFlag, 3)},
      {INFINI_STATUS_BAD_PARAM, "count flag -1", 1, attr(kFlag, -1)},
      {INFINI_STATUS_BAD_PARAM, "active_num -1", 0, attr(kActive, -1)},
      {INFINI_STATUS_BAD_PARAM, "active_num INT64_MIN", 0, attr(kActive, INT64_MIN)},
      {INFINI_STATUS_BAD_PARAM, "capacity 0", 1, attr(kCapacity, 0)},
      {INFINI_STATUS_BAD_PARAM, "capacity -1", 1, attr(kCapacity, -1)},
      {INFINI_STATUS_BAD_PARAM, "count flag 1, counts absent", 0,
       both(attr(kFlag, 1), none(kCounts))},
      {INFINI_STATUS_BAD_PARAM, "count flag 2, counts absent", 0, none(kCounts)},
      {INFINI_STATUS_BAD_PARAM, "before flag, before_capacity absent", 1, none(kBefore)},
      // expert_idx values
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1", 0, expertBad(0, -1, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx E", 1, expertBad(7, 3, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx INT32_MIN", 0, expertBad(3, INT32_MIN, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1 (I64)", 1, expertBad(7, -1, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^40 (I64)", 0, expertBad(2, int64_t{1} << 40, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^32 + 1 (I64, 1 if truncated)", 1,
       expertBad(5, (int64_t{1} << 32) + 1, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -2^32 (I64, 0 if truncated)", 0,
       expertBad(0, -(int64_t{1} << 32), true)},
      // dtypes
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x and expanded_x F64", 0,
       both(u(kX, b.make({4, 5}, kF64)), u(kEx, b.make({8, 5}, kF64)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x F16, expanded_x F32", 0, u(kX, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_x BF16, x F32", 1,
       u(kEx, b.make({3, 3, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x I32", 0,
       both(u(kX, b.make({4, 5}, kI32)), u(kEx, b.make({8, 5}, kI32)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx I16", 0, u(kExpert, b.make({4, 2}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx F32", 1, u(kExpert, b.make({4, 2}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 1, u(kRow, b.make({8}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx U32", 0,
       u(kRow, b.make({8}, INFINI_DTYPE_U32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "counts F32", 0, u(kCounts, b.make({3}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "before_capacity I16", 1, u(kBefore, b.make({3}, kI16))},
      // shapes
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "x [4,5,1]", 0, u(kX, b.make({4, 5, 1}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [4,3]", 0,
       u(kExpert, b.indices({4, 3}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [8]", 1, u(kExpert, b.indices({8}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [5,2]", 0,
       u(kExpert, b.indices({5, 2}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [7]", 0, u(kRow, b.indices({7}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 1,
       u(kRow, b.indices({4, 2}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [9,5]", 0, u(kEx, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,6]", 0, u(kEx, b.make({8, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, expanded_x [8,5]", 0, attr(kActive, 5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 0, expanded_x [5,5]", 0, u(kEx, ex5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,5] in mode 1", 1, u(kEx, ex)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [3,4,5], C = 3", 1, u(kEx, b.make({3, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [2,3,5], E = 3", 1, u(kEx, b.make({2, 3, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "counts [4]", 0, u(kCounts, b.indices({4}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "counts [3,1]", 0, u(kCounts, b.indices({3, 1}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "before_capacity [2]", 1, u(kBefore, b.indices({2}, {0}))},
      // overlapping outputs
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x broadcast", 0,
       u(kEx, b.make({8, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x rows overlap", 1,
       u(kEx, b.make({3, 3, 5}, kF32, {15, 3, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx stride 0", 0,
       u(kRow, b.make({8}, kI32, {0}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "counts stride 0", 0, u(kCounts, b.make({3}, kI32, {0}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x over x", 0, pointTo(kEx, x.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx over expert_idx", 1,
       pointTo(kRow, expert.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "counts inside expanded_x", 0,
       pointTo(kCounts, f32(ex, 5))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "before_capacity over expanded_row_idx", 1,
       pointTo(kBefore, row.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx inside expanded_x", 1,
       pointTo(kRow, f32(ex3, 10))},
  };
  expectFailures(b, valid, cases, handle(), kInit);
  {  // outputs not asked for: any shape or dtype, NULL pointers: not checked, not written
    SCOPED_TRACE("unasked outputs NULL or odd");
    TensorBuffer &odd = b.make({2, 7}, kF64);
    for (int64_t mode : {0, 1}) {
      Call c = valid(mode);
      c.tensors[mode ? kCounts : kBefore] = &odd;
      c.data[mode ? kCounts : kBefore] = nullptr;
      if (mode)  // the other mode's flag: ignored
        c.attr[kFlag] = 1;
      else
        c.attr[kBeforeFlag] = 1;
      const auto before_snapshot = odd.storage();
      const Outcome o = run(handle(), kInit, c);
      EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
      EXPECT_TRUE(odd.storage() == before_snapshot);
      c.attr[kFlag] = 0, c.attr[kBeforeFlag] = 0;
      c.tensors[kCounts] = c.tensors[kBefore] = &odd;
      EXPECT_EQ(run(handle(), kInit, c).status, INFINI_STATUS_SUCCESS) << "flags off";
    }
  }
  expectNullHandles(handle(), kInit, valid(0), b);
}

TEST_P(DeviceTest, MoeInitRoutingV2GradBadArguments) {
  // Valid: R = 4, top_k = 2, H = 5; mode 0: grad_expanded_x (8, 5); mode 1: (3, 3, 5).
  enum { kGx, kGex, kRow };
  enum { kTopK, kMode, kActive };
  Buffers b;
  const std::vector<int64_t> perm = {3, 0, 6, 1, 7, 2, 5, 4}, slots = {3, -1, 6, 1, 8, 2, -1, 4};
  TensorBuffer &gx = b.make({4, 5}), &gex = b.make({8, 5}), &gex3 = b.make({3, 3, 5}),
               &idx = b.indices({8}, perm), &idx1 = b.indices({8}, slots, kI64);
  TensorBuffer &scratch32 = b.indices({8}, perm), &scratch64 = b.indices({8}, perm, kI64);
  const auto valid = [&](int64_t mode) {
    Call c;
    c.tensors = {&gx, mode == 1 ? &gex3 : &gex, mode == 1 ? &idx1 : &idx};
    c.attr[kTopK] = 2, c.attr[kMode] = mode, c.attr[kActive] = 0;
    return c;
  };
  const auto u = [](size_t slot, TensorBuffer &t) { return use(slot, &t); };
  const auto idxBad = [&](int64_t mode, size_t pos, int64_t v, bool wide) {
    TensorBuffer *s = wide ? &scratch64 : &scratch32;
    const std::vector<int64_t> base = mode ? slots : perm;
    return Change([=](Call &c) {
      for (size_t i = 0; i < 8; ++i) setIndex(*s, i, i == pos ? v : base[i]);
      c.tensors[kRow] = s;
    });
  };
  const std::vector<BadCase> cases = {
      {INFINI_STATUS_NULL_POINTER, "grad_x descriptor NULL", 0, use(kGx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x descriptor NULL", 1, use(kGex, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 0, use(kRow, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_x NULL", 0, pointTo(kGx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x NULL", 1, pointTo(kGex, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 0, pointTo(kRow, nullptr)},
      {INFINI_STATUS_BAD_PARAM, "top_k 0", 0, attr(kTopK, 0)},
      {INFINI_STATUS_BAD_PARAM, "top_k -2", 1, attr(kTopK, -2)},
      {INFINI_STATUS_BAD_PARAM, "mode 2", 2, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "active_num -1", 0, attr(kActive, -1)},
      {INFINI_STATUS_BAD_PARAM, "index -1", 0, idxBad(0, 0, -1, false)},
      {INFINI_STATUS_BAD_PARAM, "index R*K", 0, idxBad(0, 7, 8, false)},
      {INFINI_STATUS_BAD_PARAM, "index R*K (I64)", 0, idxBad(0, 3, 8, true)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 2 (I64, 2 if truncated)", 0,
       idxBad(0, 5, (int64_t{1} << 32) + 2, true)},
      {INFINI_STATUS_BAD_PARAM, "active_num 5, index -1", 0,
       both(both(attr(kActive, 5), u(kGex, b.make({5, 5}))), idxBad(0, 7, -1, false))},
      {INFINI_STATUS_BAD_PARAM, "index -2", 1, idxBad(1, 0, -2, false)},
      {INFINI_STATUS_BAD_PARAM, "index E*C", 1, idxBad(1, 7, 9, true)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MIN", 1, idxBad(1, 2, INT32_MIN, false)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 - 1 (I64, -1 if truncated)", 1,
       idxBad(1, 1, (int64_t{1} << 32) - 1, true)},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_x F16", 0, u(kGx, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_expanded_x BF16", 1,
       u(kGex, b.make({3, 3, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "both F64", 0,
       both(u(kGx, b.make({4, 5}, kF64)), u(kGex, b.make({8, 5}, kF64)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 0, u(kRow, b.make({8}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx F32", 1, u(kRow, b.make({8}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "top_k 3: 12 indices needed", 0, attr(kTopK, 3)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_x [4,6]", 0, u(kGx, b.make({4, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_x [4,5,1]", 1, u(kGx, b.make({4, 5, 1}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [7,5]", 0, u(kGex, b.make({7, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, grad_expanded_x [8,5]", 0, attr(kActive, 5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [2,4,5] in mode 0", 0,
       u(kGex, b.make({2, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [9,5] in mode 1", 1,
       u(kGex, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [3,3,6]", 1, u(kGex, b.make({3, 3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 0,
       u(kRow, b.indices({4, 2}, perm))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x broadcast", 0,
       u(kGx, b.make({4, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x over grad_expanded_x", 0,
       pointTo(kGx, gex.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x over expanded_row_idx", 1,
       pointTo(kGx, idx1.data())},
  };
  expectFailures(b, valid, cases, handle(), kGrad);
  expectNullHandles(handle(), kGrad, valid(1), b);
}

}  // namespace
}  // namespace infiniop_test::moe_init
