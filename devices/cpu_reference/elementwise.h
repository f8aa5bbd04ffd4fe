// SPDX-License-Identifier: Apache-2.0
// cpu_reference: the elementwise framework as a plain scalar loop, single thread.
// A reference functor is `void operator()(double &out..., float in...) const`, computing in
// double. Each output is rounded once from that double, to nearest even, when stored: F16 and
// BF16 too (never through F32 first), so they are the float64 value correctly rounded.
#pragma once

#include <cstring>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "elementwise/plan.h"
#include "elementwise/walk.h"

namespace infiniop::cpu_reference {

template <class T>
float loadAt(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return toFloat(v);
}

template <class T>
void storeAt(char *p, double v) {
  const T stored = fromDouble<T>(v);
  std::memcpy(p, &stored, sizeof(T));
}

template <class Functor, class T, size_t... Out, size_t... In>
void runTyped(const elementwise::Plan &plan, const Functor &f, char *const *operands, size_t begin,
              size_t end, std::index_sequence<Out...>, std::index_sequence<In...>) {
  constexpr size_t kOut = sizeof...(Out);
  const int inner = plan.ndim - 1;
  elementwise::walkRows(plan, operands, begin, end, [&](char *const *base, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const auto at = [&](size_t k) {
        return base[k] + static_cast<ptrdiff_t>(i) * plan.strides[k][inner] *
                             static_cast<ptrdiff_t>(sizeof(T));
      };
      float in[sizeof...(In) + 1] = {loadAt<T>(at(kOut + In))...};
      double out[kOut];
      f(out[Out]..., in[In]...);
      (storeAt<T>(at(Out), out[Out]), ...);
    }
  });
}

// The Kernel of an operator: a Functor that is (or is built from) its attribute struct.
template <class Functor>
void runElementwise(const elementwise::Plan &plan, const void *attributes, char *const *operands,
                    size_t begin, size_t end) {
  Functor f{};
  if constexpr (!std::is_empty_v<Functor>) std::memcpy(&f, attributes, sizeof(Functor));
  visitFloatStorage(plan.dtype, [&](auto storage) {
    runTyped<Functor, decltype(storage)>(plan, f, operands, begin, end,
                                         std::make_index_sequence<Functor::kOutputs>(),
                                         std::make_index_sequence<Functor::kInputs>());
  });
}

}  // namespace infiniop::cpu_reference

// Defines the cpu_reference kernel `name` (declared in kernels/list.h) as the runner of a functor.
#define INFINIOP_REFERENCE_KERNEL(name, ...)                                                  \
  void name(const ::infiniop::elementwise::Plan &plan, const void *attributes,                \
            char *const *operands, size_t begin, size_t end) {                                \
    ::infiniop::cpu_reference::runElementwise<__VA_ARGS__>(plan, attributes, operands, begin, \
                                                           end);                              \
  }
