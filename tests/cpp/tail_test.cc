// SPDX-License-Identifier: Apache-2.0
// The activations' far-left tails (issue 27 item 4; devices/cpu/math-inl.h "The far-left tail"):
// where exp(-w) leaves F32's normal range (silu x < -87, gelu_tanh x < -9.9, gelu_erf x < -13.19,
// ClippedSwiglu alpha a < -87) the kernels compute the value and derivative scaled by 2^128 and
// multiply the result by 2^-128 last, so that a result whose exact value underflows is +-0 or a
// subnormal within 2^-149 of it, and a large multiplier brings a result back into the normal
// range with full relative accuracy. Every operator with such a tail, on cpu at every Highway
// target and on opencl, F32, F16 and BF16, over inputs dense in the tail, on the fast path's side
// of its bound (silu down to -60, gelu_erf to -12, gelu_tanh to -9, alpha a to -60), beyond the
// exponent clamp at w = 175, and at -1e4, -1e30, -FLT_MAX and -inf, times the multipliers
// (grad_output, x2, dy, b + bias) 1, -1, 3.5, 2^60, 2^100 and 1e-30 (those the dtype holds),
// against the long-double oracles (gelu_truth.h, silu_truth.h, clipped_swiglu_truth.h):
//  (a) where |truth| plus the F32 bound is below 2^-150 (half the smallest subnormal): a zero of
//      the exact value's sign;
//  (b) otherwise |got - truth| <= K u terms (1 + c) |scale| + 2^-149 (accuracy.h's allowedError
//      with the operator's K from tests/accuracy_bounds.json) WITHOUT the 2^-125 floor term that
//      the clamped exp needed;
//  beyond w = 175 (silu x < -175, gelu_tanh -v > 175, gelu_erf x < -18.7, alpha a < -175) the
//  kernels clamp the exponent (documented): there (a) where |truth| < 2^-150 and the multipliers
//  are at most 2^60, else (b) with the floor term;
//  every zero result has the exact value's sign; x = -inf gives a zero, of the sign the function
//  approaches it with (LimitZeroSign);
//  F16/BF16: the rounded F32 truth, or within (b) plus one ulp of the type; a zero where the F32
//  result is below half the type's smallest subnormal.
// INFINIOP_TAIL_REPORT=1 prints a line of statistics per test (elements checked, zeros,
// subnormals, the largest error as a fraction of (b)'s bound); =all lists every failure.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "accuracy.h"
#include "clipped_swiglu_truth.h"
#include "device_memory.h"
#include "device_param.h"
#include "gelu_truth.h"
#include "op_specs.h"
#include "silu_truth.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

// The multipliers (grad_output, x2, dy, b + bias) of every tail result.
constexpr double kMultipliers[] = {1, -1, 3.5, 0x1p60, 0x1p100, 1e-30};
constexpr double kClampedExponent = 175;  // math-inl.h: beyond, the exponent is clamped

float roundTo(infiniDtype_t dtype, float v) {
  if (dtype == INFINI_DTYPE_F16) return infiniop::f32FromF16(infiniop::f16FromF32(v));
  if (dtype == INFINI_DTYPE_BF16) return infiniop::f32FromBf16(infiniop::bf16FromF32(v));
  return v;
}

// The multipliers as `dtype` holds them, without those that round to 0 or to an infinity.
std::vector<float> multipliers(infiniDtype_t dtype) {
  std::vector<float> out;
  for (double m : kMultipliers) {
    const float r = roundTo(dtype, static_cast<float>(m));
    if (r != 0 && std::isfinite(r)) out.push_back(r);
  }
  return out;
}

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// n points over [lo, hi], each at a pseudo-random place within its step (deterministic).
void appendGrid(std::vector<float> &out, double lo, double hi, size_t n, uint64_t seed) {
  const double step = (hi - lo) / static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    const double unit = static_cast<double>(mix(seed * 0x9E3779B97F4A7C15ull + i) >> 11) * 0x1p-53;
    out.push_back(static_cast<float>(lo + step * (static_cast<double>(i) + unit)));
  }
}

// v and its two neighbours on each side.
void appendAround(std::vector<float> &out, float v) {
  out.push_back(v);
  float up = v, down = v;
  for (int k = 0; k < 2; ++k) {
    up = std::nextafter(up, INFINITY);
    down = std::nextafter(down, -INFINITY);
    out.push_back(up);
    out.push_back(down);
  }
}

