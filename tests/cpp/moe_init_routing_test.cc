// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingV2 and MoeInitRoutingV2Grad conformance (SEMANTICS.md "MoeInitRoutingV2 and
// MoeInitRoutingV2Grad"), on every device (cpu_reference, cpu on every Highway target, opencl):
//  - the Init against an oracle written here (std::stable_sort of the positions p = r*K + k by
//    expert): both modes, active_num 0 / < R*K / = R*K / > R*K, capacity below the largest count
//    (drops), above R (padding) and exactly the counts, both count flags (outputs not asked for
//    given, poisoned, and left untouched, even with a wrong shape and dtype), INT32 / INT64 for
//    expert_idx, expanded_row_idx and the counts independently, R = 0, K = 1, H = 0, H = 4099, and
//    three layouts (contiguous; transposed x and expert_idx, padded expanded_x, 1-D outputs at
//    stride 2 or 3; every first dim reversed, which a library may reject with BAD_TENSOR_STRIDES).
//    x holds NaN payloads (quiet and signalling), -0, infinities and subnormals: every output
//    must be the oracle's bytes exactly, guard elements around each view included;
//  - the Init's grad against a long-double oracle, duplicates and skipped indices included;
//  - both operators the same bits for 1 and 2 OpenMP threads and on repeated calls, and a larger
//    call (R = 256, K = 8, E = 64, H = 512) bit-identical to cpu_reference;
//  - the round trips Init -> MoeFinalizeRoutingV2 (mode 2 dropless, 3 drop/pad) = the plain MoE
//    combine, and MoeFinalizeRoutingV2Grad -> MoeInitRoutingV2Grad = the oracle gradient;
//  - bad arguments: status, a message naming the operator, every buffer untouched.
//
// Error model (u = 2^-24; terms = the sum of the magnitudes of what the formula adds):
//  - MoeInitRoutingV2Grad: grad_x[r] sums at most K rows in F32 (the additions only: K - 1
//    roundings) and rounds once: |got - truth| <= K (u terms + 2^-149) (+ 1 ulp of F16/BF16 at
//    |truth|). A row no index reaches is exactly 0.
//  - Round-trip forward (MoeFinalizeRoutingV2's own model): c = 2K + 3 roundings of u terms.
//  - Round-trip grad: MoeFinalizeRoutingV2Grad rounds each s * g to the dtype (at most 1 ulp of
//    the dtype at |s g|, F32 included) and the Init's grad sums K of those: (K + 1) u terms + the
//    sum of those ulps (+ 1 ulp at |truth| for F16/BF16); grad_scales its model, c = H + 2.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "accuracy.h"
#include "device_memory.h"
#include "device_param.h"
#include "infiniop/ops/moe_finalize_routing_v2.h"
#include "infiniop/ops/moe_finalize_routing_v2_grad.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "infiniop/ops/moe_init_routing_v2_grad.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr const char *kInitName = "MoeInitRoutingV2";
constexpr const char *kGradName = "MoeInitRoutingV2Grad";
constexpr infiniDtype_t kF32 = INFINI_DTYPE_F32, kF16 = INFINI_DTYPE_F16, kBF16 = INFINI_DTYPE_BF16,
                        kF64 = INFINI_DTYPE_F64, kI16 = INFINI_DTYPE_I16, kI32 = INFINI_DTYPE_I32,
                        kI64 = INFINI_DTYPE_I64;

// ---------------------------------------------------------------- small helpers
int64_t indexAt(TensorBuffer &t, size_t i) {
  if (t.dtype() == kI64) {
    int64_t v;
    std::memcpy(&v, t.at(i), sizeof v);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t.at(i), sizeof v);
  return v;
}
void setIndex(TensorBuffer &t, size_t i, int64_t v) {
  if (t.dtype() == kI64) {
    std::memcpy(t.at(i), &v, sizeof v);
  } else {
    const auto w = static_cast<int32_t>(v);
    std::memcpy(t.at(i), &w, sizeof w);
  }
}
std::vector<int64_t> indicesOf(TensorBuffer &t) {
  std::vector<int64_t> v(t.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = indexAt(t, i);
  return v;
}
void setBits(TensorBuffer &t, size_t i, uint32_t bits) {  // little-endian: the low bytes
  std::memcpy(t.at(i), &bits, t.elementSize());
}
std::string hexOf(const char *p, size_t size) {
  std::string s = "0x";
  char buf[4];
  for (size_t b = size; b-- > 0;) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(p[b]));
    s += buf;
  }
  return s;
}
std::string dtypeStr(infiniDtype_t d) {
  return infiniop::dtypeName(d);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }

 private:
  uint64_t state_;
};

