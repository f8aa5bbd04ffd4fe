// SPDX-License-Identifier: Apache-2.0
// DequantSwigluQuant (docs/dequant_swiglu_quant.md) on every device against this file's oracle,
// independent of src/exact: each accumulator dequantized as the contract orders it,
// acc = x + bias_i exactly (int64), acc w in long double (exact: 33 x 24 bits) rounded once to
// double, then d s_a and d + bias_f as IEEE double operations (each the contract's one rounding,
// not the library's code), then z = silu(d1) d2 m (activate_left 1) or d1 silu(d2) m in long
// double, and the bytes and dynamic scales of quant_oracle.h (INT8 / FP8 encoders, amax / qmax to
// F32 or UE8M0; elements within 2^-56 of a midpoint skipped and counted). Every byte and scale bit
// must equal the oracle's, and every device's cpu_reference's, storage gaps included. Cases:
// worked by hand (the order of the dequantization, INT32 vs float bias, both gate sides), random
// accumulators up to +-(2^31 - 1) and INT32_MIN with weight and activation scales of many
// magnitudes, every bias dtype, per-expert weight_scale / bias / smooth_scales with group_index
// and rows past the counts' sum, INT8 and FP8, groups, UE8M0, static scales, NaN and infinities
// through the float scales and biases, strided / reversed / 3-D layouts and both activation_scale
// shapes, a threaded size, zero rows, and bad counts (nothing written). Outputs are poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "index_values.h"
#include "quant_oracle.h"
#include "quant_names.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

using namespace quant_oracle;  // NOLINT: the oracle's formats

using namespace quant_names;  // NOLINT: the dtypes' and attributes' short names
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

struct Config {
  int32_t activate_left = 1;
  infiniopQuantMode_t mode = kDynamic;
  int64_t group_size = 0;
  infiniopQuantScaleFormat_t format = kScaleF32;
};

std::string describe(const Config &c) {
  return "left=" + std::to_string(c.activate_left) +
         (c.mode == kDynamic ? (c.format == kUe8m0 ? " dynamic UE8M0" : " dynamic F32")
                             : " static") +
         " group_size=" + std::to_string(c.group_size);
}

// The tensors of one call; every one but y, scale and x may be NULL.
struct Operands {
  TensorBuffer *y, *scale, *x;
  TensorBuffer *weight = nullptr, *activation = nullptr, *bias = nullptr, *smooth = nullptr,
               *group_index = nullptr;
  bool empty_as_null = false;  // pass NULL for tensors of no elements (the C ABI allows it)
};

// ---- the oracle --------------------------------------------------------------------------------

// silu(x) in long double; far left, where float64's x / (1 + e^-x) is 0, the tail stand-in of
// quant_oracle.h (a tiny negative value that float64 takes as 0).
Value silu(long double x) {
  if (x == -INFINITY) return {-0.0L};
  if (x < 0 && std::isfinite(x)) {
    const double xd = static_cast<double>(x);
    if (xd / (1 + std::exp(-xd)) == 0) return {-0x1p-16000L, true};
  }
  return {x / (1 + std::exp(-x))};
}

// Element (row, c) of a (2H) or (E, 2H) tensor: row 0 for a (2H) one.
size_t columnIndex(TensorBuffer &t, size_t row, size_t c, size_t H) {
  return (t.shape().size() == 2 ? row : 0) * 2 * H + c;
}

// The dequantized value of accumulator (r, c) (x's element r * 2H + c), expert row e.
double dequant(Operands &o, size_t r, size_t c, size_t e, size_t H) {
  int64_t acc = getInt(*o.x, r * 2 * H + c);
  const bool bias_int = o.bias && o.bias->dtype() == I32;
  if (bias_int) acc += getInt(*o.bias, columnIndex(*o.bias, e, c, H));
  const long double w = o.weight ? o.weight->get(columnIndex(*o.weight, e, c, H)) : 1.0f;
  double d = static_cast<double>(static_cast<long double>(acc) * w);  // exact, rounded once
  if (o.activation) d = d * static_cast<double>(o.activation->get(r));
  if (o.bias && !bias_int) d = d + static_cast<double>(o.bias->get(columnIndex(*o.bias, e, c, H)));
  return d;
}