// Far left of every function, where nothing is representable: the clamps' other side.
void appendFarLeft(std::vector<float> &out, float sign = 1) {
  for (float v : {1e4f, 1e30f, FLT_MAX, INFINITY}) out.push_back(-sign * v);
}

enum class Act { kSilu, kGeluErf, kGeluTanh };

// Inputs dense over the tail and the clamp beyond it, with the bounds' neighbours.
const std::vector<float> &tailInputs(Act act) {
  static const std::vector<float> inputs[3] = {
      [] {  // silu: tail x < -87, exponent clamped below -175; the fast path up to -60
        std::vector<float> v;
        appendGrid(v, -110, -60, 2048, 1);
        appendGrid(v, -200, -110, 256, 2);
        for (float b : {-70.7f, -87.0f, -88.0f, -175.0f}) appendAround(v, b);
        appendFarLeft(v);
        return v;
      }(),
      [] {  // gelu_erf: tail x < -13.19, x clamped at -18.7; Phi(x) subnormal below -12.95
        std::vector<float> v;
        appendGrid(v, -20, -12, 1536, 3);
        for (float b : {-13.19f, -18.7f, -12.95f, -12.0f}) appendAround(v, b);
        appendFarLeft(v);
        return v;
      }(),
      [] {  // gelu_tanh: tail x < -9.9 (v < -85), -v clamped at 175 (x < -12.95)
        std::vector<float> v;
        appendGrid(v, -14, -9, 1536, 4);
        for (float b : {-9.9f, -12.95f, -13.0f}) appendAround(v, b);
        appendFarLeft(v);
        return v;
      }(),
  };
  return inputs[static_cast<int>(act)];
}

infiniopGeluApproximate_t approximation(Act act) {
  return act == Act::kGeluTanh ? INFINIOP_GELU_APPROXIMATE_TANH : INFINIOP_GELU_APPROXIMATE_NONE;
}

// An activation at x (x < -2 here: value and derivative are negative) with what the bounds need.
struct ActTruth {
  long double value, derivative;
  double value_terms, derivative_terms, condition, value_floor, derivative_floor;
  bool beyond;  // the kernels clamp the exponent: w > 175
};

ActTruth actTruth(Act act, float x) {
  if (act == Act::kSilu) {
    const long double value = siluL(x);
    return {value,
            siluDerivativeL(x),
            std::fabs(static_cast<double>(value)),
            siluDerivativeTerms(x),
            0.0,
            onePlusAbs(x),
            onePlusAbs(x),
            x < -kClampedExponent};
  }
  const GeluTruth t = geluTruth(approximation(act), x);
  // gelu_tanh: w = -v = condition, computed in F32 by the kernel (a margin of 0.1 takes the
  // points whose F32 v may fall either side of the clamp as beyond); gelu_erf: x clamped at -18.7.
  const bool beyond = act == Act::kGeluTanh ? t.condition > kClampedExponent - 0.1 : x < -18.7f;
  return {t.value,
          t.derivative,
          std::fabs(static_cast<double>(t.value)),
          t.derivative_terms,
          t.condition,
          onePlusAbs(x),
          t.derivative_floor,
          beyond};
}

// What one output element must be.
struct Expect {
  long double truth;
  int sign;           // of the exact value; 0: exactly 0 (a masked gradient)
  double tol;         // F32: K u terms (1 + c) |scale| + 2^-149, no floor
  double floor;       // 2^-125 floor |scale|: allowed only beyond the clamp
  double multiplier;  // |product of the multipliers|
  bool beyond;
  bool limit;  // x = -inf (or alpha a = -inf from an infinite a): the limit 0
};

// An activation's value or derivative (`f`, negative) times `scale` (the product of the
// multipliers `multiplier` stands for).
Expect tailExpect(double bound_u, long double f, double terms, double condition,
                  double floor_factor, long double scale, bool beyond, float x) {
  const long double truth = timesTail(scale, f, x);
  const double s = static_cast<double>(scale);
  return {truth,
          std::signbit(s) ? 1 : -1,
          allowedError(bound_u, INFINI_DTYPE_F32, s, terms, condition, 0, 0),
          std::fabs(s) * 0x1p-125 * floor_factor,
          std::fabs(s),
          beyond,
          x == -INFINITY};
}