class ThreadCount {  // the OpenMP thread count for a scope (0: as set)
 public:
  explicit ThreadCount(int threads) : saved_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// x for the bit-copy checks: signed values from near zero to large, and every fifth element a
// special bit pattern of the dtype (quiet and signalling NaNs with payloads, -0, +-inf, the
// smallest and largest subnormals, the largest finite).
void fillSpecial(TensorBuffer &t, uint64_t seed) {
  static const uint32_t f32[] = {0x7FC01234, 0x7F800001, 0xFFA00005, 0x80000000, 0x7F800000,
                                 0xFF800000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF};
  static const uint32_t f16[] = {0x7E01, 0x7C01, 0xFD55, 0x8000, 0x7C00,
                                 0xFC00, 0x0001, 0x83FF, 0x7BFF};
  static const uint32_t bf16[] = {0x7FC1, 0x7F81, 0xFFA5, 0x8000, 0x7F80,
                                  0xFF80, 0x0001, 0x807F, 0x7F7F};
  const uint32_t *special = t.dtype() == kF32 ? f32 : t.dtype() == kF16 ? f16 : bf16;
  for (size_t i = 0; i < t.numel(); ++i) {
    if (i % 5 == 2)
      setBits(t, i, special[(i / 5 + seed) % 9]);
    else
      t.set(i, signedValue(seed, i, i % 3 ? 3.0e4f : 7.0f));
  }
}

// Index values of `n` positions into `rows` rows: kPermutation distinct, kDuplicates half to a
// few hot rows; kDrops distinct, about a third of the positions dropped (-1).
enum class Pattern { kPermutation, kDuplicates, kDrops };
std::vector<int64_t> makeIndices(Pattern p, size_t n, size_t rows, Rng &rng) {
  std::vector<int64_t> v(n, -1), slots(rows);
  std::iota(slots.begin(), slots.end(), 0);
  for (size_t i = rows; i > 1; --i) std::swap(slots[i - 1], slots[rng.below(i)]);
  for (size_t i = 0, used = 0; i < n; ++i) {
    if (rows == 0 || (p == Pattern::kDrops && rng.below(3) == 0)) continue;
    if (p == Pattern::kDuplicates)
      v[i] = static_cast<int64_t>(rng.below(rng.below(2) ? std::max<size_t>(1, rows / 8) : rows));
    else if (used < rows)
      v[i] = slots[used++];
  }
  return v;
}

// ---------------------------------------------------------------- layouts
// kContiguous; kStrided: x, expert_idx and grad_x column-major, expanded_x / grad_expanded_x
// padded, 1-D tensors at stride 2 (index outputs) or 3 (counts); kReversed: every first dim runs
// backwards (a negative stride: supported, or BAD_TENSOR_STRIDES, never mis-indexed).
enum class Layout { kContiguous, kStrided, kReversed };
const char *layoutName(Layout l) {
  static const char *names[] = {"Contiguous", "Strided", "Reversed"};
  return names[static_cast<int>(l)];
}
enum class Kind { kMatrix, kExpanded, kIndex, kCounts };
TensorBuffer makeTensor(Layout layout, Kind kind, std::vector<size_t> shape, infiniDtype_t dtype) {
  std::vector<ptrdiff_t> strides;
  if (layout == Layout::kStrided) {
    strides = kind == Kind::kMatrix     ? columnMajorStrides(shape)
              : kind == Kind::kExpanded ? paddedStrides(shape)
              : kind == Kind::kIndex    ? std::vector<ptrdiff_t>{2}
                                        : std::vector<ptrdiff_t>{3};
  } else if (layout == Layout::kReversed) {
    strides.assign(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;)
      strides[d - 1] = strides[d] * static_cast<ptrdiff_t>(std::max<size_t>(shape[d], 1));
    strides[0] = -strides[0];
  }
  return TensorBuffer(std::move(shape), std::move(strides), dtype);
}

// ---------------------------------------------------------------- running an operator
struct Outcome {
  infiniStatus_t status = INFINI_STATUS_INTERNAL_ERROR;
  std::string error;
  size_t workspace = 0;  // what the descriptor asked for
};

// The tensors of a call in the C function's order (NULL: NULL descriptor); `data` overrides a
// pointer (NULL included); the workspace passed is the asked size + workspace_delta, NULL where
// null_workspace.
struct Call {
  std::vector<TensorBuffer *> tensors;
  std::vector<std::optional<void *>> data = std::vector<std::optional<void *>>(8);
  int64_t attr[6] = {0, 0, 0, 0, 0, 0};  // the operator's attributes, in its order
  ptrdiff_t workspace_delta = 0;
  bool null_workspace = false;
  void *pointer(size_t s) const {
    if (data[s]) return *data[s];
    return tensors[s] ? tensors[s]->data() : nullptr;
  }
};

using Descs = std::vector<infiniopTensorDescriptor_t>;
using Ptrs = std::vector<void *>;
struct Op {
  const char *name;
  std::function<infiniStatus_t(infiniopHandle_t, void **, const Descs &, const int64_t *)> create;
  std::function<infiniStatus_t(void *, size_t *)> size;
  std::function<infiniStatus_t(void *, void *, size_t, const Ptrs &)> calc;
  std::function<infiniStatus_t(void *)> destroy;
};

// Each operator's four functions over opaque descriptors (`Op::create` gets the attributes).
template <class D>
D as(void *op) {
  return static_cast<D>(op);
}
using InitD = infiniopMoeInitRoutingV2Descriptor_t;
using GradD = infiniopMoeInitRoutingV2GradDescriptor_t;
using FinD = infiniopMoeFinalizeRoutingV2Descriptor_t;
using FinGradD = infiniopMoeFinalizeRoutingV2GradDescriptor_t;

// Attributes: active_num, expert_capacity, expert_num, drop_pad_mode, count flag, before flag.
const Op kInit = {
    kInitName,
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeInitRoutingV2Descriptor(h, reinterpret_cast<InitD *>(op), d[0], d[1],
                                                      d[2], d[3], d[4], d[5], a[0], a[1], a[2],
                                                      a[3], a[4], a[5] != 0);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeInitRoutingV2WorkspaceSize(as<InitD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeInitRoutingV2(as<InitD>(op), ws, wsz, p[0], p[1], p[2], p[3], p[4], p[5],
                                      nullptr);
    },
    [](void *op) { return infiniopDestroyMoeInitRoutingV2Descriptor(as<InitD>(op)); }};
// Attributes: top_k, drop_pad_mode, active_num.
const Op kGrad = {
    kGradName,
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeInitRoutingV2GradDescriptor(h, reinterpret_cast<GradD *>(op), d[0],
                                                          d[1], d[2], a[0], a[1], a[2]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeInitRoutingV2GradWorkspaceSize(as<GradD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeInitRoutingV2Grad(as<GradD>(op), ws, wsz, p[0], p[1], p[2], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeInitRoutingV2GradDescriptor(as<GradD>(op)); }};
// Attribute: drop_pad_mode.
const Op kFinalize = {
    "MoeFinalizeRoutingV2",
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeFinalizeRoutingV2Descriptor(
          h, reinterpret_cast<FinD *>(op), d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], a[0]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeFinalizeRoutingV2WorkspaceSize(as<FinD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeFinalizeRoutingV2(as<FinD>(op), ws, wsz, p[0], p[1], p[2], p[3], p[4], p[5],
                                          p[6], p[7], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeFinalizeRoutingV2Descriptor(as<FinD>(op)); }};
// Attributes: drop_pad_mode, active_num, expert_num, expert_capacity.
const Op kFinalizeGrad = {
    "MoeFinalizeRoutingV2Grad",
    [](infiniopHandle_t h, void **op, const Descs &d, const int64_t *a) {
      return infiniopCreateMoeFinalizeRoutingV2GradDescriptor(h, reinterpret_cast<FinGradD *>(op),
                                                              d[0], d[1], d[2], d[3], d[4], d[5],
                                                              d[6], d[7], a[0], a[1], a[2], a[3]);
    },
    [](void *op, size_t *size) {
      return infiniopGetMoeFinalizeRoutingV2GradWorkspaceSize(as<FinGradD>(op), size);
    },
    [](void *op, void *ws, size_t wsz, const Ptrs &p) {
      return infiniopMoeFinalizeRoutingV2Grad(as<FinGradD>(op), ws, wsz, p[0], p[1], p[2], p[3],
                                              p[4], p[5], p[6], p[7], nullptr);
    },
    [](void *op) { return infiniopDestroyMoeFinalizeRoutingV2GradDescriptor(as<FinGradD>(op)); }};

// Creates the descriptor (tensor descriptors destroyed right after), stages every tensor in
// device memory, calls with the workspace asked for (adjusted as the call says), downloads.
Outcome run(infiniopHandle_t h, const Op &op, const Call &c) {
  Descs d(c.tensors.size(), nullptr);
  for (size_t s = 0; s < d.size(); ++s) d[s] = c.tensors[s] ? c.tensors[s]->descriptor() : nullptr;
  void *desc = nullptr;
  void *const unset = &desc;
  desc = unset;
  Outcome o;
  o.status = op.create(h, &desc, d, c.attr);
  o.error = infiniopGetLastError();
  for (auto t : d)
    if (t) infiniopDestroyTensorDescriptor(t);
  if (o.status != INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(desc, unset) << "a failed create wrote the descriptor pointer";
    return o;
  }
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(op.size(desc, &o.workspace), INFINI_STATUS_SUCCESS);
  DeviceMirror device(h);
  for (TensorBuffer *t : c.tensors) device.add(t);
  void *workspace = device.scratch(o.workspace + 64);
  Ptrs p(c.tensors.size());
  for (size_t s = 0; s < p.size(); ++s) p[s] = device(c.pointer(s));
  o.status =
      op.calc(desc, c.null_workspace ? nullptr : workspace,
              static_cast<size_t>(static_cast<ptrdiff_t>(o.workspace) + c.workspace_delta), p);
  o.error = infiniopGetLastError();
  device.download();
  if (o.status == INFINI_STATUS_SUCCESS) {
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  return o;
}

// `got` must hold exactly `want`'s bytes (views and guards); else the first differing element.
void expectBytes(TensorBuffer &got, TensorBuffer &want, const std::string &what) {
  if (got.storage() == want.storage()) return;
  for (size_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(got.at(i), want.at(i), want.elementSize()) != 0) {
      ADD_FAILURE() << what << " element " << i << ": got " << hexOf(got.at(i), got.elementSize())
                    << ", want " << hexOf(want.at(i), want.elementSize());
      return;
    }
  ADD_FAILURE() << what << ": a byte outside the view (a guard) was written";
}

// ---------------------------------------------------------------- the Init's oracle
struct Routing {
  std::vector<int64_t> row_index;  // per position p
  std::vector<int64_t> counts;     // per expert, all positions
  std::vector<int64_t> source;     // per expanded row: the token copied there, -1: none
};
Routing initOracle(const std::vector<int64_t> &experts, size_t K, size_t E, int64_t mode,
                   size_t rows, size_t C) {
  const size_t n = experts.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return experts[a] < experts[b]; });
  Routing r;
  r.row_index.assign(n, -1);
  r.counts.assign(E, 0);
  for (int64_t e : experts) ++r.counts[static_cast<size_t>(e)];
  std::vector<int64_t> first(E, 0);  // s of the expert's first position
  for (size_t e = 1; e < E; ++e) first[e] = first[e - 1] + r.counts[e - 1];
  for (size_t s = 0; s < n; ++s) {
    const size_t p = order[s];
    const int64_t e = experts[p], j = static_cast<int64_t>(s) - first[static_cast<size_t>(e)];
    r.row_index[p] = mode == 0                     ? static_cast<int64_t>(s)
                     : j < static_cast<int64_t>(C) ? e * static_cast<int64_t>(C) + j
                                                   : -1;
  }
  r.source.assign(rows, -1);
  for (size_t p = 0; p < n; ++p)
    if (r.row_index[p] >= 0 && static_cast<size_t>(r.row_index[p]) < rows)
      r.source[static_cast<size_t>(r.row_index[p])] = static_cast<int64_t>(p / K);
  return r;
}

// ---------------------------------------------------------------- Init: one case, checked whole
enum class Experts { kUniform, kSkewed, kFew };
struct InitCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 1, E = 1;
  int64_t active_num = 0, capacity = 0, count_flag = 0;
  bool before_flag = false;
  infiniDtype_t expert_dt = kI32, row_dt = kI32, count_dt = kI32;
  Experts experts = Experts::kUniform;
  bool odd_unasked = false;     // the outputs not asked for: shape (2, 3), F32 (else (E), count_dt)
  bool exact_capacity = false;  // mode 1: capacity = the largest count (no drop, one expert full)
};
std::string caseName(const InitCase &c) {
  return "init mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
         " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) + " E=" + std::to_string(c.E) +
         " active_num=" + std::to_string(c.active_num) + " C=" + std::to_string(c.capacity) +
         " count_flag=" + std::to_string(c.count_flag) +
         " before=" + std::to_string(c.before_flag) + " expert_idx " + dtypeStr(c.expert_dt) +
         " row_idx " + dtypeStr(c.row_dt) + " counts " + dtypeStr(c.count_dt) +
         (c.odd_unasked ? " odd-unasked" : "");
}

std::vector<int64_t> makeExperts(Experts kind, size_t n, size_t E, Rng &rng) {
  std::vector<int64_t> v(n);
  for (int64_t &e : v) {
    const size_t u = rng.below(E);
    e = static_cast<int64_t>(kind == Experts::kUniform  ? u
                             : kind == Experts::kSkewed ? (rng.below(2) ? 0 : u)
                                                        : u % std::max<size_t>(1, E / 3) * 3);
  }
  return v;
}

// Runs the case once per entry of `threads`: every output (and every guard) exactly the oracle's
// bytes, every run the same. Returns the outputs' storage (expanded_x, row_idx, counts, before).
std::vector<std::vector<uint8_t>> checkInit(infiniopHandle_t h, infiniDtype_t dtype, Layout layout,
                                            const InitCase &c, uint64_t seed,
                                            const std::vector<int> &threads = {0}) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, E = c.E, n = R * K;
  const bool drop_pad = c.mode == 1;
  Rng rng(seed);
  const std::vector<int64_t> experts = makeExperts(c.experts, n, E, rng);
  int64_t capacity = c.capacity;
  if (c.exact_capacity) {
    std::vector<int64_t> counts(E, 0);
    for (int64_t v : experts) ++counts[static_cast<size_t>(v)];
    capacity = *std::max_element(counts.begin(), counts.end());
  }
  SCOPED_TRACE("expert_capacity " + std::to_string(capacity));
  const auto C = static_cast<size_t>(capacity);
  const size_t A = c.active_num > 0 && static_cast<size_t>(c.active_num) < n
                       ? static_cast<size_t>(c.active_num)
                       : n;
  const std::vector<size_t> ex_shape =
      drop_pad ? std::vector<size_t>{E, C, H} : std::vector<size_t>{A, H};
  TensorBuffer x = makeTensor(layout, Kind::kMatrix, {R, H}, dtype);
  TensorBuffer expert = makeTensor(layout, Kind::kMatrix, {R, K}, c.expert_dt);
  TensorBuffer ex = makeTensor(layout, Kind::kExpanded, ex_shape, dtype);
  TensorBuffer row = makeTensor(layout, Kind::kIndex, {n}, c.row_dt);
  const bool counts_asked = !drop_pad && c.count_flag != 0,
             before_asked = drop_pad && c.before_flag;
  const auto countTensor = [&](bool asked) {
    return asked || !c.odd_unasked ? makeTensor(layout, Kind::kCounts, {E}, c.count_dt)
                                   : TensorBuffer({2, 3}, kF32);
  };
  TensorBuffer counts = countTensor(counts_asked), before = countTensor(before_asked);
  fillSpecial(x, seed);
  for (size_t i = 0; i < n; ++i) setIndex(expert, i, experts[i]);
  const Routing truth = initOracle(indicesOf(expert), K, E, c.mode, drop_pad ? E * C : A, C);

  // What each output must hold: its poisoned bytes with the oracle's values written over.
  ex.poison();
  TensorBuffer want_ex = ex, want_row = row, want_counts = counts, want_before = before;
  for (size_t d = 0; d < truth.source.size(); ++d)
    for (size_t j = 0; j < H; ++j) {
      if (truth.source[d] < 0)
        std::memset(want_ex.at(d * H + j), 0, ex.elementSize());
      else
        std::memcpy(want_ex.at(d * H + j), x.at(static_cast<size_t>(truth.source[d]) * H + j),
                    ex.elementSize());
    }
  for (size_t p = 0; p < n; ++p) setIndex(want_row, p, truth.row_index[p]);
  int64_t sum = 0;
  for (size_t e = 0; e < E; ++e) {
    sum += truth.counts[e];
    if (counts_asked) setIndex(want_counts, e, c.count_flag == 1 ? sum : truth.counts[e]);
    if (before_asked) setIndex(want_before, e, truth.counts[e]);
  }

  Call call;
  call.tensors = {&ex, &row, &counts, &before, &x, &expert};
  const int64_t attrs[] = {c.active_num, capacity,     static_cast<int64_t>(E),
                           c.mode,       c.count_flag, c.before_flag};
  std::copy(std::begin(attrs), std::end(attrs), call.attr);
  std::vector<std::vector<uint8_t>> first;
  for (int t : threads) {
    SCOPED_TRACE("OpenMP threads " + std::to_string(t));
    ex.poison();
    std::memset(row.storageBytes(), 0xAB, row.storage().size());
    std::memset(counts.storageBytes(), 0xAB, counts.storage().size());
    std::memset(before.storageBytes(), 0xAB, before.storage().size());
    const std::vector<uint8_t> ex0 = ex.storage(), row0 = row.storage(), x0 = x.storage(),
                               expert0 = expert.storage();
    Outcome o;
    {
      const ThreadCount tc(t);
      o = run(h, kInit, call);
    }
    EXPECT_TRUE(x.storage() == x0 && expert.storage() == expert0) << "an input was written";
    if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
      EXPECT_TRUE(ex.storage() == ex0 && row.storage() == row0) << "rejected, yet written";
      return {};
    }
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    if (o.status != INFINI_STATUS_SUCCESS) return {};
    if (first.empty()) {
      expectBytes(ex, want_ex, "expanded_x");
      expectBytes(row, want_row, "expanded_row_idx");
      expectBytes(counts, want_counts,
                  counts_asked ? "expert_tokens_count_or_cumsum" : "unasked count output");
      expectBytes(before, want_before,
                  before_asked ? "expert_tokens_before_capacity" : "unasked before_capacity");
      first = {ex.storage(), row.storage(), counts.storage(), before.storage()};
    } else {
      EXPECT_TRUE(first[0] == ex.storage() && first[1] == row.storage() &&
                  first[2] == counts.storage() && first[3] == before.storage())
          << "differs from the first run";
    }
  }
  return first;
}

