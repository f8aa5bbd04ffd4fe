// GeluBackward on the cpu device, one Highway body for every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_backward.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/parallel.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// gelu_tanh(x) = x * sigmoid(v) with v = 2u = 2a (x + b x^3), so its derivative is
//   s (1 + x (1 - s) v'),  s = sigmoid(v),  v' = 2a (1 + 3 b x^2).
// Both s and 1 - s come from e = exp(-|v|) <= 1 without cancellation, which keeps F32 accuracy
// for negative x, where 0.5 (1 + tanh u) would cancel.
struct GeluBackward {
  static constexpr int kOutputs = 1, kInputs = 2;  // grad_input <- (input, grad_output)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad_input, V input, V grad_output) const {
    constexpr float kTwoA = 1.5957691216057308f;          // 2 sqrt(2/pi)
    constexpr float kTwoAB = kTwoA * 0.044715f;           // 2 sqrt(2/pi) b
    constexpr float kSixAB = 3.0f * kTwoAB;
    // Beyond |x| = 20 the F32 derivative is exactly 1 or 0; clamping keeps inf * 0 out.
    const V x = hn::Min(hn::Max(input, hn::Set(d, -20.0f)), hn::Set(d, 20.0f));
    const V x2 = hn::Mul(x, x);
    const V v = hn::Mul(x, hn::MulAdd(x2, hn::Set(d, kTwoAB), hn::Set(d, kTwoA)));
    const V dv = hn::MulAdd(x2, hn::Set(d, kSixAB), hn::Set(d, kTwoA));
    const V e = hn::Exp(d, hn::Neg(hn::Abs(v)));
    const V r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
    const V er = hn::Mul(e, r);
    const auto negative = hn::Lt(v, hn::Zero(d));
    const V s = hn::IfThenElse(negative, er, r);
    const V one_minus_s = hn::IfThenElse(negative, r, er);
    const V derivative = hn::Mul(s, hn::MulAdd(hn::Mul(x, one_minus_s), dv, hn::Set(d, 1.0f)));
    const V product = hn::Mul(hn::IfThenElse(hn::IsNaN(input), input, derivative), grad_output);
    // For finite x < -10 the derivative underflows to 0 but is truly negative, so an infinite
    // grad_output must give an infinity of the opposite sign, not inf * 0 = NaN.
    const auto underflowed = hn::And(hn::Eq(derivative, hn::Zero(d)), hn::IsFinite(input));
    grad_input = hn::IfThenElse(hn::And(underflowed, hn::IsInf(grad_output)), hn::Neg(grad_output),
                                product);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_backward, GeluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_backward)
#endif
