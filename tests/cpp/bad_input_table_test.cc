// SPDX-License-Identifier: Apache-2.0
// One table of bad inputs (issue 16 item 4): every row names an operator, a case, the call that
// must fail and its documented status. One parametrized test runs every row on every built
// device: the call returns the status, infiniopGetLastError() says why, the descriptor
// out-pointer (or size out-pointer) is not written and every byte of every buffer (outputs
// poisoned, inputs, index data) is unchanged, read back from the device. docs/errors.md is
// generated from the same table; BadInputTableDocs.ErrorsMdMatchesTable keeps it true
// (INFINIOP_WRITE_ERRORS_MD=1 rewrites it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "op_specs.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

enum class Call { kCreate, kWorkspaceSize, kCalculate, kDestroy };
const char *callName(Call c) {
  switch (c) {
    case Call::kCreate:
      return "create";
    case Call::kWorkspaceSize:
      return "workspace size";
    case Call::kCalculate:
      return "calculate";
    default:
      return "destroy";
  }
}

// What a row breaks, applied to the operator's valid configuration.
struct Broken {
  std::vector<Slot> slots;
  std::vector<std::vector<ptrdiff_t>> strides;  // empty: contiguous
  std::vector<bool> null_desc, null_data;
  std::vector<int> alias;  // data pointer = that slot's buffer; -1 none
  Attrs attrs;
  bool null_handle = false, null_desc_out = false, null_size_out = false;
  enum class Desc { kOwn, kNull, kOtherOperator, kTensor } desc = Desc::kOwn;
  enum class Workspace { kEnough, kOneByteShort, kNullWithSize } workspace = Workspace::kEnough;

  explicit Broken(const OpSpec &op)
      : slots(op.slots),
        strides(op.slots.size()),
        null_desc(op.slots.size(), false),
        null_data(op.slots.size(), false),
        alias(op.slots.size(), -1),
        attrs(op.attrs) {
    for (size_t i = 0; i < slots.size(); ++i) null_desc[i] = slots[i].absent;
  }
  Slot &slot(const OpSpec &op, const char *name) { return slots[slotIndex(op, name)]; }
};

struct Row {
  std::string op;    // operator (or TensorDescriptor)
  std::string name;  // the case, an identifier
  Call call;
  infiniStatus_t expected;
  std::string what;  // for docs/errors.md
  std::function<void(const OpSpec &, Broken &)> apply;
};

// A row that only changes attributes, index values or one slot.
using Apply = std::function<void(const OpSpec &, Broken &)>;

Apply setAttr(size_t i, double v) {
  return [i, v](const OpSpec &, Broken &s) { s.attrs[i] = v; };
}
Apply setValues(const char *slot, std::vector<int64_t> values) {
  return [slot, values](const OpSpec &op, Broken &s) { s.slot(op, slot).values = values; };
}
Apply setShape(const char *slot, std::vector<size_t> shape) {
  return [slot, shape](const OpSpec &op, Broken &s) { s.slot(op, slot).shape = shape; };
}
Apply setDtype(const char *slot, infiniDtype_t dtype) {
  return [slot, dtype](const OpSpec &op, Broken &s) { s.slot(op, slot).dtype = dtype; };
}
Apply dropDesc(const char *slot) {
  return [slot](const OpSpec &op, Broken &s) { s.null_desc[slotIndex(op, slot)] = true; };
}
Apply both(Apply a, Apply b) {
  return [a, b](const OpSpec &op, Broken &s) {
    a(op, s);
    b(op, s);
  };
}

bool isIndexDtype(infiniDtype_t d) {
  return d == I32 || d == I64;
}

// A slot whose last dim alone may grow and stay valid: MoeGatingWeights' x (any E >= k; its
// operator rows break k against E instead) and MoeZLoss's x (no other tensor has E).
bool lastDimFree(const std::string &op, const std::string &slot) {
  return (op == "MoeGatingWeights" || op == "MoeZLoss") && slot == "x";
}

// A float slot whose dtype is its own: the gated *Quant operators' x (F32, F16 or BF16 whatever
// the F32 scales and the integer y); DequantSwigluQuant's bias (F32, F16, BF16 or I32).
bool dtypeFree(const std::string &op, const std::string &slot) {
  return ((op == "SwiGluQuant" || op == "GeluMulQuant" || op == "ClippedSwigluQuant" ||
           op == "MoeInitRoutingQuantV2") &&
          slot == "x") ||
         (op == "DequantSwigluQuant" && slot == "bias");
}