std::vector<InitCase> initCases() {
  std::vector<InitCase> cases;
  const infiniDtype_t idx[] = {kI32, kI64};
  size_t k = 0;
  const auto add = [&](InitCase c) {  // index dtypes cycle through all 8 combinations
    c.expert_dt = idx[k % 2], c.row_dt = idx[(k / 2) % 2], c.count_dt = idx[(k / 4) % 2];
    c.odd_unasked = k % 3 == 1;
    cases.push_back(c);
    ++k;
  };
  // Mode 0: active_num 0, < R*K, = R*K, > R*K, 1; every count flag; the before flag ignored.
  for (int64_t active : {0, 7, 15, 40, 1})
    for (int64_t flag : {0, 1, 2}) {
      InitCase c;
      c.R = 5, c.K = 3, c.H = 17 + 2 * k, c.E = 4 + k % 3, c.active_num = active;
      c.count_flag = flag, c.before_flag = k % 2 == 0;
      c.experts = static_cast<Experts>(k % 3);
      add(c);
    }
  // Mode 1: capacity 1 (drops), the largest count (exact), 2R + 3 > R (padding); both flags.
  for (int64_t cap : {1, 0, 15})
    for (bool before : {false, true})
      for (int64_t flag : {0, 2}) {
        InitCase c;
        c.mode = 1, c.R = 6, c.K = 2, c.H = 9 + k, c.E = 3, c.capacity = cap, c.count_flag = flag;
        c.before_flag = before, c.experts = static_cast<Experts>(k % 3);
        c.exact_capacity = cap == 0;
        add(c);
      }
  const auto make = [](int64_t mode, size_t R, size_t K, size_t H, size_t E, int64_t active,
                       int64_t cap) {
    InitCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.E = E, c.active_num = active, c.capacity = cap;
    c.count_flag = mode == 0 ? 1 : 0, c.before_flag = mode == 1;
    return c;
  };
  add(make(0, 0, 2, 5, 3, 0, 0));  // R = 0
  add(make(0, 0, 2, 5, 3, 4, 0));
  add(make(1, 0, 2, 5, 3, 0, 2));  // R = 0: every slot zero, counts 0
  add(make(0, 7, 1, 6, 5, 0, 0));  // K = 1
  add(make(1, 7, 1, 6, 5, 0, 2));
  add(make(0, 6, 2, 0, 3, 5, 0));  // H = 0: the index outputs only
  add(make(1, 6, 2, 0, 3, 0, 2));
  add(make(0, 7, 2, 4099, 3, 0, 0));  // long odd rows
  add(make(1, 7, 2, 4099, 3, 0, 3));
  add(make(0, 40, 8, 33, 64, 100, 0));  // many experts, most of them empty
  add(make(1, 40, 8, 33, 64, 0, 2));
  return cases;
}

