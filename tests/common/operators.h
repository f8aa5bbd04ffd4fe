// SPDX-License-Identifier: Apache-2.0
// The one operator table of the C++ tests (op_specs.h, and through it the bad-input table, the
// concurrency, fault-injection and object-kind tests), the bench (bench/ops.cc) and the fuzz
// harness (tests/fuzz/fuzz_operators.cc): every operator of the C API as a type holding
//   - its four functions: create / get workspace size / calculate / destroy (the only place in
//     the tests, the bench and the fuzz harness that names them; create<Op>() and
//     calculate<Op>() below are the only places that order their arguments);
//   - its tensors in the API's order, each an output or an input and nullable or not (the slot
//     order is the create call's and the calculate call's alike);
//   - its attributes' names, in the API's order; their types are the create function's own.
// The static_asserts below hold the table to the headers: the argument counts, tensor
// descriptors where the slots are, and `void *` (an output) or `const void *` (an input) in
// calculate as each slot says.
//
// create<Op>() and calculate<Op>() call an operator with the arguments taken from the caller's
// containers: tensors and data pointers by slot (`t[s]`), attributes through an `Attrs` object
// whose `get<T>(AttrIndex)` returns the value for an attribute of C type T (DoubleAttrs: from
// doubles in API order). Each consumer keeps its own configurations (shapes, values, decoders).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "infiniop.h"

namespace infiniop_ops {

// One tensor argument, in the API's order.
struct Slot {
  const char *name;
  bool output;
  bool nullable;  // the descriptor (and data pointer) may be NULL
};
constexpr Slot in(const char *name) {
  return {name, false, false};
}
constexpr Slot out(const char *name) {
  return {name, true, false};
}
constexpr Slot nullable(Slot s) {
  return {s.name, s.output, true};
}

template <class F>
struct Signature;
template <class... A>
struct Signature<infiniStatus_t (*)(A...)> {
  using Args = std::tuple<A...>;
};
template <class F, size_t I>
using Arg = std::tuple_element_t<I, typename Signature<F>::Args>;
template <class F>
constexpr size_t kArity = std::tuple_size_v<typename Signature<F>::Args>;

template <auto Create, auto Workspace, auto Calculate, auto Destroy>
struct Functions {
  static constexpr auto create = Create;
  static constexpr auto workspace = Workspace;
  static constexpr auto calculate = Calculate;
  static constexpr auto destroy = Destroy;
  using Desc = std::remove_pointer_t<Arg<decltype(Create), 1>>;
};

template <size_t N>
using Names = std::array<const char *, N>;
template <class... N>
constexpr Names<sizeof...(N)> names(N... n) {
  return {n...};
}
template <class... S>
constexpr std::array<Slot, sizeof...(S)> slotList(S... s) {
  return {s...};
}
template <size_t N>
constexpr Names<N + 1> plus(const Names<N> &names, const char *last) {
  Names<N + 1> all{};
  for (size_t i = 0; i < N; ++i) all[i] = names[i];
  all[N] = last;
  return all;
}

// ---- the table -------------------------------------------------------------------------------

// Operator Name: the four functions the C API names after it (infiniopCreate<Name>Descriptor,
// infiniopGet<Name>WorkspaceSize, infiniop<Name>, infiniopDestroy<Name>Descriptor), its slots
// (a parenthesized list of in() / out()) and its attributes' names (a parenthesized list).
#define INFINIOP_OPERATOR(Name, Slots, Attrs)                                                 \
  struct Name : Functions<infiniopCreate##Name##Descriptor, infiniopGet##Name##WorkspaceSize, \
                          infiniop##Name, infiniopDestroy##Name##Descriptor> {                \
    static constexpr const char *name = #Name;                                                \
    static constexpr auto slots = slotList Slots;                                             \
    static constexpr auto attrs = names Attrs;                                                \
  }

INFINIOP_OPERATOR(GeluBackward, (out("grad_input"), in("input"), in("grad_output")), ());
INFINIOP_OPERATOR(Gelu, (out("output"), in("input")), ("approximate"));
INFINIOP_OPERATOR(GeluBackwardV2, (out("grad_input"), in("input"), in("grad_output")),
                  ("approximate"));
INFINIOP_OPERATOR(SwiGlu, (out("y"), in("x")), ("dim"));
INFINIOP_OPERATOR(SwiGluBackward, (out("x_grad"), in("y_grad"), in("x")), ("dim"));
INFINIOP_OPERATOR(GeluMul, (out("out"), in("input")), ("approximate"));
INFINIOP_OPERATOR(GeluMulBackward, (out("input_grad"), in("out_grad"), in("input")),
                  ("approximate"));
INFINIOP_OPERATOR(ClippedSwiglu, (out("y"), in("x"), nullable(in("group_index"))),
                  ("dim", "alpha", "limit", "bias", "interleaved"));