// Statistics of one test, for INFINIOP_TAIL_REPORT.
struct Stats {
  size_t checked = 0, zeros = 0, subnormals = 0, failures = 0;
  double worst = 0;  // largest |got - truth| / bound over the (b) cases
};

std::string describe(long double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9Lg", v);
  return buffer;
}
std::string describeFloat(float v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g (%a)", static_cast<double>(v), static_cast<double>(v));
  return buffer;
}

// "" when `got` meets `e`; else why not. At the limit (x = -inf) the sign of the zero is checked
// only with limit_sign (the LimitZeroSign test).
std::string checkTail(infiniDtype_t dtype, float got, const Expect &e, bool limit_sign,
                      Stats *stats) {
  ++stats->checked;
  if (got == 0) ++stats->zeros;
  if (got != 0 && std::fabs(got) < FLT_MIN) ++stats->subnormals;
  if (std::isnan(got)) return "got NaN";
  if (e.sign == 0) return got == 0 ? "" : "expected exactly 0 (masked)";
  const bool negative = e.sign < 0;
  const char *sign_name = negative ? "-0" : "+0";
  if (e.limit) {
    if (got != 0) return "expected the limit 0";
    if (!limit_sign || std::signbit(got) == negative) return "";
    return std::string("expected the limit ") + sign_name +
           " (the sign the function approaches it with, as at x = -FLT_MAX)";
  }
  if (got == 0 && std::signbit(got) != negative)
    return std::string("a zero of the wrong sign: expected ") + sign_name;
  const double truth = static_cast<double>(e.truth);
  const double magnitude = std::fabs(truth);
  const double type_tol = dtype == INFINI_DTYPE_F32 ? 0.0 : ulpOf(dtype, magnitude);
  // Half the smallest subnormal of the type: what stays below it rounds to a zero.
  const double half_quantum = dtype == INFINI_DTYPE_F16    ? 0x1p-25
                              : dtype == INFINI_DTYPE_BF16 ? 0x1p-134
                                                           : 0x1p-150;
  bool must_be_zero;
  double tol = e.tol + type_tol;
  if (e.beyond) {
    must_be_zero = magnitude < 0x1p-150 && e.multiplier <= 0x1p60;
    tol += e.floor;
  } else {
    // The F32 result before its last rounding is within e.tol - 2^-149 of the truth.
    must_be_zero = dtype == INFINI_DTYPE_F32 ? magnitude + (e.tol - 0x1p-149) < 0x1p-150
                                             : magnitude + e.tol < half_quantum;
  }
  if (must_be_zero) return got == 0 ? "" : std::string("expected ") + sign_name;
  if (!std::isfinite(got)) return "got non-finite";
  if (dtype != INFINI_DTYPE_F32 && got == roundTo(dtype, static_cast<float>(truth))) return "";
  const double error = std::fabs(static_cast<double>(got) - truth);
  if (!e.beyond && tol > 0) stats->worst = std::fmax(stats->worst, error / tol);
  if (error <= tol) return "";
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, "error %.3g > allowed %.3g (%.3g subnormal quanta > %.3g)",
                error, tol, error / 0x1p-149, tol / 0x1p-149);
  return buffer;
}

// ---------------------------------------------------------------- running an operator
std::string last_error;