using InitParam = std::tuple<DeviceParam, infiniDtype_t, Layout>;
class MoeInitRoutingV2Cases : public DeviceTestBase,
                              public ::testing::WithParamInterface<InitParam> {
 protected:
  void SetUp() override { selectDevice(std::get<0>(GetParam())); }
  void TearDown() override { restoreTargets(); }
  infiniDtype_t dtype() const { return std::get<1>(GetParam()); }
  Layout layout() const { return std::get<2>(GetParam()); }
};

TEST_P(MoeInitRoutingV2Cases, MatchesOracle) {
  uint64_t seed = 11;
  for (const InitCase &c : initCases()) checkInit(handle(), dtype(), layout(), c, seed++);
}

// ---------------------------------------------------------------- the grad: one case
struct GradCase {
  int64_t mode = 0;
  size_t R = 0, K = 1, H = 1, E = 1, C = 1;
  int64_t active_num = 0;
  infiniDtype_t idx_dt = kI32;
  Pattern pattern = Pattern::kPermutation;
  bool special = false;  // infinities and NaN in grad_expanded_x
};
std::string caseName(const GradCase &c) {
  static const char *patterns[] = {"permutation", "duplicates", "drops"};
  return "grad mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
         " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) +
         (c.mode ? " E=" + std::to_string(c.E) + " C=" + std::to_string(c.C)
                 : " active_num=" + std::to_string(c.active_num)) +
         " idx " + dtypeStr(c.idx_dt) + " " + patterns[static_cast<int>(c.pattern)] +
         (c.special ? " special" : "");
}

// The allowed error of a sum of `ops` roundings over `terms` (the file comment).
double allowed(infiniDtype_t dtype, double ops, long double terms, long double truth) {
  double e = ops * (0x1p-24 * static_cast<double>(terms) + 0x1p-149);
  if (dtype != kF32) e += ulpOf(dtype, std::fabs(static_cast<double>(truth)));
  return e;
}

void checkGrad(infiniopHandle_t h, infiniDtype_t dtype, Layout layout, const GradCase &c,
               uint64_t seed, const std::vector<int> &threads = {0}) {
  SCOPED_TRACE(caseName(c));
  const size_t R = c.R, K = c.K, H = c.H, n = R * K;
  const bool mode1 = c.mode == 1;
  const size_t A = c.active_num > 0 && static_cast<size_t>(c.active_num) < n
                       ? static_cast<size_t>(c.active_num)
                       : n;
  const size_t rows = mode1 ? c.E * c.C : A;
  const std::vector<size_t> gex_shape =
      mode1 ? std::vector<size_t>{c.E, c.C, H} : std::vector<size_t>{A, H};
  TensorBuffer gx = makeTensor(layout, Kind::kMatrix, {R, H}, dtype);
  TensorBuffer gex = makeTensor(layout, Kind::kExpanded, gex_shape, dtype);
  TensorBuffer idx = makeTensor(layout, Kind::kIndex, {n}, c.idx_dt);
  const float range = dtype == kF16 ? 3000.0f : 1.0e6f;
  gex.fill([&](size_t i) { return signedValue(seed, i, i % 4 ? range : 2.0f); });
  if (c.special)
    for (size_t i = 3; i < gex.numel(); i += 11)
      gex.set(i, i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY);
  Rng rng(seed);
  // Mode 0: values over [0, R*K), those >= A skipped; mode 1: [-1, E*C).
  const std::vector<int64_t> v = makeIndices(c.pattern, n, mode1 ? rows : n, rng);
  for (size_t i = 0; i < n; ++i) setIndex(idx, i, mode1 || v[i] >= 0 ? v[i] : 0);
  const std::vector<int64_t> iv = indicesOf(idx);

  Call call;
  call.tensors = {&gx, &gex, &idx};
  call.attr[0] = static_cast<int64_t>(K), call.attr[1] = c.mode, call.attr[2] = c.active_num;
  std::vector<uint8_t> first;
  for (int t : threads) {
    SCOPED_TRACE("OpenMP threads " + std::to_string(t));
    gx.poison();
    const std::vector<uint8_t> gx0 = gx.storage(), gex0 = gex.storage();
    Outcome o;
    {
      const ThreadCount tc(t);
      o = run(h, kGrad, call);
    }
    EXPECT_TRUE(gex.storage() == gex0) << "grad_expanded_x written";
    if (layout == Layout::kReversed && o.status == INFINI_STATUS_BAD_TENSOR_STRIDES) {
      EXPECT_TRUE(gx.storage() == gx0) << "rejected, yet written";
      return;
    }
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    EXPECT_EQ(o.workspace, 0u) << "the grad needs no workspace";
    if (!first.empty()) {
      EXPECT_TRUE(gx.storage() == first) << "differs from the first run";
      continue;
    }
    first = gx.storage();
    int bad = 0;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < H; ++j) {
        long double truth = 0, terms = 0;
        int adds = 0;
        for (size_t k = 0; k < K; ++k) {
          const int64_t d = iv[r * K + k];
          if (d < 0 || static_cast<size_t>(d) >= rows) continue;
          const long double g = gex.get(static_cast<size_t>(d) * H + j);
          truth += g, terms += std::fabs(g), ++adds;
        }
        const float got = gx.get(r * H + j);
        const std::string why =
            adds == 0 ? (got == 0 ? "" : "a row no index reaches is not 0")
                      : compareToTruth(dtype, got, truth,
                                       allowed(dtype, static_cast<double>(K), terms, truth));
        if (!why.empty() && bad++ < 5)
          ADD_FAILURE() << "grad_x[" << r << "," << j << "] got " << got << ": " << why;
      }
    EXPECT_EQ(bad, 0) << "mismatches";
  }
}

