// GeluMul and GeluMulBackward (erf and tanh) on the cpu device, one Highway body per functor.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/gelu_mul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu/elementwise-inl.h"
#include "cpu/math-inl.h"
#include "cpu/parallel.h"
#include "hwy/highway.h"
#include "ops/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace infiniop::cpu::HWY_NAMESPACE {

// The approximation is a type, chosen at descriptor creation: no branch in the loop.
struct ErfGelu {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative) const {
    return GeluErf(d, x, derivative);
  }
};
struct TanhGelu {
  template <class D, class V>
  HWY_INLINE V operator()(D d, V x, V *derivative) const {
    return GeluTanh(d, x, derivative);
  }
};

template <class Gelu>
struct GeluMul {
  static constexpr int kOutputs = 1, kInputs = 2;  // out <- (x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &out, V x1, V x2) const {
    V unused;
    out = hn::Mul(Gelu()(d, x1, &unused), x2);
  }
};

template <class Gelu>
struct GeluMulBackward {
  static constexpr int kOutputs = 2, kInputs = 3;  // (grad1, grad2) <- (out_grad, x1, x2)

  template <class D, class V>
  HWY_INLINE void operator()(D d, V &grad1, V &grad2, V out_grad, V x1, V x2) const {
    V derivative;
    const V gelu = Gelu()(d, x1, &derivative);
    grad1 = hn::Mul(hn::Mul(out_grad, x2), derivative);
    grad2 = hn::Mul(out_grad, gelu);
  }
};

using GeluMulErf = GeluMul<ErfGelu>;
using GeluMulTanh = GeluMul<TanhGelu>;
using GeluMulBackwardErf = GeluMulBackward<ErfGelu>;
using GeluMulBackwardTanh = GeluMulBackward<TanhGelu>;

}  // namespace infiniop::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_erf, GeluMulErf);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_tanh, GeluMulTanh);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_backward_erf, GeluMulBackwardErf);
INFINIOP_CPU_ELEMENTWISE_RANGE(gelu_mul_backward_tanh, GeluMulBackwardTanh);

#if HWY_ONCE
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_tanh)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_backward_erf)
INFINIOP_CPU_ELEMENTWISE_DISPATCH(gelu_mul_backward_tanh)
#endif