Expected oracle(Operands &o, const Config &c) {
  const size_t H = o.x->shape().back() / 2;
  const size_t rows = H ? o.y->numel() / H : o.scale->numel();
  const size_t G = rows ? o.scale->numel() / rows : 0;
  const size_t gs = c.group_size > 0 ? static_cast<size_t>(c.group_size) : H;
  Expected out = expectedOf(rows, H, G);
  const std::vector<int64_t> counts = countsOf(o.group_index);
  std::vector<Value> z(H);
  std::vector<double> d(2 * H);
  for (size_t r = 0; r < rows; ++r) {
    const ptrdiff_t expert = expertOf(counts, r);
    if (expert < 0) continue;  // past the counts: bytes 0, dynamic scale 0
    const auto e = static_cast<size_t>(expert);
    for (size_t col = 0; col < 2 * H; ++col) d[col] = dequant(o, r, col, e, H);
    for (size_t col = 0; col < H; ++col) {
      const long double d1 = d[col], d2 = d[H + col];
      const Value a = times(silu(c.activate_left ? d1 : d2), c.activate_left ? d2 : d1);
      const long double m =
          o.smooth ? o.smooth->get((o.smooth->shape().size() == 2 ? e : 0) * H + col) : 1.0L;
      z[col] = times(a, m);
    }
    quantizeRow(z, r, G, gs, c.mode == kDynamic, c.format == kUe8m0, o.y->dtype() == F8, *o.scale,
                &out);
  }
  return out;
}

// ---- the calls ---------------------------------------------------------------------------------

infiniStatus_t callOp(infiniopHandle_t handle, const Config &c, Operands &o, std::string *error) {
  poisonBytes(*o.y);
  if (c.mode == kDynamic) poisonBytes(*o.scale);
  auto desc = [](TensorBuffer *t) { return t ? t->descriptor() : nullptr; };
  infiniopTensorDescriptor_t ds[] = {desc(o.y),      desc(o.scale),      desc(o.x),
                                     desc(o.weight), desc(o.activation), desc(o.bias),
                                     desc(o.smooth), desc(o.group_index)};
  infiniopDequantSwigluQuantDescriptor_t op = nullptr;
  infiniStatus_t status = infiniopCreateDequantSwigluQuantDescriptor(
      handle, &op, ds[0], ds[1], ds[2], ds[3], ds[4], ds[5], ds[6], ds[7], c.activate_left, c.mode,
      c.group_size, c.format);
  *error = infiniopGetLastError();
  for (auto d : ds)
    if (d) infiniopDestroyTensorDescriptor(d);
  if (status != INFINI_STATUS_SUCCESS) return status;
  size_t size = 0;
  EXPECT_EQ(infiniopGetDequantSwigluQuantWorkspaceSize(op, &size), INFINI_STATUS_SUCCESS);
  DeviceMirror device(handle);
  for (TensorBuffer *t :
       {o.y, o.scale, o.x, o.weight, o.activation, o.bias, o.smooth, o.group_index})
    device.add(t);
  void *ws = device.scratch(size);
  device.passEmptyAsNull(o.empty_as_null);
  status = infiniopDequantSwigluQuant(op, ws, size, device(o.y), device(o.scale), device(o.x),
                                      device(o.weight), device(o.activation), device(o.bias),
                                      device(o.smooth), device(o.group_index), nullptr);
  *error = infiniopGetLastError();
  device.download();
  EXPECT_EQ(infiniopDestroyDequantSwigluQuantDescriptor(op), INFINI_STATUS_SUCCESS);
  return status;
}

class DequantSwigluQuant : public DeviceTest {
 protected:
  infiniStatus_t run(const Config &c, Operands o) { return callOp(handle(), c, o, &error_); }