std::vector<GradCase> gradCases() {
  std::vector<GradCase> cases;
  size_t k = 0;
  const Pattern patterns[] = {Pattern::kPermutation, Pattern::kDuplicates, Pattern::kDrops};
  for (int64_t mode : {0, 1})
    for (int variant = 0; variant < 6; ++variant) {
      GradCase c;
      c.mode = mode;
      c.R = 1 + (k * 5) % 11, c.K = 1 + k % 4, c.H = 1 + (k * 13) % 70;
      const auto n = static_cast<int64_t>(c.R * c.K);
      const int64_t actives[] = {0, n / 2, n, n + 3, 1, 0};
      c.active_num = mode ? 5 : actives[variant];  // ignored in mode 1
      c.E = 2 + k % 3, c.C = static_cast<size_t>(n) / c.E + k % 2 + 1;
      c.idx_dt = k % 2 ? kI64 : kI32;
      c.pattern = patterns[k % 3];
      if (mode == 0 && c.pattern == Pattern::kDrops) c.pattern = Pattern::kDuplicates;
      c.special = variant == 5;
      cases.push_back(c);
      ++k;
    }
  const auto make = [](int64_t mode, size_t R, size_t K, size_t H, int64_t active, size_t E,
                       size_t C, Pattern p, infiniDtype_t dt) {
    GradCase c;
    c.mode = mode, c.R = R, c.K = K, c.H = H, c.active_num = active, c.E = E, c.C = C;
    c.pattern = p, c.idx_dt = dt;
    return c;
  };
  cases.push_back(make(0, 0, 2, 5, 0, 1, 1, Pattern::kPermutation, kI32));  // R = 0
  cases.push_back(make(1, 0, 2, 5, 0, 2, 3, Pattern::kPermutation, kI64));
  cases.push_back(make(0, 4, 2, 0, 3, 1, 1, Pattern::kDuplicates, kI64));  // H = 0
  cases.push_back(make(1, 4, 2, 0, 0, 2, 3, Pattern::kDrops, kI32));
  cases.push_back(make(0, 9, 1, 4099, 0, 1, 1, Pattern::kPermutation, kI32));  // K = 1, long rows
  cases.push_back(make(1, 7, 2, 4099, 0, 3, 4, Pattern::kDrops, kI64));
  cases.push_back(make(0, 160, 8, 64, 700, 1, 1, Pattern::kDuplicates, kI64));  // every thread
  cases.push_back(make(1, 160, 8, 64, 0, 16, 64, Pattern::kDuplicates, kI32));
  return cases;
}

TEST_P(MoeInitRoutingV2Cases, GradMatchesOracle) {
  uint64_t seed = 301;
  for (const GradCase &c : gradCases()) checkGrad(handle(), dtype(), layout(), c, seed++);
}

INSTANTIATE_TEST_SUITE_P(
    All, MoeInitRoutingV2Cases,
    ::testing::Combine(::testing::ValuesIn(allDeviceParams()), ::testing::ValuesIn(kFloatDtypes),
                       ::testing::Values(Layout::kContiguous, Layout::kStrided, Layout::kReversed)),
    [](const ::testing::TestParamInfo<InitParam> &info) {
      return deviceParamName(std::get<0>(info.param)) + "_" +
             infiniop::dtypeName(std::get<1>(info.param)) + "_" +
             layoutName(std::get<2>(info.param));
    });

// ---------------------------------------------------------------- determinism, larger calls
// R = 256, K = 8, E = 64, H = 512, skewed routing (busy experts drop in mode 1): both operators the
// same bits for 1 and 2 OpenMP threads and a repeated call, against the oracle, and the Init
// bit-identical to cpu_reference's.
TEST_P(DeviceTest, MoeInitRoutingV2Larger) {
  for (infiniDtype_t dtype : {kF32, kBF16})
    for (int64_t mode : {0, 1}) {
      SCOPED_TRACE(dtypeStr(dtype));
      InitCase c;
      c.mode = mode, c.R = 256, c.K = 8, c.H = 512, c.E = 64, c.capacity = mode ? 40 : 0;
      c.count_flag = mode ? 0 : 1, c.before_flag = mode == 1, c.experts = Experts::kSkewed;
      c.row_dt = kI64;
      const auto got = checkInit(handle(), dtype, Layout::kContiguous, c, 5, {1, 2, 0});
      const Handle reference(INFINI_DEVICE_CPU_REFERENCE);
      const auto want = checkInit(reference.get(), dtype, Layout::kContiguous, c, 5);
      EXPECT_TRUE(got == want) << "differs from cpu_reference";
      GradCase g;
      g.mode = mode, g.R = 256, g.K = 8, g.H = 512, g.E = 64, g.C = 40;
      g.pattern = Pattern::kDuplicates;
      checkGrad(handle(), dtype, Layout::kContiguous, g, 6, {1, 2, 0});
    }
}

// ---------------------------------------------------------------- round trips
// Init -> MoeFinalizeRoutingV2 with scales (mode 2 dropless with A = R*K, mode 3 drop/pad) is
// out[r] = sum_k s[r,k] x[r] over the kept positions; MoeFinalizeRoutingV2Grad (mode 0 with the
// same active_num / mode 1 with the same E, C) then MoeInitRoutingV2Grad is grad_x[r] = sum over
// kept k of s[r,k] g[r], and grad_scales[r,k] = x[r] . g[r] where kept, else 0.
struct RoundTrip {
  int64_t mode;
  size_t R, K, H, E;
  int64_t active_num, capacity;
  infiniDtype_t scales_dt;  // the activations' dtype or F32
};

void checkRoundTrip(infiniopHandle_t h, infiniDtype_t dtype, const RoundTrip &t, uint64_t seed) {
  SCOPED_TRACE("round trip mode " + std::to_string(t.mode) + " R=" + std::to_string(t.R) +
               " K=" + std::to_string(t.K) + " H=" + std::to_string(t.H) +
               " active_num=" + std::to_string(t.active_num) + " C=" + std::to_string(t.capacity) +
               " scales " + dtypeStr(t.scales_dt));
  const size_t R = t.R, K = t.K, H = t.H, E = t.E, n = R * K, C = static_cast<size_t>(t.capacity);
  const bool mode1 = t.mode == 1;
  const size_t A = t.active_num > 0 && static_cast<size_t>(t.active_num) < n
                       ? static_cast<size_t>(t.active_num)
                       : n;
  const std::vector<size_t> ex_shape =
      mode1 ? std::vector<size_t>{E, C, H} : std::vector<size_t>{A, H};
  TensorBuffer x({R, H}, dtype), expert({R, K}, kI64), ex(ex_shape, dtype), row({n}, kI64),
      scales({R, K}, t.scales_dt), out({R, H}, dtype), gy({R, H}, dtype), gex(ex_shape, dtype),
      gs({R, K}, t.scales_dt), gx({R, H}, dtype);
  const float range = dtype == kF16 ? 1000.0f : 1.0e6f;
  x.fill([&](size_t i) { return signedValue(seed, i, i % 3 ? range : 1.0f); });
  gy.fill([&](size_t i) { return signedValue(seed + 1, i, i % 3 ? 4.0f : 1.0f); });
  scales.fill([&](size_t i) { return signedValue(seed + 2, i, 1.0f); });
  Rng rng(seed);
  const std::vector<int64_t> experts = makeExperts(Experts::kSkewed, n, E, rng);
  for (size_t i = 0; i < n; ++i) setIndex(expert, i, experts[i]);
  Call init;
  init.tensors = {&ex, &row, nullptr, nullptr, &x, &expert};
  const int64_t ia[] = {t.active_num, t.capacity, static_cast<int64_t>(E), t.mode, 0, 0};
  std::copy(std::begin(ia), std::end(ia), init.attr);
  Outcome o = run(h, kInit, init);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  const std::vector<int64_t> rv = indicesOf(row);
  const auto kept = [&](size_t p) {
    return rv[p] >= 0 && static_cast<size_t>(rv[p]) < (mode1 ? E * C : A);
  };
  int bad = 0;
  const auto check = [&](const char *what, infiniDtype_t dt, TensorBuffer &b, size_t i,
                         long double truth, double tol) {
    const std::string why = compareToTruth(dt, b.get(i), truth, tol);
    if (!why.empty() && bad++ < 5) ADD_FAILURE() << what << "[" << i << "] " << why;
  };
  if (mode1 || A == n) {  // the forward: MoeFinalizeRoutingV2 mode 2 / 3
    Call f;
    f.tensors = {&out, &ex, &row, nullptr, nullptr, nullptr, &scales, nullptr};
    f.attr[0] = mode1 ? 3 : 2;
    out.poison();
    o = run(h, kFinalize, f);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < H; ++j) {
        long double truth = 0, terms = 0;
        for (size_t k = 0; k < K; ++k) {
          if (!kept(r * K + k)) continue;
          const long double v = static_cast<long double>(scales.get(r * K + k)) * x.get(r * H + j);
          truth += v, terms += std::fabs(v);
        }
        check("out", dtype, out, r * H + j, truth, allowed(dtype, 2.0 * K + 3, terms, truth));
      }
  }
  Call fg;
  fg.tensors = {&gex, &gs, &gy, &row, &ex, &scales, nullptr, nullptr};
  const int64_t ga[] = {t.mode, t.active_num, static_cast<int64_t>(E), t.capacity};
  std::copy(std::begin(ga), std::end(ga), fg.attr);
  o = run(h, kFinalizeGrad, fg);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  Call ig;
  ig.tensors = {&gx, &gex, &row};
  ig.attr[0] = static_cast<int64_t>(K), ig.attr[1] = t.mode, ig.attr[2] = t.active_num;
  gx.poison();
  o = run(h, kGrad, ig);
  ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  for (size_t r = 0; r < R; ++r)
    for (size_t j = 0; j < H; ++j) {
      long double truth = 0, terms = 0;
      double rounding = 0;
      for (size_t k = 0; k < K; ++k) {
        if (!kept(r * K + k)) continue;
        const long double v = static_cast<long double>(scales.get(r * K + k)) * gy.get(r * H + j);
        truth += v, terms += std::fabs(v);
        rounding += ulpOf(dtype, std::fabs(static_cast<double>(v)));
      }
      check("grad_x", dtype, gx, r * H + j, truth,
            allowed(dtype, K + 1.0, terms, truth) + rounding);
    }
  for (size_t p = 0; p < n; ++p) {
    long double truth = 0, terms = 0;
    if (kept(p))
      for (size_t j = 0; j < H; ++j) {
        const long double v =
            static_cast<long double>(x.get(p / K * H + j)) * gy.get(p / K * H + j);
        truth += v, terms += std::fabs(v);
      }
    check("grad_scales", t.scales_dt, gs, p, truth,
          allowed(t.scales_dt, static_cast<double>(H) + 2, terms, truth));
  }
  EXPECT_EQ(bad, 0) << "mismatches";
}