INFINIOP_OPERATOR(ClippedSwigluBackward,
                  (out("x_grad"), in("y_grad"), in("x"), nullable(in("group_index"))),
                  ("dim", "alpha", "limit", "bias", "interleaved"));
INFINIOP_OPERATOR(MoeFinalizeRoutingV2,
                  (out("out"), in("expanded_x"), in("expanded_row_idx"), nullable(in("x1")),
                   nullable(in("x2")), nullable(in("bias")), nullable(in("scales")),
                   nullable(in("expert_idx"))),
                  ("drop_pad_mode"));
INFINIOP_OPERATOR(MoeFinalizeRoutingV2Grad,
                  (out("grad_expanded_x"), nullable(out("grad_scales")), in("grad_y"),
                   in("expanded_row_idx"), nullable(in("expanded_x")), nullable(in("scales")),
                   nullable(in("expert_idx")), nullable(in("bias"))),
                  ("drop_pad_mode", "active_num", "expert_num", "expert_capacity"));
INFINIOP_OPERATOR(MoeInitRoutingV2,
                  (out("expanded_x"), out("expanded_row_idx"),
                   nullable(out("expert_tokens_count_or_cumsum")),
                   nullable(out("expert_tokens_before_capacity")), in("x"), in("expert_idx")),
                  ("active_num", "expert_capacity", "expert_num", "drop_pad_mode",
                   "expert_tokens_count_or_cumsum_flag", "expert_tokens_before_capacity_flag"));
// dynamic_quant_scale is written (quant_mode 1): an output slot; scale and offset are read.
INFINIOP_OPERATOR(
    MoeInitRoutingQuantV2,
    (out("expanded_x"), out("expanded_row_idx"), nullable(out("expert_tokens_count_or_cumsum")),
     nullable(out("expert_tokens_before_capacity")), nullable(out("dynamic_quant_scale")), in("x"),
     in("expert_idx"), nullable(in("scale")), nullable(in("offset"))),
    ("active_num", "expert_capacity", "expert_num", "drop_pad_mode",
     "expert_tokens_count_or_cumsum_flag", "expert_tokens_before_capacity_flag", "quant_mode"));
INFINIOP_OPERATOR(MoeInitRoutingV2Grad,
                  (out("grad_x"), in("grad_expanded_x"), in("expanded_row_idx")),
                  ("top_k", "drop_pad_mode", "active_num"));
INFINIOP_OPERATOR(MoeGatingTopKSoftmax,
                  (out("y"), out("expert_idx"), nullable(out("row_idx")),
                   nullable(out("softmax_out")), in("x"), nullable(in("finished"))),
                  ("k", "renorm"));
INFINIOP_OPERATOR(MoeGatingTopKSoftmaxGrad,
                  (out("grad_x"), in("grad_y"), in("x"), in("expert_idx"),
                   nullable(in("finished"))),
                  ("renorm"));
INFINIOP_OPERATOR(MoeGatingTopK,
                  (out("y"), out("expert_idx"), nullable(out("norm_out")), in("x"),
                   nullable(in("bias"))),
                  ("k", "k_group", "group_count", "group_select_mode", "renorm", "norm_type",
                   "routed_scaling_factor", "eps"));
INFINIOP_OPERATOR(MoeGatingTopKGrad, (out("grad_x"), in("grad_y"), in("x"), in("expert_idx")),
                  ("norm_type", "renorm", "routed_scaling_factor", "eps"));
INFINIOP_OPERATOR(MoeGatingWeights, (out("y"), in("x"), in("expert_idx")),
                  ("norm_type", "renorm", "routed_scaling_factor", "eps"));
INFINIOP_OPERATOR(MoeExpertCounts, (out("counts"), in("expert_idx")), ("num_experts"));
// bias is read and written (in place): an output slot.
INFINIOP_OPERATOR(MoeBiasUpdate, (out("bias"), in("counts")), ("update_rate"));
INFINIOP_OPERATOR(MoeAuxLoss, (out("loss"), in("x"), in("tokens_per_expert")),
                  ("score_function", "topk", "total_tokens", "coeff"));
INFINIOP_OPERATOR(MoeAuxLossGrad,
                  (out("grad_x"), in("grad_loss"), in("x"), in("tokens_per_expert")),
                  ("score_function", "topk", "total_tokens", "coeff"));
INFINIOP_OPERATOR(MoeZLoss, (out("loss"), in("x")), ("coeff"));
INFINIOP_OPERATOR(MoeZLossGrad, (out("grad_x"), in("grad_loss"), in("x")), ("coeff"));
INFINIOP_OPERATOR(MoeExpertCapacity,
                  (out("kept_idx"), nullable(out("weights_out")), in("expert_idx"),
                   nullable(in("weights"))),
                  ("num_experts", "capacity", "drop_policy"));