// Runs operator `name` (op_specs.h) with `attrs` on `tensors` in the API's slot order (NULL: an
// absent optional tensor), staged through the device's memory.
infiniStatus_t runOp(infiniopHandle_t h, const char *name, const Attrs &attrs,
                     const std::vector<TensorBuffer *> &tensors) {
  const OpSpec &op = spec(name);
  Descs descs;
  for (TensorBuffer *t : tensors) descs.push_back(t ? t->descriptor() : nullptr);
  void *desc = nullptr;
  infiniStatus_t s = op.create(h, &desc, descs, attrs);
  last_error = infiniopGetLastError();
  for (infiniopTensorDescriptor_t d : descs)
    if (d) infiniopDestroyTensorDescriptor(d);
  if (s != INFINI_STATUS_SUCCESS) return s;
  size_t workspace_size = 0;
  EXPECT_EQ(op.workspace(desc, &workspace_size), INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  for (TensorBuffer *t : tensors) device.add(t);
  void *workspace = device.scratch(workspace_size);
  Ptrs ptrs;
  for (TensorBuffer *t : tensors) ptrs.push_back(device(t));
  s = op.calculate(desc, workspace, workspace_size, ptrs, nullptr);
  last_error = infiniopGetLastError();
  device.download();
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  return s;
}

// ---------------------------------------------------------------- the tests
// INFINIOP_TAIL_REPORT=1: a line of statistics per test; =all: every failure too (else 12).
bool report() {
  const char *r = std::getenv("INFINIOP_TAIL_REPORT");
  return r && *r && std::string(r) != "0";
}
bool reportAll() {
  const char *r = std::getenv("INFINIOP_TAIL_REPORT");
  return r && std::string(r) == "all";
}

using Param = std::tuple<DeviceParam, infiniDtype_t>;

class Tail : public DeviceTestBase, public ::testing::WithParamInterface<Param> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override {
    restoreTargets();
    if (report())
      std::printf(
          "[ tail     ] %s: %zu checked, %zu zeros, %zu subnormals, worst %.3f of the "
          "bound, %zu failures\n",
          ::testing::UnitTest::GetInstance()->current_test_info()->name(), stats_.checked,
          stats_.zeros, stats_.subnormals, stats_.worst, stats_.failures);
  }
  infiniDtype_t dtype() const { return std::get<1>(GetParam()); }

  // Checks one element; reports the first few failures of each test in full.
  // `inputs()` describes the element's inputs (formatted only for a reported failure).
  template <class Describe>
  void check(const char *what, float got, const Expect &e, const Describe &inputs) {
    const std::string problem = checkTail(dtype(), got, e, limit_only_, &stats_);
    if (problem.empty()) return;
    ++stats_.failures;
    // LimitZeroSign repeats each case over a whole tensor: one report per operator, output,
    // multiplier and result.
    if (limit_only_ &&
        !limit_reported_.emplace(what, e.multiplier * e.sign, std::signbit(got)).second)
      return;
    if (reported_++ < (reportAll() ? SIZE_MAX : 12))
      ADD_FAILURE() << op_ << " " << what << " " << inputs() << ": got " << describeFloat(got)
                    << ", truth " << describe(e.truth) << ": " << problem;
  }

  // Elements (x, m) for every tail input and multiplier of the dtype, read back as stored.
  void fillPairs(Act act, TensorBuffer &xs, size_t x_offset, TensorBuffer &ms, size_t m_offset) {
    const std::vector<float> in = inputs(act);
    const std::vector<float> mult = multipliers(dtype());
    for (size_t i = 0; i < in.size() * mult.size(); ++i) {
      xs.set(x_offset + i, in[i % in.size()]);
      ms.set(m_offset + i, mult[i / in.size()]);
    }
  }
  size_t pairCount(Act act) const { return inputs(act).size() * multipliers(dtype()).size(); }
  // The inputs of every test; in LimitZeroSign as many -inf (the sizes of the other tests, for
  // which opencl has specialized its kernels already).
  std::vector<float> inputs(Act act) const {
    const std::vector<float> &in = tailInputs(act);
    return limit_only_ ? std::vector<float>(in.size(), -INFINITY) : in;
  }

  void unary(Act act, bool grad, bool v1 = false);
  void gated(Act act, bool backward);
  void clipped(const ClippedSwigluAttrs &at, bool backward);

  Stats stats_;
  size_t reported_ = 0;
  bool limit_only_ = false;
  // The operator and attributes under test (for the messages), and in LimitZeroSign the failures
  // of its outputs reported so far (output, signed multiplier, sign of the result).
  void startOp(std::string op) {
    op_ = std::move(op);
    limit_reported_.clear();
  }
  std::string op_;
  std::set<std::tuple<const char *, double, bool>> limit_reported_;
};

std::string xmString(float x, float m) {
  return "x=" + describeFloat(x) + " m=" + describeFloat(m);
}