TEST_P(DeviceTest, MoeInitRoutingV2RoundTrip) {
  const RoundTrip trips[] = {
      {0, 9, 3, 37, 4, 0, 0, kF32},    {0, 9, 3, 37, 4, 27, 0, kF32},  // dropless, A = R*K
      {0, 9, 3, 37, 4, 20, 0, kF32},   {0, 9, 3, 37, 4, 50, 0, kF32},  // A < R*K; > R*K
      {1, 9, 3, 37, 4, 0, 3, kF32},    {1, 9, 3, 37, 4, 0, 30, kF32},  // drops; padding
      {0, 64, 8, 130, 16, 0, 0, kF32}, {1, 64, 8, 130, 16, 0, 40, kF32},
  };
  uint64_t seed = 900;
  for (infiniDtype_t dtype : kFloatDtypes)
    for (RoundTrip t : trips) {
      SCOPED_TRACE(dtypeStr(dtype));
      if (t.scales_dt != dtype && dtype != kF32) {
        checkRoundTrip(handle(), dtype, t, seed++);  // F32 scales with F16 / BF16 activations
      }
      t.scales_dt = dtype;
      checkRoundTrip(handle(), dtype, t, seed++);
    }
}

// ---------------------------------------------------------------- workspace
// The Init asks for none on the CPU devices; where it asks for some (opencl), one byte less is
// INSUFFICIENT_WORKSPACE, NULL with the size NULL_POINTER, nothing written, and a larger one the
// same result. The grad asks for none anywhere.
TEST_P(DeviceTest, MoeInitRoutingV2Workspace) {
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    const size_t R = 5, K = 2, H = 7, E = 3;
    TensorBuffer x({R, H}, kF32), expert({R, K}, kI32), row({R * K}, kI32), counts({E}, kI64),
        ex(mode ? std::vector<size_t>{E, 2, H} : std::vector<size_t>{R * K, H}, kF32);
    x.fill([](size_t i) { return signedValue(1, i, 5.0f); });
    for (size_t i = 0; i < R * K; ++i) setIndex(expert, i, static_cast<int64_t>(i * 7 % E));
    Call call;
    call.tensors = {&ex, &row, mode ? nullptr : &counts, mode ? &counts : nullptr, &x, &expert};
    const int64_t a[] = {0, 2, static_cast<int64_t>(E), mode, mode ? 0 : 2, mode};
    std::copy(std::begin(a), std::end(a), call.attr);
    ex.poison();
    Outcome o = run(handle(), kInit, call);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    const std::vector<uint8_t> good_ex = ex.storage(), good_row = row.storage(),
                               good_counts = counts.storage();
    if (!isDeviceMemory(GetParam())) {
      EXPECT_EQ(o.workspace, 0u) << "no workspace on the CPU devices";
    }
    if (o.workspace > 0) {
      for (int variant = 0; variant < 2; ++variant) {
        ex.poison();
        std::memset(row.storageBytes(), 0xAB, row.storage().size());
        std::memset(counts.storageBytes(), 0xAB, counts.storage().size());
        const auto ex0 = ex.storage(), row0 = row.storage(), counts0 = counts.storage();
        call.workspace_delta = variant == 0 ? -1 : 0;
        call.null_workspace = variant == 1;
        o = run(handle(), kInit, call);
        EXPECT_EQ(o.status,
                  variant == 0 ? INFINI_STATUS_INSUFFICIENT_WORKSPACE : INFINI_STATUS_NULL_POINTER);
        EXPECT_NE(o.error.find(kInitName), std::string::npos) << o.error;
        EXPECT_TRUE(ex.storage() == ex0 && row.storage() == row0 && counts.storage() == counts0)
            << "written";
      }
    }
    call.workspace_delta = 64, call.null_workspace = false;
    ex.poison();
    o = run(handle(), kInit, call);
    ASSERT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
    EXPECT_TRUE(ex.storage() == good_ex && row.storage() == good_row &&
                counts.storage() == good_counts)
        << "the result depends on the workspace size";
  }
}

// ---------------------------------------------------------------- bad arguments
class Buffers {  // every buffer of a bad-argument test: "nothing written" covers them all
 public:
  TensorBuffer &make(std::vector<size_t> shape, infiniDtype_t dtype = kF32,
                     std::vector<ptrdiff_t> strides = {}) {
    TensorBuffer &t = all_.emplace_back(std::move(shape), std::move(strides), dtype);
    if (infiniop::isFloatStorage(dtype))
      t.fill([&](size_t i) { return signedValue(all_.size(), i, 2.0f); });
    return t;
  }
  TensorBuffer &indices(std::vector<size_t> shape, const std::vector<int64_t> &values,
                        infiniDtype_t dtype = kI32) {
    TensorBuffer &t = make(std::move(shape), dtype);
    for (size_t i = 0; i < t.numel(); ++i) setIndex(t, i, values[i % values.size()]);
    return t;
  }
  std::vector<std::vector<uint8_t>> snapshot() const {
    std::vector<std::vector<uint8_t>> s;
    for (const TensorBuffer &t : all_) s.push_back(t.storage());
    return s;
  }

 private:
  std::deque<TensorBuffer> all_;
};

using Change = std::function<void(Call &)>;
struct BadCase {
  infiniStatus_t status;
  std::string what;
  int64_t mode;
  Change change;
};
Change use(size_t slot, TensorBuffer *t) {
  return [slot, t](Call &c) { c.tensors[slot] = t; };
}
Change pointTo(size_t slot, void *p) {
  return [slot, p](Call &c) { c.data[slot] = p; };
}
Change attr(size_t i, int64_t v) {
  return [i, v](Call &c) { c.attr[i] = v; };
}
Change both(Change a, Change b) {
  return [a, b](Call &c) {
    a(c);
    b(c);
  };
}

void expectFailures(Buffers &b, const std::function<Call(int64_t)> &valid,
                    const std::vector<BadCase> &cases, infiniopHandle_t h, const Op &op) {
  for (int64_t mode : {0, 1}) {
    SCOPED_TRACE("valid call, mode " + std::to_string(mode));
    const Outcome o = run(h, op, valid(mode));
    EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
  }
  for (const BadCase &bad : cases) {
    SCOPED_TRACE(bad.what + " (mode " + std::to_string(bad.mode) + ")");
    Call call = valid(bad.mode);
    bad.change(call);
    const auto before = b.snapshot();
    const Outcome o = run(h, op, call);
    EXPECT_EQ(o.status, bad.status) << infiniStatusString(o.status) << ": " << o.error;
    EXPECT_NE(o.error.find(op.name), std::string::npos) << "message \"" << o.error << "\"";
    EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
  }
}