  // One call against the oracle (every byte, every dynamic scale's bits) and against
  // cpu_reference (the same call on copies, bit for bit, gaps included).
  void expectOracle(const Config &c, Operands o, const std::string &what) {
    SCOPED_TRACE(what + ": " + describe(c));
    const std::vector<uint8_t> static_scale = o.scale->storage();
    ASSERT_EQ(run(c, o), INFINI_STATUS_SUCCESS) << error_;
    const Expected want = oracle(o, c);
    skipped_ += want.skipped;
    ASSERT_NO_FATAL_FAILURE(
        expectOracleBytes(want, *o.y, *o.scale, c.mode == kDynamic, static_scale));
    if (deviceOf(GetParam()) == INFINI_DEVICE_CPU_REFERENCE) return;
    TensorBuffer ref_y = *o.y, ref_scale = *o.scale;
    Operands ref = o;
    ref.y = &ref_y;
    ref.scale = &ref_scale;
    Handle reference(INFINI_DEVICE_CPU_REFERENCE);
    std::string error;
    ASSERT_EQ(callOp(reference.get(), c, ref, &error), INFINI_STATUS_SUCCESS) << error;
    ASSERT_EQ(o.y->storage(), ref_y.storage()) << "y differs from cpu_reference's";
    ASSERT_EQ(o.scale->storage(), ref_scale.storage()) << "scale differs from cpu_reference's";
  }

  // x (rows..., 2H) with y and scale made for it (static scales filled); the other operands given.
  void expectShape(const Config &c, Operands o, infiniDtype_t ydtype, const std::string &what) {
    std::vector<size_t> lead(o.x->shape().begin(), o.x->shape().end() - 1);
    const size_t H = o.x->shape().back() / 2;
    const size_t G = c.group_size > 0 ? H / static_cast<size_t>(c.group_size) : 1;
    std::vector<size_t> yshape = lead, sshape = lead;
    yshape.push_back(H);
    sshape.push_back(G);
    TensorBuffer y(yshape, ydtype), scale(sshape, F32);
    if (c.mode == kStatic)
      scale.fill([](size_t i) { return 0.25f * static_cast<float>(1 + i % 7); });
    o.y = &y;
    o.scale = &scale;
    expectOracle(c, o, what);
  }

  void TearDown() override {
    if (skipped_) std::printf("DequantSwigluQuant: %zu elements skipped at a midpoint\n", skipped_);
    DeviceTest::TearDown();
  }

  std::string error_;
  size_t skipped_ = 0;
};

std::vector<Config> configs(infiniopQuantMode_t mode, int64_t group_size,
                            infiniopQuantScaleFormat_t format) {
  return {{0, mode, group_size, format}, {1, mode, group_size, format}};
}

// x filled with signed accumulators of magnitude up to `range` (a mix: small, large, the ends).
void fillAccumulators(TensorBuffer &x, uint64_t seed, int64_t range) {
  for (size_t i = 0; i < x.numel(); ++i) {
    const double u = signedValue(seed, i, 1.0f);  // in (-1, 1)
    int64_t v = static_cast<int64_t>(u * static_cast<double>(range));
    if (i % 17 == 3) v = range;
    if (i % 19 == 5) v = -range;
    setInt(x, i, v);
  }
}