// Rows every operator has, derived from its slots.
void addGenericRows(const OpSpec &op, std::vector<Row> &rows) {
  const std::string o = op.name;
  const auto add = [&](std::string name, Call call, infiniStatus_t expected, std::string what,
                       Apply apply) {
    rows.push_back({o, std::move(name), call, expected, std::move(what), std::move(apply)});
  };
  add("NullHandle", Call::kCreate, INFINI_STATUS_NULL_POINTER, "NULL handle",
      [](const OpSpec &, Broken &s) { s.null_handle = true; });
  add("NullDescriptorOut", Call::kCreate, INFINI_STATUS_NULL_POINTER, "NULL descriptor out-pointer",
      [](const OpSpec &, Broken &s) { s.null_desc_out = true; });
  for (size_t i = 0; i < op.slots.size(); ++i) {
    const Slot &slot = op.slots[i];
    const std::string n = slot.name;
    if (slot.absent) continue;
    if (!slot.nullable)
      add("NullDesc_" + n, Call::kCreate, INFINI_STATUS_NULL_POINTER, "NULL `" + n + "` descriptor",
          [i](const OpSpec &, Broken &s) { s.null_desc[i] = true; });
    add("NullData_" + n, Call::kCalculate, INFINI_STATUS_NULL_POINTER,
        "NULL `" + n + "` data pointer (descriptor given)",
        [i](const OpSpec &, Broken &s) { s.null_data[i] = true; });
    if (isIndexDtype(slot.dtype)) {
      add("IndexI16_" + n, Call::kCreate, INFINI_STATUS_BAD_TENSOR_DTYPE,
          "`" + n + "` of dtype I16 (an index tensor: I32 or I64)",
          [i](const OpSpec &, Broken &s) { s.slots[i].dtype = INFINI_DTYPE_I16; });
      add("FloatDtype_" + n, Call::kCreate, INFINI_STATUS_BAD_TENSOR_DTYPE,
          "`" + n + "` of dtype F32 (an index tensor)",
          [i](const OpSpec &, Broken &s) { s.slots[i].dtype = F32; });
    } else {
      // A 0-D float tensor (a loss) is F32 whatever the others' dtype: it has no dtype to
      // mismatch with a tensor that has dims, nor a last dim; and a tensor with dims that is
      // the only one beside a 0-D one (MoeZLoss's x and loss) has neither to mismatch.
      bool peer = false, scalar = false;
      for (const Slot &other : op.slots) {
        peer |=
            &other != &slot && !isIndexDtype(other.dtype) && !other.shape.empty() && !other.absent;
        scalar |= !isIndexDtype(other.dtype) && other.shape.empty();
      }
      peer |= !scalar;  // the rule only concerns an operator with a 0-D float tensor
      if ((peer || slot.shape.empty()) && !dtypeFree(o, n))
        add("DtypeMismatch_" + n, Call::kCreate, INFINI_STATUS_BAD_TENSOR_DTYPE,
            "`" + n + "` F16, the others F32",
            [i](const OpSpec &, Broken &s) { s.slots[i].dtype = INFINI_DTYPE_F16; });
      if (!slot.shape.empty() && !lastDimFree(o, n))  // a scalar has no last dim
        add("LastDimPlusOne_" + n, Call::kCreate, INFINI_STATUS_BAD_TENSOR_SHAPE,
            "`" + n + "`'s last dim one longer",
            [i](const OpSpec &, Broken &s) { s.slots[i].shape.back() += 1; });
    }
    if (slot.output && !slot.shape.empty()) {
      add("SelfOverlapping_" + n, Call::kCreate, INFINI_STATUS_BAD_TENSOR_STRIDES,
          "`" + n + "` overlapping itself (stride 0 on its first dim)",
          [i](const OpSpec &, Broken &s) {
            std::vector<ptrdiff_t> st(s.slots[i].shape.size(), 1);
            for (size_t d = st.size() - 1; d-- > 0;)
              st[d] = st[d + 1] * static_cast<ptrdiff_t>(s.slots[i].shape[d + 1]);
            st[0] = 0;
            s.strides[i] = st;
          });
    }
  }
  bool has_float_input = false, has_float = false;
  for (const Slot &s : op.slots) {
    has_float_input |= !isIndexDtype(s.dtype) && !s.output;
    has_float |= !isIndexDtype(s.dtype);
  }
  // Every float tensor of an integer or double dtype (an operator of index tensors alone, such
  // as MoeExpertCounts, has none to change).
  if (has_float) {
    add("AllI32", Call::kCreate, INFINI_STATUS_BAD_TENSOR_DTYPE, "every float tensor I32",
        [](const OpSpec &, Broken &s) {
          for (Slot &slot : s.slots)
            if (!isIndexDtype(slot.dtype)) slot.dtype = I32;
        });
    add("AllF64", Call::kCreate, INFINI_STATUS_BAD_TENSOR_DTYPE, "every float tensor F64",
        [](const OpSpec &, Broken &s) {
          for (Slot &slot : s.slots)
            if (!isIndexDtype(slot.dtype)) slot.dtype = INFINI_DTYPE_F64;
        });
  }
  // The first output at the address of an input, in another layout (transposed when the shapes
  // are equal; else a shorter view at the same address).
  if (has_float_input) {
    add("OutputAliasesInputOtherLayout", Call::kCalculate, INFINI_STATUS_BAD_TENSOR_STRIDES,
        "the first output at an input's address with another layout",
        [](const OpSpec &, Broken &s) {
          const Slot &out = s.slots[0];
          int target = -1;
          for (size_t i = 0; i < s.slots.size() && target < 0; ++i)
            if (!s.slots[i].output && s.slots[i].shape == out.shape &&
                s.slots[i].dtype == out.dtype)
              target = static_cast<int>(i);
          if (target >= 0) {
            s.strides[0] = columnMajorStrides(out.shape);
          } else {
            for (size_t i = 0; i < s.slots.size() && target < 0; ++i)
              if (!s.slots[i].output && s.slots[i].dtype == out.dtype) target = static_cast<int>(i);
            // No input of the output's dtype (an INT8 y of F32 x): any input, as bytes.
            for (size_t i = 0; i < s.slots.size() && target < 0; ++i)
              if (!s.slots[i].output && !s.slots[i].absent) target = static_cast<int>(i);
          }
          s.alias[0] = target;
        });
  }
  // The second output present at the first output's address.
  // Where the second output's elements are wider (an INT8 y, an F32 scale), the first output at
  // the second's address instead: the other way its pointer would be misaligned, BAD_PARAM first.
  int outputs = 0;
  size_t second = 0;
  for (size_t i = 0; i < op.slots.size(); ++i) {
    outputs += op.slots[i].output && !op.slots[i].absent;
    if (outputs == 2 && !second) second = i;
  }
  const bool wider = outputs > 1 && infiniop::dtypeSize(op.slots[second].dtype) >
                                        infiniop::dtypeSize(op.slots[0].dtype);
  if (outputs > 1)
    add("OutputsOverlap", Call::kCalculate, INFINI_STATUS_BAD_TENSOR_STRIDES,
        wider ? "the first output at the second output's address (its elements are wider)"
              : "the second output at the first output's address",
        [second, wider](const OpSpec &, Broken &s) {
          if (wider)
            s.alias[0] = static_cast<int>(second);
          else
            s.alias[second] = 0;
        });
  add("NullDescriptor_Calculate", Call::kCalculate, INFINI_STATUS_NULL_POINTER, "NULL descriptor",
      [](const OpSpec &, Broken &s) { s.desc = Broken::Desc::kNull; });
  add("NullDescriptor_WorkspaceSize", Call::kWorkspaceSize, INFINI_STATUS_NULL_POINTER,
      "NULL descriptor", [](const OpSpec &, Broken &s) { s.desc = Broken::Desc::kNull; });
  add("NullDescriptor_Destroy", Call::kDestroy, INFINI_STATUS_NULL_POINTER, "NULL descriptor",
      [](const OpSpec &, Broken &s) { s.desc = Broken::Desc::kNull; });
  add("NullSizeOut", Call::kWorkspaceSize, INFINI_STATUS_NULL_POINTER, "NULL size out-pointer",
      [](const OpSpec &, Broken &s) { s.null_size_out = true; });
  for (Call c : {Call::kCalculate, Call::kWorkspaceSize, Call::kDestroy}) {
    const std::string suffix = c == Call::kCalculate       ? "_Calculate"
                               : c == Call::kWorkspaceSize ? "_WorkspaceSize"
                                                           : "_Destroy";
    add("OtherOperatorsDescriptor" + suffix, c, INFINI_STATUS_BAD_PARAM,
        "another operator's descriptor",
        [](const OpSpec &, Broken &s) { s.desc = Broken::Desc::kOtherOperator; });
    add("TensorDescriptorAsDescriptor" + suffix, c, INFINI_STATUS_BAD_PARAM,
        "a tensor descriptor as the descriptor",
        [](const OpSpec &, Broken &s) { s.desc = Broken::Desc::kTensor; });
  }
  add("WorkspaceOneByteShort", Call::kCalculate, INFINI_STATUS_INSUFFICIENT_WORKSPACE,
      "workspace one byte short (where the device asks for one)",
      [](const OpSpec &, Broken &s) { s.workspace = Broken::Workspace::kOneByteShort; });
  add("NullWorkspace", Call::kCalculate, INFINI_STATUS_NULL_POINTER,
      "NULL workspace with its size (where the device asks for one)",
      [](const OpSpec &, Broken &s) { s.workspace = Broken::Workspace::kNullWithSize; });
}

