// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant, GeluMulQuant and ClippedSwigluQuant (docs/swiglu_quant.md) on every device against
// this file's oracle, in long double and independent of src/exact: z = act(x1) x2 m (clipped:
// min(A, limit) sigmoid(alpha min(A, limit)) (clamp(B, +-limit) + bias) m), each dynamic scale amax
// / qmax rounded to F32 (or up to a power of two), each byte z / s rounded once to nearest even
// with this file's own INT8 and FP8 E4M3 encoders. Every y byte and every dynamic scale's bits must
// equal the oracle's, and every device's must equal cpu_reference's, bit for bit (the bit-identity
// promise). Where the long double value lies within 2^-56 (relative, kTolerance) of a rounding
// midpoint, of the byte grid or of F32 for a scale, the element is skipped and counted (printed):
// in practice only exact midpoints from a gate so large that its activation is x itself in long
// double (gelu(9) x 7.5 = 67.5), whose real value lies just below: there the float64 value
// decides (docs/quantization.md), ties to even, as ExactMidpointsTieToEven checks. Cases: worked by
// hand (zeros, +-qmax, 448 vs 464, FP8 subnormals, -0, the NaN and infinity scales), random signed
// inputs, huge and tiny values, far left tails (also over a static scale 0, where float64's
// underflow to 0 shows: FarTailOverZeroScale), NaN and infinities, every x dtype, both formats,
// dynamic F32 and UE8M0 and static scales (per group, broadcast, 0, negative), smooth scales with
// and without group_index, both gate sides, the three activations, ClippedSwigluQuant's attribute
// sets (defaults, alpha 0, limit +inf, negative alpha and bias, a tight limit) interleaved and
// halved, group sizes, strided / reversed / many-dim layouts, a threaded size, zero rows and H = 0,
// and bad counts (nothing written). Outputs are poisoned before each call.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

using infiniop::bitsOf;
using infiniop::floatOf;

using namespace quant_names;  // NOLINT: the dtypes' and attributes' short names

enum class Act { silu, gelu_erf, gelu_tanh, clipped };

const char *actName(Act a) {
  return a == Act::silu       ? "silu"
         : a == Act::gelu_erf ? "gelu_erf"
         : a == Act::clipped  ? "clipped"
                              : "gelu_tanh";
}

struct Config {
  Act act = Act::silu;
  int32_t activate_left = 1;  // not ClippedSwigluQuant's
  infiniopQuantMode_t mode = kDynamic;
  int64_t group_size = 0;
  infiniopQuantScaleFormat_t format = kScaleF32;
  // ClippedSwigluQuant's (the vendor API's defaults).
  float alpha = 1.702f, limit = 7.0f, bias = 1.0f;
  bool interleaved = true;
};

std::string describe(const Config &c) {
  if (c.act == Act::clipped)
    return "clipped alpha=" + std::to_string(c.alpha) + " limit=" + std::to_string(c.limit) +
           " bias=" + std::to_string(c.bias) + (c.interleaved ? " interleaved" : " halves") +
           (c.mode == kDynamic ? (c.format == kUe8m0 ? " dynamic UE8M0" : " dynamic F32")
                               : " static") +
           " group_size=" + std::to_string(c.group_size);
  return std::string(actName(c.act)) + " left=" + std::to_string(c.activate_left) +
         (c.mode == kDynamic ? (c.format == kUe8m0 ? " dynamic UE8M0" : " dynamic F32")
                             : " static") +
         " group_size=" + std::to_string(c.group_size);
}

// The tensors of one call; smooth and group_index may be NULL.
struct Operands {
  TensorBuffer *y, *scale, *x, *smooth, *group_index;
  bool empty_as_null = false;  // pass NULL for tensors of no elements (the C ABI allows it)
};

// ---- the oracle --------------------------------------------------------------------------------

// The activation in float64, as a float64 evaluation of the formula gives it: only to find where
// it underflows to 0 far left (exp(-x) overflows, erfc underflows).
double activationDouble(Act act, double x) {
  switch (act) {
    case Act::silu:
      return x / (1 + std::exp(-x));
    case Act::gelu_erf:
      return 0.5 * x * std::erfc(-x * 0.70710678118654752440);
    default: {
      const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x / (1 + std::exp(-2 * u));
    }
  }
}

// Whether float64's activation of a finite x < 0 is 0 (Value::zero_in_float64).
bool zeroInFloat64(Act act, long double x) {
  return x < 0 && std::isfinite(x) && activationDouble(act, static_cast<double>(x)) == 0;
}

Value activation(Act act, long double x) {
  if (x == -INFINITY) return {-0.0L};  // the limit: x e^x, x Phi(x) -> -0
  long double value = 0;
  switch (act) {
    case Act::silu:
      value = x / (1 + std::exp(-x));
      break;
    case Act::gelu_erf:  // 0.5 x erfc(-x / sqrt 2): no cancellation in the left tail
      value = 0.5L * x * std::erfc(-x * 0.707106781186547524400844362104849039L);
      break;
    case Act::gelu_tanh: {  // PyTorch: 0.5 x (1 + tanh u) = x / (1 + e^-2u)
      const long double u = 0.797884560802865355879892119868763737L * (x + 0.044715L * x * x * x);
      value = x / (1 + std::exp(-2 * u));
      break;
    }
  }
  if (zeroInFloat64(act, x)) return {-0x1p-16000L, true};
  return {value};
}

// ClippedSwiglu (clamp_mode 0) of (A, B): a = min(A, limit), b = clamp(B, -limit, limit),
// a sigmoid(alpha a) (b + bias); alpha a = -inf gives the limit, a zero of a's sign, and alpha 0
// gives z = 0 even for an infinite a. NaN passes the clamps.
Value clippedGate(const Config &c, long double A, long double B) {
  const long double limit = c.limit;
  const long double a = A > limit ? limit : A;
  const long double b = B > limit ? limit : (B < -limit ? -limit : B);
  const long double z = c.alpha == 0 ? 0.0L : static_cast<long double>(c.alpha) * a;
  const long double v = b + c.bias;
  if (z == -INFINITY) return {std::copysign(0.0L, a) * v};
  // float64's gate a / (1 + e^-z) underflows to 0 for a finite a far left (e^-z overflows, or
  // the quotient is below double's subnormals): a tiny value of a's sign (Value::zero_in_float64).
  const double gate64 = static_cast<double>(a) / (1 + std::exp(-static_cast<double>(z)));
  if (gate64 == 0 && a != 0 && std::isfinite(a))
    return {std::copysign(0x1p-16000L, a) * v, std::isfinite(v)};
  return {a / (1 + std::exp(-z)) * v};
}