TEST_P(DequantSwigluQuant, ByHand) {
  // H = 1, static scale 1 unless said: silu(20) = 20 (1 - 2.1e-9), silu(40) = 40 (1 - 4e-18).
  struct Case {
    const char *what;
    int32_t x1, x2;
    float w1, w2, s_a;         // s_a 0: no activation_scale
    infiniDtype_t bias_dtype;  // I8: no bias
    float b1, b2;
    int32_t left;
    float s;
    int int8;
  };
  const Case cases[] = {
      // d1 = 40 1 0.5 = 20, d2 = 3 2 0.5 + 0.25 = 3.25: z = 65 (1 - tiny) -> 65.
      {"float bias after the scales", 40, 3, 1, 2, 0.5f, F32, 0, 0.25f, 1, 1, 65},
      // INT32 bias on the accumulator: (38 + 2) 0.5 = 20, (1 + 2) 1 = 3: z = 60 (1 - tiny).
      {"int bias before the scales", 38, 1, 0.5f, 1, 0, I32, 2, 2, 1, 1, 60},
      // The same bias 1 on d2 = 3 w 2: a float bias gives 3 2 + 1 = 7, an INT32 one (3 + 1) 2 = 8;
      // z = silu(40) d2 over s = 4: 70 or 80.
      {"float bias 1", 40, 3, 1, 2, 0, F32, 0, 1, 1, 4, 70},
      {"int bias 1", 40, 3, 1, 2, 0, I32, 0, 1, 1, 4, 80},
      {"f16 bias 1", 40, 3, 1, 2, 0, F16, 0, 1, 1, 4, 70},
      {"bf16 bias 1", 40, 3, 1, 2, 0, BF16, 0, 1, 1, 4, 70},
      // activate_left 0: z = d1 silu(d2) = 3 silu(40) over 2 = 60 (1 - tiny) -> 60.
      {"right gate", 3, 40, 1, 1, 0, I8, 0, 0, 0, 2, 60},
      // silu(0) = 0; a negative weight scale: d2 = -5, z = silu(20) (-5) -> -100 over 1.
      {"zero gate", 0, 9, 1, 1, 0, I8, 0, 0, 1, 1, 0},
      {"negative weight", 20, 5, 1, -1, 0, I8, 0, 0, 1, 1, -100},
      // The largest accumulators: (2^31 - 1) 2^-24 2^-3 = 16 - 2^-28 (gate), -2^31 2^-31 = -1:
      // z = -silu(16 - 2^-28) = -15.99999... over 1/8: -127.99... saturates to -127.
      {"int32 extremes", 2147483647, -2147483647 - 1, 0x1p-24f, 0x1p-28f, 0.125f, I8, 0, 0, 1,
       0.125f, -127},
  };
  for (const Case &k : cases) {
    for (infiniDtype_t yd : {I8, F8}) {
      TensorBuffer x({1, 2}, I32), w({2}, F32), sa({1, 1}, F32), y({1, 1}, yd), scale({1, 1}, F32);
      TensorBuffer bias({2}, k.bias_dtype == I8 ? F32 : k.bias_dtype);
      setInt(x, 0, k.x1), setInt(x, 1, k.x2);
      w.set(0, k.w1), w.set(1, k.w2);
      sa.set(0, k.s_a);
      if (k.bias_dtype == I32)
        setInt(bias, 0, static_cast<int64_t>(k.b1)), setInt(bias, 1, static_cast<int64_t>(k.b2));
      else
        bias.set(0, k.b1), bias.set(1, k.b2);
      scale.set(0, k.s);
      Operands o{
          &y, &scale, &x, &w, k.s_a != 0 ? &sa : nullptr, k.bias_dtype != I8 ? &bias : nullptr};
      expectOracle({k.left, kStatic, 0, kScaleF32}, o, k.what);
      if (yd == I8) EXPECT_EQ(int(int8_t(byteAt(y, 0))), k.int8) << k.what;
    }
  }
}