// The handle, the descriptor pointer, the operator descriptor: NULL_POINTER, nothing written.
void expectNullHandles(infiniopHandle_t h, const Op &op, const Call &c, Buffers &b) {
  const auto before = b.snapshot();
  const auto expectNull = [&](infiniStatus_t s, const char *what) {
    EXPECT_EQ(s, INFINI_STATUS_NULL_POINTER) << what;
    EXPECT_NE(std::string(infiniopGetLastError()).find(op.name), std::string::npos)
        << what << ": \"" << infiniopGetLastError() << "\"";
  };
  Descs d;
  for (TensorBuffer *t : c.tensors) d.push_back(t ? t->descriptor() : nullptr);
  void *desc = nullptr;
  expectNull(op.create(nullptr, &desc, d, c.attr), "NULL handle");
  EXPECT_EQ(desc, nullptr);
  expectNull(op.create(h, nullptr, d, c.attr), "NULL descriptor pointer");
  size_t size = 0;
  expectNull(op.size(nullptr, &size), "workspace size of NULL");
  DeviceMirror device(h);
  Ptrs p;
  for (TensorBuffer *t : c.tensors) {
    device.add(t);
    p.push_back(device(t));
  }
  expectNull(op.calc(nullptr, nullptr, 0, p), "calculate with NULL");
  expectNull(op.destroy(nullptr), "destroy NULL");
  ASSERT_EQ(op.create(h, &desc, d, c.attr), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  expectNull(op.size(desc, nullptr), "NULL size pointer");
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  for (auto t : d)
    if (t) infiniopDestroyTensorDescriptor(t);
  device.download();
  EXPECT_TRUE(b.snapshot() == before) << "a buffer was written";
}

TEST_P(DeviceTest, MoeInitRoutingV2BadArguments) {
  // Valid: R = 4, K = 2, H = 5, E = 3; mode 0: expanded_x (8, 5) and counts (flag 2); mode 1:
  // C = 3, expanded_x (3, 3, 5) and before_capacity (flag true).
  enum { kEx, kRow, kCounts, kBefore, kX, kExpert };
  enum { kActive, kCapacity, kExperts, kMode, kFlag, kBeforeFlag };
  Buffers b;
  const std::vector<int64_t> experts = {0, 1, 2, 0, 1, 2, 0, 1};
  TensorBuffer &ex = b.make({8, 5}), &ex3 = b.make({3, 3, 5}), &row = b.indices({8}, {0}),
               &counts = b.indices({3}, {0}, kI64), &before = b.indices({3}, {0}),
               &x = b.make({4, 5}), &expert = b.indices({4, 2}, experts);
  TensorBuffer &scratch32 = b.indices({4, 2}, experts),
               &scratch64 = b.indices({4, 2}, experts, kI64);
  const auto valid = [&](int64_t mode) {
    Call c;
    c.tensors = {mode == 1 ? &ex3 : &ex, &row, &counts, &before, &x, &expert};
    const int64_t a[] = {0, 3, 3, mode, 2, 1};
    std::copy(std::begin(a), std::end(a), c.attr);
    return c;
  };
  const auto u = [](size_t slot, TensorBuffer &t) { return use(slot, &t); };
  const auto none = [](size_t slot) { return use(slot, nullptr); };
  const auto expertBad = [&](size_t pos, int64_t v, bool wide) {
    TensorBuffer *s = wide ? &scratch64 : &scratch32;
    return Change([=](Call &c) {
      for (size_t i = 0; i < 8; ++i) setIndex(*s, i, i == pos ? v : experts[i]);
      c.tensors[kExpert] = s;
    });
  };
  const auto f32 = [](TensorBuffer &t, size_t offset) {
    return static_cast<void *>(static_cast<float *>(t.data()) + offset);
  };
  TensorBuffer &ex5 = b.make({5, 5});
  const std::vector<BadCase> cases = {
      // NULL descriptors and pointers
      {INFINI_STATUS_NULL_POINTER, "expanded_x descriptor NULL", 0, none(kEx)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 1, none(kRow)},
      {INFINI_STATUS_NULL_POINTER, "x descriptor NULL", 0, none(kX)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx descriptor NULL", 1, none(kExpert)},
      {INFINI_STATUS_NULL_POINTER, "expanded_x NULL", 0, pointTo(kEx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 1, pointTo(kRow, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "counts NULL", 0, pointTo(kCounts, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "before_capacity NULL", 1, pointTo(kBefore, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "x NULL", 0, pointTo(kX, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expert_idx NULL", 1, pointTo(kExpert, nullptr)},
      // attributes
      {INFINI_STATUS_BAD_PARAM, "mode 2", 2, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "expert_num 0", 0, attr(kExperts, 0)},
      {INFINI_STATUS_BAD_PARAM, "expert_num -3", 1, attr(kExperts, -3)},
      {INFINI_STATUS_BAD_PARAM, "count flag 3", 0, attr(kFlag, 3)},
      {INFINI_STATUS_BAD_PARAM, "count flag -1", 1, attr(kFlag, -1)},
      {INFINI_STATUS_BAD_PARAM, "active_num -1", 0, attr(kActive, -1)},
      {INFINI_STATUS_BAD_PARAM, "active_num INT64_MIN", 0, attr(kActive, INT64_MIN)},
      {INFINI_STATUS_BAD_PARAM, "capacity 0", 1, attr(kCapacity, 0)},
      {INFINI_STATUS_BAD_PARAM, "capacity -1", 1, attr(kCapacity, -1)},
      {INFINI_STATUS_BAD_PARAM, "count flag 1, counts absent", 0,
       both(attr(kFlag, 1), none(kCounts))},
      {INFINI_STATUS_BAD_PARAM, "count flag 2, counts absent", 0, none(kCounts)},
      {INFINI_STATUS_BAD_PARAM, "before flag, before_capacity absent", 1, none(kBefore)},
      // expert_idx values
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1", 0, expertBad(0, -1, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx E", 1, expertBad(7, 3, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx INT32_MIN", 0, expertBad(3, INT32_MIN, false)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -1 (I64)", 1, expertBad(7, -1, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^40 (I64)", 0, expertBad(2, int64_t{1} << 40, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx 2^32 + 1 (I64, 1 if truncated)", 1,
       expertBad(5, (int64_t{1} << 32) + 1, true)},
      {INFINI_STATUS_BAD_PARAM, "expert_idx -2^32 (I64, 0 if truncated)", 0,
       expertBad(0, -(int64_t{1} << 32), true)},
      // dtypes
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x and expanded_x F64", 0,
       both(u(kX, b.make({4, 5}, kF64)), u(kEx, b.make({8, 5}, kF64)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x F16, expanded_x F32", 0, u(kX, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_x BF16, x F32", 1,
       u(kEx, b.make({3, 3, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "x I32", 0,
       both(u(kX, b.make({4, 5}, kI32)), u(kEx, b.make({8, 5}, kI32)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx I16", 0, u(kExpert, b.make({4, 2}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expert_idx F32", 1, u(kExpert, b.make({4, 2}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 1, u(kRow, b.make({8}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx U32", 0,
       u(kRow, b.make({8}, INFINI_DTYPE_U32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "counts F32", 0, u(kCounts, b.make({3}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "before_capacity I16", 1, u(kBefore, b.make({3}, kI16))},
      // shapes
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "x [4,5,1]", 0, u(kX, b.make({4, 5, 1}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [4,3]", 0,
       u(kExpert, b.indices({4, 3}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [8]", 1, u(kExpert, b.indices({8}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expert_idx [5,2]", 0,
       u(kExpert, b.indices({5, 2}, experts))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [7]", 0, u(kRow, b.indices({7}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 1,
       u(kRow, b.indices({4, 2}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [9,5]", 0, u(kEx, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,6]", 0, u(kEx, b.make({8, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, expanded_x [8,5]", 0, attr(kActive, 5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 0, expanded_x [5,5]", 0, u(kEx, ex5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [8,5] in mode 1", 1, u(kEx, ex)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [3,4,5], C = 3", 1, u(kEx, b.make({3, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_x [2,3,5], E = 3", 1, u(kEx, b.make({2, 3, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "counts [4]", 0, u(kCounts, b.indices({4}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "counts [3,1]", 0, u(kCounts, b.indices({3, 1}, {0}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "before_capacity [2]", 1, u(kBefore, b.indices({2}, {0}))},
      // overlapping outputs
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x broadcast", 0,
       u(kEx, b.make({8, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x rows overlap", 1,
       u(kEx, b.make({3, 3, 5}, kF32, {15, 3, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx stride 0", 0,
       u(kRow, b.make({8}, kI32, {0}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "counts stride 0", 0, u(kCounts, b.make({3}, kI32, {0}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_x over x", 0, pointTo(kEx, x.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx over expert_idx", 1,
       pointTo(kRow, expert.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "counts inside expanded_x", 0,
       pointTo(kCounts, f32(ex, 5))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "before_capacity over expanded_row_idx", 1,
       pointTo(kBefore, row.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "expanded_row_idx inside expanded_x", 1,
       pointTo(kRow, f32(ex3, 10))},
  };
  expectFailures(b, valid, cases, handle(), kInit);
  {  // outputs not asked for: any shape or dtype, NULL pointers: not checked, not written
    SCOPED_TRACE("unasked outputs NULL or odd");
    TensorBuffer &odd = b.make({2, 7}, kF64);
    for (int64_t mode : {0, 1}) {
      Call c = valid(mode);
      c.tensors[mode ? kCounts : kBefore] = &odd;
      c.data[mode ? kCounts : kBefore] = nullptr;
      if (mode)  // the other mode's flag: ignored
        c.attr[kFlag] = 1;
      else
        c.attr[kBeforeFlag] = 1;
      const auto before_snapshot = odd.storage();
      const Outcome o = run(handle(), kInit, c);
      EXPECT_EQ(o.status, INFINI_STATUS_SUCCESS) << o.error;
      EXPECT_TRUE(odd.storage() == before_snapshot);
      c.attr[kFlag] = 0, c.attr[kBeforeFlag] = 0;
      c.tensors[kCounts] = c.tensors[kBefore] = &odd;
      EXPECT_EQ(run(handle(), kInit, c).status, INFINI_STATUS_SUCCESS) << "flags off";
    }
  }
  expectNullHandles(handle(), kInit, valid(0), b);
}

TEST_P(DeviceTest, MoeInitRoutingV2GradBadArguments) {
  // Valid: R = 4, top_k = 2, H = 5; mode 0: grad_expanded_x (8, 5); mode 1: (3, 3, 5).
  enum { kGx, kGex, kRow };
  enum { kTopK, kMode, kActive };
  Buffers b;
  const std::vector<int64_t> perm = {3, 0, 6, 1, 7, 2, 5, 4}, slots = {3, -1, 6, 1, 8, 2, -1, 4};
  TensorBuffer &gx = b.make({4, 5}), &gex = b.make({8, 5}), &gex3 = b.make({3, 3, 5}),
               &idx = b.indices({8}, perm), &idx1 = b.indices({8}, slots, kI64);
  TensorBuffer &scratch32 = b.indices({8}, perm), &scratch64 = b.indices({8}, perm, kI64);
  const auto valid = [&](int64_t mode) {
    Call c;
    c.tensors = {&gx, mode == 1 ? &gex3 : &gex, mode == 1 ? &idx1 : &idx};
    c.attr[kTopK] = 2, c.attr[kMode] = mode, c.attr[kActive] = 0;
    return c;
  };
  const auto u = [](size_t slot, TensorBuffer &t) { return use(slot, &t); };
  const auto idxBad = [&](int64_t mode, size_t pos, int64_t v, bool wide) {
    TensorBuffer *s = wide ? &scratch64 : &scratch32;
    const std::vector<int64_t> base = mode ? slots : perm;
    return Change([=](Call &c) {
      for (size_t i = 0; i < 8; ++i) setIndex(*s, i, i == pos ? v : base[i]);
      c.tensors[kRow] = s;
    });
  };
  const std::vector<BadCase> cases = {
      {INFINI_STATUS_NULL_POINTER, "grad_x descriptor NULL", 0, use(kGx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x descriptor NULL", 1, use(kGex, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx descriptor NULL", 0, use(kRow, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_x NULL", 0, pointTo(kGx, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "grad_expanded_x NULL", 1, pointTo(kGex, nullptr)},
      {INFINI_STATUS_NULL_POINTER, "expanded_row_idx NULL", 0, pointTo(kRow, nullptr)},
      {INFINI_STATUS_BAD_PARAM, "top_k 0", 0, attr(kTopK, 0)},
      {INFINI_STATUS_BAD_PARAM, "top_k -2", 1, attr(kTopK, -2)},
      {INFINI_STATUS_BAD_PARAM, "mode 2", 2, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "mode -1", -1, [](Call &) {}},
      {INFINI_STATUS_BAD_PARAM, "active_num -1", 0, attr(kActive, -1)},
      {INFINI_STATUS_BAD_PARAM, "index -1", 0, idxBad(0, 0, -1, false)},
      {INFINI_STATUS_BAD_PARAM, "index R*K", 0, idxBad(0, 7, 8, false)},
      {INFINI_STATUS_BAD_PARAM, "index R*K (I64)", 0, idxBad(0, 3, 8, true)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 + 2 (I64, 2 if truncated)", 0,
       idxBad(0, 5, (int64_t{1} << 32) + 2, true)},
      {INFINI_STATUS_BAD_PARAM, "active_num 5, index -1", 0,
       both(both(attr(kActive, 5), u(kGex, b.make({5, 5}))), idxBad(0, 7, -1, false))},
      {INFINI_STATUS_BAD_PARAM, "index -2", 1, idxBad(1, 0, -2, false)},
      {INFINI_STATUS_BAD_PARAM, "index E*C", 1, idxBad(1, 7, 9, true)},
      {INFINI_STATUS_BAD_PARAM, "index INT32_MIN", 1, idxBad(1, 2, INT32_MIN, false)},
      {INFINI_STATUS_BAD_PARAM, "index 2^32 - 1 (I64, -1 if truncated)", 1,
       idxBad(1, 1, (int64_t{1} << 32) - 1, true)},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_x F16", 0, u(kGx, b.make({4, 5}, kF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "grad_expanded_x BF16", 1,
       u(kGex, b.make({3, 3, 5}, kBF16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "both F64", 0,
       both(u(kGx, b.make({4, 5}, kF64)), u(kGex, b.make({8, 5}, kF64)))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx I16", 0, u(kRow, b.make({8}, kI16))},
      {INFINI_STATUS_BAD_TENSOR_DTYPE, "expanded_row_idx F32", 1, u(kRow, b.make({8}, kF32))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "top_k 3: 12 indices needed", 0, attr(kTopK, 3)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_x [4,6]", 0, u(kGx, b.make({4, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_x [4,5,1]", 1, u(kGx, b.make({4, 5, 1}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [7,5]", 0, u(kGex, b.make({7, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "active_num 5, grad_expanded_x [8,5]", 0, attr(kActive, 5)},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [2,4,5] in mode 0", 0,
       u(kGex, b.make({2, 4, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [9,5] in mode 1", 1,
       u(kGex, b.make({9, 5}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "grad_expanded_x [3,3,6]", 1, u(kGex, b.make({3, 3, 6}))},
      {INFINI_STATUS_BAD_TENSOR_SHAPE, "expanded_row_idx [4,2]", 0,
       u(kRow, b.indices({4, 2}, perm))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x broadcast", 0,
       u(kGx, b.make({4, 5}, kF32, {0, 1}))},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x over grad_expanded_x", 0,
       pointTo(kGx, gex.data())},
      {INFINI_STATUS_BAD_TENSOR_STRIDES, "grad_x over expanded_row_idx", 1,
       pointTo(kGx, idx1.data())},
  };
  expectFailures(b, valid, cases, handle(), kGrad);
  expectNullHandles(handle(), kGrad, valid(1), b);
}

}  // namespace
}  // namespace infiniop_test