Expected oracle(Operands &o, const Config &c) {
  const size_t H = o.x->shape().back() / 2;
  const size_t rows = H ? o.y->numel() / H : o.scale->numel();
  const size_t G = rows ? o.scale->numel() / rows : 0;
  const size_t gs = c.group_size > 0 ? static_cast<size_t>(c.group_size) : H;
  const bool fp8 = o.y->dtype() == F8;
  Expected out = expectedOf(rows, H, G);
  const std::vector<int64_t> counts = countsOf(o.group_index);
  std::vector<Value> z(H);
  for (size_t r = 0; r < rows; ++r) {
    const ptrdiff_t expert = expertOf(counts, r);
    if (expert < 0) continue;  // past the counts: bytes 0, dynamic scale 0
    for (size_t col = 0; col < H; ++col) {
      const long double x1 = o.x->get(r * 2 * H + col), x2 = o.x->get(r * 2 * H + H + col);
      Value a{0};
      if (c.act == Act::clipped) {
        const size_t ia = c.interleaved ? 2 * col : col, ib = c.interleaved ? 2 * col + 1 : H + col;
        a = clippedGate(c, o.x->get(r * 2 * H + ia), o.x->get(r * 2 * H + ib));
      } else {
        a = times(activation(c.act, c.activate_left ? x1 : x2), c.activate_left ? x2 : x1);
      }
      const long double m = o.smooth ? o.smooth->get(static_cast<size_t>(expert) * H + col) : 1.0L;
      z[col] = times(a, m);
    }
    quantizeRow(z, r, G, gs, c.mode == kDynamic, c.format == kUe8m0, fp8, *o.scale, &out);
  }
  return out;
}

// ---- the calls ---------------------------------------------------------------------------------

infiniStatus_t callOp(infiniopHandle_t handle, const Config &c, Operands &o, std::string *error) {
  poisonBytes(*o.y);
  if (c.mode == kDynamic) poisonBytes(*o.scale);
  infiniopTensorDescriptor_t yd = o.y->descriptor(), sd = o.scale->descriptor(),
                             xd = o.x->descriptor();
  infiniopTensorDescriptor_t md = o.smooth ? o.smooth->descriptor() : nullptr;
  infiniopTensorDescriptor_t gd = o.group_index ? o.group_index->descriptor() : nullptr;
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  infiniopSwiGluQuantDescriptor_t silu = nullptr;
  infiniopGeluMulQuantDescriptor_t gelu = nullptr;
  infiniopClippedSwigluQuantDescriptor_t clipped = nullptr;
  if (c.act == Act::clipped)
    status = infiniopCreateClippedSwigluQuantDescriptor(handle, &clipped, yd, sd, xd, md, gd,
                                                        c.alpha, c.limit, c.bias, c.interleaved,
                                                        c.mode, c.group_size, c.format);
  else if (c.act == Act::silu)
    status = infiniopCreateSwiGluQuantDescriptor(handle, &silu, yd, sd, xd, md, gd, c.activate_left,
                                                 c.mode, c.group_size, c.format);
  else
    status = infiniopCreateGeluMulQuantDescriptor(
        handle, &gelu, yd, sd, xd, md, gd,
        c.act == Act::gelu_tanh ? INFINIOP_GELU_APPROXIMATE_TANH : INFINIOP_GELU_APPROXIMATE_NONE,
        c.activate_left, c.mode, c.group_size, c.format);
  *error = infiniopGetLastError();
  for (auto d : {yd, sd, xd, md, gd})
    if (d) infiniopDestroyTensorDescriptor(d);
  if (status != INFINI_STATUS_SUCCESS) return status;
  size_t size = 0;
  EXPECT_EQ(silu   ? infiniopGetSwiGluQuantWorkspaceSize(silu, &size)
            : gelu ? infiniopGetGeluMulQuantWorkspaceSize(gelu, &size)
                   : infiniopGetClippedSwigluQuantWorkspaceSize(clipped, &size),
            INFINI_STATUS_SUCCESS);
  DeviceMirror device(handle);
  device.add(o.y);
  device.add(o.scale);
  device.add(o.x);
  device.add(o.smooth);
  device.add(o.group_index);
  void *ws = device.scratch(size);
  device.passEmptyAsNull(o.empty_as_null);
  status = silu   ? infiniopSwiGluQuant(silu, ws, size, device(o.y), device(o.scale), device(o.x),
                                        device(o.smooth), device(o.group_index), nullptr)
           : gelu ? infiniopGeluMulQuant(gelu, ws, size, device(o.y), device(o.scale), device(o.x),
                                         device(o.smooth), device(o.group_index), nullptr)
                  : infiniopClippedSwigluQuant(clipped, ws, size, device(o.y), device(o.scale),
                                               device(o.x), device(o.smooth), device(o.group_index),
                                               nullptr);
  *error = infiniopGetLastError();
  device.download();
  if (silu) EXPECT_EQ(infiniopDestroySwiGluQuantDescriptor(silu), INFINI_STATUS_SUCCESS);
  if (gelu) EXPECT_EQ(infiniopDestroyGeluMulQuantDescriptor(gelu), INFINI_STATUS_SUCCESS);
  if (clipped)
    EXPECT_EQ(infiniopDestroyClippedSwigluQuantDescriptor(clipped), INFINI_STATUS_SUCCESS);
  return status;
}

// Where y element i came from: x1, x2 (and its group's scale).
std::string inputsOf(Operands &o, size_t i) {
  const size_t H = o.x->shape().back() / 2, r = i / H, col = i % H;
  const size_t G = o.scale->numel() / (o.y->numel() / H);
  char text[160];
  std::snprintf(text, sizeof text, " (H = %zu): x1 %.9g, x2 %.9g, scale %.9g", H,
                o.x->get(r * 2 * H + col), o.x->get(r * 2 * H + H + col),
                o.scale->get(r * G + col / (H / G)));
  return text;
}