TEST_P(DequantSwigluQuant, RandomScalesAndBiases) {
  const size_t R = 7, H = 16;
  uint64_t seed = 1;
  // (accumulator range, weight scale magnitude, activation scale magnitude)
  const struct {
    int64_t range;
    float w, a;
  } scales[] = {{100, 1.0f, 1.0f},
                {kI32Max, 1e-7f, 1e-2f},
                {1 << 20, 3e-4f, 0.5f},
                {kI32Max, 2.0f, 3e4f},
                {1000, 1e-30f, 1e-8f}};
  const infiniDtype_t bias_dtypes[] = {I8, F32, F16, BF16, I32};  // I8: none
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                std::pair{kStatic, kScaleF32}})
      for (int64_t gs : {int64_t{0}, int64_t{4}})
        for (const Config &c : configs(mode, gs, format))
          for (const auto &sc : scales)
            for (infiniDtype_t bd : bias_dtypes) {
              if (isDeviceMemory(GetParam()) && (bd == F16 || gs == 4)) continue;  // staged: fewer
              ++seed;
              TensorBuffer x({R, 2 * H}, I32), w({2 * H}, F32), sa({R}, F32);
              fillAccumulators(x, seed, sc.range);
              w.fill([&](size_t i) { return sc.w * signedValue(seed + 1, i, 2.0f); });
              sa.fill(
                  [&](size_t i) { return sc.a * (0.1f + std::fabs(signedValue(seed, i, 2.0f))); });
              TensorBuffer bias({2 * H}, bd == I8 ? F32 : bd);
              if (bd == I32)
                for (size_t i = 0; i < 2 * H; ++i)
                  setInt(bias, i,
                         i % 5 == 0 ? (i % 2 ? kI32Max : kI32Min)
                                    : static_cast<int64_t>(signedValue(seed, i, 1e6f)));
              else
                bias.fill([&](size_t i) { return signedValue(seed + 2, i, sc.w * sc.a * 1e4f); });
              Operands o{nullptr, nullptr, &x, &w, &sa, bd == I8 ? nullptr : &bias};
              if (mode == kStatic) {  // |z| about d^2: scales near it, so that few saturate
                TensorBuffer y({R, H}, yd), s({R, gs ? H / 4 : 1}, F32);
                const double d = static_cast<double>(sc.range) * sc.w * sc.a;  // |d| about
                s.fill([&](size_t) { return static_cast<float>(d * d * 0.02); });
                o.y = &y, o.scale = &s;
                expectOracle(c, o, "random static " + std::string(infiniop::dtypeName(bd)));
              } else {
                expectShape(c, o, yd, "random " + std::string(infiniop::dtypeName(bd)));
              }
            }
}

TEST_P(DequantSwigluQuant, OptionalTensorsAbsent) {
  const size_t R = 5, H = 8;
  TensorBuffer x({R, 2 * H}, I32), w({2 * H}, F32), sa({R, 1}, F32);
  fillAccumulators(x, 41, 40);
  w.fill([](size_t i) { return signedValue(42, i, 0.5f); });
  sa.fill([](size_t i) { return 0.01f + 0.1f * static_cast<float>(i); });
  for (infiniDtype_t yd : {I8, F8})
    for (const Config &c : configs(kDynamic, 0, kScaleF32)) {
      expectShape(c, {nullptr, nullptr, &x}, yd, "x alone");
      expectShape(c, {nullptr, nullptr, &x, &w}, yd, "weight_scale alone");
      expectShape(c, {nullptr, nullptr, &x, nullptr, &sa}, yd, "activation_scale (R, 1) alone");
    }
}

TEST_P(DequantSwigluQuant, PerExpert) {
  const size_t R = 9, H = 8, E = 3;
  TensorBuffer x({R, 2 * H}, I32), w_e({E, 2 * H}, F32), w({2 * H}, F32), sa({R}, F32);
  TensorBuffer smooth_e({E, H}, F32), counts({E}, I64);
  fillAccumulators(x, 51, 1 << 16);
  w_e.fill([](size_t i) { return signedValue(52, i, 1e-3f); });
  w.fill([](size_t i) { return signedValue(53, i, 1e-3f); });
  sa.fill([](size_t i) { return 0.05f + 0.01f * static_cast<float>(i); });
  smooth_e.fill([](size_t i) { return signedValue(54, i, 2.0f); });
  smooth_e.set(3, 0.0f);
  for (infiniDtype_t bd : {F32, BF16, I32}) {
    TensorBuffer bias_e({E, 2 * H}, bd), bias({2 * H}, bd);
    if (bd == I32) {
      for (size_t i = 0; i < E * 2 * H; ++i) setInt(bias_e, i, (int64_t(i) - 20) * 1000);
      for (size_t i = 0; i < 2 * H; ++i) setInt(bias, i, int64_t(i) * 77 - 500);
    } else {
      bias_e.fill([](size_t i) { return signedValue(55, i, 3.0f); });
      bias.fill([](size_t i) { return signedValue(56, i, 3.0f); });
    }
    for (infiniDtype_t yd : {I8, F8})
      for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                  std::pair{kStatic, kScaleF32}})
        for (const Config &c : configs(mode, 4, format))
          for (const auto &n : {std::vector<int64_t>{2, 0, 4}, std::vector<int64_t>{3, 3, 3},
                                std::vector<int64_t>{0, 0, 0}}) {
            for (size_t e = 0; e < E; ++e) setInt(counts, e, n[e]);
            const std::string what = std::string(infiniop::dtypeName(bd)) + " counts " +
                                     std::to_string(n[0]) + "," + std::to_string(n[1]) + "," +
                                     std::to_string(n[2]);
            expectShape(c, {nullptr, nullptr, &x, &w_e, &sa, &bias_e, &smooth_e, &counts}, yd,
                        "all per expert " + what);
            expectShape(c, {nullptr, nullptr, &x, &w, &sa, &bias_e, &smooth_e, &counts}, yd,
                        "bias per expert " + what);
            // group_index choosing weight_scale rows alone (no smooth_scales).
            expectShape(c, {nullptr, nullptr, &x, &w_e, &sa, &bias, nullptr, &counts}, yd,
                        "weight per expert, no smooth " + what);
          }
  }
}