// Gelu (grad false), GeluBackwardV2 or, with v1, GeluBackward: out = act(x), or
// grad_input = grad_output act'(x) with grad_output = m.
void Tail::unary(Act act, bool grad, bool v1) {
  const std::vector<float> xs = inputs(act);
  const size_t n = grad ? pairCount(act) : xs.size();
  TensorBuffer in({n}, dtype()), g({n}, dtype()), out({n}, dtype());
  if (grad) {
    fillPairs(act, in, 0, g, 0);
  } else {
    in.fill([&](size_t i) { return xs[i]; });
  }
  out.poison();
  const double approximate = approximation(act);
  startOp(std::string(!grad ? "Gelu"
                      : v1  ? "GeluBackward"
                            : "GeluBackwardV2") +
          (act == Act::kGeluTanh ? "(tanh)" : "(erf)"));
  const infiniStatus_t s = !grad ? runOp(handle(), "Gelu", {approximate}, {&out, &in})
                           : v1  ? runOp(handle(), "GeluBackward", {}, {&out, &in, &g})
                                : runOp(handle(), "GeluBackwardV2", {approximate}, {&out, &in, &g});
  ASSERT_EQ(s, INFINI_STATUS_SUCCESS) << last_error;
  const double bound = !grad ? f32_bound_u::gelu
                       : v1  ? f32_bound_u::gelu_backward
                             : f32_bound_u::gelu_backward_v2;
  for (size_t i = 0; i < n; ++i) {
    const float x = in.get(i), m = grad ? g.get(i) : 1.0f;
    const ActTruth t = actTruth(act, x);
    const Expect e = grad ? tailExpect(bound, t.derivative, t.derivative_terms, t.condition,
                                       t.derivative_floor, m, t.beyond, x)
                          : tailExpect(bound, t.value, t.value_terms, t.condition, t.value_floor, m,
                                       t.beyond, x);
    check(grad ? "grad_input" : "output", out.get(i), e, [&] { return xmString(x, m); });
  }
}

// SwiGlu / GeluMul (x = [x1 | x2], out = act(x1) x2, x2 = m) or their backward (grad1 = dy x2
// act'(x1), grad2 = dy act(x1), dy = m, x2 = +-1).
void Tail::gated(Act act, bool backward) {
  const size_t n = pairCount(act);
  TensorBuffer x({1, 2 * n}, dtype()), dy({1, n}, dtype()), out({1, backward ? 2 * n : n}, dtype());
  const char *name = act == Act::kSilu ? (backward ? "SwiGluBackward" : "SwiGlu")
                                       : (backward ? "GeluMulBackward" : "GeluMul");
  startOp(std::string(name) + (act == Act::kSilu       ? ""
                               : act == Act::kGeluTanh ? "(tanh)"
                                                       : "(erf)"));
  const Attrs attrs = {act == Act::kSilu ? -1.0 : static_cast<double>(approximation(act))};
  const double bound_forward = act == Act::kSilu ? f32_bound_u::swiglu : f32_bound_u::gelu_mul;
  const double bound_backward =
      act == Act::kSilu ? f32_bound_u::swiglu_backward : f32_bound_u::gelu_mul_backward;
  out.poison();
  if (!backward) {
    fillPairs(act, x, 0, x, n);
    ASSERT_EQ(runOp(handle(), name, attrs, {&out, &x}), INFINI_STATUS_SUCCESS) << last_error;
    for (size_t i = 0; i < n; ++i) {
      const float x1 = x.get(i), x2 = x.get(n + i);
      const ActTruth t = actTruth(act, x1);
      check("out", out.get(i),
            tailExpect(bound_forward, t.value, t.value_terms, t.condition, t.value_floor, x2,
                       t.beyond, x1),
            [&] { return xmString(x1, x2); });
    }
    return;
  }
  fillPairs(act, x, 0, dy, 0);
  for (size_t i = 0; i < n; ++i) x.set(n + i, i % 2 ? -1.0f : 1.0f);
  ASSERT_EQ(runOp(handle(), name, attrs, {&out, &dy, &x}), INFINI_STATUS_SUCCESS) << last_error;
  for (size_t i = 0; i < n; ++i) {
    const float x1 = x.get(i), x2 = x.get(n + i), g = dy.get(i);
    const ActTruth t = actTruth(act, x1);
    const auto inputs = [&] { return xmString(x1, g) + " x2=" + describeFloat(x2); };
    check("grad1", out.get(i),
          tailExpect(bound_backward, t.derivative, t.derivative_terms, t.condition,
                     t.derivative_floor, static_cast<long double>(g) * x2, t.beyond, x1),
          inputs);
    check("grad2", out.get(n + i),
          tailExpect(bound_backward, t.value, t.value_terms, t.condition, t.value_floor, g,
                     t.beyond, x1),
          inputs);
  }
}

