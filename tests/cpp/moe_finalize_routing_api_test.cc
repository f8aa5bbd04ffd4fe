// SPDX-License-Identifier: Apache-2.0
// MoeFinalizeRoutingV2 and MoeFinalizeRoutingV2Grad conformance, the calls themselves (the oracle
// suites are moe_finalize_routing_test.cc): hand-worked values on every device, absent optional
// tensors whose pointers must be ignored, bad arguments (each with its status, a message naming
// the operator and every buffer untouched, INT64 index values that a truncation to INT32 would
// make valid included), the grad's workspace, and more expert slots than INT32 indexes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "moe_finalize_routing.h"
#include "tensor_buffer.h"

namespace infiniop_test::moe_finalize {
namespace {

// ---------------------------------------------------------------- hand-worked values
// R = 2, K = 2, H = 2; expanded_x rows 0..3 = [1,2] [3,4] [5,6] [7,8]; scales [[0.5, 2], [1, -1]];
// expert_idx [[1, 0], [0, 1]]; bias [[1, 1], [0, 2]]. All results exact in F32.
struct HandWorked {
  TensorBuffer ex2{{4, 2}, kF32}, ex3{{2, 2, 2}, kF32}, scales{{2, 2}, kF32}, expert{{2, 2}, kI32},
      bias{{2, 2}, kF32}, x1{{2, 2}, kF32}, gy{{2, 2}, kF32};
  HandWorked() {
    ex2.fill([](size_t i) { return static_cast<float>(i + 1); });
    ex3.fill([](size_t i) { return static_cast<float>(i + 1); });
    const float s[] = {0.5f, 2, 1, -1}, b[] = {1, 1, 0, 2}, x[] = {10, 20, 30, 40};
    const int32_t e[] = {1, 0, 0, 1};
    for (size_t i = 0; i < 4; ++i) {
      scales.set(i, s[i]);
      bias.set(i, b[i]);
      x1.set(i, x[i]);
      gy.set(i, static_cast<float>(i + 1));  // [[1, 2], [3, 4]]
      setIndex(expert, i, e[i]);
    }
  }
  static TensorBuffer indices(std::vector<int32_t> values) {
    TensorBuffer t({values.size()}, kI32);
    for (size_t i = 0; i < values.size(); ++i) setIndex(t, i, values[i]);
    return t;
  }
};

void expectValues(TensorBuffer &t, const std::vector<float> &expected, const char *what) {
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(t.get(i), expected[i]) << what << " element " << i;
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2HandWorked) {
  HandWorked w;
  TensorBuffer idx = HandWorked::indices({2, 0, 3, 1});
  TensorBuffer out({2, 2}, kF32);
  ForwardCall call;
  call.tensors = {&out, &w.ex2, &idx, &w.x1, nullptr, nullptr, &w.scales, nullptr};
  // Mode 0, column layout: (r0,k0) -> 2, (r1,k0) -> 0, (r0,k1) -> 3, (r1,k1) -> 1.
  // out[0] = [10,20] + 0.5 [5,6] + 2 [7,8] = [26.5, 39]; out[1] = [30,40] + [1,2] - [3,4].
  out.poison();
  ASSERT_EQ(runForward(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(out, {26.5f, 39, 28, 38}, "mode 0");
  // Mode 2, row layout: (r0,k0) -> 2, (r0,k1) -> 0, (r1,k0) -> 3, (r1,k1) -> 1.
  // out[0] = [10,20] + 0.5 [5,6] + 2 [1,2] = [14.5, 27]; out[1] = [30,40] + [7,8] - [3,4].
  call.mode = 2;
  out.poison();
  ASSERT_EQ(runForward(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(out, {14.5f, 27, 34, 44}, "mode 2");
  // Mode 3 (E = 2, C = 2), row layout [3, -1, 0, 2], bias, no x1:
  // out[0] = 0.5 ([7,8] + [0,2]) + 2 (0 + [1,1]) = [5.5, 7]; out[1] = ([1,2] + [1,1]) - ([5,6] +
  // [0,2]) = [-3, -5]. Mode 1 reads the same table in column layout: [3, 0, -1, 2].
  TensorBuffer idx_row = HandWorked::indices({3, -1, 0, 2}),
               idx_col = HandWorked::indices({3, 0, -1, 2});
  call.tensors = {&out, &w.ex3, &idx_row, nullptr, nullptr, &w.bias, &w.scales, &w.expert};
  call.mode = 3;
  out.poison();
  ASSERT_EQ(runForward(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(out, {5.5f, 7, -3, -5}, "mode 3");
  call.tensors[fwd::kRowIdx] = &idx_col;
  call.mode = 1;
  out.poison();
  ASSERT_EQ(runForward(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(out, {5.5f, 7, -3, -5}, "mode 1");
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2GradHandWorked) {
  HandWorked w;
  // Mode 0, idx [2, 0, 3, 1] (row layout), grad_y [[1,2],[3,4]]:
  //   grad_expanded_x = [2 gy0, -gy1, 0.5 gy0, gy1] = [[2,4], [-3,-4], [0.5,1], [3,4]]
  //   grad_scales = (ex[d] + bias[e]) . gy[r] = [[21, 8], [60, 33]].
  TensorBuffer idx = HandWorked::indices({2, 0, 3, 1});
  TensorBuffer gx({4, 2}, kF32), gs({2, 2}, kF32);
  GradCall call;
  call.tensors = {&gx, &gs, &w.gy, &idx, &w.ex2, &w.scales, &w.expert, &w.bias};
  gx.poison();
  gs.poison();
  ASSERT_EQ(runGrad(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(gx, {2, 4, -3, -4, 0.5f, 1, 3, 4}, "mode 0 grad_expanded_x");
  expectValues(gs, {21, 8, 60, 33}, "mode 0 grad_scales");
  // active_num = 2: index values 2 and 3 are inactive rows; their grad_scales keep the bias term
  // only: [[b1 . gy0 = 4, 8], [b0 . gy1 = 7, 33]].
  TensorBuffer gx2({2, 2}, kF32), ex_2({2, 2}, kF32);
  ex_2.fill([](size_t i) { return static_cast<float>(i + 1); });
  call.tensors[grad::kGradExpandedX] = &gx2;
  call.tensors[grad::kExpandedX] = &ex_2;
  call.active_num = 2;
  gx2.poison();
  gs.poison();
  ASSERT_EQ(runGrad(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(gx2, {2, 4, -3, -4}, "active_num 2 grad_expanded_x");
  expectValues(gs, {4, 8, 7, 33}, "active_num 2 grad_scales");
  // Mode 1 (E = 2, C = 2), idx [3, -1, 0, 2]: slot 3 = 0.5 gy0, slot 0 = gy1, slot 2 = -gy1, slot
  // 1 unreached (0); grad_scales = [[[7,10].gy0 = 27, [1,1].gy0 = 3], [[2,3].gy1 = 18, [5,8].gy1
  // = 47]].
  TensorBuffer idx1 = HandWorked::indices({3, -1, 0, 2});
  TensorBuffer gx3({2, 2, 2}, kF32);
  call.tensors = {&gx3, &gs, &w.gy, &idx1, &w.ex3, &w.scales, &w.expert, &w.bias};
  call.mode = 1;
  call.active_num = 0;
  call.expert_num = 2;
  call.expert_capacity = 2;
  gx3.poison();
  gs.poison();
  ASSERT_EQ(runGrad(handle(), call).status, INFINI_STATUS_SUCCESS);
  expectValues(gx3, {3, 4, 0, 0, -3, -4, 0.5f, 1}, "mode 1 grad_expanded_x");
  expectValues(gs, {27, 3, 18, 47}, "mode 1 grad_scales");
}

// ---------------------------------------------------------------- absent tensors' pointers
// API.md: a nullable descriptor given as NULL means its pointer is ignored, on every device.
// Every allowed combination of absent optional tensors (each alone, all together and everything
// between) runs with NULL in the absent slots, then with junk there: (a) device memory of the
// handle whose every byte is 0xFF (NaN in F32, F16 and BF16, -1 in INT32), and (b) a host buffer
// of the same bytes that is not device memory (on the CPU devices the same as (a); on opencl a
// pointer the library could not even resolve, so a device touching it would fail the call). Each
// output must be bit-identical to the NULL run's and equal the exact values (small integers and
// halves: exact in every dtype), and the junk, which also stands for the grad's absent output
// grad_scales, must be left as it was.
enum class Junk { kNull, kDevice, kHost };
const char *junkName(Junk j) {
  return j == Junk::kNull ? "NULL" : j == Junk::kDevice ? "device junk" : "host junk";
}
constexpr Junk kJunks[] = {Junk::kNull, Junk::kDevice, Junk::kHost};

// The dtypes of these tests: all three on the CPU devices; F32 on opencl, where presence is decided
// by dtype-independent host code and each further dtype would only add program builds.
std::vector<infiniDtype_t> absentTestDtypes(DeviceParam p) {
  if (isDeviceMemory(p)) return {INFINI_DTYPE_F32};
  return {std::begin(kFloatDtypes), std::end(kFloatDtypes)};
}

// The two junk buffers of a call: `device` staged in the call's DeviceMirror, `host` not.
struct JunkBuffers {
  static constexpr size_t kBytes = 4096;  // more than any tensor of these tests
  std::vector<uint8_t> device = std::vector<uint8_t>(kBytes, 0xFF),
                       host = std::vector<uint8_t>(kBytes, 0xFF);
  bool untouched() const {
    const auto junk = [](uint8_t b) { return b == 0xFF; };
    return std::all_of(device.begin(), device.end(), junk) &&
           std::all_of(host.begin(), host.end(), junk);
  }
};

// The call's pointers on `device`: its tensors', and `junk` in every absent slot.
std::array<void *, 8> pointersWithJunk(const Args &c, DeviceMirror &device, JunkBuffers &buffers,
                                       Junk junk) {
  std::array<void *, 8> p{};
  for (size_t s = 0; s < p.size(); ++s)
    p[s] = c.tensors[s]            ? device(c.tensors[s]->data())
           : junk == Junk::kDevice ? device(buffers.device.data())
           : junk == Junk::kHost   ? buffers.host.data()
                                   : nullptr;
  return p;
}

// v rounded to `dtype` (v is exact in F32 here).
float roundedTo(infiniDtype_t dtype, double v) {
  TensorBuffer t({1}, dtype);
  t.set(0, static_cast<float>(v));
  return t.get(0);
}

// Exact inputs: integers in [-4, 4] (expanded_x), [-3, 3] (x1, grad_y), [-2, 2] (x2, bias) and
// scales from {0.5, -1, 2, 1.5}.
float exactValue(size_t i, int span) {
  return static_cast<float>(static_cast<int>(i % (2 * span + 1)) - span);
}
float exactScale(size_t i) {
  const float s[] = {0.5f, -1.0f, 2.0f, 1.5f};
  return s[i % 4];
}

// Slot of position i (of n): modes without drop/pad a permutation of [0, n) but for the last
// position, which repeats the first's (a duplicate; row 0 unreached); drop/pad modes (rows 2n)
// 2 i, with position 1 dropped (-1) and the last position repeating the first's row 0.
int32_t junkTestSlot(bool drop_pad, size_t i, size_t n) {
  if (drop_pad) return i == 1 ? -1 : i + 1 == n && n > 2 ? 0 : static_cast<int32_t>(2 * i);
  return static_cast<int32_t>(i + 1 == n ? n - 1 : n - 1 - i);
}

// Calls `call` (the operator on the call's pointers and a workspace of workspace_size bytes) with
// NULL, then each junk, in the absent slots of `c`: every run succeeds with the exact values
// (`check`, after each run; the outputs are re-poisoned before each), bit-identical to the NULL
// run's, and leaves the junk as it was.
void expectJunkIgnored(
    infiniopHandle_t h, const Args &c, const std::vector<TensorBuffer *> &outputs,
    size_t workspace_size,
    const std::function<infiniStatus_t(const std::array<void *, 8> &, void *)> &call,
    const std::function<void()> &check) {
  JunkBuffers buffers;
  DeviceMirror device(h);
  c.stage(device);
  device.add(buffers.device.data(), buffers.device.size());
  void *workspace = device.scratch(workspace_size);
  std::vector<std::vector<uint8_t>> first;
  for (Junk junk : kJunks) {
    SCOPED_TRACE(junkName(junk));
    for (TensorBuffer *t : outputs) t->poison();
    device.upload();
    const infiniStatus_t status = call(pointersWithJunk(c, device, buffers, junk), workspace);
    const std::string error = infiniopGetLastError();
    device.download();
    EXPECT_TRUE(buffers.untouched()) << "the junk behind an absent tensor was written";
    ASSERT_EQ(status, INFINI_STATUS_SUCCESS) << error;
    check();
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (junk == Junk::kNull)
        first.push_back(outputs[o]->storage());
      else
        EXPECT_TRUE(outputs[o]->storage() == first[o])
            << "output " << o << " differs from the run with NULL pointers";
    }
  }
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2IgnoresAbsentPointers) {
  const size_t R = 3, H = 37, E = 2;  // H: opencl's 32-column kernel and its scalar tail
  for (infiniDtype_t dtype : absentTestDtypes(GetParam()))
    for (int64_t mode = 0; mode < 4; ++mode)
      for (int x = 0; x < 3; ++x)    // none, x1, x1 + x2
        for (int b = 0; b < 3; ++b)  // none, expert_idx alone, bias + expert_idx
          for (bool has_scales : {false, true}) {
            const size_t K = has_scales ? 2 : 1, n = R * K;
            const bool drop_pad = mode % 2 == 1, column = mode < 2;
            SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " mode " + std::to_string(mode) +
                         " present:" + (x > 0 ? " x1" : "") + (x > 1 ? " x2" : "") +
                         (b == 2 ? " bias" : "") + (b > 0 ? " expert_idx" : "") +
                         (has_scales ? " scales" : ""));
            const std::vector<size_t> ex_shape =
                drop_pad ? std::vector<size_t>{E, n, H} : std::vector<size_t>{n, H};
            TensorBuffer out({R, H}, dtype), ex(ex_shape, dtype), idx({n}, kI32);
            std::optional<TensorBuffer> x1, x2, bias, scales, expert;
            if (x > 0) x1.emplace(std::vector<size_t>{R, H}, dtype);
            if (x > 1) x2.emplace(std::vector<size_t>{R, H}, dtype);
            if (b == 2) bias.emplace(std::vector<size_t>{E, H}, dtype);
            if (b > 0) expert.emplace(std::vector<size_t>{R, K}, kI32);
            if (has_scales) scales.emplace(std::vector<size_t>{R, K}, dtype);
            ex.fill([](size_t i) { return exactValue(i, 4); });
            if (x1) x1->fill([](size_t i) { return exactValue(i, 3); });
            if (x2) x2->fill([](size_t i) { return exactValue(i, 2); });
            if (bias) bias->fill([](size_t i) { return exactValue(i + 1, 2); });
            if (scales) scales->fill(exactScale);
            for (size_t r = 0; r < R; ++r)
              for (size_t k = 0; k < K; ++k) {
                const size_t i = r * K + k;
                setIndex(idx, column ? k * R + r : i, junkTestSlot(drop_pad, i, n));
                if (expert) setIndex(*expert, i, static_cast<int32_t>(i % E));
              }
            ForwardCall call;
            call.mode = mode;
            call.tensors = {&out, &ex, &idx, ptr(x1), ptr(x2), ptr(bias), ptr(scales), ptr(expert)};
            const auto check = [&] {
              for (size_t r = 0; r < R; ++r)
                for (size_t j = 0; j < H; ++j) {
                  double sum = (x1 ? x1->get(r * H + j) : 0.0) + (x2 ? x2->get(r * H + j) : 0.0);
                  for (size_t k = 0; k < K; ++k) {
                    const size_t i = r * K + k;
                    const int32_t d = junkTestSlot(drop_pad, i, n);
                    const double term = (d < 0 ? 0.0 : ex.get(static_cast<size_t>(d) * H + j)) +
                                        (bias ? bias->get((i % E) * H + j) : 0.0);
                    sum += (scales ? scales->get(i) : 1.0) * term;
                  }
                  ASSERT_EQ(out.get(r * H + j), roundedTo(dtype, sum))
                      << "out[" << r << "," << j << "]";
                }
            };
            infiniopMoeFinalizeRoutingV2Descriptor_t op = nullptr;
            {
              const Descriptors d(call);
              ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(
                            handle(), &op, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], mode),
                        INFINI_STATUS_SUCCESS)
                  << infiniopGetLastError();
            }
            expectJunkIgnored(
                handle(), call, {&out}, 0,
                [&](const std::array<void *, 8> &p, void *) {
                  return infiniopMoeFinalizeRoutingV2(op, nullptr, 0, p[0], p[1], p[2], p[3], p[4],
                                                      p[5], p[6], p[7], nullptr);
                },
                check);
            EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2Descriptor(op), INFINI_STATUS_SUCCESS);
          }
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2GradIgnoresAbsentPointers) {
  const size_t R = 3, H = 37, E = 2;
  for (infiniDtype_t dtype : absentTestDtypes(GetParam()))
    for (int64_t mode : {0, 1})
      for (bool has_scales : {false, true})
        for (bool has_ex : {false, true})
          for (int b = 0; b < 3; ++b)  // none, expert_idx alone, bias + expert_idx
            for (bool has_gs : {false, true}) {
              if (has_scales && !has_ex) continue;  // scales need expanded_x
              const size_t K = has_scales ? 2 : 1, n = R * K;
              const bool mode1 = mode == 1;
              SCOPED_TRACE(std::string(infiniop::dtypeName(dtype)) + " mode " +
                           std::to_string(mode) + " present:" + (has_gs ? " grad_scales" : "") +
                           (has_ex ? " expanded_x" : "") + (has_scales ? " scales" : "") +
                           (b > 0 ? " expert_idx" : "") + (b == 2 ? " bias" : ""));
              const std::vector<size_t> gx_shape =
                  mode1 ? std::vector<size_t>{E, n, H} : std::vector<size_t>{n, H};
              const size_t rows = mode1 ? E * n : n;
              TensorBuffer gx(gx_shape, dtype), gy({R, H}, dtype), idx({n}, kI32);
              std::optional<TensorBuffer> gs, ex, scales, expert, bias;
              if (has_gs) gs.emplace(std::vector<size_t>{R, K}, dtype);
              if (has_ex) ex.emplace(gx_shape, dtype);
              if (has_scales) scales.emplace(std::vector<size_t>{R, K}, dtype);
              if (b > 0) expert.emplace(std::vector<size_t>{R, K}, kI32);
              if (b == 2) bias.emplace(std::vector<size_t>{E, H}, dtype);
              gy.fill([](size_t i) { return exactValue(i, 3); });
              if (ex) ex->fill([](size_t i) { return exactValue(i, 4); });
              if (scales) scales->fill(exactScale);
              if (bias) bias->fill([](size_t i) { return exactValue(i + 1, 2); });
              for (size_t i = 0; i < n; ++i) {
                setIndex(idx, i, junkTestSlot(mode1, i, n));
                if (expert) setIndex(*expert, i, static_cast<int32_t>(i % E));
              }
              GradCall call;
              call.mode = mode;
              call.expert_num = mode1 ? static_cast<int64_t>(E) : 0;
              call.expert_capacity = mode1 ? static_cast<int64_t>(n) : 0;
              call.tensors = {&gx,     ptr(gs),     &gy,         &idx,
                              ptr(ex), ptr(scales), ptr(expert), ptr(bias)};
              // grad_scales is written only with scales: otherwise (given) it must keep its 7s.
              std::vector<TensorBuffer *> outputs = {&gx};
              if (gs && has_scales) outputs.push_back(&*gs);
              if (gs && !has_scales) gs->fill([](size_t) { return 7.0f; });
              const auto check = [&] {
                for (size_t d = 0; d < rows; ++d)
                  for (size_t j = 0; j < H; ++j) {
                    double sum = 0.0;
                    for (size_t i = 0; i < n; ++i)
                      if (junkTestSlot(mode1, i, n) == static_cast<int32_t>(d))
                        sum += gy.get((i / K) * H + j) * (scales ? scales->get(i) : 1.0);
                    ASSERT_EQ(gx.get(d * H + j), roundedTo(dtype, sum))
                        << "grad_expanded_x[" << d << "," << j << "]";
                  }
                if (!gs) return;
                for (size_t i = 0; i < n; ++i) {
                  if (!scales) {
                    ASSERT_EQ(gs->get(i), 7.0f) << "grad_scales written without scales";
                    continue;
                  }
                  const int32_t d = junkTestSlot(mode1, i, n);
                  double sum = 0.0;
                  for (size_t j = 0; j < H; ++j)
                    sum += ((d < 0 ? 0.0 : ex->get(static_cast<size_t>(d) * H + j)) +
                            (bias ? bias->get((i % E) * H + j) : 0.0)) *
                           gy.get((i / K) * H + j);
                  ASSERT_EQ(gs->get(i), roundedTo(dtype, sum)) << "grad_scales[" << i << "]";
                }
              };
              infiniopMoeFinalizeRoutingV2GradDescriptor_t op = nullptr;
              {
                const Descriptors d(call);
                ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
                              handle(), &op, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], mode,
                              0, call.expert_num, call.expert_capacity),
                          INFINI_STATUS_SUCCESS)
                    << infiniopGetLastError();
              }
              size_t workspace_size = 0;
              EXPECT_EQ(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(op, &workspace_size),
                        INFINI_STATUS_SUCCESS);
              expectJunkIgnored(
                  handle(), call, outputs, workspace_size,
                  [&](const std::array<void *, 8> &p, void *workspace) {
                    return infiniopMoeFinalizeRoutingV2Grad(op, workspace, workspace_size, p[0],
                                                            p[1], p[2], p[3], p[4], p[5], p[6],
                                                            p[7], nullptr);
                  },
                  check);
              EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(op),
                        INFINI_STATUS_SUCCESS);
            }
}

// ---------------------------------------------------------------- bad arguments
// Every buffer of a bad-argument test, so that "nothing written" covers all of them. Float
// buffers hold values, INT32 ones the given indices, other dtypes filler bytes.
class Buffers {
 public:
  TensorBuffer &make(std::vector<size_t> shape, infiniDtype_t dtype = kF32,
                     std::vector<ptrdiff_t> strides = {}) {
    TensorBuffer &t = all_.emplace_back(std::move(shape), std::move(strides), dtype);
    const uint64_t seed = all_.size();
    if (infiniop::isFloatStorage(dtype))
      t.fill([&](size_t i) { return signedValue(seed, i, 2.0f); });
    return t;
  }
  TensorBuffer &indices(std::vector<size_t> shape, const std::vector<int32_t> &values,
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

template <class Call>
using Change = std::function<void(Call &)>;

template <class Call>
struct BadCase {
  infiniStatus_t status;
  std::string what;
  int64_t mode;
  Change<Call> change;
};

template <class Call>
Change<Call> use(size_t slot, TensorBuffer *t) {
  return [slot, t](Call &c) { c.tensors[slot] = t; };
}
template <class Call>
Change<Call> pointTo(size_t slot, void *p) {
  return [slot, p](Call &c) { c.data[slot] = p; };
}
template <class Call>
Change<Call> both(Change<Call> a, Change<Call> b) {
  return [a, b](Call &c) {
    a(c);
    b(c);
  };
}
// A copy of `valid` with one value replaced, in `scratch`, used at `slot`.
template <class Call>
Change<Call> badValue(size_t slot, TensorBuffer &scratch, const std::vector<int32_t> &valid,
                      size_t position, int64_t value) {
  return [slot, &scratch, valid, position, value](Call &c) {
    for (size_t i = 0; i < scratch.numel(); ++i) setIndex(scratch, i, valid[i]);
    setIndex(scratch, position, value);
    c.tensors[slot] = &scratch;
  };
}

// Runs each bad case: its status, a message naming the operator, and no buffer written.
template <class Call, class Run>
void expectFailures(Buffers &b, const std::function<Call(int64_t)> &valid,
                    const std::vector<BadCase<Call>> &cases, Run run, const char *name) {
  for (const BadCase<Call> &bad : cases) {
    SCOPED_TRACE(bad.what + " (mode " + std::to_string(bad.mode) + ")");
    Call call = valid(bad.mode);
    bad.change(call);
    const auto before = b.snapshot();
    const Outcome o = run(call);
    EXPECT_EQ(o.status, bad.status) << infiniStatusString(o.status) << ": " << o.error;
    EXPECT_NE(o.error.find(name), std::string::npos) << "message \"" << o.error << "\"";
    EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
  }
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2BadArguments) {
  // Valid: R = 4, K = 2, H = 5, E = 3 (C = 3 in modes 1 and 3): index values [0, 8) fit all modes.
  using C = ForwardCall;
  using namespace fwd;
  Buffers b;
  const std::vector<int32_t> perm = {3, 0, 6, 1, 7, 2, 5, 4}, experts = {0, 1, 2, 0, 1, 2, 0, 1};
  TensorBuffer &out = b.make({4, 5}), &ex = b.make({8, 5}), &ex3 = b.make({3, 3, 5}),
               &idx = b.indices({8}, perm), &x1 = b.make({4, 5}), &x2 = b.make({4, 5}),
               &bias = b.make({3, 5}), &scales = b.make({4, 2}),
               &expert = b.indices({4, 2}, experts);
  TensorBuffer &idx_scratch = b.indices({8}, perm), &expert_scratch = b.indices({4, 2}, experts);
  const std::function<C(int64_t)> valid = [&](int64_t mode) {
    C c;
    c.mode = mode;
    c.tensors = {&out, mode % 2 ? &ex3 : &ex, &idx, &x1, &x2, &bias, &scales, &expert};
    return c;
  };
  const auto run = [&](const C &c) { return runForward(handle(), c); };
  for (int64_t mode = 0; mode < 4; ++mode) {  // the baseline is valid
    SCOPED_TRACE("valid call, mode " + std::to_string(mode));
    const Outcome o = run(valid(mode));
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  }
  // Without scales and bias, K = 1: (4) indices into (4, 5).
  TensorBuffer &idx4 = b.indices({4}, {2, 0, 3, 1}), &ex4 = b.make({4, 5});
  const Change<C> k1 = [&](C &c) {
    c.tensors = {c.tensors[kOut], &ex4, &idx4, nullptr, nullptr, nullptr, nullptr, nullptr};
  };
  const auto idxBad = [&](size_t pos, int32_t v) {
    return badValue<C>(kRowIdx, idx_scratch, perm, pos, v);
  };
  const auto expertBad = [&](size_t pos, int32_t v) {
    return badValue<C>(kExpertIdx, expert_scratch, experts, pos, v);
  };
  const auto u = [](size_t slot, TensorBuffer &t) { return use<C>(slot, &t); };
  const auto none = [](size_t slot) { return use<C>(slot, nullptr); };
  const auto at = [](size_t slot, void *p) { return pointTo<C>(slot, p); };
  const auto f32 = [](TensorBuffer &t, size_t offset) {
    return static_cast<void *>(static_cast<float *>(t.data()) + offset);
  };
  // INT64 indices: values that a truncation to INT32 would make valid.
  TensorBuffer &idx64 = b.indices({8}, perm, kI64), &expert64 = b.indices({4, 2}, experts, kI64);
  const auto idx64Bad = [&](size_t pos, int64_t v) {
    return badValue<C>(kRowIdx, idx64, perm, pos, v);
  };
  const auto expert64Bad = [&](size_t pos, int64_t v) {
    return badValue<C>(kExpertIdx, expert64, experts, pos, v);
  };
  const int64_t two32 = int64_t{1} << 32;
  // F16 activations (scales stay F32: the one allowed mixture).
  TensorBuffer &out16 = b.make({4, 5}, kF16), &ex16 = b.make({8, 5}, kF16),
               &ex3_16 = b.make({3, 3, 5}, kF16), &x1_16 = b.make({4, 5}, kF16),
               &x2_16 = b.make({4, 5}, kF16), &bias16 = b.make({3, 5}, kF16);
  const Change<C> half = [&](C &c) {
    c.tensors[kExpandedX] = c.tensors[kExpandedX] == &ex3 ? &ex3_16 : &ex16;
    c.tensors[kOut] = &out16, c.tensors[kX1] = &x1_16, c.tensors[kX2] = &x2_16;
    c.tensors[kBias] = &bias16;
  };
  for (int64_t mode = 0; mode < 4; ++mode) {  // F16 with F32 scales, INT64 indices: valid
    SCOPED_TRACE("valid mixture, mode " + std::to_string(mode));
    C c = valid(mode);
    half(c);
    const Outcome o = run(c);
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    c.tensors[kRowIdx] = &idx64, c.tensors[kExpertIdx] = &expert64;
    for (size_t i = 0; i < 8; ++i) setIndex(idx64, i, perm[i]), setIndex(expert64, i, experts[i]);
    const Outcome o64 = run(c);
    EXPECT_EQ(o64.status, INFINI_STATUS_SUCCESS) << o64.error;
  }
  const std::vector<BadCase<C>> cases = {
      // dtypes
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations, BF16 scales", 0,
       both(half, u(kScales, b.make({4, 2}, kBF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations, F64 scales", 3,
       both(half, u(kScales, b.make({4, 2}, kF64)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations, F32 scales, BF16 bias", 1,
       both(half, u(kBias, b.make({3, 5}, kBF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "out F16", 0, u(kOut, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_x BF16", 0, u(kExpandedX, b.make({8, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x1 F16", 0, u(kX1, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x2 BF16", 2, u(kX2, b.make({4, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "bias F16", 1, u(kBias, b.make({3, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "scales BF16", 3, u(kScales, b.make({4, 2}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 0,
       u(kRowIdx, b.make({8}, INFINI_DTYPE_I16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx F32", 1, u(kRowIdx, b.make({8}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx U32", 0,
       u(kExpertIdx, b.make({4, 2}, INFINI_DTYPE_U32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx F32", 2, u(kExpertIdx, b.make({4, 2}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "all F64", 0,
       both(k1, both(u(kOut, b.make({4, 5}, kF64)), u(kExpandedX, b.make({4, 5}, kF64))))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "all I32", 0,
       both(k1, both(u(kOut, b.make({4, 5}, kI32)), u(kExpandedX, b.make({4, 5}, kI32))))},
      // shapes
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "out [4,6]", 0, u(kOut, b.make({4, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "out [5,5]", 2, u(kOut, b.make({5, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "out [4,5,1]", 0, u(kOut, b.make({4, 5, 1}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [9,5]", 0, u(kExpandedX, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [7,5]", 2, u(kExpandedX, b.make({7, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,6]", 0, u(kExpandedX, b.make({8, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [2,4,5] in mode 0", 0,
       u(kExpandedX, b.make({2, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [9,5] in mode 1", 1,
       u(kExpandedX, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [3,3,6] in mode 3", 3,
       u(kExpandedX, b.make({3, 3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [7]", 0, u(kRowIdx, b.indices({7}, perm))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [9]", 3, u(kRowIdx, b.indices({9}, perm))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 2,
       u(kRowIdx, b.indices({4, 2}, perm))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "scales [4,3]", 0, u(kScales, b.make({4, 3}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "scales [5,2]", 1, u(kScales, b.make({5, 2}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "scales [8]", 0, u(kScales, b.make({8}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [4,3]", 0,
       u(kExpertIdx, b.indices({4, 3}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [8]", 2, u(kExpertIdx, b.indices({8}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "bias [3,6]", 0, u(kBias, b.make({3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "bias with 4 rows, E = 3", 1, u(kBias, b.make({4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "bias with 2 rows, E = 3", 3, u(kBias, b.make({2, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "x1 [4,6]", 0, u(kX1, b.make({4, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "x2 [3,5]", 2, u(kX2, b.make({3, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "no scales: K = 1, yet 8 indices", 0,
       both(none(kScales), both(none(kBias), none(kExpertIdx)))},
      // attributes and missing partners
      {INFINI_STATUS_BAD_PARAM, "x2 without x1", 0, none(kX1)},
      {INFINI_STATUS_BAD_PARAM, "bias without expert_idx", 1, none(kExpertIdx)},
      {INFINI_STATUS_BAD_PARAM, "mode 4", 4, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode 2^32", int64_t{1} << 32, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode INT64_MIN", INT64_MIN, [](C &) {}},
      // index values (first or last position), every mode
      {INFINI_STATUS_BAD_PARAM, "index -1 first", 0, idxBad(0, -1)},
      {INFINI_STATUS_BAD_PARAM, "index -1 last", 0, idxBad(7, -1)},
      {INFINI_STATUS_BAD_PARAM, "index R*K", 0, idxBad(7, 8)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MIN", 0, idxBad(3, INT32_MIN)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MAX", 0, idxBad(7, INT32_MAX)},
      {INFINI_STATUS_BAD_PARAM, "index -1", 2, idxBad(0, -1)},
      {INFINI_STATUS_BAD_PARAM, "index R*K", 2, idxBad(7, 8)},
      {INFINI_STATUS_BAD_PARAM, "index -2", 1, idxBad(7, -2)},
      {INFINI_STATUS_BAD_PARAM, "index E*C", 1, idxBad(7, 9)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MIN", 1, idxBad(0, INT32_MIN)},
      {INFINI_STATUS_BAD_PARAM, "index -2", 3, idxBad(0, -2)},
      {INFINI_STATUS_BAD_PARAM, "index E*C", 3, idxBad(7, 9)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx E", 0, expertBad(7, 3)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1", 2, expertBad(0, -1)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx E", 1, expertBad(7, 3)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx INT32_MIN", 3, expertBad(4, INT32_MIN)},
      // INT64 index values outside the range, inside it if truncated to INT32
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 3 (I64)", 0, idx64Bad(7, two32 + 3)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 3 (I64)", 2, idx64Bad(0, two32 + 3)},
      {INFINI_STATUS_BAD_PARAM, "index -2^32 + 5 (I64)", 2, idx64Bad(4, 5 - two32)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 - 1 (I64; -1 if truncated)", 1, idx64Bad(7, two32 - 1)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 8 (I64)", 3, idx64Bad(3, two32 + 8)},
      {INFINI_STATUS_BAD_PARAM, "index INT64_MAX", 3, idx64Bad(0, INT64_MAX)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^32 + 1 (I64)", 0, expert64Bad(7, two32 + 1)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -2^32 (I64)", 3, expert64Bad(0, -two32)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^40 (I64)", 1, expert64Bad(3, int64_t{1} << 40)},
      // overlapping outputs
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out broadcast (stride 0)", 0,
       u(kOut, b.make({4, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out rows overlap (stride 3 < H)", 0,
       u(kOut, b.make({4, 5}, kF32, {3, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out is x1", 0, at(kOut, x1.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out inside expanded_x", 2, at(kOut, f32(ex, 3))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out over scales", 0, at(kOut, f32(scales, 0))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out over expanded_row_idx", 1, at(kOut, idx.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "out over bias", 3, at(kOut, f32(bias, 2))},
      // NULL descriptors and pointers
      {INFINI_STATUS_NULL_POINTER, "out descriptor NULL", 0, none(kOut)},
      {INFINI_STATUS_NULL_POINTER, "expanded_x descriptor NULL", 0, none(kExpandedX)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 0, none(kRowIdx)},
      {INFINI_STATUS_NULL_POINTER, "out NULL", 0, at(kOut, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_x NULL", 1, at(kExpandedX, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 0, at(kRowIdx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "x1 NULL", 2, at(kX1, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "x2 NULL", 0, at(kX2, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "bias NULL", 3, at(kBias, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "scales NULL", 0, at(kScales, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx NULL", 1, at(kExpertIdx, nullptr)},
  };
  expectFailures<C>(b, valid, cases, run, kForwardName);

  // The handle, the descriptor pointer, and the operator descriptor itself.
  const auto before = b.snapshot();
  const C c = valid(0);
  const Descriptors d(c);
  infiniopMoeFinalizeRoutingV2Descriptor_t op = nullptr;
  const auto expectNull = [&](infiniStatus_t s, const char *what) {
    EXPECT_EQ(s, INFINI_STATUS_NULL_POINTER) << what;
    EXPECT_NE(std::string(infiniopGetLastError()).find(kForwardName), std::string::npos)
        << what << ": \"" << infiniopGetLastError() << "\"";
  };
  expectNull(infiniopCreateMoeFinalizeRoutingV2Descriptor(nullptr, &op, d[0], d[1], d[2], d[3],
                                                          d[4], d[5], d[6], d[7], 0),
             "NULL handle");
  EXPECT_EQ(op, nullptr);
  expectNull(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle(), nullptr, d[0], d[1], d[2], d[3],
                                                          d[4], d[5], d[6], d[7], 0),
             "NULL descriptor pointer");
  size_t size = 0;
  expectNull(infiniopGetMoeFinalizeRoutingV2WorkspaceSize(nullptr, &size), "workspace of NULL");
  DeviceMirror device(handle());
  c.stage(device);
  expectNull(infiniopMoeFinalizeRoutingV2(nullptr, nullptr, 0, device(out), device(ex), device(idx),
                                          device(x1), device(x2), device(bias), device(scales),
                                          device(expert), nullptr),
             "calculate with NULL");
  expectNull(infiniopDestroyMoeFinalizeRoutingV2Descriptor(nullptr), "destroy NULL");
  ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle(), &op, d[0], d[1], d[2], d[3],
                                                         d[4], d[5], d[6], d[7], 0),
            INFINI_STATUS_SUCCESS);
  expectNull(infiniopGetMoeFinalizeRoutingV2WorkspaceSize(op, nullptr), "NULL size pointer");
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2Descriptor(op), INFINI_STATUS_SUCCESS);
  device.download();
  EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
}

TEST_P(DeviceTest, MoeFinalizeRoutingV2GradBadArguments) {
  // Valid: R = 4, K = 2, H = 5; mode 0: 8 rows, mode 1: E = 3, C = 3; bias has 3 rows.
  using C = GradCall;
  using namespace grad;
  Buffers b;
  const std::vector<int32_t> perm = {3, 0, 6, 1, 7, 2, 5, 4}, experts = {0, 1, 2, 0, 1, 2, 0, 1};
  TensorBuffer &gx = b.make({8, 5}), &gx3 = b.make({3, 3, 5}), &gs = b.make({4, 2}),
               &gy = b.make({4, 5}), &idx = b.indices({8}, perm), &ex = b.make({8, 5}),
               &ex3 = b.make({3, 3, 5}), &scales = b.make({4, 2}),
               &expert = b.indices({4, 2}, experts), &bias = b.make({3, 5});
  TensorBuffer &idx_scratch = b.indices({8}, perm), &expert_scratch = b.indices({4, 2}, experts);
  const std::function<C(int64_t)> valid = [&](int64_t mode) {
    C c;
    c.mode = mode;
    const bool m1 = mode == 1;
    c.expert_num = m1 ? 3 : 0;
    c.expert_capacity = m1 ? 3 : 0;
    c.tensors = {m1 ? &gx3 : &gx, &gs, &gy, &idx, m1 ? &ex3 : &ex, &scales, &expert, &bias};
    return c;
  };
  const auto run = [&](const C &c) { return runGrad(handle(), c); };
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("valid call, mode " + std::to_string(mode));
    const Outcome o = run(valid(mode));
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  }
  const auto u = [](size_t slot, TensorBuffer &t) { return use<C>(slot, &t); };
  const auto none = [](size_t slot) { return use<C>(slot, nullptr); };
  const auto at = [](size_t slot, void *p) { return pointTo<C>(slot, p); };
  const auto f32 = [](TensorBuffer &t, size_t offset) {
    return static_cast<void *>(static_cast<float *>(t.data()) + offset);
  };
  const auto attrs = [](int64_t active, std::optional<int64_t> experts_n = std::nullopt,
                        std::optional<int64_t> capacity = std::nullopt) {
    return Change<C>([=](C &c) {
      c.active_num = active;
      if (experts_n) c.expert_num = *experts_n;
      if (capacity) c.expert_capacity = *capacity;
    });
  };
  const auto idxBad = [&](size_t pos, int32_t v) {
    return badValue<C>(kRowIdx, idx_scratch, perm, pos, v);
  };
  const auto expertBad = [&](size_t pos, int32_t v) {
    return badValue<C>(kExpertIdx, expert_scratch, experts, pos, v);
  };
  // active_num = 5: grad_expanded_x and expanded_x (5, 5); indices 5..7 skipped.
  TensorBuffer &gx5 = b.make({5, 5}), &ex5 = b.make({5, 5});
  const Change<C> active5 = both(attrs(5), both(u(kGradExpandedX, gx5), u(kExpandedX, ex5)));
  // Without scales, K = 1: 8 tokens of grad_y (8, 5), grad_expanded_x (8, 5).
  TensorBuffer &gy8 = b.make({8, 5}), &expert8_bad = b.indices({8, 1}, {0, 1, 2, 0, 1, 3, 0, 1});
  const Change<C> k1 = [&](C &c) {
    c.tensors = {
        c.tensors[kGradExpandedX], nullptr, &gy8, &idx, nullptr, nullptr, nullptr, nullptr};
  };
  // INT64 indices: values that a truncation to INT32 would make valid.
  TensorBuffer &idx64 = b.indices({8}, perm, kI64), &expert64 = b.indices({4, 2}, experts, kI64);
  const auto idx64Bad = [&](size_t pos, int64_t v) {
    return badValue<C>(kRowIdx, idx64, perm, pos, v);
  };
  const auto expert64Bad = [&](size_t pos, int64_t v) {
    return badValue<C>(kExpertIdx, expert64, experts, pos, v);
  };
  const int64_t two32 = int64_t{1} << 32;
  // F16 activations (scales and grad_scales stay F32: the one allowed mixture).
  TensorBuffer &gx16 = b.make({8, 5}, kF16), &gx3_16 = b.make({3, 3, 5}, kF16),
               &gy16 = b.make({4, 5}, kF16), &ex16 = b.make({8, 5}, kF16),
               &ex3_16 = b.make({3, 3, 5}, kF16), &bias16 = b.make({3, 5}, kF16);
  const Change<C> half = [&](C &c) {
    const bool m1 = c.tensors[kGradExpandedX] == &gx3;
    c.tensors[kGradExpandedX] = m1 ? &gx3_16 : &gx16;
    c.tensors[kExpandedX] = m1 ? &ex3_16 : &ex16;
    c.tensors[kGradY] = &gy16, c.tensors[kBias] = &bias16;
  };
  TensorBuffer &gx3_bf = b.make({3, 3, 5}, kBF16), &gy_bf = b.make({4, 5}, kBF16),
               &ex3_bf = b.make({3, 3, 5}, kBF16), &bias_bf = b.make({3, 5}, kBF16);
  const Change<C> bf16 = [&](C &c) {  // mode 1 only
    c.tensors[kGradExpandedX] = &gx3_bf, c.tensors[kExpandedX] = &ex3_bf;
    c.tensors[kGradY] = &gy_bf, c.tensors[kBias] = &bias_bf;
  };
  for (int64_t mode : {0, 1}) {  // F16 with F32 scales and grad_scales, INT64 indices: valid
    SCOPED_TRACE("valid mixture, mode " + std::to_string(mode));
    C c = valid(mode);
    half(c);
    const Outcome o = run(c);
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    c.tensors[kRowIdx] = &idx64, c.tensors[kExpertIdx] = &expert64;
    for (size_t i = 0; i < 8; ++i) setIndex(idx64, i, perm[i]), setIndex(expert64, i, experts[i]);
    const Outcome o64 = run(c);
    EXPECT_EQ(o64.status, INFINI_STATUS_SUCCESS) << o64.error;
  }
  const std::vector<BadCase<C>> cases = {
      // dtypes
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations, F32 scales, F16 grad_scales", 0,
       both(half, u(kGradScales, b.make({4, 2}, kF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations, BF16 scales", 1,
       both(half, u(kScales, b.make({4, 2}, kBF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "F16 activations and scales, F32 grad_scales", 0,
       both(half, u(kScales, b.make({4, 2}, kF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "BF16 activations, F32 scales, F16 grad_scales", 1,
       both(bf16, u(kGradScales, b.make({4, 2}, kF16)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_expanded_x F16", 0,
       u(kGradExpandedX, b.make({8, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_scales F16", 0, u(kGradScales, b.make({4, 2}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_y BF16", 1, u(kGradY, b.make({4, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_x F16", 0, u(kExpandedX, b.make({8, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "scales BF16", 1, u(kScales, b.make({4, 2}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "bias F16", 0, u(kBias, b.make({3, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 0,
       u(kRowIdx, b.make({8}, INFINI_DTYPE_I16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx F32", 1, u(kRowIdx, b.make({8}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx U32", 0,
       u(kExpertIdx, b.make({4, 2}, INFINI_DTYPE_U32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "all F64", 0,
       both(k1, both(u(kGradExpandedX, b.make({8, 5}, kF64)), u(kGradY, b.make({8, 5}, kF64))))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "all I32", 0,
       both(k1, both(u(kGradExpandedX, b.make({8, 5}, kI32)), u(kGradY, b.make({8, 5}, kI32))))},
      // shapes
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [7,5]", 0,
       u(kGradExpandedX, b.make({7, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [9,5]", 0,
       u(kGradExpandedX, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [8,6]", 0,
       u(kGradExpandedX, b.make({8, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [2,4,5] in mode 0", 0,
       u(kGradExpandedX, b.make({2, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, grad_expanded_x [8,5]", 0,
       both(active5, u(kGradExpandedX, gx))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, expanded_x [8,5]", 0,
       both(active5, u(kExpandedX, ex))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 100, grad_expanded_x [100,5]", 0,
       both(attrs(100),
            both(u(kGradExpandedX, b.make({100, 5})), u(kExpandedX, b.make({100, 5}))))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [3,4,5], E = C = 3", 1,
       u(kGradExpandedX, b.make({3, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [9,5] in mode 1", 1,
       both(u(kGradExpandedX, b.make({9, 5})), u(kExpandedX, b.make({9, 5})))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,5] in mode 1", 1, u(kExpandedX, ex)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [3,3,6]", 1, u(kExpandedX, b.make({3, 3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_y [4,6]", 0, u(kGradY, b.make({4, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_y [5,5]", 1, u(kGradY, b.make({5, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [7]", 0, u(kRowIdx, b.indices({7}, perm))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 1,
       u(kRowIdx, b.indices({4, 2}, perm))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "scales [4,3]", 0, u(kScales, b.make({4, 3}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "scales [8]", 0, u(kScales, b.make({8}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_scales [4,3]", 0, u(kGradScales, b.make({4, 3}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_scales [2,4]", 1, u(kGradScales, b.make({2, 4}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_scales [8]", 0, u(kGradScales, b.make({8}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [4,3]", 0,
       u(kExpertIdx, b.indices({4, 3}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "bias [3,6]", 0, u(kBias, b.make({3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "bias with 4 rows, expert_num 3", 1,
       u(kBias, b.make({4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "no scales: K = 1, yet 8 indices for 4 tokens", 0,
       both(none(kScales), none(kGradScales))},
      // attributes and missing partners
      {INFINI_STATUS_BAD_PARAM, "mode 2", 2, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode 2^32", int64_t{1} << 32, [](C &) {}},
      {INFINI_STATUS_BAD_PARAM, "active_num -1", 0, attrs(-1)},
      {INFINI_STATUS_BAD_PARAM, "active_num INT64_MIN", 0, attrs(INT64_MIN)},
      {INFINI_STATUS_BAD_PARAM, "expert_num 0", 1,
       both(attrs(0, 0, 3),
            both(u(kGradExpandedX, b.make({0, 3, 5})), u(kExpandedX, b.make({0, 3, 5}))))},
      {INFINI_STATUS_BAD_PARAM, "expert_capacity 0", 1,
       both(attrs(0, 3, 0),
            both(u(kGradExpandedX, b.make({3, 0, 5})), u(kExpandedX, b.make({3, 0, 5}))))},
      {INFINI_STATUS_BAD_PARAM, "expert_num -3", 1, attrs(0, -3, 3)},
      {INFINI_STATUS_BAD_PARAM, "expert_capacity -1", 1, attrs(0, 3, -1)},
      {INFINI_STATUS_BAD_PARAM, "scales without expanded_x", 0, none(kExpandedX)},
      {INFINI_STATUS_BAD_PARAM, "scales without expanded_x", 1, none(kExpandedX)},
      {INFINI_STATUS_BAD_PARAM, "bias without expert_idx", 0, none(kExpertIdx)},
      // index values (first or last position)
      {INFINI_STATUS_BAD_PARAM, "index -1 first", 0, idxBad(0, -1)},
      {INFINI_STATUS_BAD_PARAM, "index -1 last", 0, idxBad(7, -1)},
      {INFINI_STATUS_BAD_PARAM, "index R*K", 0, idxBad(7, 8)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MIN", 0, idxBad(2, INT32_MIN)},
      {INFINI_STATUS_BAD_PARAM, "active_num 5, index R*K", 0, both(active5, idxBad(7, 8))},
      {INFINI_STATUS_BAD_PARAM, "active_num 5, index -1", 0, both(active5, idxBad(7, -1))},
      {INFINI_STATUS_BAD_PARAM, "index -2", 1, idxBad(7, -2)},
      {INFINI_STATUS_BAD_PARAM, "index E*C", 1, idxBad(7, 9)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MAX", 1, idxBad(0, INT32_MAX)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx = bias rows", 0, expertBad(7, 3)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1", 0, expertBad(0, -1)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx = expert_num", 1, expertBad(7, 3)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx INT32_MIN", 1, expertBad(3, INT32_MIN)},
      // INT64 index values outside the range, inside it if truncated to INT32
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 3 (I64)", 0, idx64Bad(7, two32 + 3)},
      {INFINI_STATUS_BAD_PARAM, "index -2^32 + 1 (I64)", 0, idx64Bad(2, 1 - two32)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 - 1 (I64; -1 if truncated)", 1, idx64Bad(0, two32 - 1)},
      {INFINI_STATUS_BAD_PARAM, "index INT64_MIN", 1, idx64Bad(5, INT64_MIN)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^32 + 2 (I64)", 0, expert64Bad(6, two32 + 2)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^40 (I64)", 1, expert64Bad(1, int64_t{1} << 40)},
      {INFINI_STATUS_BAD_PARAM, "no scales, bias given, expert_idx = bias rows", 0,
       both(k1, both(u(kBias, bias), u(kExpertIdx, expert8_bad)))},
      // overlapping outputs
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x broadcast", 0,
       u(kGradExpandedX, b.make({8, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x rows overlap", 0,
       u(kGradExpandedX, b.make({8, 5}, kF32, {4, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_scales broadcast", 0,
       u(kGradScales, b.make({4, 2}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x over grad_y", 0,
       at(kGradExpandedX, gy.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x is expanded_x", 0,
       at(kGradExpandedX, ex.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x is expanded_x", 1,
       at(kGradExpandedX, ex3.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x over bias", 0,
       at(kGradExpandedX, f32(bias, 1))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_expanded_x over expanded_row_idx", 1,
       at(kGradExpandedX, idx.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_scales is scales", 0,
       at(kGradScales, scales.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_scales inside grad_expanded_x", 0,
       at(kGradScales, f32(gx, 3))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_scales over expert_idx", 1,
       at(kGradScales, expert.data())},
      // NULL descriptors and pointers
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x descriptor NULL", 0, none(kGradExpandedX)},
      {INFINI_STATUS_NULL_POINTER, "grad_y descriptor NULL", 0, none(kGradY)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 1, none(kRowIdx)},
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x NULL", 0, at(kGradExpandedX, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_scales NULL", 1, at(kGradScales, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_y NULL", 0, at(kGradY, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 1, at(kRowIdx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_x NULL", 0, at(kExpandedX, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "scales NULL", 1, at(kScales, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx NULL", 0, at(kExpertIdx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "bias NULL", 1, at(kBias, nullptr)},
  };
  expectFailures<C>(b, valid, cases, run, kGradName);

  const auto before = b.snapshot();
  const C c = valid(0);
  const Descriptors d(c);
  infiniopMoeFinalizeRoutingV2GradDescriptor_t op = nullptr;
  const auto expectNull = [&](infiniStatus_t s, const char *what) {
    EXPECT_EQ(s, INFINI_STATUS_NULL_POINTER) << what;
    EXPECT_NE(std::string(infiniopGetLastError()).find(kGradName), std::string::npos)
        << what << ": \"" << infiniopGetLastError() << "\"";
  };
  expectNull(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(nullptr, &op, d[0], d[1], d[2], d[3],
                                                              d[4], d[5], d[6], d[7], 0, 0, 0, 0),
             "NULL handle");
  EXPECT_EQ(op, nullptr);
  expectNull(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
                 handle(), nullptr, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], 0, 0, 0, 0),
             "NULL descriptor pointer");
  size_t size = 0;
  expectNull(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(nullptr, &size), "workspace of NULL");
  DeviceMirror device(handle());
  c.stage(device);
  expectNull(infiniopMoeFinalizeRoutingV2Grad(nullptr, nullptr, 0, device(gx), device(gs),
                                              device(gy), device(idx), device(ex), device(scales),
                                              device(expert), device(bias), nullptr),
             "calculate with NULL");
  expectNull(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(nullptr), "destroy NULL");
  ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(handle(), &op, d[0], d[1], d[2], d[3],
                                                             d[4], d[5], d[6], d[7], 0, 0, 0, 0),
            INFINI_STATUS_SUCCESS);
  expectNull(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(op, nullptr), "NULL size pointer");
  EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(op), INFINI_STATUS_SUCCESS);
  device.download();
  EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
}

// The workspace: what the descriptor asks for is enough (any alignment, any larger size); one
// byte less is INSUFFICIENT_WORKSPACE, NULL with a non-zero size NULL_POINTER, and a workspace
// in an input's memory BAD_TENSOR_STRIDES, nothing written. The cpu device asks for one (its
// index inversion).
TEST_P(DeviceTest, MoeFinalizeRoutingV2GradWorkspace) {
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    const size_t R = 6, K = 3, H = 17, E = 4, Cap = 5;
    const std::vector<size_t> gx_shape =
        mode ? std::vector<size_t>{E, Cap, H} : std::vector<size_t>{R * K, H};
    TensorBuffer gx(gx_shape, kF32), gs({R, K}, kF32), gy({R, H}, kF32), ex(gx_shape, kF32),
        scales({R, K}, kF32), idx({R * K}, kI32);
    gy.fill([](size_t i) { return signedValue(3, i, 2.0f); });
    ex.fill([](size_t i) { return signedValue(4, i, 2.0f); });
    scales.fill([](size_t i) { return signedValue(5, i, 1.0f); });
    Rng rng(9);
    const std::vector<int32_t> v =
        makeIndices(Pattern::kDuplicates, R * K, mode ? E * Cap : R * K, mode == 1, rng);
    for (size_t i = 0; i < v.size(); ++i) setIndex(idx, i, v[i]);
    GradCall call;
    call.mode = mode;
    call.expert_num = static_cast<int64_t>(E);
    call.expert_capacity = static_cast<int64_t>(Cap);
    call.tensors = {&gx, &gs, &gy, &idx, &ex, &scales, nullptr, nullptr};
    infiniopMoeFinalizeRoutingV2GradDescriptor_t op = nullptr;
    {
      const Descriptors d(call);
      ASSERT_EQ(infiniopCreateMoeFinalizeRoutingV2GradDescriptor(
                    handle(), &op, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], mode, 0,
                    call.expert_num, call.expert_capacity),
                INFINI_STATUS_SUCCESS)
          << infiniopGetLastError();
    }
    size_t size = 0;
    ASSERT_EQ(infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(op, &size), INFINI_STATUS_SUCCESS);
    if (isCpu(GetParam())) {
      EXPECT_GT(size, 0u) << "the cpu device inverts the index in a workspace";
    }
    std::vector<char> workspace(size + 64);
    DeviceMirror device(handle());
    call.stage(device);
    device.add(workspace.data(), workspace.size());
    // Uploads what the host holds (poisoned outputs, the workspace's bytes), calls, downloads;
    // the call's message in `error`.
    std::string error;
    const auto calc = [&](void *workspace, size_t workspace_size) {
      device.upload();
      const infiniStatus_t status = infiniopMoeFinalizeRoutingV2Grad(
          op, device(workspace), workspace_size, device(gx), device(gs), device(gy), device(idx),
          device(ex), device(scales), nullptr, nullptr, nullptr);
      error = infiniopGetLastError();
      device.download();
      return status;
    };
    gx.poison();
    gs.poison();
    ASSERT_EQ(calc(size ? workspace.data() : nullptr, size), INFINI_STATUS_SUCCESS) << error;
    const std::vector<uint8_t> gx_good = gx.storage(), gs_good = gs.storage();
    if (size > 0) {
      gx.poison();
      gs.poison();
      const std::vector<uint8_t> gx_before = gx.storage(), gs_before = gs.storage();
      EXPECT_EQ(calc(workspace.data(), size - 1), INFINI_STATUS_INSUFFICIENT_WORKSPACE);
      EXPECT_NE(error.find(kGradName), std::string::npos) << error;
      EXPECT_EQ(calc(nullptr, size), INFINI_STATUS_NULL_POINTER);
      EXPECT_NE(error.find(kGradName), std::string::npos) << error;
      // The workspace is written (the index inversion): it may not be an input's memory.
      const std::vector<uint8_t> ex_before = ex.storage();
      EXPECT_EQ(calc(ex.data(), size), INFINI_STATUS_BAD_TENSOR_STRIDES);
      EXPECT_NE(error.find("the workspace overlaps expanded_x"), std::string::npos) << error;
      EXPECT_TRUE(ex.storage() == ex_before) << "expanded_x written";
      EXPECT_TRUE(gx.storage() == gx_before && gs.storage() == gs_before) << "written";
    }
    // A larger, unaligned workspace full of garbage: the same result.
    std::fill(workspace.begin(), workspace.end(), static_cast<char>(0x5A));
    gx.poison();
    gs.poison();
    EXPECT_EQ(calc(workspace.data() + 3, size + 40), INFINI_STATUS_SUCCESS) << error;
    EXPECT_TRUE(gx.storage() == gx_good && gs.storage() == gs_good)
        << "the result depends on the workspace";
    EXPECT_EQ(infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(op), INFINI_STATUS_SUCCESS);
  }
}

// Drop/pad index values address E x C slots, which every device indexes below 2^31 (the OpenCL
// kernels divide rows in 32 bits): a larger (E, C, H) expanded_x is refused at creation, not
// read at the wrong row. Broadcast strides make such a tensor cheap to describe.
TEST(MoeFinalizeRoutingV2Slots, MoreThanInt32SlotsAreRefused) {
  infiniopHandle_t handle = nullptr;
  ASSERT_EQ(infiniopCreateHandle(&handle, INFINI_DEVICE_CPU_REFERENCE, 0), INFINI_STATUS_SUCCESS);
  const size_t ex_shape[3] = {131072, 65536, 1}, out_shape[2] = {1, 1}, idx_shape[1] = {1};
  const ptrdiff_t ex_strides[3] = {1, 0, 1};
  infiniopTensorDescriptor_t ex = nullptr, out = nullptr, idx = nullptr;
  ASSERT_EQ(infiniopCreateTensorDescriptor(&ex, 3, ex_shape, ex_strides, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  ASSERT_EQ(infiniopCreateTensorDescriptor(&out, 2, out_shape, nullptr, INFINI_DTYPE_F32),
            INFINI_STATUS_SUCCESS);
  ASSERT_EQ(infiniopCreateTensorDescriptor(&idx, 1, idx_shape, nullptr, INFINI_DTYPE_I64),
            INFINI_STATUS_SUCCESS);
  infiniopMoeFinalizeRoutingV2Descriptor_t desc = nullptr;
  EXPECT_EQ(infiniopCreateMoeFinalizeRoutingV2Descriptor(handle, &desc, out, ex, idx, nullptr,
                                                         nullptr, nullptr, nullptr, nullptr, 3),
            INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_NE(std::string(infiniopGetLastError()).find("expert slots exceed"), std::string::npos)
      << infiniopGetLastError();
  EXPECT_EQ(desc, nullptr);
  for (auto t : {ex, out, idx}) infiniopDestroyTensorDescriptor(t);
  infiniopDestroyHandle(handle);
}

}  // namespace
}  // namespace infiniop_test::moe_finalize
