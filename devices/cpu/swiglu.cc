// SwiGlu and SwiGluBackward on the cpu device, one Highway body for every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/swiglu.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// x clamped at -87, where sigmoid's exp is clamped too: below it silu and silu' are tiny
// negative numbers (|value| < 1.5e-36) rather than x * 1.6e-38, which grows with |x|.
template <class D, class V>
HWY_INLINE V ClampSiluArgument(D d, V x) {
  return hn::Max(x, hn::Set(d, -87.0f));
}

struct SwiGlu {
  static constexpr int kOutputs = 1, kInputs = 2;  // y <- (x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &y, V x1, V x2) const {
    const V x = ClampSiluArgument(d, x1);
    V s;
    SigmoidAndSlope(d, x, &s);
    y = hn::Mul(ZeroAtMinusInfNaNAtNaN(d, x1, hn::Mul(x, s)), x2);
  }
};

// silu'(x) = s + x s (1 - s); its zero near x = -1.2785 is where the two terms cancel.
struct SwiGluBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (x_grad1, x_grad2) <- (y_grad, x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &x_grad1, V &x_grad2, V y_grad, V x1, V x2) const {
    const V x = ClampSiluArgument(d, x1);
    V s;
    const V slope = SigmoidAndSlope(d, x, &s);
    const V silu = ZeroAtMinusInfNaNAtNaN(d, x1, hn::Mul(x, s));
    // Far right x s (1 - s) vanishes: x capped at 40 keeps inf * tiny out (silu'(+inf) = 1).
    const V capped = hn::Min(x, hn::Set(d, 40.0f));
    const V silu_derivative = ZeroAtMinusInfNaNAtNaN(d, x1, hn::MulAdd(capped, slope, s));
    x_grad1 = hn::Mul(hn::Mul(y_grad, x2), silu_derivative);
    x_grad2 = hn::Mul(y_grad, silu);
  }
};

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu, SwiGlu);
INFINIOP_CPU_ELEMENTWISE_RANGE(swiglu_backward, SwiGluBackward);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(swiglu_backward)
#endif