class GatedQuant : public DeviceTest {
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
    ASSERT_NO_FATAL_FAILURE(expectOracleBytes(want, *o.y, *o.scale, c.mode == kDynamic,
                                              static_scale,
                                              [&](size_t i) { return inputsOf(o, i); }));
    const size_t n = o.y->numel(), ns = o.scale->numel();
    if (deviceOf(GetParam()) == INFINI_DEVICE_CPU_REFERENCE) return;
    TensorBuffer ref_y = *o.y, ref_scale = *o.scale;
    Operands ref = o;
    ref.y = &ref_y;
    ref.scale = &ref_scale;
    Handle reference(INFINI_DEVICE_CPU_REFERENCE);
    std::string error;
    ASSERT_EQ(callOp(reference.get(), c, ref, &error), INFINI_STATUS_SUCCESS) << error;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(int(byteAt(*o.y, i)), int(byteAt(ref_y, i)))
          << "y element " << i << " vs cpu_reference";
    for (size_t i = 0; i < ns; ++i)
      ASSERT_EQ(scaleBits(*o.scale, i), scaleBits(ref_scale, i))
          << "scale " << i << " vs cpu_reference";
    ASSERT_EQ(o.y->storage(), ref_y.storage()) << "y storage differs from cpu_reference's";
  }

  // The usual shapes: x (rows, 2H), y (rows, H), scale (rows, G).
  void expectShape(const Config &c, TensorBuffer &x, infiniDtype_t ydtype, const std::string &what,
                   TensorBuffer *smooth = nullptr, TensorBuffer *group_index = nullptr) {
    std::vector<size_t> lead(x.shape().begin(), x.shape().end() - 1);
    const size_t H = x.shape().back() / 2;
    const size_t G = c.group_size > 0 ? H / static_cast<size_t>(c.group_size) : 1;
    std::vector<size_t> yshape = lead, sshape = lead;
    yshape.push_back(H);
    sshape.push_back(G);
    TensorBuffer y(yshape, ydtype), scale(sshape, F32);
    if (c.mode == kStatic)
      scale.fill([](size_t i) { return 0.03125f * static_cast<float>(1 + i % 5); });
    expectOracle(c, {&y, &scale, &x, smooth, group_index}, what);
  }

  // The elements skipped at a midpoint, reported (a value exactly at one in long double, from a
  // gate whose activation rounds to x itself, is one: float64 decides there, as
  // ExactMidpointsTieToEven checks).
  void TearDown() override {
    if (skipped_) std::printf("GatedQuant: %zu elements skipped at a midpoint\n", skipped_);
    RecordProperty("skipped_at_midpoint", static_cast<int>(skipped_));
    DeviceTest::TearDown();
  }

  std::string error_;
  size_t skipped_ = 0;
};

// Every config of the three activations, both formats and both gate sides.
std::vector<Config> configs(infiniopQuantMode_t mode, int64_t group_size,
                            infiniopQuantScaleFormat_t format) {
  std::vector<Config> out;
  for (Act act : {Act::silu, Act::gelu_erf, Act::gelu_tanh})
    for (int32_t left : {0, 1}) out.push_back({act, left, mode, group_size, format});
  return out;
}

// The attribute sets: the vendor's defaults, alpha 0, limit +inf, a negative alpha and bias, and a
// tight limit that clips most inputs; each split.
std::vector<Config> clippedConfigs(infiniopQuantMode_t mode, int64_t group_size,
                                   infiniopQuantScaleFormat_t format) {
  struct Attributes {
    float alpha, limit, bias;
  };
  const Attributes sets[] = {{1.702f, 7.0f, 1.0f},
                             {0.0f, 7.0f, 1.0f},
                             {1.702f, INFINITY, 1.0f},
                             {-1.5f, 3.0f, -0.5f},
                             {40.0f, 0.5f, 0.0f}};
  std::vector<Config> out;
  for (const Attributes &a : sets)
    for (bool interleaved : {true, false})
      out.push_back(
          {Act::clipped, 1, mode, group_size, format, a.alpha, a.limit, a.bias, interleaved});
  return out;
}

// SwiGluQuant's and GeluMulQuant's configs, then ClippedSwigluQuant's: the cases below run all
// three operators.
std::vector<Config> everyOp(infiniopQuantMode_t mode, int64_t group_size,
                            infiniopQuantScaleFormat_t format) {
  std::vector<Config> out = configs(mode, group_size, format);
  for (const Config &c : clippedConfigs(mode, group_size, format)) out.push_back(c);
  return out;
}

