// GeluBackward on the cpu device, one Highway body for every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_backward.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// gelu_tanh(x) = x * sigmoid(v) with v = 2u = 2a (x + b x^3), so its derivative is
//   s + x v' s (1 - s),  s = sigmoid(v),  v' = 2a (1 + 3 b x^2),
// and with e = exp(-|v|) <= 1, r = 1 / (1 + e):  s(1 - s) = e r^2,  s = (v < 0 ? e r : r).
// Nothing cancels for negative x, where 0.5 (1 + tanh u) would lose every digit.
struct GeluBackward {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad_input, V input, V grad_output) const {
    constexpr float kTwoA = 1.5957691216057308f;  // 2 sqrt(2/pi)
    constexpr float kTwoAB = kTwoA * 0.044715f;   // 2 sqrt(2/pi) b
    constexpr float kSixAB = 3.0f * kTwoAB;
    // Beyond |x| = 20 the F32 derivative is 1, or tiny (see below).
    const V x = hn::Min(hn::Max(input, hn::Set(d, -20.0f)), hn::Set(d, 20.0f));
    const V x2 = hn::Mul(x, x);
    const V v = hn::Mul(x, hn::MulAdd(x2, hn::Set(d, kTwoAB), hn::Set(d, kTwoA)));
    const V dv = hn::MulAdd(x2, hn::Set(d, kSixAB), hn::Set(d, kTwoA));
    // sigmoid(v) and s(1 - s) come from exp clamped at exp(-87): for x < -10, where
    // |gelu'| < 3e-36, the derivative stays a tiny negative number (|error| < 2^-125 (1 + |x v'|))
    // so that an infinite grad_output gives an infinity of the right sign, not inf * 0 = NaN.
    V s;
    const V slope = SigmoidAndSlope(d, v, &s);
    const V derivative = ZeroAtMinusInfNaNAtNaN(d, input, hn::MulAdd(hn::Mul(x, dv), slope, s));
    grad_input = hn::Mul(derivative, grad_output);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_backward, GeluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_backward)
#endif