TEST_P(DequantSwigluQuant, NanAndInfinities) {
  const size_t R = 6, H = 4;
  TensorBuffer x({R, 2 * H}, I32), w({2 * H}, F32), sa({R}, F32), bias({2 * H}, F32);
  fillAccumulators(x, 61, 1000);
  setInt(x, 2, 0);  // 0 inf = NaN
  w.fill([](size_t i) { return 0.01f * static_cast<float>(i + 1); });
  w.set(2, INFINITY);
  w.set(5, NAN);
  sa.fill([](size_t) { return 0.5f; });
  sa.set(1, INFINITY);
  sa.set(3, -INFINITY);
  sa.set(4, NAN);
  bias.fill([](size_t) { return 0.25f; });
  bias.set(6, -INFINITY);
  bias.set(7, INFINITY);
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                std::pair{kStatic, kScaleF32}})
      for (int64_t gs : {int64_t{0}, int64_t{2}})
        for (const Config &c : configs(mode, gs, format)) {
          expectShape(c, {nullptr, nullptr, &x, &w, &sa, &bias}, yd, "non-finite scales");
          expectShape(c, {nullptr, nullptr, &x, &w, &sa}, yd, "non-finite, no bias");
        }
  // Static scales 0, NaN, inf and negative over huge values: 2^31 3.4e38 squared overflows no
  // double, far-left gates reach silu's tail (exp(-d) overflows: -0).
  TensorBuffer big({2, 4}, I32), wb({4}, F32), y({2, 2}, F8), s({2, 1}, F32);
  setInt(big, 0, kI32Min), setInt(big, 1, kI32Max), setInt(big, 2, kI32Max), setInt(big, 3, -3);
  setInt(big, 4, -800), setInt(big, 5, 1), setInt(big, 6, 5), setInt(big, 7, 7);
  wb.set(0, 3e38f), wb.set(1, 1.0f), wb.set(2, 3e38f), wb.set(3, 1.0f);
  for (float sv : {0.0f, NAN, INFINITY, -2.0f, 1e-30f}) {
    s.fill([&](size_t) { return sv; });
    for (const Config &c : configs(kStatic, 0, kScaleF32))
      expectOracle(c, {&y, &s, &big, &wb}, "huge values, static " + std::to_string(sv));
  }
  for (const Config &c : configs(kDynamic, 0, kScaleF32))
    expectShape(c, {nullptr, nullptr, &big, &wb}, I8, "huge values, dynamic");
}