TEST_P(GatedQuant, ByHand) {
  // One element (H = 1), static scale s: silu(20) = 20 (1 - 2.1e-9) over s = 20 and silu(40) =
  // 40 (1 - 4.2e-18) over s = 40 2^9 give x2 (1 - tiny) and x2 2^-9 (1 - tiny): just below the
  // values, far from every midpoint.
  struct Row {
    float x1, x2, s;
    uint8_t int8, fp8;
  };
  const Row rows[] = {
      {0.0f, 3.0f, 20.0f, 0, 0x00},       // silu(0) = 0
      {-0.0f, 3.0f, 20.0f, 0, 0x80},      // -0: FP8 keeps the sign, INT8 has none
      {20.0f, 3.0f, 20.0f, 3, 0x44},      // 3 = 1.5 2^1
      {20.0f, 60.0f, 20.0f, 60, 0x67},    // 60 = 1.875 2^5
      {20.0f, 127.0f, 20.0f, 127, 0x70},  // INT8's +qmax; FP8: 128 (the 120 | 128 step)
      {20.0f, -127.0f, 20.0f, 0x81, 0xf0},
      {20.0f, 448.0f, 20.0f, 127, 0x7e},  // FP8 +qmax
      {20.0f, 464.0f, 20.0f, 127, 0x7e},  // 464 (448 + half a step) saturates
      {20.0f, -1000.0f, 20.0f, 0x81, 0xfe},
      {20.0f, 431.0f, 20.0f, 127, 0x7d},  // 431 -> 416 (below the 432 midpoint)
      {20.0f, 433.0f, 20.0f, 127, 0x7e},  // 433 -> 448
      {40.0f, 1.0f, 20480.0f, 0, 0x01},   // 2^-9, FP8's smallest subnormal
      {40.0f, 3.0f, 20480.0f, 0, 0x03},
      {40.0f, 7.0f, 20480.0f, 0, 0x07},
      {40.0f, 8.0f, 20480.0f, 0, 0x08},   // 2^-6, the smallest normal
      {40.0f, -5.0f, 20480.0f, 0, 0x85},  // INT8: -5 2^-9 rounds to 0
      {40.0f, 0.75f, 20480.0f, 0, 0x01},  // 0.75 2^-9 rounds up
  };
  for (const Row &row : rows) {
    for (infiniDtype_t yd : {I8, F8}) {
      TensorBuffer x({1, 2}, F32), y({1, 1}, yd), scale({1, 1}, F32);
      x.set(0, row.x1);
      x.set(1, row.x2);
      scale.set(0, row.s);
      const Config c{Act::silu, 1, kStatic, 0, kScaleF32};
      expectOracle(c, {&y, &scale, &x, nullptr, nullptr},
                   "by hand x1=" + std::to_string(row.x1) + " x2=" + std::to_string(row.x2));
      const uint8_t want = yd == I8 ? row.int8 : row.fp8;
      EXPECT_EQ(int(byteAt(y, 0)), int(want)) << row.x1 << " " << row.x2 << " " << row.s;
    }
  }
  // Dynamic: a row of zeros gets 2^-126 and bytes 0; a row whose amax is z = silu(20) 127 gets
  // s = silu(20) (127 / 127), rounded to F32, and its amax byte is 127 (or FP8's 448-scale).
  TensorBuffer x({2, 8}, F32), y({2, 4}, I8), scale({2, 1}, F32);
  for (size_t i = 0; i < 4; ++i) x.set(i, 0.0f), x.set(4 + i, static_cast<float>(i) - 1.5f);
  const float second[] = {20, 20, 20, -20, 127, 63.5f, -127, 1};
  for (size_t i = 0; i < 8; ++i) x.set(8 + i, second[i]);
  const Config dyn{Act::silu, 1, kDynamic, 0, kScaleF32};
  expectOracle(dyn, {&y, &scale, &x, nullptr, nullptr}, "dynamic by hand");
  EXPECT_EQ(scaleBits(scale, 0), 0x00800000u);  // 2^-126
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(byteAt(y, i), 0) << i;
  EXPECT_EQ(int(byteAt(y, 4)), 127);
  EXPECT_EQ(int(byteAt(y, 6)), 0x81);
  EXPECT_NEAR(scale.get(1), 20.0f, 1e-5f);
  // UE8M0: amax = 127 silu(20) -> 2^ceil(log2(silu(20))) = 32.
  const Config ue{Act::silu, 1, kDynamic, 0, kUe8m0};
  expectOracle(ue, {&y, &scale, &x, nullptr, nullptr}, "UE8M0 by hand");
  EXPECT_EQ(scale.get(1), 32.0f);
  EXPECT_EQ(scale.get(0), 0x1p-126f);
}

TEST_P(GatedQuant, RandomEveryDtype) {
  uint64_t seed = 1;
  for (infiniDtype_t xd : kFloatDtypes) {
    if (isDeviceMemory(GetParam()) && xd == BF16) continue;  // staged: fewer dtypes
    for (infiniDtype_t yd : {I8, F8})
      for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                  std::pair{kStatic, kScaleF32}})
        for (int64_t gs : {int64_t{0}, int64_t{4}})
          for (const Config &c : everyOp(mode, gs, format)) {
            TensorBuffer x({7, 32}, xd);
            ++seed;
            x.fill([&](size_t i) { return signedValue(seed, i, 10.0f); });
            expectShape(c, x, yd, "random " + std::string(infiniop::dtypeName(xd)));
          }
  }
}

TEST_P(GatedQuant, HugeTinyAndTails) {
  // Per x dtype: +-1e4 (F16: 65504 max), F32 +-1e30 (the dynamic scale overflows: +inf), near 0,
  // and far left tails x1 < -90 (silu and gelu underflow double there: the values are tiny but
  // not 0, and their sign shows in FP8's -0).
  for (infiniDtype_t xd : kFloatDtypes)
    for (infiniDtype_t yd : {I8, F8})
      for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                  std::pair{kStatic, kScaleF32}})
        for (const Config &c : everyOp(mode, 8, format)) {
          TensorBuffer x({6, 32}, xd);
          const float big = xd == F32 ? 1e30f : 1e4f;
          x.fill([&](size_t i) {
            const size_t r = i / 32, col = i % 32;
            const float sign = (i * 7 + r) % 3 == 0 ? -1.0f : 1.0f;
            switch (r) {
              case 0:
                return sign * 1e4f * (1 + static_cast<float>(col) / 64);
              case 1:
                return sign * big / (1 + static_cast<float>(col));
              case 2:
                return sign * 1e-30f * static_cast<float>(col + 1);  // F16: 0 or subnormal
              case 3:  // far left gate inputs, ordinary multipliers (either side)
                return col % 16 < 8 ? -90.0f - 13.0f * static_cast<float>(col)
                                    : sign * static_cast<float>(col);
              case 4:
                return col % 16 < 8 ? -1e4f * static_cast<float>(col % 8 + 1) : sign * 3.0f;
              default:
                return signedValue(r, col, col % 2 ? 1e3f : 1e-3f);
            }
          });
          expectShape(c, x, yd, "huge/tiny " + std::string(infiniop::dtypeName(xd)));
        }
}

TEST_P(GatedQuant, NanAndInfinities) {
  // Row 0: a NaN in one group (its scale 0x7FC00000, all its bytes NaN's); row 1: +inf x2 (scale
  // +inf, finite values +-0, the infinity NaN's); row 2: -inf x1 (the limit -0, times x2) and
  // +inf x1 times 0 (NaN); row 3: -inf x2 with a far-left x1 (-inf); row 4: ordinary.
  const float nan = NAN, inf = INFINITY;
  for (infiniDtype_t xd : kFloatDtypes)
    for (infiniDtype_t yd : {I8, F8})
      for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                  std::pair{kStatic, kScaleF32}})
        for (int64_t gs : {int64_t{0}, int64_t{4}})
          for (const Config &c : everyOp(mode, gs, format)) {
            TensorBuffer x({5, 16}, xd);
            x.fill([&](size_t i) { return signedValue(77, i, 4.0f); });
            const size_t g = c.activate_left ? 0 : 8, m = c.activate_left ? 8 : 0;
            x.set(0 * 16 + g + 1, nan);
            x.set(1 * 16 + m + 2, inf);
            x.set(1 * 16 + m + 6, -inf);
            x.set(2 * 16 + g + 0, -inf);
            x.set(2 * 16 + g + 3, inf);
            x.set(2 * 16 + m + 3, 0.0f);
            x.set(2 * 16 + g + 5, inf);
            x.set(3 * 16 + g + 2, -200.0f);
            x.set(3 * 16 + m + 2, -inf);
            x.set(3 * 16 + g + 7, nan);
            x.set(3 * 16 + m + 7, inf);
            expectShape(c, x, yd, "nan/inf " + std::string(infiniop::dtypeName(xd)));
          }
}