// Rows of one operator's own rules (attributes, shape rules, index values).
void addOperatorRows(std::vector<Row> &rows) {
  const auto add = [&](const char *op, const char *name, Call call, infiniStatus_t expected,
                       const char *what, Apply apply) {
    rows.push_back({op, name, call, expected, what, std::move(apply)});
  };
  const auto P = INFINI_STATUS_BAD_PARAM;
  const auto S = INFINI_STATUS_BAD_TENSOR_SHAPE;
  const auto T = INFINI_STATUS_BAD_TENSOR_DTYPE;
  const auto N = INFINI_STATUS_NULL_POINTER;
  const auto C = Call::kCreate;
  const auto K = Call::kCalculate;
  for (const char *op : {"Gelu", "GeluBackwardV2", "GeluMul", "GeluMulBackward"}) {
    add(op, "ApproximateTwo", C, P, "`approximate` 2", setAttr(0, 2));
    add(op, "ApproximateNegative", C, P, "`approximate` -1", setAttr(0, -1));
  }
  add("GeluMul", "OddLastDim", C, S, "`input`'s last dim odd",
      both(setShape("input", {2, 7}), setShape("out", {2, 3})));
  add("GeluMulBackward", "OddLastDim", C, S, "`input`'s last dim odd",
      both(both(setShape("input", {2, 7}), setShape("input_grad", {2, 7})),
           setShape("out_grad", {2, 3})));
  add("GeluBackward", "RankDiffers", C, S, "`grad_output` of another rank",
      setShape("grad_output", {1, 2, 4}));
  for (const char *op : {"SwiGlu", "SwiGluBackward"}) {
    add(op, "DimTooLarge", C, P, "`dim` 2 (rank 2)", setAttr(0, 2));
    add(op, "DimTooSmall", C, P, "`dim` -3 (rank 2)", setAttr(0, -3));
  }
  add("SwiGlu", "OddSplit", C, S, "`x`'s split dim odd",
      both(setShape("x", {2, 7}), setShape("y", {2, 3})));
  add("SwiGluBackward", "OddSplit", C, S, "`x`'s split dim odd",
      both(both(setShape("x", {2, 7}), setShape("x_grad", {2, 7})), setShape("y_grad", {2, 3})));
  for (const char *op : {"ClippedSwigluV2", "ClippedSwigluBackwardV2"}) {
    add(op, "ClampModeTwo", C, P, "`clamp_mode` 2", setAttr(5, 2));
    add(op, "ClampModeNegative", C, P, "`clamp_mode` -1", setAttr(5, -1));
  }
  // ClippedSwiglu's alpha, limit and bias, attributes `alpha`, alpha + 1 and alpha + 2 (also
  // ClippedSwigluQuant's).
  const auto clippedAttributeRows = [&](const char *op, size_t alpha) {
    add(op, "LimitZero", C, P, "`limit` 0", setAttr(alpha + 1, 0));
    add(op, "LimitNegative", C, P, "`limit` -1", setAttr(alpha + 1, -1));
    add(op, "LimitNaN", C, P, "`limit` NaN", setAttr(alpha + 1, std::nan("")));
    add(op, "AlphaNaN", C, P, "`alpha` NaN", setAttr(alpha, std::nan("")));
    add(op, "AlphaInfinite", C, P, "`alpha` +inf",
        setAttr(alpha, std::numeric_limits<double>::infinity()));
    add(op, "BiasInfinite", C, P, "`bias` -inf",
        setAttr(alpha + 2, -std::numeric_limits<double>::infinity()));
  };
  for (const char *op :
       {"ClippedSwiglu", "ClippedSwigluBackward", "ClippedSwigluV2", "ClippedSwigluBackwardV2"}) {
    add(op, "DimTooLarge", C, P, "`dim` 2 (rank 2)", setAttr(0, 2));
    add(op, "DimTooSmall", C, P, "`dim` -3 (rank 2)", setAttr(0, -3));
    clippedAttributeRows(op, 1);
    add(op, "GroupIndexRank2", C, S, "`group_index` of rank 2", setShape("group_index", {1, 1}));
    add(op, "GroupIndexI32", C, INFINI_STATUS_BAD_TENSOR_DTYPE, "`group_index` INT32",
        setDtype("group_index", I32));
    add(op, "GroupCountNegative", K, P, "a negative `group_index` count",
        setValues("group_index", {-1}));
    add(op, "GroupCountMin", K, P, "`group_index` count INT64_MIN",
        setValues("group_index", {INT64_MIN}));
  }
  // A staged layout (dim 0 over padded rows) needs a workspace on every device (ClippedSwiglu).
  const auto staged = [](Broken::Workspace w) {
    return [w](const OpSpec &op, Broken &s) {
      s.attrs[0] = 0;
      for (size_t i = 0; i < s.slots.size(); ++i) {
        if (isIndexDtype(s.slots[i].dtype)) continue;
        s.slots[i].shape =
            op.slots[i].shape[1] == 4 ? std::vector<size_t>{2, 2} : std::vector<size_t>{4, 2};
        s.strides[i] = paddedStrides(s.slots[i].shape);
      }
      s.workspace = w;
    };
  };
  for (const char *op : {"ClippedSwiglu", "ClippedSwigluV2"}) {
    add(op, "StagedWorkspaceOneByteShort", K, INFINI_STATUS_INSUFFICIENT_WORKSPACE,
        "a staged layout (dim 0, padded rows) with its workspace one byte short",
        staged(Broken::Workspace::kOneByteShort));
    add(op, "StagedNullWorkspace", K, INFINI_STATUS_NULL_POINTER,
        "a staged layout with a NULL workspace of the right size",
        staged(Broken::Workspace::kNullWithSize));
  }
  add("ClippedSwiglu", "OddSplit", C, S, "`x`'s split dim odd",
      both(setShape("x", {2, 7}), setShape("y", {2, 3})));
  add("ClippedSwigluBackward", "OddSplit", C, S, "`x`'s split dim odd",
      both(both(setShape("x", {2, 7}), setShape("x_grad", {2, 7})), setShape("y_grad", {2, 3})));
  add("ClippedSwigluV2", "OddSplit", C, S, "`x`'s split dim odd",
      both(setShape("x", {2, 7}), setShape("y", {2, 3})));
  add("ClippedSwigluBackwardV2", "OddSplit", C, S, "`x`'s split dim odd",
      both(both(setShape("x", {2, 7}), setShape("x_grad", {2, 7})), setShape("y_grad", {2, 3})));

  // MoeFinalizeRoutingV2: R = 2, K = 1, E = 3, H = 4.
  const char *fin = "MoeFinalizeRoutingV2";
  add(fin, "ModeFour", C, P, "`drop_pad_mode` 4", setAttr(0, 4));
  add(fin, "ModeNegative", C, P, "`drop_pad_mode` -1", setAttr(0, -1));
  add(fin, "RowIdxOutOfRange", K, P, "`expanded_row_idx` value R*K",
      setValues("expanded_row_idx", {2, 0}));
  add(fin, "RowIdxNegative", K, P, "`expanded_row_idx` value -1 (dropless mode)",
      setValues("expanded_row_idx", {-1, 0}));
  add(fin, "ExpertIdxOutOfRange", K, P, "`expert_idx` value E", setValues("expert_idx", {3, 0}));
  add(fin, "ExpertIdxNegative", K, P, "`expert_idx` value -1", setValues("expert_idx", {-1, 0}));
  add(fin, "RowIdxLength", C, S, "`expanded_row_idx` not R*K long",
      setShape("expanded_row_idx", {3}));
  add(fin, "ScalesShape", C, S, "`scales` not (R, K)", setShape("scales", {3, 1}));
  add(fin, "BiasWithoutExpertIdx", C, P, "`bias` without `expert_idx`", dropDesc("expert_idx"));
  add(fin, "X2WithoutX1", C, P, "`x2` without `x1`", dropDesc("x1"));
  const char *fing = "MoeFinalizeRoutingV2Grad";
  add(fing, "ModeFour", C, P, "`drop_pad_mode` 4", setAttr(0, 4));
  add(fing, "RowIdxOutOfRange", K, P, "`expanded_row_idx` value R*K",
      setValues("expanded_row_idx", {2, 0}));
  add(fing, "RowIdxNegative", K, P, "`expanded_row_idx` value -1 (dropless mode)",
      setValues("expanded_row_idx", {-1, 0}));
  add(fing, "ExpertIdxOutOfRange", K, P, "`expert_idx` value E", setValues("expert_idx", {3, 0}));
  add(fing, "RowIdxLength", C, S, "`expanded_row_idx` not R*K long",
      setShape("expanded_row_idx", {3}));

  const char *init = "MoeInitRoutingV2";
  add(init, "ModeTwo", C, P, "`drop_pad_mode` 2", setAttr(3, 2));
  add(init, "ExpertNumZero", C, P, "`expert_num` 0", setAttr(2, 0));
  add(init, "ActiveNumNegative", C, P, "`active_num` -1", setAttr(0, -1));
  add(init, "CountFlagThree", C, P, "`expert_tokens_count_or_cumsum_flag` 3", setAttr(4, 3));
  add(init, "CountLength", C, S, "`expert_tokens_count_or_cumsum` not E long",
      setShape("expert_tokens_count_or_cumsum", {2}));
  add(init, "ExpertIdxOutOfRange", K, P, "`expert_idx` value `expert_num`",
      setValues("expert_idx", {3, 0}));
  add(init, "ExpertIdxNegative", K, P, "`expert_idx` value -1", setValues("expert_idx", {-1, 0}));
  add(init, "RowIdxLength", C, S, "`expanded_row_idx` not R*K long",
      setShape("expanded_row_idx", {3}));
  add(init, "ExpertIdxRank1", C, S, "`expert_idx` of rank 1", setShape("expert_idx", {2}));

  const char *initg = "MoeInitRoutingV2Grad";
  add(initg, "TopKZero", C, P, "`top_k` 0", setAttr(0, 0));
  add(initg, "ModeTwo", C, P, "`drop_pad_mode` 2", setAttr(1, 2));
  add(initg, "ActiveNumNegative", C, P, "`active_num` -1", setAttr(2, -1));
  add(initg, "RowIdxOutOfRange", K, P, "`expanded_row_idx` value R*top_k",
      setValues("expanded_row_idx", {2, 0}));
  add(initg, "RowIdxNegative", K, P, "`expanded_row_idx` value -1 (dropless mode)",
      setValues("expanded_row_idx", {-1, 0}));
  add(initg, "RowIdxLength", C, S, "`expanded_row_idx` not R*top_k long",
      setShape("expanded_row_idx", {3}));

  const char *gs = "MoeGatingTopKSoftmax";
  add(gs, "KZero", C, P, "`k` 0", setAttr(0, 0));
  add(gs, "KAboveE", C, P, "`k` 5 (E = 4)", setAttr(0, 5));
  add(gs, "RenormTwo", C, P, "`renorm` 2", setAttr(1, 2));
  add(gs, "SoftmaxOutWithRenorm", C, P, "`softmax_out` given with `renorm` 1", setAttr(1, 1));
  add(gs, "XRankOne", C, S, "`x` of rank 1", setShape("x", {4}));
  add(gs, "NoExperts", C, S, "`x`'s last dim 0 (E = 0)", setShape("x", {2, 0}));
  add(gs, "FinishedRankTwo", C, S, "`finished` of shape (2, 1)", setShape("finished", {2, 1}));
  const char *gsg = "MoeGatingTopKSoftmaxGrad";
  add(gsg, "RenormTwo", C, P, "`renorm` 2", setAttr(0, 2));
  add(gsg, "KAboveE", C, S, "`grad_y`'s last dim 5 (k > E = 4)", setShape("grad_y", {2, 5}));
  add(gsg, "ExpertIdxShape", C, S, "`expert_idx` of another shape than `grad_y`",
      setShape("expert_idx", {2, 2}));
  add(gsg, "ExpertIdxOutOfRange", K, P, "`expert_idx` value E on a row finished does not mark",
      setValues("expert_idx", {4, 4}));
  add(gsg, "ExpertIdxNegative", K, P, "`expert_idx` value -1", setValues("expert_idx", {-1, 0}));
  const char *gt = "MoeGatingTopK";
  add(gt, "KZero", C, P, "`k` 0", setAttr(0, 0));
  add(gt, "KAboveSelectable", C, P, "`k` 3 with `k_group` 1 of 2 groups of 2",
      [](const OpSpec &, Broken &s) { s.attrs[0] = 3, s.attrs[2] = 2; });
  add(gt, "KGroupZero", C, P, "`k_group` 0", setAttr(1, 0));
  add(gt, "KGroupAboveGroups", C, P, "`k_group` 2, `group_count` 1", setAttr(1, 2));
  add(gt, "GroupCountZero", C, P, "`group_count` 0", setAttr(2, 0));
  add(gt, "GroupCountNotDividing", C, P, "`group_count` 3 (E = 4)", setAttr(2, 3));
  add(gt, "ModeThree", C, P, "`group_select_mode` 3", setAttr(3, 3));
  add(gt, "ModeTwoFewerThanKGroup", C, P,
      "`group_select_mode` 2 with `k` 1 < `k_group` 2 (sums k / k_group = 0 scores)",
      [](const OpSpec &, Broken &s) {
        s.attrs[0] = 1, s.attrs[1] = 2, s.attrs[2] = 2, s.attrs[3] = 2;
      });
  add(gt, "ModeOneSingletons", C, P, "`group_select_mode` 1 with groups of 1 expert",
      [](const OpSpec &, Broken &s) { s.attrs[2] = 4, s.attrs[3] = 1; });
  add(gt, "RenormOne", C, P, "`renorm` 1 (only 0 is defined)", setAttr(4, 1));
  add(gt, "NormTypeThree", C, P, "`norm_type` 3 (0 softmax, 1 sigmoid, 2 sqrtsoftplus)",
      setAttr(5, 3));
  const char *ec = "MoeExpertCounts";
  add(ec, "NumExpertsZero", C, P, "`num_experts` 0", setAttr(0, 0));
  add(ec, "CountsNotE", C, S, "`counts` (4) with `num_experts` 3", setShape("counts", {4}));
  add(ec, "CountsRankTwo", C, S, "`counts` (3, 1)", setShape("counts", {3, 1}));
  add(ec, "ExpertAboveE", K, P, "an `expert_idx` value 4 > E = 3 (E itself marks a finished row)",
      setValues("expert_idx", {2, 0, 4, 1}));
  add(ec, "ExpertNegative", K, P, "an `expert_idx` value -1",
      setValues("expert_idx", {2, -1, 3, 1}));
  const char *xc = "MoeExpertCapacity";
  add(xc, "NumExpertsZero", C, P, "`num_experts` 0", setAttr(0, 0));
  add(xc, "NumExpertsAbove2To24", C, P, "`num_experts` 2^24 + 1 (MoeInitRoutingV2's bound)",
      setAttr(0, 16777217));
  add(xc, "CapacityNegative", C, P, "`capacity` -1", setAttr(1, -1));
  add(xc, "DropPolicyTwo", C, P, "`drop_policy` 2 (0 position, 1 probability)", setAttr(2, 2));
  add(xc, "ProbabilityWithoutWeights", C, N, "`drop_policy` 1 with a NULL `weights` descriptor",
      both(dropDesc("weights"), dropDesc("weights_out")));
  add(xc, "WeightsOutWithoutWeights", C, N, "`weights_out` given, `weights` NULL (`drop_policy` 0)",
      both(dropDesc("weights"), setAttr(2, 0)));
  add(xc, "KeptIdxNotExpertIdxShape", C, S, "`kept_idx` (4), `expert_idx` (2, 2)",
      setShape("kept_idx", {4}));
  add(xc, "WeightsOutDtypeNotWeights", C, T, "`weights_out` F16, `weights` F32",
      setDtype("weights_out", INFINI_DTYPE_F16));
  add(xc, "ExpertAboveE", K, P, "an `expert_idx` value 4 > E = 3 (E itself marks a dropped slot)",
      setValues("expert_idx", {2, 0, 4, 1}));
  add(xc, "ExpertNegative", K, P, "an `expert_idx` value -1",
      setValues("expert_idx", {2, -1, 3, 1}));
  // SwiGluQuant, GeluMulQuant and ClippedSwigluQuant: GeluMulQuant's attributes are SwiGluQuant's
  // after `approximate` (attribute 0); ClippedSwigluQuant's quant_mode, group_size and
  // scale_format are attributes 4-6 (after alpha, limit, bias, interleaved; no activate_left).
  // Configuration: y (2, 4) I8 / F8, scale (2, 2), x (2, 8), smooth_scales (2, 4), group_index
  // (2) = {1, 1}, dynamic, group_size 2.
  for (const char *op : {"SwiGluQuant", "GeluMulQuant", "ClippedSwigluQuant"}) {
    const bool clipped = std::string(op) == "ClippedSwigluQuant";
    const size_t a = std::string(op) == "GeluMulQuant" ? 1 : clipped ? 3 : 0;
    if (!clipped) {
      add(op, "ActivateLeftTwo", C, P, "`activate_left` 2", setAttr(a + 0, 2));
      add(op, "ActivateLeftNegative", C, P, "`activate_left` -1", setAttr(a + 0, -1));
    }
    add(op, "QuantModeTwo", C, P, "`quant_mode` 2 (0 static, 1 dynamic)", setAttr(a + 1, 2));
    add(op, "QuantModeNegative", C, P, "`quant_mode` -1", setAttr(a + 1, -1));
    add(op, "ScaleFormatTwo", C, P, "`scale_format` 2 (0 F32, 1 UE8M0)", setAttr(a + 3, 2));
    add(op, "StaticUe8m0", C, P, "`scale_format` 1 (UE8M0) with `quant_mode` 0 (static)",
        both(setAttr(a + 1, 0), setAttr(a + 3, 1)));
    add(op, "GroupSizeNegative", C, P, "`group_size` -2", setAttr(a + 2, -2));
    add(op, "GroupSizeNotDividingH", C, S, "`group_size` 3, H = 4",
        both(setAttr(a + 2, 3), setShape("scale", {2, 1})));
    add(op, "GroupSizePastH", C, S, "`group_size` 8, H = 4 (G would be 0)",
        both(setAttr(a + 2, 8), setShape("scale", {2, 0})));
    add(op, "GroupIndexWithoutSmooth", C, P, "`group_index` given, `smooth_scales` NULL",
        dropDesc("smooth_scales"));
    add(op, "XOddLastDim", C, S, "`x`'s last dim odd (2, 7)",
        both(setShape("x", {2, 7}), setShape("y", {2, 3})));
    add(op, "XRankZero", C, S, "`x` 0-D", setShape("x", {}));
    add(op, "XI8", C, T, "`x` INT8", setDtype("x", INFINI_DTYPE_I8));
    add(op, "YF16", C, T, "`y` F16 (I8 or F8 is required)", setDtype("y", INFINI_DTYPE_F16));
    add(op, "YU8", C, T, "`y` U8", setDtype("y", INFINI_DTYPE_U8));
    add(op, "YRowsDiffer", C, S, "`y` (3, 4), `x` (2, 8)", setShape("y", {3, 4}));
    add(op, "YRankDiffers", C, S, "`y` (1, 2, 4), `x` (2, 8)", setShape("y", {1, 2, 4}));
    add(op, "ScaleOneGroup", C, S, "`scale` (2, 1) with G = 2", setShape("scale", {2, 1}));
    add(op, "ScaleRowsDiffer", C, S, "`scale` (1, 2), `x` (2, 8)", setShape("scale", {1, 2}));
    add(op, "ScaleBF16", C, T, "`scale` BF16 (F32 is required)",
        setDtype("scale", INFINI_DTYPE_BF16));
    add(op, "SmoothNotEH", C, S, "`smooth_scales` (3, 4) with `group_index` (2)",
        setShape("smooth_scales", {3, 4}));
    add(op, "SmoothRowWithGroupIndex", C, S, "`smooth_scales` (4) with `group_index` (2)",
        setShape("smooth_scales", {4}));
    add(op, "SmoothEHWithoutGroupIndex", C, S, "`smooth_scales` (2, 4) without `group_index`",
        dropDesc("group_index"));
    add(op, "SmoothF16", C, T, "`smooth_scales` F16 (F32 is required)",
        setDtype("smooth_scales", INFINI_DTYPE_F16));
    add(op, "GroupIndexI32", C, T, "`group_index` INT32 (INT64 is required)",
        setDtype("group_index", I32));
    add(op, "GroupIndexRankTwo", C, S, "`group_index` (2, 1)", setShape("group_index", {2, 1}));
    add(op, "GroupIndexEmpty", C, S, "`group_index` (0), `smooth_scales` (0, 4): no groups",
        both(setShape("group_index", {0}), setShape("smooth_scales", {0, 4})));
    add(op, "CountNegative", K, P, "a `group_index` count -1", setValues("group_index", {-1, 1}));
    add(op, "CountsPastRows", K, P, "`group_index` counts 2, 1: 3 rows of 2",
        setValues("group_index", {2, 1}));
    add(op, "CountPastRowsAlone", K, P, "a `group_index` count 2^63 - 1",
        setValues("group_index", {0, INT64_MAX}));
  }
  // DequantSwigluQuant: SwiGluQuant's rules on y, scale, smooth_scales and group_index (the
  // same shared checks; a few rows here), and its own tensors. Configuration: y (2, 4) I8, scale
  // (2, 2), x (2, 8) I32, weight_scale (2, 8), activation_scale (2, 1), bias (8) F32,
  // smooth_scales (2, 4), group_index (2) = {1, 1}, dynamic, group_size 2.
  const char *dq = "DequantSwigluQuant";
  add(dq, "ActivateLeftTwo", C, P, "`activate_left` 2", setAttr(0, 2));
  add(dq, "StaticUe8m0", C, P, "`scale_format` 1 (UE8M0) with `quant_mode` 0 (static)",
      both(setAttr(1, 0), setAttr(3, 1)));
  add(dq, "GroupSizeNotDividingH", C, S, "`group_size` 3, H = 4",
      both(setAttr(2, 3), setShape("scale", {2, 1})));
  add(dq, "XF32", C, T, "`x` F32 (INT32 accumulators are required)", setDtype("x", F32));
  add(dq, "XI64", C, T, "`x` INT64", setDtype("x", I64));
  add(dq, "XOddLastDim", C, S, "`x`'s last dim odd (2, 7)",
      both(setShape("x", {2, 7}), setShape("y", {2, 3})));
  add(dq, "YF16", C, T, "`y` F16 (I8 or F8 is required)", setDtype("y", INFINI_DTYPE_F16));
  add(dq, "WeightScaleF16", C, T, "`weight_scale` F16 (F32 is required)",
      setDtype("weight_scale", INFINI_DTYPE_F16));
  add(dq, "WeightScaleNotEOr2H", C, S, "`weight_scale` (3, 8) with `group_index` (2)",
      setShape("weight_scale", {3, 8}));
  add(dq, "WeightScaleH", C, S, "`weight_scale` (4): H, not 2H", setShape("weight_scale", {4}));
  add(dq, "WeightScaleEWithoutGroupIndex", C, S, "`weight_scale` (2, 8) without `group_index`",
      both(dropDesc("group_index"), setShape("smooth_scales", {4})));
  add(dq, "ActivationScaleF16", C, T, "`activation_scale` F16 (F32 is required)",
      setDtype("activation_scale", INFINI_DTYPE_F16));
  add(dq, "ActivationScaleRowsDiffer", C, S, "`activation_scale` (3, 1), `x` (2, 8)",
      setShape("activation_scale", {3, 1}));
  add(dq, "ActivationScaleNotOneColumn", C, S, "`activation_scale` (2, 2)",
      setShape("activation_scale", {2, 2}));
  add(dq, "BiasI8", C, T, "`bias` INT8 (F32, F16, BF16 or I32 is required)",
      setDtype("bias", INFINI_DTYPE_I8));
  add(dq, "BiasF64", C, T, "`bias` F64", setDtype("bias", INFINI_DTYPE_F64));
  add(dq, "BiasH", C, S, "`bias` (4): H, not 2H", setShape("bias", {4}));
  add(dq, "BiasENotGroupIndex", C, S, "`bias` (3, 8) with `group_index` (2)",
      setShape("bias", {3, 8}));
  add(dq, "GroupIndexChoosesNothing", C, P,
      "`group_index` given, `smooth_scales` NULL, `weight_scale` and `bias` (2H)",
      both(dropDesc("smooth_scales"), setShape("weight_scale", {8})));
  add(dq, "SmoothNotEH", C, S, "`smooth_scales` (3, 4) with `group_index` (2)",
      setShape("smooth_scales", {3, 4}));
  add(dq, "CountNegative", K, P, "a `group_index` count -1", setValues("group_index", {-1, 1}));
  add(dq, "CountsPastRows", K, P, "`group_index` counts 2, 1: 3 rows of 2",
      setValues("group_index", {2, 1}));
  // MoeInitRoutingQuantV2: MoeInitRoutingV2's checks (a few of its rows again), then the quant
  // part's. Configuration: dynamic, scale (3, 4) = (E, H), offset absent, dynamic_quant_scale (2).
  const char *iq = "MoeInitRoutingQuantV2";
  const auto give = [](const char *slot) {
    return [slot](const OpSpec &op, Broken &s) { s.null_desc[slotIndex(op, slot)] = false; };
  };
  const Apply to_static = both(setAttr(6, 0), setShape("scale", {1}));
  add(iq, "ModeTwo", C, P, "`drop_pad_mode` 2", setAttr(3, 2));
  add(iq, "ExpertNumZero", C, P, "`expert_num` 0", setAttr(2, 0));
  add(iq, "ExpertIdxOutOfRange", K, P, "`expert_idx` value `expert_num`",
      setValues("expert_idx", {3, 0}));
  add(iq, "QuantModeTwo", C, P, "`quant_mode` 2 (0 static, 1 dynamic)", setAttr(6, 2));
  add(iq, "QuantModeNegative", C, P, "`quant_mode` -1", setAttr(6, -1));
  add(iq, "StaticWithoutScale", C, P, "`quant_mode` 0 (static) with `scale` NULL",
      both(both(setAttr(6, 0), dropDesc("scale")), give("offset")));
  add(iq, "StaticWithoutOffset", C, P, "`quant_mode` 0 (static) with `offset` NULL", to_static);
  add(iq, "StaticScaleNotOne", C, S, "`quant_mode` 0 with `scale` (3, 4) (static: (1))",
      both(setAttr(6, 0), give("offset")));
  add(iq, "StaticOffsetNotOne", C, S, "`quant_mode` 0 with `offset` (2)",
      both(both(to_static, give("offset")), setShape("offset", {2})));
  add(iq, "StaticScaleF16", C, T, "`quant_mode` 0 with `scale` F16 (F32 is required)",
      both(both(to_static, give("offset")), setDtype("scale", INFINI_DTYPE_F16)));
  add(iq, "StaticOffsetBF16", C, T, "`quant_mode` 0 with `offset` BF16 (F32 is required)",
      both(both(to_static, give("offset")), setDtype("offset", INFINI_DTYPE_BF16)));
  add(iq, "DynamicWithOffset", C, P, "`quant_mode` 1 (dynamic) with `offset` given",
      give("offset"));
  add(iq, "DynamicScaleOutMissing", C, N, "`quant_mode` 1 with `dynamic_quant_scale` NULL",
      dropDesc("dynamic_quant_scale"));
  add(iq, "DynamicScaleOutShape", C, S, "`dynamic_quant_scale` (3) with A = 2",
      setShape("dynamic_quant_scale", {3}));
  add(iq, "DynamicScaleOutRankTwo", C, S, "`dynamic_quant_scale` (2, 1) in dropless mode (A)",
      setShape("dynamic_quant_scale", {2, 1}));
  add(iq, "DynamicScaleOutF16", C, T, "`dynamic_quant_scale` F16 (F32 is required)",
      setDtype("dynamic_quant_scale", INFINI_DTYPE_F16));
  add(iq, "SmoothRowsNotEOrOne", C, S, "`scale` (2, 4) with `expert_num` 3 ((E, H) or (1, H))",
      setShape("scale", {2, 4}));
  add(iq, "SmoothRankOne", C, S, "`scale` (4) in `quant_mode` 1", setShape("scale", {4}));
  add(iq, "SmoothColumnsNotH", C, S, "`scale` (3, 5) with H = 4", setShape("scale", {3, 5}));
  add(iq, "SmoothF16", C, T, "`scale` F16 in `quant_mode` 1 (F32 is required)",
      setDtype("scale", INFINI_DTYPE_F16));
  add(iq, "ExpandedXF32", C, T, "`expanded_x` F32 (I8 or F8 is required)",
      setDtype("expanded_x", F32));
  add(iq, "ExpandedXU8", C, T, "`expanded_x` U8", setDtype("expanded_x", INFINI_DTYPE_U8));
  add(iq, "XI8", C, T, "`x` INT8", setDtype("x", INFINI_DTYPE_I8));
  add("GeluMulQuant", "ApproximateTwo", C, P, "`approximate` 2", setAttr(0, 2));
  // ClippedSwigluQuant's alpha, limit, bias: ClippedSwiglu's rules.
  clippedAttributeRows("ClippedSwigluQuant", 0);
  add("ClippedSwigluQuant", "BiasNaN", C, P, "`bias` NaN", setAttr(2, std::nan("")));
  add("GeluMulQuant", "ApproximateNegative", C, P, "`approximate` -1", setAttr(0, -1));
  const char *bu = "MoeBiasUpdate";
  add(bu, "UpdateRateInfinite", C, P, "`update_rate` 1e39 (infinite in F32)", setAttr(0, 1e39));
  add(bu, "NoExperts", C, S, "`bias` and `counts` (0)",
      both(setShape("bias", {0}), setShape("counts", {0})));
  add(bu, "CountsNotBiasShape", C, S, "`counts` (4), `bias` (3)", setShape("counts", {4}));
  add(bu, "CountNegative", K, P, "a `counts` value -1", setValues("counts", {1, -1, 2}));
  add(bu, "CountsSumOverflows", K, P, "`counts` summing past 2^63 - 1",
      setValues("counts", {INT64_MAX, 1, 0}));
  for (const char *al : {"MoeAuxLoss", "MoeAuxLossGrad"}) {
    add(al, "ScoreFunctionThree", C, P, "`score_function` 3", setAttr(0, 3));
    add(al, "TopkZero", C, P, "`topk` 0", setAttr(1, 0));
    add(al, "TotalTokensZero", C, P, "`total_tokens` 0 (tokens_per_expert (E))", setAttr(2, 0));
    add(al, "CoeffNaN", C, P, "`coeff` NaN", setAttr(3, std::nan("")));
    add(al, "ScaleBeyondF32", C, P, "`coeff` 1e300: K infinite in F32", setAttr(3, 1e300));
    add(al, "CountsNotE", C, S, "`tokens_per_expert` (3), E = 4",
        setShape("tokens_per_expert", {3}));
    add(al, "CountsRankThree", C, S, "`tokens_per_expert` (1, 1, 4)",
        setShape("tokens_per_expert", {1, 1, 4}));
    add(al, "SequencesNotDividingRows", C, S, "`tokens_per_expert` (3, 4): B = 3, T = 2",
        setShape("tokens_per_expert", {3, 4}));
    add(al, "SequenceTotalNotRows", C, P, "`tokens_per_expert` (2, 4) with `total_tokens` 4, T = 2",
        both(both(setShape("tokens_per_expert", {2, 4}),
                  setValues("tokens_per_expert", {1, 0, 2, 1, 0, 1, 1, 2})),
             setAttr(2, 4)));
    add(al, "CountNegative", K, P, "a `tokens_per_expert` value -1",
        setValues("tokens_per_expert", {1, -1, 2, 1}));
    add(al, "CountAbove2To24", K, P, "a `tokens_per_expert` value 2^24 + 1",
        setValues("tokens_per_expert", {1, 16777217, 2, 1}));
  }
  add("MoeAuxLoss", "LossNotScalar", C, S, "`loss` (1)", setShape("loss", {1}));
  add("MoeAuxLossGrad", "GradLossNotScalar", C, S, "`grad_loss` (1)", setShape("grad_loss", {1}));
  const char *zl = "MoeZLoss";
  add(zl, "XRankOne", C, S, "`x` of rank 1", setShape("x", {3}));
  add(zl, "NoExperts", C, S, "`x`'s last dim 0 (E = 0)", setShape("x", {2, 0}));
  add(zl, "LossRankOne", C, S, "`loss` of shape (1) (0-D is required)", setShape("loss", {1}));
  add(zl, "CoeffInfinite", C, P, "`coeff` +inf", setAttr(0, INFINITY));
  add(zl, "CoeffBeyondF32", C, P, "`coeff` 1e39 (infinite in F32)", setAttr(0, 1e39));
  add(zl, "CoeffNaN", C, P, "`coeff` NaN", setAttr(0, std::nan("")));
  add(zl, "ScaleSubnormal", C, P, "`coeff` 1e-300 (coeff / T below F32's normal range)",
      setAttr(0, 1e-300));
  const char *zg = "MoeZLossGrad";
  add(zg, "XRankOne", C, S, "`x` and `grad_x` of rank 1",
      both(setShape("x", {3}), setShape("grad_x", {3})));
  add(zg, "GradXNotXShape", C, S, "`grad_x` (3, 3), `x` (2, 3)", setShape("grad_x", {3, 3}));
  add(zg, "GradLossRankOne", C, S, "`grad_loss` of shape (1) (0-D is required)",
      setShape("grad_loss", {1}));
  add(zg, "CoeffInfinite", C, P, "`coeff` +inf", setAttr(0, INFINITY));
  add(zg, "ScaleOverflows", C, P, "`coeff` 3e38 with T = 1 (2 coeff / T overflows F32)",
      both(both(setShape("x", {1, 3}), setShape("grad_x", {1, 3})), setAttr(0, 3e38)));
  add(gt, "ScaleInfinite", C, P, "`routed_scaling_factor` +inf", setAttr(6, INFINITY));
  add(gt, "ScaleBeyondF32", C, P, "`routed_scaling_factor` 1e39 (infinite in F32)",
      setAttr(6, 1e39));
  add(gt, "EpsNegative", C, P, "`eps` -1e-9", setAttr(7, -1e-9));
  add(gt, "EpsNaN", C, P, "`eps` NaN", setAttr(7, std::nan("")));
  add(gt, "BiasRankTwo", C, S, "`bias` of shape (1, 4)", setShape("bias", {1, 4}));
  const char *gtg = "MoeGatingTopKGrad";
  add(gtg, "NormTypeThree", C, P, "`norm_type` 3", setAttr(0, 3));
  add(gtg, "RenormOne", C, P, "`renorm` 1", setAttr(1, 1));
  add(gtg, "ScaleNaN", C, P, "`routed_scaling_factor` NaN", setAttr(2, std::nan("")));
  add(gtg, "EpsNegative", C, P, "`eps` -1", setAttr(3, -1));
  add(gtg, "KAboveE", C, S, "`grad_y`'s last dim 5 (k > E = 4)", setShape("grad_y", {2, 5}));
  add(gtg, "ExpertIdxOutOfRange", K, P, "`expert_idx` value E", setValues("expert_idx", {4, 0}));
  add(gtg, "ExpertIdxNegative", K, P, "`expert_idx` value -1", setValues("expert_idx", {-1, 0}));
  const char *gw = "MoeGatingWeights";
  add(gw, "NormTypeThree", C, P, "`norm_type` 3", setAttr(0, 3));
  add(gw, "RenormOne", C, P, "`renorm` 1", setAttr(1, 1));
  add(gw, "ScaleBeyondF32", C, P, "`routed_scaling_factor` 1e39 (infinite in F32)",
      setAttr(2, 1e39));
  add(gw, "EpsNegative", C, P, "`eps` -1", setAttr(3, -1));
  add(gw, "EpsNaN", C, P, "`eps` NaN", setAttr(3, std::nan("")));
  add(gw, "KAboveE", C, S, "`y` and `expert_idx` of last dim 5 (k > E = 4)",
      both(setShape("y", {2, 5}), setShape("expert_idx", {2, 5})));
  add(gw, "ExpertIdxRowsDiffer", C, S, "`expert_idx` (3, 2), `y` (2, 2)",
      setShape("expert_idx", {3, 2}));
  add(gw, "ExpertIdxOutOfRange", K, P, "`expert_idx` value E (row 1, column 0)",
      setValues("expert_idx", {1, 3, 4, 2}));
  add(gw, "ExpertIdxNegative", K, P, "`expert_idx` value -1",
      setValues("expert_idx", {-1, 0, 2, 2}));
}