// scale is written (dynamic) or read (static), a `void *` either way: an output slot.
INFINIOP_OPERATOR(SwiGluQuant,
                  (out("y"), out("scale"), in("x"), nullable(in("smooth_scales")),
                   nullable(in("group_index"))),
                  ("activate_left", "quant_mode", "group_size", "scale_format"));
INFINIOP_OPERATOR(GeluMulQuant,
                  (out("y"), out("scale"), in("x"), nullable(in("smooth_scales")),
                   nullable(in("group_index"))),
                  ("approximate", "activate_left", "quant_mode", "group_size", "scale_format"));
INFINIOP_OPERATOR(ClippedSwigluQuant,
                  (out("y"), out("scale"), in("x"), nullable(in("smooth_scales")),
                   nullable(in("group_index"))),
                  ("alpha", "limit", "bias", "interleaved", "quant_mode", "group_size",
                   "scale_format"));
INFINIOP_OPERATOR(DequantSwigluQuant,
                  (out("y"), out("scale"), in("x"), nullable(in("weight_scale")),
                   nullable(in("activation_scale")), nullable(in("bias")),
                   nullable(in("smooth_scales")), nullable(in("group_index"))),
                  ("activate_left", "quant_mode", "group_size", "scale_format"));
#undef INFINIOP_OPERATOR

// The V2 creates of ClippedSwiglu(Backward): the same descriptor and calls, one attribute more.
struct ClippedSwigluV2 : ClippedSwiglu {
  static constexpr auto create = infiniopCreateClippedSwigluV2Descriptor;
  static constexpr const char *name = "ClippedSwigluV2";
  static constexpr auto attrs = plus(ClippedSwiglu::attrs, "clamp_mode");
};
struct ClippedSwigluBackwardV2 : ClippedSwigluBackward {
  static constexpr auto create = infiniopCreateClippedSwigluBackwardV2Descriptor;
  static constexpr const char *name = "ClippedSwigluBackwardV2";
  static constexpr auto attrs = plus(ClippedSwigluBackward::attrs, "clamp_mode");
};

// Every operator type (a create function each), for the checks below and any consumer that
// walks them all.
using All =
    std::tuple<GeluBackward, Gelu, GeluBackwardV2, SwiGlu, SwiGluBackward, GeluMul, GeluMulBackward,
               ClippedSwiglu, ClippedSwigluV2, ClippedSwigluBackward, ClippedSwigluBackwardV2,
               MoeFinalizeRoutingV2, MoeFinalizeRoutingV2Grad, MoeInitRoutingV2,
               MoeInitRoutingV2Grad, MoeGatingTopKSoftmax, MoeGatingTopKSoftmaxGrad, MoeGatingTopK,
               MoeGatingTopKGrad, MoeExpertCounts, MoeBiasUpdate, MoeGatingWeights, MoeAuxLoss,
               MoeAuxLossGrad, MoeZLoss, MoeZLossGrad, MoeExpertCapacity, SwiGluQuant, GeluMulQuant,
               ClippedSwigluQuant, DequantSwigluQuant, MoeInitRoutingQuantV2>;

// ---- attributes ------------------------------------------------------------------------------

// The kinds of attribute types in the API: int32_t / int64_t, float, double, bool, a C enum.
enum class AttrKind { kInteger, kFloat, kDouble, kBool, kEnum };
template <class T>
constexpr AttrKind attrKind() {
  if constexpr (std::is_same_v<T, bool>) {
    return AttrKind::kBool;
  } else if constexpr (std::is_enum_v<T>) {
    return AttrKind::kEnum;
  } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
    return AttrKind::kInteger;
  } else if constexpr (std::is_same_v<T, float>) {
    return AttrKind::kFloat;
  } else {
    static_assert(std::is_same_v<T, double>, "an attribute type the table does not know");
    return AttrKind::kDouble;
  }
}

template <class Op>
constexpr size_t kSlotCount = Op::slots.size();
template <class Op>
constexpr size_t kAttrCount = Op::attrs.size();
template <class Op>
using CreateFn = std::remove_const_t<decltype(Op::create)>;
// Attribute k's C type: the create function's parameter after the handle, the descriptor
// pointer and the tensors.
template <class Op, size_t K>
using AttrType = Arg<CreateFn<Op>, 2 + kSlotCount<Op> + K>;

template <class Op, size_t... K>
constexpr std::array<AttrKind, sizeof...(K)> attrKinds(std::index_sequence<K...>) {
  return {attrKind<AttrType<Op, K>>()...};
}
template <class Op>
constexpr std::array<AttrKind, kAttrCount<Op>> kAttrKinds =
    attrKinds<Op>(std::make_index_sequence<kAttrCount<Op>>());