TEST_P(GatedQuant, NanAndInfinityScalesByHand) {
  // docs/swiglu_quant.md: a NaN in the group makes its scale 0x7FC00000 and every byte NaN's (0,
  // 0x7F); an infinite z makes it +inf, the finite values +-0 (FP8 keeps the sign) and the
  // infinite ones NaN's (inf / inf); amax / qmax past F32's range is +inf too.
  TensorBuffer x({3, 4}, F32);
  const float v[] = {NAN,  1.0f, 2.0f,     -3.0f,  // row 0: x1 NaN, 1; x2 2, -3
                     1.0f, 2.0f, INFINITY, -3.0f, 1e4f, -20.0f, 3e38f, 3e38f};
  for (size_t i = 0; i < 12; ++i) x.set(i, v[i]);
  for (infiniDtype_t yd : {I8, F8})
    for (auto format : {kScaleF32, kUe8m0}) {
      TensorBuffer y({3, 2}, yd), scale({3, 1}, F32);
      const Config c{Act::silu, 1, kDynamic, 0, format};
      expectOracle(c, {&y, &scale, &x, nullptr, nullptr}, "NaN and inf by hand");
      const uint8_t nan_byte = yd == I8 ? 0 : 0x7f;
      EXPECT_EQ(scaleBits(scale, 0), 0x7fc00000u);
      EXPECT_EQ(byteAt(y, 0), nan_byte);
      EXPECT_EQ(byteAt(y, 1), nan_byte);
      EXPECT_EQ(scaleBits(scale, 1), 0x7f800000u);   // +inf
      EXPECT_EQ(byteAt(y, 2), nan_byte);             // inf / inf
      EXPECT_EQ(byteAt(y, 3), yd == I8 ? 0 : 0x80);  // silu(2) (-3) / inf = -0
      EXPECT_EQ(scaleBits(scale, 2), 0x7f800000u);   // 1e4 x 3e38 / qmax: past F32
      EXPECT_EQ(byteAt(y, 4), 0);
      EXPECT_EQ(byteAt(y, 5), yd == I8 ? 0 : 0x80);
    }
}

TEST_P(GatedQuant, StaticScales) {
  for (infiniDtype_t yd : {I8, F8})
    for (const Config &c : everyOp(kStatic, 4, kScaleF32)) {
      TensorBuffer x({6, 16}, F32);
      x.fill([&](size_t i) { return signedValue(5, i, 8.0f); });
      // Per group, with 0, negative, tiny and huge scales among them.
      TensorBuffer y({6, 8}, yd), scale({6, 2}, F32);
      const float values[] = {0.25f, 0.0f,      -0.5f, 1e-30f, 1e30f,  -0.0f,
                              3.0f,  0x1p-149f, -7.0f, 0.01f,  100.0f, 1.0f};
      scale.fill([&](size_t i) { return values[i]; });
      expectOracle(c, {&y, &scale, &x, nullptr, nullptr}, "per-group static");
      // One scale broadcast (stride 0) to every row and group: per-tensor.
      for (float s : {0.0625f, 0.0f, -0.125f}) {
        TensorBuffer bcast({6, 2}, {0, 0}, F32);
        bcast.set(0, s);
        expectOracle(c, {&y, &bcast, &x, nullptr, nullptr}, "broadcast " + std::to_string(s));
      }
      // A column of scales broadcast over the rows (stride 0 on rows).
      TensorBuffer per_group({6, 2}, {0, 1}, F32);
      per_group.set(0, 0.5f);
      per_group.set(1, -2.0f);
      expectOracle(c, {&y, &per_group, &x, nullptr, nullptr}, "row-broadcast");
    }
}

TEST_P(GatedQuant, ExactMidpointsTieToEven) {
  // gelu_tanh(9) = 9 (1 - 1.4e-29), gelu_erf(10) = 10 (1 - 7.6e-24), gelu_tanh(8) = 8 (1 - 5e-22),
  // silu(64) = 64 (1 - 1.6e-28): the products below are exact midpoints in float64 (and long
  // double), though truly just below them; the float64 value decides (docs/quantization.md), ties
  // to even, as PyTorch's float64 does. INT8: 67.5 -> 68. FP8: 76 (the 72 | 80 midpoint) -> 80 =
  // 0x6A; 67.5 -> 64 = 0x68 (no midpoint). The oracle skips these (ambiguous to it).
  struct Case {
    Act act;
    float x1, x2;
    uint8_t int8, fp8;
  };
  const Case cases[] = {
      {Act::gelu_tanh, 9.0f, 7.5f, 68, 0x68},
      {Act::gelu_erf, 10.0f, 6.75f, 68, 0x68},
      {Act::gelu_tanh, 8.0f, 9.5f, 76, 0x6a},
      {Act::silu, 64.0f, 1.0546875f, 68, 0x68},
  };
  for (const Case &k : cases)
    for (int32_t left : {0, 1})
      for (infiniDtype_t yd : {I8, F8}) {
        TensorBuffer x({1, 2}, F32), y({1, 1}, yd), scale({1, 1}, F32);
        x.set(left ? 0 : 1, k.x1);
        x.set(left ? 1 : 0, k.x2);
        scale.set(0, 1.0f);
        const Config c{k.act, left, kStatic, 0, kScaleF32};
        expectOracle(c, {&y, &scale, &x, nullptr, nullptr}, "float64 midpoint");
        EXPECT_EQ(int(byteAt(y, 0)), int(yd == I8 ? k.int8 : k.fp8)) << k.x1 << " " << k.x2;
      }
}