// Tensor descriptor rows: the shape and stride checks every operator relies on.
struct TensorRow {
  const char *name;
  const char *what;
  infiniStatus_t expected;
  std::vector<size_t> shape;
  std::vector<ptrdiff_t> strides;
  int dtype;  // an int, cast at the call: 99 is no infiniDtype_t, and UBSan checks enum loads
};
const std::vector<TensorRow> &tensorRows() {
  static const std::vector<TensorRow> rows = {
      {"ShapeProductOverflows",
       "shape product past 2^64 ({2^32, 2^32, 2})",
       INFINI_STATUS_BAD_TENSOR_SHAPE,
       {size_t{1} << 32, size_t{1} << 32, 2},
       {},
       F32},
      {"BytesOverflow",
       "bytes past the headroom ({2^60} F32)",
       INFINI_STATUS_BAD_TENSOR_SHAPE,
       {size_t{1} << 60},
       {},
       F32},
      {"StrideExtentOverflows",
       "stride extent past PTRDIFF_MAX",
       INFINI_STATUS_BAD_TENSOR_STRIDES,
       {2},
       {PTRDIFF_MAX / 2},
       INFINI_DTYPE_F16},
      {"InvalidDtype",
       "dtype INVALID",
       INFINI_STATUS_BAD_TENSOR_DTYPE,
       {2},
       {},
       INFINI_DTYPE_INVALID},
      {"DtypeOutsideEnum", "dtype 99", INFINI_STATUS_BAD_TENSOR_DTYPE, {2}, {}, 99},
      {"RankTooLarge",
       "rank INFINIOP_MAX_NDIM + 1",
       INFINI_STATUS_BAD_TENSOR_SHAPE,
       std::vector<size_t>(INFINIOP_MAX_NDIM + 1, 1),
       {},
       F32},
  };
  return rows;
}