// The A inputs of ClippedSwiglu: z = alpha A dense over [-200, -60], the bounds' neighbours, and
// the far side (A of -alpha's sign up to infinity).
std::vector<float> clippedInputs(float alpha) {
  std::vector<float> v;
  std::vector<float> z;
  appendGrid(z, -120, -60, 1024, 5);
  appendGrid(z, -200, -120, 256, 6);
  for (float zi : z) v.push_back(zi / alpha);
  for (float b : {-87.0f, -175.0f}) appendAround(v, b / alpha);
  appendFarLeft(v, alpha > 0 ? 1.0f : -1.0f);
  return v;
}

// ClippedSwiglu (x interleaved (A, B), B = m) or its backward (dy = m, B = 1 or -3.5).
void Tail::clipped(const ClippedSwigluAttrs &at, bool backward) {
  startOp(std::string(backward ? "ClippedSwigluBackward" : "ClippedSwiglu") +
          "(alpha=" + std::to_string(at.alpha) + " limit=" + std::to_string(at.limit) +
          " bias=" + std::to_string(at.bias) + ")");
  std::vector<float> As = clippedInputs(at.alpha);
  if (limit_only_) As.assign(As.size(), at.alpha > 0 ? -INFINITY : INFINITY);
  const std::vector<float> mult = multipliers(dtype());
  const size_t n = As.size() * mult.size();
  TensorBuffer x({1, 2 * n}, dtype()), dy({1, n}, dtype()), out({1, backward ? 2 * n : n}, dtype());
  for (size_t i = 0; i < n; ++i) {
    x.set(2 * i, As[i % As.size()]);
    const float m = mult[i / As.size()];
    x.set(2 * i + 1, backward ? (i % 2 ? -3.5f : 1.0f) : m);
    dy.set(i, m);
  }
  out.poison();
  const Attrs attrs = {-1, at.alpha, at.limit, at.bias, 1};
  const infiniStatus_t s =
      backward ? runOp(handle(), "ClippedSwigluBackward", attrs, {&out, &dy, &x, nullptr})
               : runOp(handle(), "ClippedSwiglu", attrs, {&out, &x, nullptr});
  ASSERT_EQ(s, INFINI_STATUS_SUCCESS) << last_error;
  for (size_t i = 0; i < n; ++i) {
    const float A = x.get(2 * i), B = x.get(2 * i + 1), g = dy.get(i);
    const ClippedSwigluTruth t = clippedSwigluTruth(INFINI_DTYPE_F32, A, B, g, at, 0);
    const ClippedSwigluTruth with_floor = clippedSwigluTruth(INFINI_DTYPE_F32, A, B, g, at, 1);
    const float a = std::fmin(A, at.limit);
    const float b = std::fmax(-at.limit, std::fmin(B, at.limit));
    const double v = static_cast<double>(b) + at.bias;
    const float z = at.alpha * a;  // as the kernels round it
    const bool beyond = z < -kClampedExponent;
    const bool limit = std::isinf(a) && z == -INFINITY;
    const int gate_sign = a < 0 ? -1 : 1;
    const int slope_sign = z < -1.2785f ? -1 : 1;
    const auto sign = [](double m) { return m < 0 ? -1 : 1; };
    const auto inputs = [&] {
      return "A=" + describeFloat(A) + " B=" + describeFloat(B) +
             (backward ? " dy=" + describeFloat(g) : "");
    };
    if (!backward) {
      check("y", out.get(i),
            {t.y, gate_sign * sign(v), t.tol_y, with_floor.tol_y - t.tol_y, std::fabs(v), beyond,
             limit},
            inputs);
      continue;
    }
    const Expect dA = {t.dA,
                       t.dA_masked ? 0 : slope_sign * sign(g) * sign(v),
                       t.tol_dA,
                       with_floor.tol_dA - t.tol_dA,
                       std::fabs(g * v),
                       beyond,
                       limit};
    const Expect dB = {t.dB,         t.dB_masked ? 0 : gate_sign * sign(g),
                       t.tol_dB,     with_floor.tol_dB - t.tol_dB,
                       std::fabs(g), beyond,
                       limit};
    check("dA", out.get(2 * i), dA, inputs);
    check("dB", out.get(2 * i + 1), dB, inputs);
  }
}