TEST_P(GatedQuant, ScaleCandidatesOfWholeGroups) {
  // Groups of 128 (whole vectors on every target). The cpu device takes a group's dynamic scale
  // from finer values of its amax candidates (the lanes within 2^-16 of the largest |p m|) and
  // checks that scale's rounding. Row 0: random, one candidate a group. Row 1: group 0 two
  // candidates of equal |z| and either sign; group 1 silu(64) 7 = 448 (1 - 1.6e-28), whose UE8M0
  // FP8 scale is just below a power of two (the doubles decide). Row 2: group 0 every lane equal
  // (128 candidates), group 1 all zeros (scale 0).
  constexpr size_t H = 256;
  for (infiniDtype_t xd : {BF16, F16})
    for (infiniDtype_t yd : {I8, F8})
      for (auto format : {kScaleF32, kUe8m0})
        for (Act act : {Act::silu, Act::gelu_erf}) {
          TensorBuffer x({3, 2 * H}, xd);
          x.fill([&](size_t i) {
            const size_t r = i / (2 * H), col = i % (2 * H), h = col % H;
            const bool gate = col < H;
            if (r == 0) return signedValue(7, i, 10.0f);
            if (r == 2) return h < 128 ? (gate ? 2.0f : 3.0f) : 0.0f;
            if (h == 5 || h == 77 || h == 130) return gate ? 64.0f : (h == 77 ? -7.0f : 7.0f);
            return gate ? signedValue(8, i, 4.0f) : 1.0f;
          });
          const Config c{act, 1, kDynamic, 128, format};
          expectShape(c, x, yd, "scale candidates " + std::string(infiniop::dtypeName(xd)));
        }
}

TEST_P(GatedQuant, FarTailOverZeroScale) {
  // A far-left gate input whose float64 activation underflows to -0 (silu from about -710,
  // gelu erf from about -38.5, gelu tanh from about -20) gives 0 / 0, NaN's byte (0, 0x7F); where
  // it does not (silu(-100) = -3.7e-42), z / 0 is -+inf, saturated.
  for (infiniDtype_t yd : {I8, F8})
    for (const Config &c : everyOp(kStatic, 0, kScaleF32)) {
      TensorBuffer x({4, 8}, F32), y({4, 4}, yd), scale({4, 1}, {0, 1}, F32);
      const float gates[] = {-1e4f, -800.0f, -40.0f, -100.0f};
      x.fill([&](size_t i) {
        const size_t col = i % 8;
        const bool gate = c.activate_left ? col < 4 : col >= 4;
        return gate ? gates[(i / 8 + col) % 4] : (col % 2 ? 3.0f : -0.5f);
      });
      scale.set(0, 0.0f);
      expectOracle(c, {&y, &scale, &x, nullptr, nullptr}, "far tail over 0");
    }
}

TEST_P(GatedQuant, SmoothScales) {
  const size_t R = 9, H = 16, E = 3;
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                std::pair{kStatic, kScaleF32}})
      for (int64_t gs : {int64_t{0}, int64_t{8}})
        for (const Config &c : everyOp(mode, gs, format)) {
          TensorBuffer x({R, 2 * H}, BF16);
          x.fill([&](size_t i) { return signedValue(9, i, 6.0f); });
          TensorBuffer smooth({H}, F32);
          smooth.fill([](size_t i) { return signedValue(3, i, 2.0f); });
          smooth.set(3, 0.0f);
          smooth.set(4, -1.0f);
          expectShape(c, x, yd, "smooth (H)", &smooth);
          // (E, H) + counts: 2, 0, 4 -> rows 0-1 take row 0, 2-5 row 2, 6-8 past the sum.
          TensorBuffer smooth_e({E, H}, F32), counts({E}, I64);
          smooth_e.fill([](size_t i) { return signedValue(4, i, 3.0f); });
          setInt(counts, 0, 2), setInt(counts, 1, 0), setInt(counts, 2, 4);
          expectShape(c, x, yd, "smooth (E, H) + group_index", &smooth_e, &counts);
          // Counts summing to the rows exactly, and all zeros (every row past the sum).
          setInt(counts, 0, 3), setInt(counts, 1, 3), setInt(counts, 2, 3);
          expectShape(c, x, yd, "counts = rows", &smooth_e, &counts);
          setInt(counts, 0, 0), setInt(counts, 1, 0), setInt(counts, 2, 0);
          expectShape(c, x, yd, "counts all 0", &smooth_e, &counts);
        }
}

TEST_P(GatedQuant, Layouts) {
  for (infiniDtype_t yd : {I8, F8})
    for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kStatic, kScaleF32}})
      for (const Config &c : everyOp(mode, 4, format)) {
        // Leading dims transposed: x (3, 5, 16) whose first dim moves faster than the second.
        TensorBuffer xt({3, 5, 16}, {16, 48, 1}, F16);
        xt.fill([](size_t i) { return signedValue(11, i, 5.0f); });
        expectShape(c, xt, yd, "transposed leading dims");
        // Row stride past 2H, strided y and scale.
        TensorBuffer xs({7, 16}, {40, 1}, F32);
        xs.fill([](size_t i) { return signedValue(12, i, 5.0f); });
        TensorBuffer ys({7, 8}, {11, 1}, yd), ss({7, 2}, {1, 7}, F32);
        if (c.mode == kStatic) ss.fill([](size_t i) { return 0.02f * static_cast<float>(i + 1); });
        expectOracle(c, {&ys, &ss, &xs, nullptr, nullptr}, "row stride 40");
        // Reversed strides everywhere.
        TensorBuffer xr({6, 16}, {-16, -1}, BF16), yr({6, 8}, {-8, -1}, yd),
            sr({6, 2}, {-2, -1}, F32);
        xr.fill([](size_t i) { return signedValue(13, i, 5.0f); });
        if (c.mode == kStatic) sr.fill([](size_t i) { return 0.05f * static_cast<float>(i + 1); });
        expectOracle(c, {&yr, &sr, &xr, nullptr, nullptr}, "reversed");
        // 3-D and 4-D, padded (nothing merges).
        TensorBuffer x3({2, 3, 16}, paddedStrides({2, 3, 16}), F32),
            x4({2, 2, 3, 16}, paddedStrides({2, 2, 3, 16}), F16);
        x3.fill([](size_t i) { return signedValue(14, i, 5.0f); });
        x4.fill([](size_t i) { return signedValue(15, i, 5.0f); });
        expectShape(c, x3, yd, "3-D");
        expectShape(c, x4, yd, "4-D");
        // x's columns strided (stride 2): ClippedSwigluQuant's interleaved pairs 4 elements apart.
        TensorBuffer xc({4, 16}, {40, 2}, F32);
        xc.fill([](size_t i) { return signedValue(17, i, 9.0f); });
        expectShape(c, xc, yd, "column stride 2");
        // Rank 1: one row.
        TensorBuffer x1({16}, F32);
        x1.fill([](size_t i) { return signedValue(16, i, 5.0f); });
        TensorBuffer y1({8}, yd), s1({2}, F32);
        if (c.mode == kStatic) s1.fill([](size_t) { return 0.03f; });
        expectOracle(c, {&y1, &s1, &x1, nullptr, nullptr}, "rank 1");
      }
}