// Rows to skip, with the reason: known defects not fixed here.
const std::map<std::string, std::string> &knownDefects() {
  static const std::map<std::string, std::string> defects = {};
  return defects;
}

const std::vector<Row> &table() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> r;
    for (const OpSpec &op : specs()) addGenericRows(op, r);
    addOperatorRows(r);
    return r;
  }();
  return rows;
}

std::string statusName(infiniStatus_t s) {
  return infiniStatusString(s);
}

// --- the test -------------------------------------------------------------------------------

// Parametrized by (device, operator): one process per pair under ctest (not one per row, which
// cost minutes in process starts); each row runs under a SCOPED_TRACE naming it.
class BadInputTable : public DeviceTestBase,
                      public ::testing::WithParamInterface<std::tuple<infiniDevice_t, size_t>> {
 protected:
  void SetUp() override { selectDeviceType(std::get<0>(GetParam())); }
  void runRow(const Row &row);
  std::vector<std::string> skipped_;
  ~BadInputTable() override {
    for (auto d : tensors_) infiniopDestroyTensorDescriptor(d);
  }
  infiniopTensorDescriptor_t tensor(const Slot &s, const std::vector<ptrdiff_t> &strides) {
    infiniopTensorDescriptor_t t = nullptr;
    EXPECT_EQ(infiniopCreateTensorDescriptor(&t, s.shape.size(), s.shape.data(),
                                             strides.empty() ? nullptr : strides.data(), s.dtype),
              INFINI_STATUS_SUCCESS)
        << s.name << ": " << infiniopGetLastError();
    tensors_.push_back(t);
    return t;
  }
  std::vector<infiniopTensorDescriptor_t> tensors_;
};