TEST_P(DequantSwigluQuant, SiluRegions) {
  // The cpu device's fast values and where it leaves them to the reference's (its kernel's
  // comment): gates far left (d1 <= -710: exp(-d1) overflows in double, silu -0), between -710
  // and -700 (the reference's value), near -700 (z below 2^-1000 for a small multiplier), right
  // of 36.8 (1 + e^-d1 rounds to 1) and around the exp's clamp at 40, exact zeros (d1, d2 or a
  // smooth scale 0, either sign), and ordinary values; H = 21 so that the row and groups of 3, 7
  // and 21 end inside a vector on every target. d = x itself (no scales): integer gates.
  const size_t R = 4, H = 21;
  TensorBuffer x({R, 2 * H}, I32), smooth({H}, F32);
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < H; ++c) {
      const auto i = static_cast<int64_t>(c);
      int64_t gate = 0, multiplier = 0;
      switch (r) {
        case 0:  // -720 ... -700, multipliers of either sign
          gate = -720 + i, multiplier = (c % 2 ? -3 : 5) * (1 + i);
          break;
        case 1:  // -700 ... -680: silu about 7e-302 and up, times 1 or 2
          gate = -700 + i, multiplier = c % 3 == 0 ? -1 : 2;
          break;
        case 2:  // 30 ... 50, and zeros
          gate = c % 5 == 0 ? 0 : 30 + i, multiplier = c % 7 == 0 ? 0 : (c % 2 ? 9 : -11);
          break;
        default:
          gate = static_cast<int64_t>(signedValue(81, c, 12.0f)),
          multiplier = static_cast<int64_t>(signedValue(82, c, 100.0f));
      }
      setInt(x, r * 2 * H + c, gate);
      setInt(x, r * 2 * H + H + c, multiplier);
    }
  smooth.fill([](size_t i) { return i % 6 == 1 ? -0.0f : (i % 6 == 4 ? 0.0f : 0.5f + i); });
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                std::pair{kStatic, kScaleF32}})
      for (int64_t gs : {int64_t{0}, int64_t{3}, int64_t{7}})
        for (int32_t left : {0, 1}) {
          const Config c{left, mode, gs, format};
          expectShape(c, {nullptr, nullptr, &x}, yd, "silu regions");
          expectShape(c, {nullptr, nullptr, &x, nullptr, nullptr, nullptr, &smooth}, yd,
                      "silu regions, smooth");
        }
}

TEST_P(DequantSwigluQuant, Layouts) {
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kStatic, kScaleF32}})
      for (const Config &c : configs(mode, 4, format)) {
        // Row stride past 2H; strided weight, activation_scale (R, 1) with a row stride, bias.
        TensorBuffer xs({7, 16}, {40, 1}, I32), ws({16}, {2}, F32), as({7, 1}, {3, 1}, F32),
            bs({16}, {-1}, BF16);
        fillAccumulators(xs, 71, 5000);
        ws.fill([](size_t i) { return signedValue(72, i, 0.01f); });
        as.fill([](size_t i) { return 0.1f + 0.05f * static_cast<float>(i); });
        bs.fill([](size_t i) { return signedValue(73, i, 2.0f); });
        expectShape(c, {nullptr, nullptr, &xs, &ws, &as, &bs}, yd, "row stride 40");
        // Column stride 2 and reversed x; y and scale strided.
        TensorBuffer xc({5, 16}, {1, -5}, I32), yc({5, 8}, {11, 1}, yd), sc({5, 2}, {1, 5}, F32);
        fillAccumulators(xc, 74, 3000);
        if (c.mode == kStatic) sc.fill([](size_t i) { return 2.0f * static_cast<float>(i + 1); });
        expectOracle(c, {&yc, &sc, &xc, &ws, nullptr, &bs}, "column-major x");
        // 3-D padded x with activation_scale of its leading dims (2, 3), transposed.
        TensorBuffer x3({2, 3, 16}, paddedStrides({2, 3, 16}), I32), a3({2, 3}, {1, 2}, F32);
        fillAccumulators(x3, 75, 100000);
        a3.fill([](size_t i) { return 1e-3f * static_cast<float>(i + 1); });
        expectShape(c, {nullptr, nullptr, &x3, &ws, &a3}, yd, "3-D");
        // Rank 1: one row, activation_scale () and (1).
        TensorBuffer x1({16}, I32), a0({}, F32), a1({1}, F32), y1({8}, yd), s1({2}, F32);
        fillAccumulators(x1, 76, 50);
        a0.set(0, 0.25f), a1.set(0, 0.25f);
        if (c.mode == kStatic) s1.fill([](size_t) { return 0.5f; });
        expectOracle(c, {&y1, &s1, &x1, &ws, &a0}, "rank 1, activation_scale ()");
        expectOracle(c, {&y1, &s1, &x1, &ws, &a1}, "rank 1, activation_scale (1)");
      }
}