TEST_P(GatedQuant, ThreadedSize) {
  // H = 256, 512 rows: the cpu device splits rows over threads.
  const size_t R = 512, H = 256;
  for (infiniDtype_t yd : {I8, F8})
    for (int64_t gs : {int64_t{0}, int64_t{2}, int64_t{128}})
      for (Act act : {Act::silu, Act::gelu_erf, Act::gelu_tanh, Act::clipped}) {
        Config c{act, gs == 2 ? 0 : 1, kDynamic, gs, gs == 128 ? kUe8m0 : kScaleF32};
        c.interleaved = gs != 2;
        // ClippedSwigluQuant: 16-bit x of this size takes the cpu device's gate table.
        const infiniDtype_t xd = act == Act::clipped ? (gs == 128 ? F16 : BF16) : F32;
        TensorBuffer x({R, 2 * H}, act == Act::silu ? BF16 : xd);
        x.fill([&](size_t i) { return signedValue(100 + static_cast<uint64_t>(gs), i, 10.0f); });
        expectShape(c, x, yd, "threaded");
      }
  // Smooth (E, H) + group_index at the threaded size, static scales per group.
  TensorBuffer x({R, 2 * H}, F16), smooth({4, H}, F32), counts({4}, I64);
  x.fill([](size_t i) { return signedValue(200, i, 10.0f); });
  smooth.fill([](size_t i) { return signedValue(201, i, 2.0f); });
  const int64_t n[] = {100, 0, 211, 150};  // 461 of 512 rows
  for (size_t e = 0; e < 4; ++e) setInt(counts, e, n[e]);
  for (auto mode : {kDynamic, kStatic})
    expectShape({Act::gelu_tanh, 1, mode, 128, kScaleF32}, x, F8, "threaded smooth", &smooth,
                &counts);
}

TEST_P(GatedQuant, ZeroRowsAndEmptyH) {
  for (infiniDtype_t yd : {I8, F8})
    for (const Config &c : everyOp(kDynamic, 0, kScaleF32)) {
      TensorBuffer x({0, 16}, F32);
      expectShape(c, x, yd, "zero rows");
      TensorBuffer x3({4, 0, 8}, F16);
      expectShape(c, x3, yd, "zero rows, 3-D");
      // H = 0, per-token: each row's empty group gets 2^-126.
      TensorBuffer e({3, 0}, F32), y({3, 0}, yd), scale({3, 1}, F32);
      expectOracle(c, {&y, &scale, &e, nullptr, nullptr}, "H = 0");
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(scaleBits(scale, i), 0x00800000u);
      // The same with 16-bit x (the cpu device's vector path) and NULL x and y: no row pointer
      // may be formed from them (a fuzz finding, with interleaved x).
      for (infiniDtype_t xd : {F16, BF16}) {
        TensorBuffer e16({3, 0}, xd);
        Operands null_xy{&y, &scale, &e16, nullptr, nullptr};
        null_xy.empty_as_null = true;
        expectOracle(c, null_xy, "H = 0, NULL x and y");
        for (size_t i = 0; i < 3; ++i) EXPECT_EQ(scaleBits(scale, i), 0x00800000u);
      }
      Config ue = c;
      ue.format = kUe8m0;
      expectOracle(ue, {&y, &scale, &e, nullptr, nullptr}, "H = 0 UE8M0");
      // H = 0 with group_size 4: no groups at all.
      Config grouped = c;
      grouped.group_size = 4;
      TensorBuffer none({3, 0}, F32);
      expectOracle(grouped, {&y, &none, &e, nullptr, nullptr}, "H = 0, no groups");
    }
}

TEST_P(GatedQuant, BadCountsWriteNothing) {
  const size_t R = 6, H = 8;
  TensorBuffer x({R, 2 * H}, F32), smooth({3, H}, F32), counts({3}, I64);
  x.fill([](size_t i) { return signedValue(21, i, 3.0f); });
  smooth.fill([](size_t) { return 1.0f; });
  const int64_t cases[][3] = {{-1, 2, 2},        {2, 5, 0},         {7, 0, 0},
                              {0, 0, INT64_MAX}, {INT64_MIN, 0, 0}, {3, 3, 1}};
  for (const auto &cs : cases)
    for (auto mode : {kDynamic, kStatic})
      for (Act act : {Act::silu, Act::gelu_erf}) {
        for (size_t e = 0; e < 3; ++e) setInt(counts, e, cs[e]);
        TensorBuffer y({R, H}, F8), scale({R, 1}, F32);
        poisonBytes(scale);
        const Config c{act, 1, mode, 0, kScaleF32};
        EXPECT_EQ(run(c, {&y, &scale, &x, &smooth, &counts}), INFINI_STATUS_BAD_PARAM)
            << cs[0] << " " << cs[1] << " " << cs[2];
        EXPECT_NE(error_.find("group_index value"), std::string::npos) << error_;
        for (uint8_t byte : y.storage()) ASSERT_EQ(byte, 0xA5) << "y written";
        for (uint8_t byte : scale.storage()) ASSERT_EQ(byte, 0xA5) << "scale written";
      }
}

// ---- ClippedSwigluQuant ---------------------------------------------------------------------