TEST_P(Tail, GeluErf) {
  unary(Act::kGeluErf, false);
}
TEST_P(Tail, GeluTanh) {
  unary(Act::kGeluTanh, false);
}
TEST_P(Tail, GeluBackward) {
  unary(Act::kGeluTanh, true, true);
}
TEST_P(Tail, GeluBackwardV2Erf) {
  unary(Act::kGeluErf, true);
}
TEST_P(Tail, GeluBackwardV2Tanh) {
  unary(Act::kGeluTanh, true);
}
TEST_P(Tail, SwiGlu) {
  gated(Act::kSilu, false);
}
TEST_P(Tail, SwiGluBackward) {
  gated(Act::kSilu, true);
}
TEST_P(Tail, GeluMulErf) {
  gated(Act::kGeluErf, false);
}
TEST_P(Tail, GeluMulTanh) {
  gated(Act::kGeluTanh, false);
}
TEST_P(Tail, GeluMulBackwardErf) {
  gated(Act::kGeluErf, true);
}
TEST_P(Tail, GeluMulBackwardTanh) {
  gated(Act::kGeluTanh, true);
}

// alpha 1.702 (the tail at A < -51) and negative (A > 51: reached only without the limit, or with
// alpha -20 under limit 7), limit 7 (bias 0.5) and +inf (bias 0, so B carries every multiplier).
const ClippedSwigluAttrs kClippedAttrs[] = {
    {-1, 1.702f, 7.0f, 0.5f, true},  {-1, 1.702f, INFINITY, 0.0f, true},
    {-1, -1.702f, 7.0f, 0.5f, true}, {-1, -1.702f, INFINITY, 0.0f, true},
    {-1, -20.0f, 7.0f, 0.5f, true},  {-1, -20.0f, INFINITY, 0.0f, true},
};

TEST_P(Tail, ClippedSwiglu) {
  for (const ClippedSwigluAttrs &at : kClippedAttrs) clipped(at, false);
}
TEST_P(Tail, ClippedSwigluBackward) {
  for (const ClippedSwigluAttrs &at : kClippedAttrs) clipped(at, true);
}

// x = -inf (A = -inf with alpha > 0, +inf with alpha < 0 and no limit) gives the limit 0 in every
// operator; its sign is the one the function approaches it with, that of the finite far left
// (x = -FLT_MAX): the activation's (negative: silu, gelu and their derivatives there, the
// ClippedSwiglu gate for A < 0 and its slope) times the multipliers'.
TEST_P(Tail, LimitZeroSign) {
  limit_only_ = true;
  for (Act act : {Act::kGeluErf, Act::kGeluTanh}) {
    unary(act, false);
    unary(act, true);
  }
  unary(Act::kGeluTanh, true, true);
  for (Act act : {Act::kSilu, Act::kGeluErf, Act::kGeluTanh}) {
    gated(act, false);
    gated(act, true);
  }
  for (const ClippedSwigluAttrs &at : kClippedAttrs) {
    clipped(at, false);
    clipped(at, true);
  }
}

// The devices whose kernels scale the tails: cpu at every target and opencl. cpu_reference
// computes in double, whose own underflow (x < -745) is not what this test is about.
std::vector<DeviceParam> tailDeviceParams() {
  std::vector<DeviceParam> params;
  for (DeviceParam p : allDeviceParams())
    if (deviceOf(p) != INFINI_DEVICE_CPU_REFERENCE) params.push_back(p);
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, Tail,
                         ::testing::Combine(::testing::ValuesIn(tailDeviceParams()),
                                            ::testing::ValuesIn(kFloatDtypes)),
                         [](const ::testing::TestParamInfo<Param> &info) {
                           return deviceParamName(std::get<0>(info.param)) + "_" +
                                  infiniop::dtypeName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace infiniop_test