TEST_P(DequantSwigluQuant, ThreadedSize) {
  const size_t R = 512, H = 256, E = 4;
  TensorBuffer x({R, 2 * H}, I32), w({E, 2 * H}, F32), sa({R, 1}, F32), bias({2 * H}, I32);
  TensorBuffer smooth({E, H}, F32), counts({E}, I64);
  fillAccumulators(x, 81, kI32Max / 2);
  w.fill([](size_t i) { return signedValue(82, i, 1e-6f); });
  sa.fill([](size_t i) { return 1e-3f * static_cast<float>(1 + i % 13); });
  for (size_t i = 0; i < 2 * H; ++i) setInt(bias, i, (int64_t(i) - 256) * 12345);
  smooth.fill([](size_t i) { return signedValue(83, i, 2.0f); });
  const int64_t n[] = {100, 0, 211, 150};  // 461 of 512 rows
  for (size_t e = 0; e < E; ++e) setInt(counts, e, n[e]);
  for (infiniDtype_t yd : {I8, F8})
    for (int64_t gs : {int64_t{0}, int64_t{128}}) {
      const Config c{gs ? 0 : 1, kDynamic, gs, gs ? kUe8m0 : kScaleF32};
      expectShape(c, {nullptr, nullptr, &x, &w, &sa, &bias, &smooth, &counts}, yd, "threaded");
    }
}

TEST_P(DequantSwigluQuant, ZeroRows) {
  for (const Config &c : configs(kDynamic, 0, kScaleF32)) {
    TensorBuffer x({0, 16}, I32), sa({0}, F32);
    expectShape(c, {nullptr, nullptr, &x, nullptr, &sa}, I8, "zero rows");
    // H = 0, per token: each row's empty group gets 2^-126.
    TensorBuffer e({3, 0}, I32), y({3, 0}, F8), scale({3, 1}, F32);
    expectOracle(c, {&y, &scale, &e}, "H = 0");
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(scaleBits(scale, i), 0x00800000u);
    Operands null_xy{&y, &scale, &e};  // NULL x and y: no row pointer may be formed from them
    null_xy.empty_as_null = true;
    expectOracle(c, null_xy, "H = 0, NULL x and y");
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(scaleBits(scale, i), 0x00800000u);
  }
}

TEST_P(DequantSwigluQuant, BadCountsWriteNothing) {
  const size_t R = 6, H = 8;
  TensorBuffer x({R, 2 * H}, I32), w({3, 2 * H}, F32), counts({3}, I64);
  fillAccumulators(x, 91, 100);
  w.fill([](size_t) { return 0.5f; });
  const int64_t cases[][3] = {{-1, 2, 2}, {2, 5, 0}, {0, 0, INT64_MAX}, {INT64_MIN, 0, 0}};
  for (const auto &cs : cases)
    for (auto mode : {kDynamic, kStatic}) {
      for (size_t e = 0; e < 3; ++e) setInt(counts, e, cs[e]);
      TensorBuffer y({R, H}, I8), scale({R, 1}, F32);
      poisonBytes(scale);
      EXPECT_EQ(
          run({1, mode, 0, kScaleF32}, {&y, &scale, &x, &w, nullptr, nullptr, nullptr, &counts}),
          INFINI_STATUS_BAD_PARAM);
      EXPECT_NE(error_.find("group_index value"), std::string::npos) << error_;
      for (uint8_t byte : y.storage()) ASSERT_EQ(byte, 0xA5) << "y written";
      for (uint8_t byte : scale.storage()) ASSERT_EQ(byte, 0xA5) << "scale written";
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, DequantSwigluQuant, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test