TEST_P(GatedQuant, ClippedByHand) {
  // One (A, B) pair (H = 1), static scale 1: values worked by hand.
  struct Row {
    float alpha, limit, bias, A, B;
    uint8_t int8, fp8;
  };
  const Row rows[] = {
      {0.0f, 7.0f, 1.0f, 4.0f, 1.0f, 4, 0x48},           // 4 0.5 (1 + 1) = 4
      {0.0f, 7.0f, 1.0f, 100.0f, 100.0f, 28, 0x5e},      // both clipped: 7 0.5 (7 + 1) = 28
      {0.0f, 7.0f, 1.0f, 100.0f, -100.0f, 0xeb, 0xda},   // 7 0.5 (-7 + 1) = -21: FP8's tie -> 20
      {0.0f, 7.0f, 1.0f, -INFINITY, 1.0f, 0x81, 0xfe},   // alpha 0: -inf 0.5 2 = -inf, saturated
      {1.702f, INFINITY, 1.0f, 1e30f, 2.0f, 127, 0x7e},  // no clipping: 3e30, saturated
      {1.702f, 7.0f, 1.0f, -INFINITY, 2.0f, 0, 0x80},    // the gate's limit -0: -0 3
      {1.702f, 7.0f, 0.0f, 3.0f, 0.0f, 0, 0x00},         // b + bias = 0
  };
  for (const Row &row : rows)
    for (infiniDtype_t yd : {I8, F8})
      for (bool interleaved : {true, false}) {
        TensorBuffer x({1, 2}, F32), y({1, 1}, yd), scale({1, 1}, F32);
        x.set(0, row.A);
        x.set(1, row.B);
        scale.set(0, 1.0f);
        const Config c{Act::clipped, 1,         kStatic,  0,          kScaleF32,
                       row.alpha,    row.limit, row.bias, interleaved};
        expectOracle(c, {&y, &scale, &x, nullptr, nullptr},
                     "by hand A=" + std::to_string(row.A) + " B=" + std::to_string(row.B));
        EXPECT_EQ(int(byteAt(y, 0)), int(yd == I8 ? row.int8 : row.fp8)) << row.A << " " << row.B;
      }
  // Halves against interleaved: x = (A0, A1, B0, B1) read interleaved is (A0, B0), (A1, B1) =
  // (x0, x1), (x2, x3). alpha 0, limit 7, bias 1: halves 2 0.5 (4 + 1) = 5, 3 0.5 (-8 + 1) ->
  // -7 clipped: 3 0.5 (-6) = -9; interleaved: 2 0.5 (3 + 1) = 4, 4 0.5 (-7 + 1) = -12.
  TensorBuffer x({1, 4}, F32), y({1, 2}, I8), scale({1, 1}, F32);
  const float v[] = {2.0f, 3.0f, 4.0f, -8.0f};
  for (size_t i = 0; i < 4; ++i) x.set(i, v[i]);
  scale.set(0, 1.0f);
  for (bool interleaved : {false, true}) {
    const Config c{Act::clipped, 1, kStatic, 0, kScaleF32, 0.0f, 7.0f, 1.0f, interleaved};
    expectOracle(c, {&y, &scale, &x, nullptr, nullptr}, "split");
    EXPECT_EQ(int(static_cast<int8_t>(byteAt(y, 0))), interleaved ? 4 : 5);
    EXPECT_EQ(int(static_cast<int8_t>(byteAt(y, 1))), interleaved ? -12 : -9);
  }
}

TEST_P(GatedQuant, ClippedSixteenBitEdges) {
  // 16-bit x (the cpu device's gate-table path): b + bias exactly 0 (B = -bias, +-0), A = +-0,
  // A and B beyond the limit, gates far left (F32-subnormal or 0 in float64: the double decides),
  // NaN and infinities, ordinary values; both splits, contiguous and with x's columns strided,
  // with and without smooth scales.
  const float edges[] = {0.0f,   -0.0f, -1.0f,  1.0f,     7.0f,      -7.0f,    7.5f,
                         -8.0f,  100.f, -60.0f, -100.0f,  -500.0f,   -3e4f,    0.5f,
                         -0.75f, 3.0f,  NAN,    INFINITY, -INFINITY, 2.0f / 3, -1.25f};
  const size_t n = sizeof edges / sizeof edges[0];
  for (infiniDtype_t xd : {BF16, F16})
    for (infiniDtype_t yd : {I8, F8})
      for (auto [mode, format] : {std::pair{kDynamic, kScaleF32}, std::pair{kDynamic, kUe8m0},
                                  std::pair{kStatic, kScaleF32}})
        for (int64_t gs : {int64_t{0}, int64_t{8}})
          for (bool interleaved : {true, false}) {
            const Config c{Act::clipped, 1, mode, gs, format, 1.702f, 7.0f, 1.0f, interleaved};
            // every (A, B) pair of edges, wherever the split puts them: 21 x 21 = 441 pairs in 28
            // rows of 16 (the rest ordinary)
            TensorBuffer x({28, 32}, xd), xs({28, 32}, {80, 2}, xd), smooth({16}, F32);
            const auto value = [&](size_t i) {
              const size_t r = i / 32, col = i % 32;
              const size_t h = interleaved ? col / 2 : col % 16, pair = r * 16 + h;
              const bool is_b = interleaved ? col % 2 == 1 : col >= 16;
              if (pair >= n * n) return signedValue(3, i, 5.0f);
              return is_b ? edges[pair % n] : edges[pair / n];
            };
            x.fill(value);
            xs.fill(value);
            smooth.fill([](size_t i) { return 0.25f + 0.5f * static_cast<float>(i % 3); });
            expectShape(c, x, yd, "16-bit edges " + std::string(infiniop::dtypeName(xd)));
            expectShape(c, xs, yd, "16-bit edges, column stride 2");
            expectShape(c, x, yd, "16-bit edges, smooth", &smooth);
          }
}

TEST_P(GatedQuant, ClippedManyAttributeSets) {
  // More attribute sets than the cpu device keeps gate tables for (clipped_gate_table.h's 16):
  // those beyond take its double path, the same bytes.
  for (int k = 0; k < 24; ++k)
    for (infiniDtype_t xd : {BF16, F16}) {
      const Config c{Act::clipped,
                     1,
                     kDynamic,
                     16,
                     kScaleF32,
                     0.25f + 0.125f * static_cast<float>(k),
                     4.0f + static_cast<float>(k % 5),
                     k % 3 == 0 ? 0.0f : -0.5f,
                     k % 2 == 0};
      TensorBuffer x({4, 64}, xd);
      x.fill([&](size_t i) { return signedValue(300 + static_cast<uint64_t>(k), i, 12.0f); });
      expectShape(c, x, k % 2 ? I8 : F8, "attribute set " + std::to_string(k));
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, GatedQuant, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test