// INFINIOP_TABLE_VERBOSE=1 prints each row's message (to review that it fails for its reason).
void expectMessage(const Row &row) {
  const std::string message = infiniopGetLastError();
  EXPECT_NE(message, "") << row.op << "." << row.name << ": no message from infiniopGetLastError()";
  static const bool verbose = std::getenv("INFINIOP_TABLE_VERBOSE") != nullptr;
  if (verbose) std::cout << "  " << row.op << "." << row.name << ": " << message << "\n";
}

void BadInputTable::runRow(const Row &row) {
  {
    const auto defect = knownDefects().find(row.op + "." + row.name);
    if (defect != knownDefects().end()) {
      skipped_.push_back(row.name + " (known defect: " + defect->second + ")");
      return;
    }
  }
  const OpSpec &op = spec(row.op);
  Broken s(op);
  row.apply(op, s);
  const size_t n = s.slots.size();
  Descs descs(n, nullptr);
  for (size_t i = 0; i < n; ++i)
    if (!s.null_desc[i]) descs[i] = tensor(s.slots[i], s.strides[i]);

  void *const sentinel = reinterpret_cast<void *>(uintptr_t{0x5eed});
  if (row.call == Call::kCreate) {
    void *desc = sentinel;
    EXPECT_EQ(statusName(op.create(s.null_handle ? nullptr : handle(),
                                   s.null_desc_out ? nullptr : &desc, descs, s.attrs)),
              statusName(row.expected))
        << infiniopGetLastError();
    expectMessage(row);
    EXPECT_EQ(desc, sentinel) << "descriptor out-pointer written on failure";
    if (desc != sentinel && desc) op.destroy(desc);
    return;
  }

  void *desc = nullptr;
  ASSERT_EQ(op.create(handle(), &desc, descs, s.attrs), INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  void *other = nullptr;  // another operator's descriptor, for the kind rows
  const OpSpec &other_op = specs()[(&op - specs().data() + 1) % specs().size()];
  if (s.desc == Broken::Desc::kOtherOperator) {
    Broken os(other_op);
    Descs od(os.slots.size(), nullptr);
    for (size_t i = 0; i < od.size(); ++i)
      if (!os.null_desc[i]) od[i] = tensor(os.slots[i], {});
    ASSERT_EQ(other_op.create(handle(), &other, od, os.attrs), INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
  }
  void *target = s.desc == Broken::Desc::kOwn             ? desc
                 : s.desc == Broken::Desc::kNull          ? nullptr
                 : s.desc == Broken::Desc::kOtherOperator ? other
                                                          : static_cast<void *>(descs[0]);

  size_t workspace_size = 0;
  ASSERT_EQ(op.workspace(desc, &workspace_size), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  if (row.call == Call::kWorkspaceSize) {
    size_t size = 12345;
    EXPECT_EQ(statusName(op.workspace(target, s.null_size_out ? nullptr : &size)),
              statusName(row.expected));
    expectMessage(row);
    EXPECT_EQ(size, 12345u) << "size written on failure";
  } else if (row.call == Call::kDestroy) {
    EXPECT_EQ(statusName(op.destroy(target)), statusName(row.expected));
    expectMessage(row);
  } else {
    if (s.workspace != Broken::Workspace::kEnough && workspace_size == 0) {
      EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
      skipped_.push_back(row.name + " (no workspace on this device)");
      return;
    }
    // Every buffer poisoned (0xAB) with guards, index data written; staged to the device.
    std::vector<std::unique_ptr<TensorBuffer>> buffers;
    for (size_t i = 0; i < n; ++i) {
      buffers.push_back(
          std::make_unique<TensorBuffer>(s.slots[i].shape, s.strides[i], s.slots[i].dtype));
      writeValues(*buffers.back(), s.slots[i].values);
    }
    std::vector<std::vector<uint8_t>> before;
    DeviceMirror device(handle());
    for (auto &b : buffers) {
      before.push_back(b->storage());
      device.add(*b);
    }
    Ptrs ptrs(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (s.null_data[i] || s.null_desc[i]) continue;
      ptrs[i] = device(*buffers[s.alias[i] >= 0 ? static_cast<size_t>(s.alias[i]) : i]);
    }
    void *workspace = device.scratch(workspace_size);
    size_t given = workspace_size;
    if (s.workspace == Broken::Workspace::kOneByteShort) given -= 1;
    if (s.workspace == Broken::Workspace::kNullWithSize) workspace = nullptr;
    EXPECT_EQ(statusName(op.calculate(target, workspace, given, ptrs, nullptr)),
              statusName(row.expected))
        << infiniopGetLastError();
    expectMessage(row);
    device.download();
    for (size_t i = 0; i < n; ++i)
      EXPECT_TRUE(buffers[i]->storage() == before[i])
          << "`" << s.slots[i].name << "` changed by a failed call";
  }
  if (other) {
    EXPECT_EQ(other_op.destroy(other), INFINI_STATUS_SUCCESS);
  }
  if (!(row.call == Call::kDestroy && target == desc)) {
    EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  }
}

TEST_P(BadInputTable, EveryRowFailsWithItsStatusAMessageAndNoWrite) {
  const OpSpec &op = specs()[std::get<1>(GetParam())];
  size_t ran = 0;
  for (const Row &row : table()) {
    if (row.op != op.name) continue;
    SCOPED_TRACE(std::string(op.name) + "." + row.name + " (" + callName(row.call) + ")");
    runRow(row);
    ++ran;
    if (HasFatalFailure()) return;
  }
  std::string skipped;
  for (const std::string &name : skipped_) skipped += " " + name;
  std::cout << "[ table    ] " << ran << " rows, " << skipped_.size() << " skipped:" << skipped
            << "\n";
}

std::vector<size_t> operatorIndices() {
  std::vector<size_t> v(specs().size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadInputTable,
    ::testing::Combine(::testing::ValuesIn(builtDeviceTypes()),
                       ::testing::ValuesIn(operatorIndices())),
    [](const ::testing::TestParamInfo<std::tuple<infiniDevice_t, size_t>> &info) {
      return std::string(deviceInfo(std::get<0>(info.param)).name) + "_" +
             specs()[std::get<1>(info.param)].name;
    });

TEST(BadTensorDescriptor, EveryRowFailsWithItsStatusAndAMessage) {
  for (const TensorRow &row : tensorRows()) {
    SCOPED_TRACE(row.name);
    infiniopTensorDescriptor_t t = reinterpret_cast<infiniopTensorDescriptor_t>(uintptr_t{0x5eed});
    EXPECT_EQ(statusName(
                  infiniopCreateTensorDescriptor(&t, row.shape.size(), row.shape.data(),
                                                 row.strides.empty() ? nullptr : row.strides.data(),
                                                 static_cast<infiniDtype_t>(row.dtype))),
              statusName(row.expected));
    EXPECT_NE(std::string(infiniopGetLastError()), "");
    EXPECT_EQ(t, reinterpret_cast<infiniopTensorDescriptor_t>(uintptr_t{0x5eed}));
  }
}

// --- docs/errors.md -------------------------------------------------------------------------

std::string errorsMarkdown() {
  std::ostringstream md;
  md << "# Errors\n\n"
        "<!-- Generated from tests/cpp/bad_input_table_test.cc; the ctest\n"
        "     BadInputTableDocs.ErrorsMdMatchesTable fails when this file and the table differ.\n"
        "     Regenerate: INFINIOP_WRITE_ERRORS_MD=1 build/tests/infiniop-tests\n"
        "     --gtest_filter=BadInputTableDocs.* -->\n\n"
        "Every public function returns an `infiniStatus_t`. On failure:\n\n"
        "- the status names the kind of error (the table below lists, per operator, the status\n"
        "  of each bad input);\n"
        "- `infiniopGetLastError()` (thread-local) returns a non-empty message saying why; it is\n"
        "  empty after a successful call;\n"
        "- nothing is written: no output element, no descriptor or size out-pointer;\n"
        "- nothing leaks: whatever the call allocated is freed (the sanitizer builds' leak\n"
        "  checker runs this test too).\n\n"
        "The test `tests/cpp/bad_input_table_test.cc` runs every row below on every built\n"
        "device (cpu, cpu_reference, opencl), with every buffer poisoned and compared bytewise\n"
        "before and after the call. A row that says \"where the device asks for one\" is\n"
        "skipped on a device whose workspace for that configuration is 0 bytes. Each\n"
        "operator's valid configuration is small (R = 2 rows, H = 4, K = 1, E = 3 experts);\n"
        "the row says what it breaks.\n\n";
  md << "## Tensor descriptors\n\n| case | bad input | status |\n|---|---|---|\n";
  for (const TensorRow &r : tensorRows())
    md << "| " << r.name << " | " << r.what << " | `" << statusName(r.expected) << "` |\n";
  for (const OpSpec &op : specs()) {
    md << "\n## " << op.name << "\n\n| case | call | bad input | status |\n|---|---|---|---|\n";
    for (const Row &r : table()) {
      if (r.op != op.name) continue;
      md << "| " << r.name << " | " << callName(r.call) << " | " << r.what << " | `"
         << statusName(r.expected) << "` |";
      const auto defect = knownDefects().find(r.op + "." + r.name);
      if (defect != knownDefects().end()) md << " known defect: " << defect->second;
      md << "\n";
    }
  }
  return md.str();
}

TEST(BadInputTableDocs, ErrorsMdMatchesTable) {
  const std::string path = std::string(INFINIOP_SOURCE_DIR) + "/docs/errors.md";
  const std::string expected = errorsMarkdown();
  const char *write = std::getenv("INFINIOP_WRITE_ERRORS_MD");
  if (write && *write) {
    std::ofstream(path, std::ios::binary) << expected;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream actual;
  actual << in.rdbuf();
  EXPECT_TRUE(actual.str() == expected)
      << path << " differs from the table; regenerate it with INFINIOP_WRITE_ERRORS_MD=1";
}

}  // namespace
}  // namespace infiniop_test