// An attribute's position in the API's order and its rank among the attributes of its kind
// (ClippedSwigluV2: dim is integer 0, alpha float 0, limit float 1, clamp_mode integer 1).
struct AttrIndex {
  size_t position, rank;
};
template <class Op>
constexpr AttrIndex attrIndex(size_t k) {
  size_t rank = 0;
  for (size_t j = 0; j < k; ++j) rank += kAttrKinds<Op>[j] == kAttrKinds<Op>[k];
  return {k, rank};
}
template <class Op>
constexpr bool hasAttrKind(AttrKind kind) {
  for (AttrKind k : kAttrKinds<Op>)
    if (k == kind) return true;
  return false;
}

// Attributes given as doubles in API order (op_specs.h, the bench): each converted to its C type.
struct DoubleAttrs {
  const std::vector<double> &values;
  template <class T>
  T get(AttrIndex a) const {
    if constexpr (std::is_enum_v<T>)
      return static_cast<T>(static_cast<int64_t>(values[a.position]));
    else
      return static_cast<T>(values[a.position]);
  }
};

// ---- the calls -------------------------------------------------------------------------------

template <class Op, class Fn, class Tensors, class Attrs, size_t... S, size_t... K>
infiniStatus_t createWith(Fn fn, infiniopHandle_t handle, typename Op::Desc *desc, const Tensors &t,
                          const Attrs &a, std::index_sequence<S...>, std::index_sequence<K...>) {
  return fn(handle, desc, t[S]..., a.template get<AttrType<Op, K>>(attrIndex<Op>(K))...);
}

// Op's create with tensor descriptors t[0..slots) and the attributes from `a`; `fn` may replace
// the create function by one of the same arguments (the fuzz harness's enum-as-int adapters).
template <class Op, class Tensors, class Attrs, class Fn = CreateFn<Op>>
infiniStatus_t create(infiniopHandle_t handle, typename Op::Desc *desc, const Tensors &t,
                      const Attrs &a, Fn fn = Op::create) {
  return createWith<Op>(fn, handle, desc, t, a, std::make_index_sequence<kSlotCount<Op>>(),
                        std::make_index_sequence<kAttrCount<Op>>());
}

template <class Op, class Data, size_t... S>
infiniStatus_t calculateWith(typename Op::Desc desc, void *workspace, size_t workspace_size,
                             const Data &p, void *stream, std::index_sequence<S...>) {
  return Op::calculate(desc, workspace, workspace_size, p[S]..., stream);
}

// Op's calculate with data pointers p[0..slots) (converted to void * or const void *).
template <class Op, class Data>
infiniStatus_t calculate(typename Op::Desc desc, void *workspace, size_t workspace_size,
                         const Data &p, void *stream) {
  return calculateWith<Op>(desc, workspace, workspace_size, p, stream,
                           std::make_index_sequence<kSlotCount<Op>>());
}

// ---- the table against the headers -----------------------------------------------------------

template <class Op, size_t... S>
constexpr bool slotsMatch(std::index_sequence<S...>) {
  using C = CreateFn<Op>;
  using K = std::remove_const_t<decltype(Op::calculate)>;
  return ((std::is_same_v<Arg<C, 2 + S>, infiniopTensorDescriptor_t> &&
           std::is_same_v<Arg<K, 3 + S>,
                          std::conditional_t<Op::slots[S].output, void *, const void *>>)&&...);
}

template <class Op>
constexpr bool matchesHeaders() {
  using C = CreateFn<Op>;
  using K = std::remove_const_t<decltype(Op::calculate)>;
  using Desc = typename Op::Desc;
  static_assert(kArity<C> == 2 + kSlotCount<Op> + kAttrCount<Op>,
                "create's arguments: handle, descriptor pointer, the slots, the attributes");
  static_assert(kArity<K> == 3 + kSlotCount<Op> + 1,
                "calculate's arguments: descriptor, workspace, size, the slots, stream");
  static_assert(std::is_same_v<Arg<C, 0>, infiniopHandle_t> && std::is_same_v<Arg<C, 1>, Desc *>);
  static_assert(std::is_same_v<Arg<K, 0>, Desc> &&
                std::is_same_v<Arg<std::remove_const_t<decltype(Op::workspace)>, 0>, Desc> &&
                std::is_same_v<Arg<std::remove_const_t<decltype(Op::destroy)>, 0>, Desc>);
  static_assert(slotsMatch<Op>(std::make_index_sequence<kSlotCount<Op>>()),
                "a slot is not a tensor descriptor in create, or its output flag is not "
                "calculate's void * (output) / const void * (input)");
  (void)kAttrKinds<Op>;  // every attribute type known
  return true;
}

template <class... Op>
constexpr bool allMatch(std::tuple<Op...> *) {
  return (matchesHeaders<Op>() && ...);
}
static_assert(allMatch(static_cast<All *>(nullptr)));

}  // namespace infiniop_ops
