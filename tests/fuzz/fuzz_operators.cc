// SPDX-License-Identifier: Apache-2.0
// One libFuzzer target over every operator of the C API (tests/fuzz/README.md).
//
// The input decodes to an operator and its call: tensor shapes (built around the operator's own
// shape rules, then perturbed: rank 0-9, dims 0, 1, odd and overflowing), layouts (contiguous,
// padded, negative, zero, overlapping, transposed, huge strides), dtypes (valid and any enum
// value), attributes (dims out of range, NaN/inf/negative floats, every mode and count), index and
// count data (in range, -1, out of range, duplicates), the workspace (exact, too small, NULL,
// larger) and NULL pointers. The same call runs on cpu and cpu_reference (and opencl when
// INFINIOP_FUZZ_OPENCL=1, on device copies of the buffers, read back after the call), each on its
// own buffers, filled alike: storage spans what the strides reach, fenced by guard bytes.
// Checked (a violation is a trap, which libFuzzer reports):
//   - a failed create or call leaves every buffer byte unchanged and infiniopGetLastError()
//     non-empty;
//   - a successful one leaves guards and inputs unchanged and the last error empty;
//   - cpu (and opencl) agree with cpu_reference on the status (but for workspace sizes, which may
//     differ);
//   - where both succeed, the outputs equal cpu_reference's within the operator's F32 bound
//     (tests/accuracy_bounds.json, with an allowance for cancellation) plus, for F16/BF16, one
//     ulp of the output type; index and count outputs are exact;
//   - the elementwise operators again on handles in the relaxed F32 mode
//     (infiniopSetHandleFpmathMode), within its bound (K = 8);
//   - the routers (MoeGatingTopK*): against a recomputation of cpu_reference's doubles, the
//     selection allowed to differ only at near ties (compareRouter()), and opencl's outputs bit
//     for bit as cpu's;
//   - the expert-count operators (MoeExpertCounts, MoeBiasUpdate): every output byte as
//     cpu_reference's (exact integer counts; the bias after one exact comparison and one F32
//     addition), the in-place bias filled like an input.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "infiniop.h"
#include "operators.h"  // the operators' C signatures

namespace ops = infiniop_ops;

// A create function's type with its enum parameters as int.
template <class F>
struct EnumAsIntT;
template <class... A>
struct EnumAsIntT<infiniStatus_t (*)(A...)> {
  using type = infiniStatus_t(std::conditional_t<std::is_enum_v<A>, int, A>...);
};
template <class Op>
using EnumAsInt = typename EnumAsIntT<ops::CreateFn<Op>>::type;

extern "C" infiniStatus_t fuzzCreateTensorDescriptor(infiniopTensorDescriptor_t *, size_t,
                                                     const size_t *, const ptrdiff_t *, int);

// The create function the harness calls: the table's, or enum_calls.c's for an enum attribute.
template <class Op>
struct FuzzCreate {
  static_assert(!ops::hasAttrKind<Op>(ops::AttrKind::kEnum),
                "an enum attribute goes through enum_calls.c (ENUM_AS_INT below)");
  static constexpr auto fn = Op::create;
};
// enum_calls.c's fuzzCreate<Name>Descriptor: the enum parameters as ints, as C passes them.
#define ENUM_AS_INT(Name)                                       \
  extern "C" EnumAsInt<ops::Name> fuzzCreate##Name##Descriptor; \
  template <>                                                   \
  struct FuzzCreate<ops::Name> {                                \
    static constexpr auto fn = fuzzCreate##Name##Descriptor;    \
  }
ENUM_AS_INT(Gelu);
ENUM_AS_INT(GeluMul);
ENUM_AS_INT(GeluBackwardV2);
ENUM_AS_INT(GeluMulBackward);
ENUM_AS_INT(SwiGluQuant);
ENUM_AS_INT(GeluMulQuant);
ENUM_AS_INT(ClippedSwigluQuant);
ENUM_AS_INT(DequantSwigluQuant);
ENUM_AS_INT(MoeInitRoutingQuantV2);
#undef ENUM_AS_INT

namespace {

[[noreturn]] void fail(const char *what, const std::string &detail) {
  std::fprintf(stderr, "\n=== infiniop fuzz check failed: %s\n%s\n", what, detail.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

// The fuzz input, read front to back; past its end every read is 0.
class Input {
 public:
  Input(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8() { return p_ < end_ ? *p_++ : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }
  size_t pick(size_t n) { return n ? u8() % n : 0; }
  bool chance(unsigned in256) { return u8() < in256; }  // true with probability in256/256

 private:
  const uint8_t *p_, *end_;
};

const size_t kDims[] = {0,
                        1,
                        2,
                        3,
                        4,
                        5,
                        7,
                        8,
                        16,
                        33,
                        size_t{1} << 20,
                        size_t{1} << 31,
                        size_t{1} << 40,
                        SIZE_MAX / 3,
                        SIZE_MAX};

// A dim: usually small, sometimes from the table of edges.
size_t fuzzDim(Input &in) {
  const uint8_t b = in.u8();
  if (b < 200) return b % 9;
  return kDims[b % (sizeof kDims / sizeof kDims[0])];
}

float fuzzFloat(Input &in) {
  static const float table[] = {0.0f,  -0.0f,  1.0f, -1.0f,    0.5f,      1.702f, 7.0f,  -7.0f,
                                1e-3f, 100.0f, NAN,  INFINITY, -INFINITY, 1e-40f, 3e38f, -2.5f};
  const uint8_t b = in.u8();
  if (b < 160) return table[b % 16];
  uint32_t bits = in.u32();
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

int64_t fuzzInt(Input &in, int64_t usual) {
  static const int64_t table[] = {
      0, 1, 2, 3, -1, -2, 7, INT32_MAX, int64_t{INT32_MAX} + 1, INT64_MAX, INT64_MIN, 1 << 20};
  const uint8_t b = in.u8();
  if (b < 170) return usual;
  if (b < 230) return table[b % 12];
  return static_cast<int64_t>(in.u64());
}

bool isFloatDtype(int d) {
  return d == INFINI_DTYPE_F32 || d == INFINI_DTYPE_F16 || d == INFINI_DTYPE_BF16;
}
size_t dtypeBytes(int d) {
  switch (d) {
    case INFINI_DTYPE_F16:
    case INFINI_DTYPE_BF16:
    case INFINI_DTYPE_I16:
    case INFINI_DTYPE_U16:
      return 2;
    case INFINI_DTYPE_F32:
    case INFINI_DTYPE_I32:
    case INFINI_DTYPE_U32:
      return 4;
    case INFINI_DTYPE_F64:
    case INFINI_DTYPE_I64:
    case INFINI_DTYPE_U64:
      return 8;
    default:
      return 1;
  }
}

float f32FromHalf(uint16_t h, int dtype) {
  if (dtype == INFINI_DTYPE_BF16) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 1024), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

// Roles of a tensor in a call.
enum Role { kInput, kIndex, kOutput, kOutIndex };

struct Tensor {
  bool present = true;  // false: a NULL descriptor (and a NULL data pointer)
  Role role = kInput;
  std::vector<size_t> shape;
  std::vector<ptrdiff_t> strides;
  bool null_strides = true;
  int dtype = INFINI_DTYPE_F32;
  // Index data: values drawn mostly from [lo, hi).
  int64_t lo = 0, hi = 1;
  // Float data rounded to multiples of 10 (router logits): equal keys, so ties and near ties.
  bool coarse = false;
  // An output the operator also reads (MoeBiasUpdate's bias): filled like an input.
  bool inplace = false;
  // Derived: the element span the view reaches and the origin's offset in it, in elements.
  bool span_ok = false;
  size_t span = 0, origin = 0;
};

const ptrdiff_t kHugeStride = ptrdiff_t{1} << 40;

// Strides for `t.shape`: contiguous most often, else a layout of the fuzzer's choosing.
void fuzzLayout(Input &in, Tensor &t) {
  const size_t n = t.shape.size();
  t.strides.assign(n, 0);
  ptrdiff_t step = 1;
  for (size_t d = n; d-- > 0;) {
    t.strides[d] = step;
    step *= static_cast<ptrdiff_t>(t.shape[d] ? (t.shape[d] > 64 ? 64 : t.shape[d]) : 1);
  }
  const uint8_t kind = in.u8();
  t.null_strides = kind < 110;
  if (kind < 140 || n == 0) return;
  t.null_strides = false;
  const size_t d = in.pick(n);
  switch (kind % 8) {
    case 0:  // padded: nothing merges
      step = 1;
      for (size_t e = n; e-- > 0;) {
        t.strides[e] = step;
        step *= static_cast<ptrdiff_t>((t.shape[e] > 64 ? 64 : t.shape[e]) + 1);
      }
      break;
    case 1:
      t.strides[d] = -t.strides[d];
      break;
    case 2:
      t.strides[d] = 0;
      break;
    case 3:  // overlapping
      for (auto &s : t.strides) s = 1;
      break;
    case 4: {  // column-major
      step = 1;
      for (size_t e = 0; e < n; ++e) {
        t.strides[e] = step;
        step *= static_cast<ptrdiff_t>(t.shape[e] ? (t.shape[e] > 64 ? 64 : t.shape[e]) : 1);
      }
      break;
    }
    case 5:
      t.strides[d] = in.chance(128) ? kHugeStride : -kHugeStride;
      break;
    case 6:
      t.strides[d] = static_cast<ptrdiff_t>(in.u64());
      break;
    default:
      for (auto &s : t.strides) s = -s;
      break;
  }
}

// Perturbs a tensor now and then: its shape, rank, dtype or presence.
void fuzzPerturb(Input &in, Tensor &t, bool nullable) {
  const uint8_t b = in.u8();
  if (b < 200) return;
  switch (b % 6) {
    case 0:
      if (!t.shape.empty()) t.shape[in.pick(t.shape.size())] = fuzzDim(in);
      break;
    case 1: {
      const size_t rank = in.pick(10);
      t.shape.resize(rank);
      for (auto &s : t.shape) s = fuzzDim(in);
      break;
    }
    case 2:
      if (!t.shape.empty()) t.shape.pop_back();
      break;
    case 3:
      t.dtype = in.u8() % 24 - 2;  // every enum value, some outside it
      break;
    case 4:
      t.present = false;
      break;
    default:
      t.shape.push_back(fuzzDim(in));
      break;
  }
  (void)nullable;
}

// The span of elements the view reaches, or false when it overflows or is too large to test.
bool computeSpan(Tensor &t) {
  const size_t n = t.shape.size();
  std::vector<ptrdiff_t> strides = t.strides;
  if (t.null_strides) {
    ptrdiff_t step = 1;
    for (size_t d = n; d-- > 0;) {
      strides[d] = step;
      if (__builtin_mul_overflow(step, static_cast<ptrdiff_t>(t.shape[d] ? t.shape[d] : 1), &step))
        step = PTRDIFF_MAX;  // only matters when a later dim is > 1: caught below
    }
  }
  size_t numel = 1;
  for (size_t s : t.shape)
    if (__builtin_mul_overflow(numel, s, &numel)) numel = SIZE_MAX;
  if (numel == 0) {
    t.span = 0;
    t.origin = 0;
    return t.span_ok = true;
  }
  if (numel > (size_t{1} << 16)) return t.span_ok = false;  // also bounds the reaches below
  __int128 lowest = 0, highest = 0;
  for (size_t d = 0; d < n; ++d) {
    const __int128 reach =
        static_cast<__int128>(strides[d]) * static_cast<__int128>(t.shape[d] - 1);
    (reach < 0 ? lowest : highest) += reach;
  }
  const __int128 span = highest - lowest + 1;
  if (span > (1 << 16)) return t.span_ok = false;
  t.span = static_cast<size_t>(span);
  t.origin = static_cast<size_t>(-lowest);
  return t.span_ok = true;
}

constexpr size_t kGuard = 32;
constexpr uint8_t kGuardByte = 0xCD, kPoisonByte = 0xAB;

// One device's buffers for one call.
struct Buffer {
  std::vector<uint8_t> bytes;  // guard, span, guard
  void *data(const Tensor &t) { return bytes.data() + kGuard + t.origin * dtypeBytes(t.dtype); }
};

// Fills the inputs' spans from the fuzz input (the same bytes for every device).
std::vector<uint8_t> fillBytes(Input &in, const Tensor &t) {
  const size_t es = dtypeBytes(t.dtype);
  std::vector<uint8_t> span(t.span * es, kPoisonByte);
  if ((t.role == kOutput || t.role == kOutIndex) && !t.inplace) return span;
  const uint64_t seed = in.u32();
  const uint8_t special_rate = in.u8();
  for (size_t i = 0; i < t.span; ++i) {
    uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    if (t.role == kIndex && (t.dtype == INFINI_DTYPE_I32 || t.dtype == INFINI_DTYPE_I64)) {
      int64_t v;
      const uint8_t b = static_cast<uint8_t>(z >> 56);
      const int64_t range = t.hi - t.lo;
      if (b >= special_rate / 4 || range <= 0)
        v = range > 0 ? t.lo + static_cast<int64_t>((z >> 8) % static_cast<uint64_t>(range)) : t.lo;
      else if (b % 4 == 0)
        v = -1;
      else if (b % 4 == 1)
        v = t.hi;
      else if (b % 4 == 2)
        v = t.lo - 1;
      else
        v = static_cast<int64_t>(z);
      if (t.dtype == INFINI_DTYPE_I32) {
        const int32_t w = static_cast<int32_t>(v);
        std::memcpy(&span[i * 4], &w, 4);
      } else {
        std::memcpy(&span[i * 8], &v, 8);
      }
    } else if (t.dtype == INFINI_DTYPE_BOOL && t.role == kInput) {
      // finished flags: mostly 0 or 1, else any byte (every nonzero byte is true).
      const uint8_t b = static_cast<uint8_t>(z >> 56);
      span[i] = b < special_rate / 2 ? static_cast<uint8_t>(z >> 8) : (b & 1);
    } else if (isFloatDtype(t.dtype)) {
      float f;
      const uint8_t b = static_cast<uint8_t>(z >> 56);
      if (b < special_rate / 8) {
        static const float specials[] = {NAN,   INFINITY, -INFINITY, 0.0f,
                                         -0.0f, 1e-40f,   6e4f,      -88.0f};
        f = specials[b % 8];
      } else {
        const double unit = static_cast<double>((z >> 11) & ((1ull << 40) - 1)) * 0x1p-40;
        f = static_cast<float>((2 * unit - 1) * ((z & 3) == 0   ? 100.0
                                                 : (z & 3) == 1 ? 1e-2
                                                                : 10.0));
        if (t.coarse) f = 10 * std::nearbyint(f * 0.1f);
      }
      if (t.dtype == INFINI_DTYPE_F32) {
        std::memcpy(&span[i * 4], &f, 4);
      } else {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t h;
        if (t.dtype == INFINI_DTYPE_BF16) {
          h = static_cast<uint16_t>(bits >> 16);  // truncation: any BF16 value will do
        } else {
          // F16 from a few bit fields: sign, exponent and mantissa straight from z.
          h = static_cast<uint16_t>(z >> 16);
          if ((h & 0x7C00) == 0x7C00 && b >= special_rate / 8) h &= 0xBFFF;  // mostly finite
        }
        std::memcpy(&span[i * 2], &h, 2);
      }
    } else {
      for (size_t k = 0; k < es; ++k) span[i * es + k] = static_cast<uint8_t>(z >> (8 * k));
    }
  }
  return span;
}

// ---- the operators ---------------------------------------------------------------------------

enum Op {
  kGelu,
  kGeluBackward,
  kGeluBackwardV2,
  kGeluMul,
  kGeluMulBackward,
  kSwiGlu,
  kSwiGluBackward,
  kClippedSwiglu,
  kClippedSwigluBackward,
  kMoeFinalize,
  kMoeFinalizeGrad,
  kMoeInit,
  kMoeInitGrad,
  kRouterSoftmax,  // the routers: compared by compareRouter(), not compare()
  kRouterSoftmaxGrad,
  kRouterTopK,
  kRouterTopKGrad,
  kExpertCounts,  // exact: every output byte as cpu_reference's (checkAgainstReference())
  kBiasUpdate,
  kRouterWeights,  // MoeGatingWeights: a router (compareRouter()), last so the seeds keep their op
  kAuxLoss,        // MoeAuxLoss, MoeAuxLossGrad: compare() with the terms of auxTerms()
  kAuxLossGrad,
  kZLoss,  // the router z-loss: a sum over rows (compare()'s bound scaled by coeff, below)
  kZLossGrad,
  kCapacity,            // MoeExpertCapacity: exact, as the expert counts
  kSwiGluQuant,         // SwiGluQuant, GeluMulQuant: exact (every byte of y, every scale's bits)
  kGeluMulQuant,        // (appended last, so that the earlier seeds keep their operator)
  kClippedSwigluQuant,  // exact, as SwiGluQuant (appended last too)
  kDequantSwigluQuant,  // exact, as SwiGluQuant (appended last likewise)
  kMoeInitQuant,        // MoeInitRoutingQuantV2: exact, as SwiGluQuant (bytes, scales, indices)
  kOpCount
};
// The table's operator of each Op (ClippedSwiglu(Backward) with a clamp_mode: their V2, see
// runOn()).
using FuzzOps =
    std::tuple<ops::Gelu, ops::GeluBackward, ops::GeluBackwardV2, ops::GeluMul,
               ops::GeluMulBackward, ops::SwiGlu, ops::SwiGluBackward, ops::ClippedSwiglu,
               ops::ClippedSwigluBackward, ops::MoeFinalizeRoutingV2, ops::MoeFinalizeRoutingV2Grad,
               ops::MoeInitRoutingV2, ops::MoeInitRoutingV2Grad, ops::MoeGatingTopKSoftmax,
               ops::MoeGatingTopKSoftmaxGrad, ops::MoeGatingTopK, ops::MoeGatingTopKGrad,
               ops::MoeExpertCounts, ops::MoeBiasUpdate, ops::MoeGatingWeights, ops::MoeAuxLoss,
               ops::MoeAuxLossGrad, ops::MoeZLoss, ops::MoeZLossGrad, ops::MoeExpertCapacity,
               ops::SwiGluQuant, ops::GeluMulQuant, ops::ClippedSwigluQuant,
               ops::DequantSwigluQuant, ops::MoeInitRoutingQuantV2>;
static_assert(std::tuple_size_v<FuzzOps> == kOpCount);

// f(Op's type from the table).
template <size_t I = 0, class F>
void withOp(Op op, F &&f) {
  if constexpr (I < kOpCount) {
    if (op == static_cast<Op>(I))
      f(std::tuple_element_t<I, FuzzOps>{});
    else
      withOp<I + 1>(op, f);
  }
}

const char *opName(Op op) {
  const char *name = "?";
  withOp(op, [&](auto t) { name = decltype(t)::name; });
  return name;
}

// F32 bounds in u (tests/accuracy_bounds.json); the MoE sums get 16 u per term. The relaxed
// mode's, for the elementwise operators (the MoE operators ignore the mode). The routers' K
// (moe_gating) enters their own bound (compareRouter()); the expert-count operators are exact.
// The aux losses: (E / 16 + T / 256 + 300) 2^-23 at the fuzzer's sizes (docs/moe_aux_loss.md).
const double kBoundU[] = {4, 4, 4, 5, 6, 4,   6,   4,  6,  16, 16, 0, 16, 4, 4,
                          4, 4, 0, 0, 4, 800, 800, 16, 16, 0,  0,  0, 0,  0, 0};
static_assert(sizeof kBoundU / sizeof kBoundU[0] == kOpCount);
bool isRouter(Op op) {
  return (op >= kRouterSoftmax && op <= kRouterTopKGrad) || op == kRouterWeights;
}
bool isExact(Op op) {
  return op == kExpertCounts || op == kBiasUpdate || op == kCapacity || op == kSwiGluQuant ||
         op == kGeluMulQuant || op == kClippedSwigluQuant || op == kDequantSwigluQuant ||
         op == kMoeInitQuant;
}
constexpr double kRelaxedBoundU = 8;

struct Case {
  Op op = kGelu;
  std::vector<Tensor> t;  // in the order of the create call's tensor arguments
  int64_t i[6] = {};      // integer attributes
  float f[3] = {};        // float attributes
  double d[2] = {};       // double attributes (MoeGatingTopK's routed_scaling_factor, eps)
  bool flag = false;
  int approximate = 0;
  // The enum attributes after the first (whose value is `approximate`), by rank: GeluMulQuant's
  // quant_mode and scale_format (SwiGluQuant's quant_mode is its first, in `approximate`).
  int enums[3] = {};
  // Faults: 0 none; else which pointer is NULL (see call()).
  int null_what = 0;
  int workspace_mode = 0;  // 0 exact, 1 one byte short, 2 NULL, 3 larger
  bool null_size_ptr = false;
};

// A Case's attributes by kind, each kind in the API's order (operators.h's AttrIndex rank): the
// integers from i, the floats from f, the doubles from d, the one bool from flag and the one enum
// from approximate (an int, for enum_calls.c).
struct CaseAttrs {
  const Case &c;
  template <class T>
  auto get(ops::AttrIndex a) const {
    if constexpr (std::is_same_v<T, bool>)
      return c.flag;
    else if constexpr (std::is_enum_v<T>)
      return a.rank == 0 ? c.approximate : c.enums[a.rank];
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(c.i[a.rank]);
    else if constexpr (std::is_same_v<T, float>)
      return c.f[a.rank];
    else
      return c.d[a.rank];
  }
};

Tensor makeT(Role role, std::vector<size_t> shape, int dtype) {
  Tensor t;
  t.role = role;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

int fuzzFloatDtype(Input &in) {
  const int d[] = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16, INFINI_DTYPE_F32};
  return d[in.pick(4)];
}
int fuzzIndexDtype(Input &in) {
  return in.chance(128) ? INFINI_DTYPE_I32 : INFINI_DTYPE_I64;
}

std::vector<size_t> fuzzShape(Input &in, size_t min_rank) {
  size_t rank = in.pick(5);
  if (in.chance(16)) rank = in.pick(10);
  if (rank < min_rank) rank = min_rank;
  std::vector<size_t> s(rank);
  for (auto &d : s) {
    d = in.u8() % 6;
    if (rank > 4 && d > 2) d = 2;
  }
  return s;
}

size_t fuzzDimIndex(Input &in, size_t rank, int64_t *attribute) {
  // dim attribute: in range mostly (either sign), sometimes anything.
  const int64_t r = static_cast<int64_t>(rank ? rank : 1);
  int64_t d = static_cast<int64_t>(in.pick(static_cast<size_t>(r)));
  if (in.chance(64)) d -= r;
  *attribute = fuzzInt(in, d);
  return static_cast<size_t>(d);
}

// A count attribute of the routers (k, k_group, group_count): usually the consistent value, else
// an edge around the limit n (0, 1, n, n + 1) or fuzzInt's.
int64_t fuzzCount(Input &in, int64_t usual, int64_t n) {
  const uint8_t b = in.u8();
  if (b < 180) return usual;
  if (b < 230) return (b % 4 < 2) ? b % 4 : n + b % 4 - 2;
  return fuzzInt(in, usual);
}

// routed_scaling_factor and eps (doubles, rounded to F32 at create): usually the usual ones, else
// NaN, infinities, negatives, denormal, past F32's range.
double fuzzDouble(Input &in, double usual) {
  const uint8_t b = in.u8();
  if (b < 200) return usual;
  if (b < 216) return b % 2 ? 1e300 : -1e-300;
  return fuzzFloat(in);
}

// The routers (docs/moe_gating_top_k_softmax.md, docs/moe_gating_top_k.md,
// docs/moe_gating_weights.md): x (lead..., E),
// the k-wide tensors (lead..., k); attributes usually consistent, else edges.
void decodeRouter(Input &in, Case &c, int fd) {
  std::vector<size_t> lead(in.pick(3) + 1);
  for (auto &d : lead) d = in.pick(5);
  const auto with = [&](size_t last) {
    std::vector<size_t> s = lead;
    s.push_back(last);
    return s;
  };
  // TopK: E = group_count * group size, sometimes anything; the others up to 40 (E > 16 takes
  // the 16-slot sums past one pass).
  const size_t groups = in.pick(4) + 1, size = in.pick(4) + 1;
  size_t E = in.chance(200) ? in.pick(9) + 1 : in.pick(40) + 1;
  if (c.op == kRouterTopK && in.chance(220)) E = groups * size;
  const int64_t En = static_cast<int64_t>(E);
  const int idx_dt = fuzzIndexDtype(in);
  int64_t k = fuzzCount(in, static_cast<int64_t>(in.pick(E) + 1), En);
  if (c.op == kRouterTopK) {  // k within the kept groups' experts
    const int64_t k_group =
        fuzzCount(in, static_cast<int64_t>(in.pick(groups) + 1), static_cast<int64_t>(groups));
    const size_t kept = k_group > 0 && k_group <= static_cast<int64_t>(groups)
                            ? static_cast<size_t>(k_group) * (E / groups)
                            : E;
    k = fuzzCount(in, static_cast<int64_t>(in.pick(kept ? kept : 1) + 1), En);
    c.i[1] = k_group;
    c.i[2] = fuzzCount(in, static_cast<int64_t>(groups), En);
    // group_select_mode: 0, 1 or 2 (groups of 1: 0 or 2)
    c.i[3] = fuzzInt(in, static_cast<int64_t>(size >= 2 ? in.pick(3) : 2 * in.pick(2)));
  }
  // The k-wide tensors follow k where it is a width (0 .. E + 1), else a consistent k.
  const size_t kw = k >= 0 && k <= En + 1 ? static_cast<size_t>(k) : in.pick(E) + 1;
  Tensor x = makeT(kInput, with(E), fd);
  x.coarse = in.chance(96);
  switch (c.op) {
    case kRouterSoftmax: {
      c.i[0] = k;
      c.i[1] = fuzzInt(in, static_cast<int64_t>(in.pick(2)));  // renorm
      c.t.push_back(makeT(kOutput, with(kw), fd));
      c.t.push_back(makeT(kOutIndex, with(kw), idx_dt));
      Tensor row_idx = makeT(kOutIndex, with(kw), fuzzIndexDtype(in));
      row_idx.present = in.chance(128);
      c.t.push_back(row_idx);
      Tensor probs = makeT(kOutput, with(E), INFINI_DTYPE_F32);
      probs.present = c.i[1] == 0 ? in.chance(128) : in.chance(16);
      c.t.push_back(probs);
      c.t.push_back(x);
      Tensor finished = makeT(kInput, lead, INFINI_DTYPE_BOOL);
      finished.present = in.chance(96);
      c.t.push_back(finished);
      break;
    }
    case kRouterSoftmaxGrad:
    case kRouterTopKGrad: {
      c.t.push_back(makeT(kOutput, with(E), fd));
      c.t.push_back(makeT(kInput, with(kw), fd));
      c.t.push_back(x);
      Tensor idx = makeT(kIndex, with(kw), idx_dt);
      idx.hi = En;  // mostly in range; -1, E, any value now and then
      c.t.push_back(idx);
      if (c.op == kRouterSoftmaxGrad) {
        c.i[0] = fuzzInt(in, static_cast<int64_t>(in.pick(2)));  // renorm
        Tensor finished = makeT(kInput, lead, INFINI_DTYPE_BOOL);
        finished.present = in.chance(128);
        c.t.push_back(finished);
      } else {
        c.i[0] = fuzzInt(in, static_cast<int64_t>(in.pick(3)));  // norm_type
        c.i[1] = fuzzInt(in, 0);                                 // renorm
        c.d[0] = fuzzDouble(in, in.chance(128) ? 1.0 : 2.5);
        c.d[1] = fuzzDouble(in, in.chance(192) ? 1e-20 : 0.0);
      }
      break;
    }
    case kRouterWeights: {  // y, x, expert_idx (given: mostly in range)
      c.t.push_back(makeT(kOutput, with(kw), fd));
      c.t.push_back(x);
      Tensor idx = makeT(kIndex, with(kw), idx_dt);
      idx.hi = En;
      c.t.push_back(idx);
      c.i[0] = fuzzInt(in, static_cast<int64_t>(in.pick(3)));  // norm_type
      c.i[1] = fuzzInt(in, 0);                                 // renorm
      c.d[0] = fuzzDouble(in, in.chance(128) ? 1.0 : 2.5);
      c.d[1] = fuzzDouble(in, in.chance(192) ? 1e-20 : 0.0);
      break;
    }
    default: {  // kRouterTopK
      c.i[0] = k;
      c.i[4] = fuzzInt(in, 0);                                 // renorm
      c.i[5] = fuzzInt(in, static_cast<int64_t>(in.pick(3)));  // norm_type
      c.d[0] = fuzzDouble(in, in.chance(128) ? 1.0 : 2.5);
      c.d[1] = fuzzDouble(in, in.chance(192) ? 1e-20 : 0.0);
      c.t.push_back(makeT(kOutput, with(kw), fd));
      c.t.push_back(makeT(kOutIndex, with(kw), idx_dt));
      Tensor norm_out = makeT(kOutput, with(E), INFINI_DTYPE_F32);
      norm_out.present = in.chance(128);
      c.t.push_back(norm_out);
      c.t.push_back(x);
      // HF DeepSeek-V3 keeps the bias in F32; x's dtype is the other valid one.
      Tensor bias = makeT(kInput, {E}, in.chance(128) ? INFINI_DTYPE_F32 : fd);
      bias.present = in.chance(160);
      c.t.push_back(bias);
      break;
    }
  }
}

// The expert-count operators (docs/moe_expert_counts.md, docs/moe_bias_update.md): E experts
// (num_experts usually E, else an edge), MoeExpertCounts' expert_idx (lead..., k) mostly in
// [0, E] (E a finished row's, not counted), else -1, E + 1 or any value; MoeBiasUpdate's counts
// mostly in [0, hi) with hi from a few counts to 2^62 (sums past 2^63), else -1, hi or any value
// (negative half the time), update_rate usually 0.001, 0, 2^-24 or -0.25, else an edge.
void decodeCounts(Input &in, Case &c) {
  const size_t E = in.chance(200) ? in.pick(9) + 1 : in.pick(40) + 1;
  const int64_t En = static_cast<int64_t>(E);
  if (c.op == kExpertCounts) {
    std::vector<size_t> shape(in.pick(3));
    for (auto &d : shape) d = in.pick(5);
    shape.push_back(in.pick(5));  // k, 0 too
    c.i[0] = fuzzCount(in, En, En);
    c.t.push_back(makeT(kOutIndex, {E}, fuzzIndexDtype(in)));
    Tensor idx = makeT(kIndex, shape, fuzzIndexDtype(in));
    idx.hi = En + 1;  // E itself in range: a finished row's value
    c.t.push_back(idx);
    return;
  }
  static const double rates[] = {0.001, 0.0, 0x1p-24, -0.25};
  c.d[0] = fuzzDouble(in, rates[in.pick(4)]);
  static const int64_t his[] = {1, 2, 3, 8, 1 << 20, INT32_MAX, int64_t{1} << 62, INT64_MAX};
  Tensor bias = makeT(kOutput, {E}, in.chance(230) ? INFINI_DTYPE_F32 : fuzzFloatDtype(in));
  bias.inplace = true;
  bias.coarse = in.chance(64);  // equal biases
  c.t.push_back(bias);
  Tensor counts = makeT(kIndex, {E}, fuzzIndexDtype(in));
  counts.hi = his[in.pick(8)];
  c.t.push_back(counts);
}

// MoeExpertCapacity (docs/moe_expert_capacity.md): expert_idx (lead..., k) mostly in [0, E] (E a
// dropped slot), weights of any float dtype, coarse now and then (ties), present for the
// probability policy and mostly otherwise, weights_out half the time; capacity mostly small
// (0 to 8), else any; drop_policy 0 or 1, else an edge.
void decodeCapacity(Input &in, Case &c, int fd) {
  const size_t E = in.pick(12) + 1;
  const int64_t En = static_cast<int64_t>(E);
  std::vector<size_t> shape(in.pick(3));
  for (auto &d : shape) d = in.pick(6);
  shape.push_back(in.pick(5));                                                     // k, 0 too
  c.i[0] = fuzzCount(in, En, En);                                                  // num_experts
  c.i[1] = fuzzInt(in, in.chance(200) ? static_cast<int64_t>(in.pick(9)) : 1000);  // capacity
  c.i[2] = fuzzInt(in, static_cast<int64_t>(in.pick(2)));                          // drop_policy
  const bool weighted = c.i[2] == 1 || in.chance(200);
  c.t.push_back(makeT(kOutIndex, shape, fuzzIndexDtype(in)));
  Tensor weights_out = makeT(kOutput, shape, fd);
  weights_out.present = weighted && in.chance(128);
  c.t.push_back(weights_out);
  Tensor idx = makeT(kIndex, shape, fuzzIndexDtype(in));
  idx.hi = En + 1;  // E itself in range: a dropped slot
  c.t.push_back(idx);
  Tensor weights = makeT(kInput, shape, fd);
  weights.present = weighted;
  weights.coarse = in.chance(96);
  c.t.push_back(weights);
}

// MoeInitRoutingV2's sizes and attributes (MoeInitRoutingQuantV2's too): R, H, K, E, C, the
// mode, active_num (i[0..4]) and the before-capacity flag.
struct InitShape {
  size_t R, H, K, E, C, rows;
  int64_t mode;
  std::vector<size_t> rowsShape() const {
    return mode == 1 ? std::vector<size_t>{E, C} : std::vector<size_t>{rows};
  }
  std::vector<size_t> expanded() const {
    std::vector<size_t> s = rowsShape();
    s.push_back(H);
    return s;
  }
};
InitShape decodeInitAttributes(Input &in, Case &c) {
  InitShape r{};
  r.R = in.pick(6), r.H = in.pick(7), r.K = in.pick(4) + 1, r.E = in.pick(5) + 1,
  r.C = in.pick(5) + 1;
  r.mode = fuzzInt(in, static_cast<int64_t>(in.pick(2)));
  const int64_t active = in.chance(128) ? 0 : static_cast<int64_t>(in.pick(r.R * r.K + 2));
  r.rows = active > 0 && static_cast<size_t>(active) < r.R * r.K ? active : r.R * r.K;
  c.i[0] = fuzzInt(in, active);
  c.i[1] = fuzzInt(in, static_cast<int64_t>(r.C));
  c.i[2] = fuzzInt(in, static_cast<int64_t>(r.E));
  c.i[3] = r.mode;
  c.i[4] = fuzzInt(in, static_cast<int64_t>(in.pick(3)));  // count_or_cumsum flag
  c.flag = in.chance(128);
  return r;
}
// After expanded_x: expanded_row_idx, the two counts, `scales` (MoeInitRoutingQuantV2's
// dynamic_quant_scale, where given), x and expert_idx.
void pushInitRest(Input &in, Case &c, const InitShape &r, int fd, Tensor *scales = nullptr) {
  c.t.push_back(makeT(kOutIndex, {r.R * r.K}, fuzzIndexDtype(in)));
  Tensor cnt = makeT(kOutIndex, {r.E}, fuzzIndexDtype(in));
  cnt.present = c.i[4] != 0 || in.chance(32);
  c.t.push_back(cnt);
  Tensor cap = makeT(kOutIndex, {r.E}, fuzzIndexDtype(in));
  cap.present = c.flag || in.chance(32);
  c.t.push_back(cap);
  if (scales) c.t.push_back(*scales);
  c.t.push_back(makeT(kInput, {r.R, r.H}, fd));
  Tensor eidx = makeT(kIndex, {r.R, r.K}, fuzzIndexDtype(in));
  eidx.hi = static_cast<int64_t>(r.E);
  c.t.push_back(eidx);
}

// SwiGluQuant, GeluMulQuant, ClippedSwigluQuant (docs/swiglu_quant.md): x (lead..., 2H) of any
// float dtype, rank 1-4
// (rows 0 too), H 0-8; y (lead..., H) INT8 or FP8 (else any float dtype); scale (lead..., G) F32,
// written (dynamic: an output) or read (static: an input, any float values); group_size 0, a
// divisor of H or H, else an edge; smooth_scales (H), or (E, H) with group_index (E) I64 counts
// mostly summing within the rows (else -1, past them, any value), or group_index alone;
// activate_left, quant_mode, scale_format and approximate mostly valid, else any int;
// ClippedSwigluQuant's alpha, limit and bias mostly the vendor's defaults, else any float (as
// ClippedSwiglu's), interleaved either way.
void decodeGatedQuant(Input &in, Case &c, int fd) {
  std::vector<size_t> lead(in.pick(4));
  for (auto &d : lead) d = in.pick(5);
  const size_t H = in.pick(9);
  size_t rows = 1;
  for (size_t d : lead) rows *= d;
  const auto with = [&](size_t last) {
    std::vector<size_t> s = lead;
    s.push_back(last);
    return s;
  };
  const size_t usual_gs[] = {0, 1, H % 2 == 0 ? 2 : H, H};
  const int64_t gs = fuzzInt(in, static_cast<int64_t>(usual_gs[in.pick(4)]));
  const size_t G = gs > 0 && H % static_cast<size_t>(gs) == 0 ? H / static_cast<size_t>(gs) : 1;
  c.i[0] = fuzzInt(in, static_cast<int64_t>(in.pick(2)));  // activate_left
  c.i[1] = gs;                                             // group_size
  const int mode = in.chance(240) ? static_cast<int>(in.pick(2)) : static_cast<int>(in.u32());
  const int format = in.chance(240) ? (mode == 1 ? static_cast<int>(in.pick(2)) : 0)
                                    : static_cast<int>(in.u32() % 4);
  if (c.op == kClippedSwigluQuant) {  // its only integer is group_size; no activate_left
    c.i[0] = gs;
    c.f[0] = in.chance(200) ? 1.702f : fuzzFloat(in);  // alpha
    c.f[1] = in.chance(200) ? 7.0f : fuzzFloat(in);    // limit
    c.f[2] = in.chance(200) ? 1.0f : fuzzFloat(in);    // bias
    c.flag = in.chance(128);                           // interleaved
  }
  if (c.op == kSwiGluQuant || c.op == kClippedSwigluQuant || c.op == kDequantSwigluQuant) {
    c.approximate = mode;  // quant_mode: its first enum
    c.enums[1] = format;
  } else {
    c.enums[1] = mode;
    c.enums[2] = format;
  }
  c.t.push_back(makeT(kOutput, with(H),
                      in.chance(240) ? (in.chance(128) ? INFINI_DTYPE_I8 : INFINI_DTYPE_F8) : fd));
  c.t.push_back(
      makeT(mode == 0 ? kInput : kOutput, with(G), in.chance(240) ? INFINI_DTYPE_F32 : fd));
  Tensor x = makeT(kInput, with(2 * H), fd);
  x.coarse = in.chance(64);  // ties of z / s
  c.t.push_back(x);
  const size_t E = in.pick(4) + 1;
  const bool counts = in.chance(128), smooth = counts ? in.chance(240) : in.chance(128);
  Tensor m =
      makeT(kInput, counts ? std::vector<size_t>{E, H} : std::vector<size_t>{H}, INFINI_DTYPE_F32);
  m.present = smooth;
  c.t.push_back(m);
  Tensor g = makeT(kIndex, {E}, INFINI_DTYPE_I64);
  g.lo = 0;
  g.hi = static_cast<int64_t>(rows / E) + 1;  // sums mostly within the rows
  g.present = counts;
  c.t.push_back(g);
}

// DequantSwigluQuant (docs/dequant_swiglu_quant.md): SwiGluQuant's tensors and attributes
// (decodeGatedQuant) with x INT32 accumulators of any value (else a float dtype), and
// weight_scale (2H) or (E, 2H), activation_scale (lead...) or (lead..., 1), bias (2H) or (E, 2H)
// of F32, F16, BF16 or INT32 (any value), each present or not.
void decodeDequantSwigluQuant(Input &in, Case &c, int fd) {
  decodeGatedQuant(in, c, fd);
  Tensor &x = c.t[2];
  if (in.chance(240)) {
    x.dtype = INFINI_DTYPE_I32;
    x.role = kIndex;
    x.lo = INT32_MIN;
    x.hi = INT32_MAX;
  }
  const std::vector<size_t> lead(x.shape.begin(), x.shape.end() - 1);
  const size_t H2 = x.shape.back(), E = c.t[4].shape[0];
  const auto columns = [&](bool per_expert) {
    return per_expert ? std::vector<size_t>{E, H2} : std::vector<size_t>{H2};
  };
  Tensor w = makeT(kInput, columns(in.chance(64)), in.chance(240) ? INFINI_DTYPE_F32 : fd);
  w.present = in.chance(192);
  std::vector<size_t> rows = lead;
  if (in.chance(128)) rows.push_back(1);
  Tensor a = makeT(kInput, rows, in.chance(240) ? INFINI_DTYPE_F32 : fd);
  a.present = in.chance(192);
  static const int bias_dtypes[] = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16,
                                    INFINI_DTYPE_I32};
  Tensor b = makeT(kInput, columns(in.chance(64)), bias_dtypes[in.pick(4)]);
  if (b.dtype == INFINI_DTYPE_I32) {
    b.role = kIndex;
    b.lo = INT32_MIN;
    b.hi = INT32_MAX;
  }
  b.present = in.chance(128);
  c.t.insert(c.t.begin() + 3, {w, a, b});
}

// The aux losses (docs/moe_aux_loss.md): x (T, E) of any float dtype, logits now and then in
// multiples of 10; tokens_per_expert (E) or (B, E) with B dividing T, counts mostly in [0, hi)
// with hi up to 2^24 + 1 (2^24 the largest valid), else -1 or any value; score_function 0, 1, 2
// (else an edge), topk, total_tokens (T, a global N, else an edge) and coeff (1e-2, else an
// edge); the grad's grad_loss F32 ().
void decodeAuxLoss(Input &in, Case &c, int fd) {
  const size_t E = in.pick(40) + 1, B = in.chance(128) ? 0 : in.pick(4) + 1;
  const size_t T = B ? B * in.pick(6) : in.pick(20);
  c.i[0] = fuzzInt(in, static_cast<int64_t>(in.pick(3)));                      // score_function
  c.i[1] = fuzzInt(in, static_cast<int64_t>(in.pick(8) + 1));                  // topk
  c.i[2] = fuzzInt(in, static_cast<int64_t>(B || in.chance(128) ? T : 4096));  // total_tokens
  c.d[0] = fuzzDouble(in, 1e-2);                                               // coeff
  if (c.op == kAuxLoss) {
    c.t.push_back(makeT(kOutput, {}, INFINI_DTYPE_F32));
  } else {
    c.t.push_back(makeT(kOutput, {T, E}, fd));
    c.t.push_back(makeT(kInput, {}, INFINI_DTYPE_F32));
  }
  Tensor x = makeT(kInput, {T, E}, fd);
  x.coarse = in.chance(32);
  c.t.push_back(x);
  static const int64_t his[] = {1, 3, 40, 1000, int64_t{1} << 24, (int64_t{1} << 24) + 1};
  Tensor counts =
      makeT(kIndex, B ? std::vector<size_t>{B, E} : std::vector<size_t>{E}, fuzzIndexDtype(in));
  counts.hi = his[in.pick(6)];
  c.t.push_back(counts);
}

// The router z-loss (docs/moe_z_loss.md): x (lead..., E) of any float dtype, rank 2-4, the
// leading dims 0-5 (T = 0 too), E 1-12; loss and grad_loss 0-D F32; coeff usually 1e-3, else an
// edge (NaN, infinities, 1e300, denormal, ...).
void decodeZLoss(Input &in, Case &c, int fd) {
  std::vector<size_t> shape(in.pick(3) + 1);
  for (auto &d : shape) d = in.pick(6);
  shape.push_back(in.pick(12) + 1);
  c.d[0] = fuzzDouble(in, 1e-3);
  if (c.op == kZLoss) {
    c.t.push_back(makeT(kOutput, {}, INFINI_DTYPE_F32));
    c.t.push_back(makeT(kInput, shape, fd));
    return;
  }
  c.t.push_back(makeT(kOutput, shape, fd));
  c.t.push_back(makeT(kInput, {}, INFINI_DTYPE_F32));
  c.t.push_back(makeT(kInput, shape, fd));
}

Case decode(Input &in) {
  Case c;
  c.op = static_cast<Op>(in.pick(kOpCount));
  const int fd = fuzzFloatDtype(in);
  c.approximate = in.chance(240) ? static_cast<int>(in.pick(2)) : static_cast<int>(in.u32());
  switch (c.op) {
    case kGelu:
    case kGeluBackward:
    case kGeluBackwardV2: {
      const auto s = fuzzShape(in, 0);
      c.t.push_back(makeT(kOutput, s, fd));
      c.t.push_back(makeT(kInput, s, fd));
      if (c.op != kGelu) c.t.push_back(makeT(kInput, s, fd));
      break;
    }
    case kGeluMul:
    case kGeluMulBackward:
    case kSwiGlu:
    case kSwiGluBackward:
    case kClippedSwiglu:
    case kClippedSwigluBackward: {
      auto x = fuzzShape(in, 1);
      size_t d = x.size() - 1;
      if (c.op != kGeluMul && c.op != kGeluMulBackward) d = fuzzDimIndex(in, x.size(), &c.i[0]);
      if (d < x.size()) x[d] *= 2;
      auto y = x;
      if (d < y.size()) y[d] /= 2;
      if (c.op == kGeluMul || c.op == kSwiGlu || c.op == kClippedSwiglu) {
        c.t.push_back(makeT(kOutput, y, fd));
        c.t.push_back(makeT(kInput, x, fd));
      } else {  // input_grad / x_grad, then out_grad / y_grad, then input / x
        c.t.push_back(makeT(kOutput, x, fd));
        c.t.push_back(makeT(kInput, y, fd));
        c.t.push_back(makeT(kInput, x, fd));
      }
      if (c.op == kClippedSwiglu || c.op == kClippedSwigluBackward) {
        size_t pre = 1;
        for (size_t k = 0; k < d && k < x.size(); ++k) pre *= x[k];
        Tensor g = makeT(kIndex, {in.pick(4) + 1}, INFINI_DTYPE_I64);
        g.lo = 0;
        g.hi = static_cast<int64_t>(pre) + 1;
        g.present = in.chance(128);
        c.t.push_back(g);
        c.f[0] = in.chance(200) ? 1.702f : fuzzFloat(in);        // alpha
        c.f[1] = in.chance(200) ? 7.0f : fuzzFloat(in);          // limit
        c.f[2] = in.chance(200) ? 1.0f : fuzzFloat(in);          // bias
        c.flag = in.chance(128);                                 // interleaved
        c.i[1] = fuzzInt(in, static_cast<int64_t>(in.pick(2)));  // clamp_mode (V2 unless 0)
      }
      break;
    }
    case kMoeFinalize: {
      const size_t R = in.pick(6), H = in.pick(7), K = in.pick(4) + 1, E = in.pick(4) + 1,
                   C = in.pick(5);
      const int64_t mode = fuzzInt(in, static_cast<int64_t>(in.pick(4)));
      c.i[0] = mode;
      const bool padded = mode == 1 || mode == 3;
      const bool has_scales = in.chance(192);
      const size_t k = has_scales ? K : 1;
      c.t.push_back(makeT(kOutput, {R, H}, fd));
      c.t.push_back(
          makeT(kInput, padded ? std::vector<size_t>{E, C, H} : std::vector<size_t>{R * k, H}, fd));
      Tensor idx = makeT(kIndex, {R * k}, fuzzIndexDtype(in));
      idx.lo = padded ? -1 : 0;
      idx.hi = padded ? static_cast<int64_t>(E * C) : static_cast<int64_t>(R * k);
      c.t.push_back(idx);
      Tensor x1 = makeT(kInput, {R, H}, fd), x2 = x1;
      x1.present = in.chance(160);
      x2.present = x1.present && in.chance(128);
      c.t.push_back(x1);
      c.t.push_back(x2);
      const bool has_bias = in.chance(128);
      Tensor bias = makeT(kInput, {E, H}, fd);
      bias.present = has_bias;
      c.t.push_back(bias);
      Tensor scales = makeT(kInput, {R, K}, in.chance(64) ? INFINI_DTYPE_F32 : fd);
      scales.present = has_scales;
      c.t.push_back(scales);
      Tensor eidx = makeT(kIndex, {R, k}, fuzzIndexDtype(in));
      eidx.hi = static_cast<int64_t>(E);
      eidx.present = has_bias || in.chance(64);
      c.t.push_back(eidx);
      break;
    }
    case kMoeFinalizeGrad: {
      const size_t R = in.pick(6), H = in.pick(7), K = in.pick(4) + 1, E = in.pick(4) + 1,
                   C = in.pick(5) + 1;
      const int64_t mode = fuzzInt(in, static_cast<int64_t>(in.pick(2)));
      const bool has_scales = in.chance(192);
      const size_t k = has_scales ? K : 1;
      const int64_t active = in.chance(128) ? 0 : static_cast<int64_t>(in.pick(R * k + 2));
      const size_t rows = active > 0 && static_cast<size_t>(active) < R * k ? active : R * k;
      c.i[0] = mode;
      c.i[1] = fuzzInt(in, active);
      c.i[2] = fuzzInt(in, static_cast<int64_t>(E));
      c.i[3] = fuzzInt(in, static_cast<int64_t>(C));
      const std::vector<size_t> gex =
          mode == 1 ? std::vector<size_t>{E, C, H} : std::vector<size_t>{rows, H};
      c.t.push_back(makeT(kOutput, gex, fd));
      Tensor gs = makeT(kOutput, {R, K}, fd);
      gs.present = has_scales && in.chance(200);
      c.t.push_back(gs);
      c.t.push_back(makeT(kInput, {R, H}, fd));
      Tensor idx = makeT(kIndex, {R * k}, fuzzIndexDtype(in));
      idx.lo = mode == 1 ? -1 : 0;
      idx.hi = mode == 1 ? static_cast<int64_t>(E * C) : static_cast<int64_t>(R * k);
      c.t.push_back(idx);
      Tensor ex = makeT(kInput, gex, fd);
      ex.present = has_scales || in.chance(32);
      c.t.push_back(ex);
      Tensor scales = makeT(kInput, {R, K}, fd);
      scales.present = has_scales;
      c.t.push_back(scales);
      const bool has_bias = in.chance(100);
      Tensor eidx = makeT(kIndex, {R, k}, fuzzIndexDtype(in));
      eidx.hi = static_cast<int64_t>(E);
      eidx.present = has_bias || in.chance(32);
      c.t.push_back(eidx);
      Tensor bias = makeT(kInput, {E, H}, fd);
      bias.present = has_bias;
      c.t.push_back(bias);
      break;
    }
    case kMoeInit: {
      const InitShape r = decodeInitAttributes(in, c);
      c.t.push_back(makeT(kOutput, r.expanded(), fd));
      pushInitRest(in, c, r, fd);
      break;
    }
    case kMoeInitQuant: {  // MoeInitRoutingV2's call, quantized (docs/moe_init_routing_quant.md)
      const InitShape r = decodeInitAttributes(in, c);
      const int quant = in.chance(240) ? static_cast<int>(in.pick(2)) : static_cast<int>(in.u32());
      c.approximate = quant;  // quant_mode: its one enum
      c.t.push_back(
          makeT(kOutput, r.expanded(),
                in.chance(240) ? (in.chance(128) ? INFINI_DTYPE_I8 : INFINI_DTYPE_F8) : fd));
      Tensor scales = makeT(kOutput, r.rowsShape(), in.chance(240) ? INFINI_DTYPE_F32 : fd);
      scales.present = quant != 0 || in.chance(32);
      pushInitRest(in, c, r, fd, &scales);
      Tensor &x = c.t[5];
      x.coarse = in.chance(64);  // ties of the rounding
      // scale: static (1); dynamic (E, H), (1, H) or none. offset: static (1).
      const size_t smooth_rows = in.chance(128) ? r.E : 1;
      Tensor scale =
          makeT(kInput, quant == 0 ? std::vector<size_t>{1} : std::vector<size_t>{smooth_rows, r.H},
                INFINI_DTYPE_F32);
      scale.present = quant == 0 ? in.chance(250) : in.chance(170);
      c.t.push_back(scale);
      Tensor offset = makeT(kInput, {1}, INFINI_DTYPE_F32);
      offset.present = quant == 0 ? in.chance(250) : in.chance(8);
      c.t.push_back(offset);
      break;
    }
    case kMoeInitGrad: {
      const size_t R = in.pick(6), H = in.pick(7), K = in.pick(4) + 1, E = in.pick(5) + 1,
                   C = in.pick(5) + 1;
      const int64_t mode = fuzzInt(in, static_cast<int64_t>(in.pick(2)));
      const int64_t active = in.chance(128) ? 0 : static_cast<int64_t>(in.pick(R * K + 2));
      const size_t rows = active > 0 && static_cast<size_t>(active) < R * K ? active : R * K;
      c.i[0] = fuzzInt(in, static_cast<int64_t>(K));
      c.i[1] = mode;
      c.i[2] = fuzzInt(in, active);
      c.t.push_back(makeT(kOutput, {R, H}, fd));
      c.t.push_back(makeT(
          kInput, mode == 1 ? std::vector<size_t>{E, C, H} : std::vector<size_t>{rows, H}, fd));
      Tensor idx = makeT(kIndex, {R * K}, fuzzIndexDtype(in));
      idx.lo = mode == 1 ? -1 : 0;
      idx.hi = mode == 1 ? static_cast<int64_t>(E * C) : static_cast<int64_t>(R * K);
      c.t.push_back(idx);
      break;
    }
    case kRouterSoftmax:
    case kRouterSoftmaxGrad:
    case kRouterTopK:
    case kRouterTopKGrad:
    case kRouterWeights:
      decodeRouter(in, c, fd);
      break;
    case kExpertCounts:
    case kBiasUpdate:
      decodeCounts(in, c);
      break;
    case kAuxLoss:
    case kAuxLossGrad:
      decodeAuxLoss(in, c, fd);
      break;
    case kZLoss:
    case kZLossGrad:
      decodeZLoss(in, c, fd);
      break;
    case kCapacity:
      decodeCapacity(in, c, fd);
      break;
    case kSwiGluQuant:
    case kGeluMulQuant:
    case kClippedSwigluQuant:
      decodeGatedQuant(in, c, fd);
      break;
    case kDequantSwigluQuant:
      decodeDequantSwigluQuant(in, c, fd);
      break;
    default:
      break;
  }
  for (Tensor &t : c.t) {
    fuzzPerturb(in, t, true);
    fuzzLayout(in, t);
  }
  if (in.chance(24)) c.null_what = 1 + static_cast<int>(in.pick(c.t.size() + 3));
  c.workspace_mode = in.chance(200) ? 0 : static_cast<int>(in.pick(4));
  c.null_size_ptr = in.chance(4);
  return c;
}

// ---- one call on one device ------------------------------------------------------------------

struct Run {
  infiniStatus_t create = INFINI_STATUS_SUCCESS, call = INFINI_STATUS_SUCCESS;
  bool called = false;
  size_t workspace = 0;
  std::vector<Buffer> buffers;
};

infiniopTensorDescriptor_t makeDesc(const Tensor &t, bool *ok) {
  infiniopTensorDescriptor_t d = nullptr;
  if (!t.present) return nullptr;
  const infiniStatus_t s = infiniopCreateTensorDescriptor(
      &d, t.shape.size(), t.shape.data(), t.null_strides ? nullptr : t.strides.data(),
      static_cast<infiniDtype_t>(t.dtype));
  const char *err = infiniopGetLastError();
  if (s != INFINI_STATUS_SUCCESS) {
    if (!err || !*err) fail("tensor descriptor failed without a message", infiniStatusString(s));
    *ok = false;
    return nullptr;
  }
  if (err && *err) fail("tensor descriptor succeeded with a message", err);
  return d;
}

// `what` names the call: "create ", "workspace size " or "" followed by the operator's name.
void checkMessage(infiniStatus_t s, const char *what, const char *name) {
  const char *err = infiniopGetLastError();
  if (!err) fail("infiniopGetLastError returned NULL", std::string(what) + name);
  if (s != INFINI_STATUS_SUCCESS && !*err)
    fail("failure without a message", std::string(what) + name + ": " + infiniStatusString(s));
  if (s == INFINI_STATUS_SUCCESS && *err)
    fail("success with a message", std::string(what) + name + ": " + err);
}

std::string describe(const Case &c) {
  std::string s = std::string("op ") + opName(c.op) + " i=[";
  for (int64_t v : c.i) s += std::to_string(v) + ",";
  char dd[64];
  std::snprintf(dd, sizeof dd, "] d=[%.9g,%.9g", c.d[0], c.d[1]);
  s += "] f=[" + std::to_string(c.f[0]) + "," + std::to_string(c.f[1]) + "," +
       std::to_string(c.f[2]) + dd + "] flag=" + std::to_string(c.flag) +
       " approx=" + std::to_string(c.approximate) + " null=" + std::to_string(c.null_what) +
       " ws_mode=" + std::to_string(c.workspace_mode) + "\n";
  for (size_t k = 0; k < c.t.size(); ++k) {
    const Tensor &t = c.t[k];
    s += "  t" + std::to_string(k) + (t.present ? "" : " (NULL)") + " dtype " +
         std::to_string(t.dtype) + " shape [";
    for (size_t d : t.shape) s += std::to_string(d) + ",";
    s += "] strides ";
    if (t.null_strides) {
      s += "NULL";
    } else {
      s += "[";
      for (ptrdiff_t d : t.strides) s += std::to_string(d) + ",";
      s += "]";
    }
    s += "\n";
  }
  return s;
}

// A device whose pointers are not host memory (opencl): each buffer (guards included) gets its own
// allocation holding a copy of its bytes, and is read back after the call, so the checks below
// see what the device wrote. With a NULL handle (host memory) the host bytes are used directly.
struct DeviceCopies {
  infiniopHandle_t handle = nullptr;
  std::vector<void *> allocations;
  DeviceCopies(const DeviceCopies &) = delete;
  DeviceCopies &operator=(const DeviceCopies &) = delete;
  explicit DeviceCopies(infiniopHandle_t h) : handle(h) {}
  ~DeviceCopies() {
    for (void *p : allocations)
      if (infiniopFree(handle, p) != INFINI_STATUS_SUCCESS) fail("free failed", "");
  }
  void *upload(std::vector<uint8_t> &host) {
    if (!handle) return host.data();
    void *p = nullptr;
    if (infiniopMalloc(handle, &p, host.size()) != INFINI_STATUS_SUCCESS ||
        infiniopMemcpyHostToDevice(handle, p, host.data(), host.size(), nullptr) !=
            INFINI_STATUS_SUCCESS)
      fail("staging to the device failed", infiniopGetLastError());
    allocations.push_back(p);
    return p;
  }
  void download(std::vector<uint8_t> &host, const void *device) {
    if (handle && infiniopMemcpyDeviceToHost(handle, host.data(), device, host.size(), nullptr) !=
                      INFINI_STATUS_SUCCESS)
      fail("reading back from the device failed", infiniopGetLastError());
  }
};

Run runOn(infiniopHandle_t handle, bool device_memory, const Case &c,
          const std::vector<std::vector<uint8_t>> &fill, bool runnable) {
  Run r;
  r.buffers.resize(c.t.size());
  std::vector<void *> p(c.t.size(), nullptr), base(c.t.size(), nullptr);
  DeviceCopies copies(device_memory ? handle : nullptr);
  for (size_t k = 0; k < c.t.size(); ++k) {
    const Tensor &t = c.t[k];
    Buffer &b = r.buffers[k];
    b.bytes.assign(kGuard, kGuardByte);
    if (runnable) b.bytes.insert(b.bytes.end(), fill[k].begin(), fill[k].end());
    b.bytes.insert(b.bytes.end(), kGuard, kGuardByte);
    base[k] = copies.upload(b.bytes);
    const ptrdiff_t origin = static_cast<uint8_t *>(b.data(t)) - b.bytes.data();
    if (t.present) p[k] = static_cast<uint8_t *>(base[k]) + origin;
    if (c.null_what >= 4 && static_cast<size_t>(c.null_what - 4) == k) p[k] = nullptr;
  }
  auto download = [&] {
    for (size_t k = 0; k < c.t.size(); ++k) copies.download(r.buffers[k].bytes, base[k]);
  };
  bool ok = true;
  std::vector<infiniopTensorDescriptor_t> d(c.t.size());
  for (size_t k = 0; k < c.t.size(); ++k) d[k] = makeDesc(c.t[k], &ok);
  std::vector<Buffer> snapshot = r.buffers;
  infiniopHandle_t h = c.null_what == 2 ? nullptr : handle;
  // The call of Op (the table's type): create, workspace size, calculate (when runnable) and
  // destroy, with the faults the Case asks for.
  const auto call = [&](auto op) {
    using Op = decltype(op);
    if (c.t.size() != ops::kSlotCount<Op>) fail("a decoder's tensors are not the slots", Op::name);
    typename Op::Desc od = nullptr;
    r.create =
        ops::create<Op>(h, c.null_what == 1 ? nullptr : &od, d, CaseAttrs{c}, FuzzCreate<Op>::fn);
    checkMessage(r.create, "create ", Op::name);
    if (r.create != INFINI_STATUS_SUCCESS) return;
    size_t ws = 0;
    const infiniStatus_t wst = Op::workspace(od, c.null_size_ptr ? nullptr : &ws);
    checkMessage(wst, "workspace size ", Op::name);
    if (c.null_size_ptr) {
      if (wst == INFINI_STATUS_SUCCESS) fail("NULL size pointer accepted", Op::name);
      if (Op::workspace(od, &ws) != INFINI_STATUS_SUCCESS) fail("workspace size failed", Op::name);
    } else if (wst != INFINI_STATUS_SUCCESS) {
      fail("workspace size failed", Op::name);
    }
    r.workspace = ws;
    if (runnable) {
      std::vector<uint8_t> wsbuf(ws + 64, kPoisonByte);
      void *const wbase = copies.upload(wsbuf);
      void *w = ws ? wbase : nullptr;
      size_t wsize = ws;
      if (c.workspace_mode == 1 && ws) wsize = ws - 1;
      if (c.workspace_mode == 2) w = nullptr;
      if (c.workspace_mode == 3) {
        w = wbase;
        wsize = ws + 64;
      }
      r.called = true;
      snapshot = r.buffers;
      r.call = ops::calculate<Op>(od, w, wsize, p, nullptr);
      checkMessage(r.call, "", Op::name);
      download();
    }
    if (Op::destroy(od) != INFINI_STATUS_SUCCESS) fail("destroy failed", Op::name);
  };
  if (!ok) {
    r.create = INFINI_STATUS_BAD_PARAM;  // a descriptor the library refused: nothing to call
  } else if (c.op == kClippedSwiglu && c.i[1] != 0) {  // a clamp_mode: the V2 create
    call(ops::ClippedSwigluV2{});
  } else if (c.op == kClippedSwigluBackward && c.i[1] != 0) {
    call(ops::ClippedSwigluBackwardV2{});
  } else {
    withOp(c.op, call);
  }
  for (auto desc : d)
    if (desc && infiniopDestroyTensorDescriptor(desc) != INFINI_STATUS_SUCCESS)
      fail("tensor descriptor destroy failed", describe(c));
  // What a call may have written.
  for (size_t k = 0; k < c.t.size(); ++k) {
    const Buffer &now = r.buffers[k], &before = snapshot[k];
    const bool failed =
        r.create != INFINI_STATUS_SUCCESS || (r.called && r.call != INFINI_STATUS_SUCCESS);
    const bool output = c.t[k].role == kOutput || c.t[k].role == kOutIndex;
    for (size_t b = 0; b < now.bytes.size(); ++b) {
      const bool guard = b < kGuard || b >= now.bytes.size() - kGuard;
      if (now.bytes[b] == before.bytes[b]) continue;
      if (failed)
        fail(
            "a failed call wrote a byte",
            std::string(infiniStatusString(r.create == INFINI_STATUS_SUCCESS ? r.call : r.create)) +
                " tensor " + std::to_string(k) + " byte " + std::to_string(b) + "\n" + describe(c));
      if (guard)
        fail("a guard byte was written",
             "tensor " + std::to_string(k) + " byte " + std::to_string(b) + "\n" + describe(c));
      if (!output)
        fail("an input was written",
             "tensor " + std::to_string(k) + " byte " + std::to_string(b) + "\n" + describe(c));
    }
  }
  return r;
}

double valueAt(const uint8_t *p, int dtype) {
  switch (dtype) {
    case INFINI_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case INFINI_DTYPE_F16:
    case INFINI_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f32FromHalf(h, dtype);
    }
    case INFINI_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case INFINI_DTYPE_I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    default:
      return *p;
  }
}

double ulpOf(int dtype, double v) {
  const int mantissa_bits = dtype == INFINI_DTYPE_F16 ? 10 : dtype == INFINI_DTYPE_BF16 ? 7 : 23;
  const int min_exponent = dtype == INFINI_DTYPE_F16 ? -14 : -126;
  int e = v == 0 || !std::isfinite(v) ? min_exponent : std::ilogb(v);
  if (e < min_exponent) e = min_exponent;
  return std::ldexp(1.0, e - mantissa_bits);
}

// The largest finite |value| among the call's floating inputs: the scale of the terms summed.
double inputScale(const Case &c, const std::vector<std::vector<uint8_t>> &fill) {
  double m = 1;
  for (size_t k = 0; k < c.t.size(); ++k) {
    const Tensor &t = c.t[k];
    if (t.role != kInput || !isFloatDtype(t.dtype)) continue;
    const size_t es = dtypeBytes(t.dtype);
    for (size_t i = 0; i * es < fill[k].size(); ++i) {
      const double v = std::fabs(valueAt(&fill[k][i * es], t.dtype));
      if (std::isfinite(v) && v > m) m = v;
    }
  }
  return m;
}

// The aux losses' bound (docs/moe_aux_loss.md, "Accuracy"): the loss's terms are >= 0, so the
// bound is relative to it (terms 0); the grad's |K g| a (n + w) <= 2 |K g| max n (a <= 1), and
// its floor where c = g K is subnormal: (n + w) 2^-149 <= 2 max n 2^-149; the loss's where K_f is
// subnormal: (sum_t w_t) 2^-149 <= T max n 2^-149, and its scores' floor.
struct AuxBound {
  double terms = 0, floor = 0;
  bool skip = false;
};
AuxBound auxBound(const Case &c, const std::vector<std::vector<uint8_t>> &fill) {
  AuxBound b;
  const size_t xi = c.op == kAuxLoss ? 1 : 2;
  const Tensor &x = c.t[xi], &counts = c.t[xi + 1];
  const double E = static_cast<double>(x.shape.back());
  double T = 1;
  for (size_t d = 0; d + 1 < x.shape.size(); ++d) T *= static_cast<double>(x.shape[d]);
  const double B = counts.shape.size() == 2 ? static_cast<double>(counts.shape[0]) : 1;
  const double L = counts.shape.size() == 2 ? T / B : static_cast<double>(c.i[2]);
  const double K = c.d[0] * E / static_cast<double>(c.i[1]) / B / L / L;
  double n = 0;
  const size_t es = dtypeBytes(counts.dtype);
  for (size_t i = 0; i * es < fill[xi + 1].size(); ++i)
    n = std::fmax(n, std::fabs(valueAt(&fill[xi + 1][i * es], counts.dtype)));
  if (c.op == kAuxLoss) {
    // Plus the scores' floor (below 2^-125.5 a score is 0): 2 |K| T E n 2^-125.5 / D, D = 1 for
    // softmax (S >= 1), at least 1e-20 for the normalized sigmoids; 2 2^-125.5 < 2^-124.
    b.floor =
        2 * T * n * 0x1p-149 + std::fabs(K) * T * E * n * 0x1p-124 / (c.i[0] == 0 ? 1.0 : 1e-20);
    return b;
  }
  const double g = fill[1].size() >= 4 ? valueAt(fill[1].data(), INFINI_DTYPE_F32) : 0;
  // grad_loss K not finite in F32: grad_x is whatever inf and 0 make of it (NaN or +-inf, in an
  // order of the device's), not bounded (docs/moe_aux_loss.md): NaN tells compare() to skip.
  if (!std::isfinite(static_cast<float>(static_cast<float>(K) * static_cast<float>(g)))) {
    b.skip = true;
    return b;
  }
  b.terms = 2 * std::fabs(K * g) * n;
  b.floor = 2 * n * 0x1p-149;
  return b;
}

void compare(const char *device, const Case &c, const Run &cpu, const Run &ref,
             const std::vector<std::vector<uint8_t>> &fill, double bound_u) {
  const double scale = inputScale(c, fill);
  const bool aux = c.op == kAuxLoss || c.op == kAuxLossGrad;
  const AuxBound aux_bound = aux ? auxBound(c, fill) : AuxBound{};
  if (aux_bound.skip) return;
  const double aux_terms = aux_bound.terms;
  double attr = 1;
  if (c.op == kClippedSwiglu || c.op == kClippedSwigluBackward)
    for (float f : c.f)
      if (std::isfinite(f)) attr = std::fmax(attr, std::fabs(f));
  // The bound's condition c (docs/accuracy.md): the |argument| of an exponential the kernel
  // rounds first, 2u of gelu_tanh and alpha a of ClippedSwiglu, at most 88 (exp's clamp).
  double cond = 0;
  const bool tanh = c.op == kGeluBackward ||
                    (c.approximate == 1 && (c.op == kGelu || c.op == kGeluBackwardV2 ||
                                            c.op == kGeluMul || c.op == kGeluMulBackward));
  if (tanh) cond = 2 * 0.7978845608 * (scale + 0.044715 * scale * scale * scale);
  if (c.op == kClippedSwiglu || c.op == kClippedSwigluBackward)  // clamp_mode 1: alpha 1, A whole
    cond = c.i[1] == 1 ? scale : std::fabs(c.f[0]) * std::fmin(scale, std::fabs(c.f[1]));
  cond = std::isnan(cond) ? 88 : std::fmin(cond, 88);
  // MoeZLossGrad with |2 coeff g| past 1e30: gs = g c overflows F32 near its range, and an
  // element is then +-inf, or inf * 0 = NaN where the F32 exp floors p to 0, where the double
  // formula may be finite (docs/moe_z_loss.md, "Range"); a non-finite value there is let through.
  bool zloss_unbounded = false;
  if (c.op == kZLossGrad && fill.size() > 1 && fill[1].size() >= 4) {
    const double g = valueAt(&fill[1][0], INFINI_DTYPE_F32);
    zloss_unbounded = !(std::fabs(2 * c.d[0] * g) < 1e30);
  }
  for (size_t k = 0; k < c.t.size(); ++k) {
    const Tensor &t = c.t[k];
    if (t.role != kOutput && t.role != kOutIndex) continue;
    const size_t es = dtypeBytes(t.dtype);
    const auto &a = cpu.buffers[k].bytes, &b = ref.buffers[k].bytes;
    for (size_t i = kGuard; i + es <= a.size() - kGuard; i += es) {
      const double x = valueAt(&a[i], t.dtype), y = valueAt(&b[i], t.dtype);
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
      if (zloss_unbounded && (!std::isfinite(x) || !std::isfinite(y))) continue;
      bool ok = false;
      const double magnitude = scale * scale * attr * attr * attr;
      // Where the magnitudes multiply past 1e36 (alpha or bias near FLT_MAX) the bound's floor
      // term (exp clamped at exp(-87), times |dy (b + bias) alpha a|) is itself huge and this
      // oracle does not model it: an infinity against a finite value is let through there, a NaN
      // against a number never (tests/fuzz/README.md, Findings).
      if (isFloatDtype(t.dtype) && t.role == kOutput && !(std::isfinite(x) && std::isfinite(y)) &&
          !std::isnan(x) && !std::isnan(y) && magnitude > 1e36)
        continue;
      // The aux grad's bound past the output dtype's range: an infinity there stands for a value
      // the bound allows (the cancellation of n - w times a huge |K g|).
      const double dtype_max = t.dtype == INFINI_DTYPE_F16 ? 65504.0 : 3.4028234663852886e38;
      if (aux && !std::isnan(x) && !std::isnan(y) && !(std::isfinite(x) && std::isfinite(y)) &&
          bound_u * 0x1p-23 * aux_terms > dtype_max)
        continue;
      if (isFloatDtype(t.dtype) && t.role == kOutput && std::isfinite(x) && std::isfinite(y)) {
        // The documented K u terms (1 + c), with terms and c taken at the inputs' (and the
        // attributes') largest magnitude, for the cancellation the bound allows.
        double terms = aux ? aux_terms : magnitude * (c.op >= kMoeFinalize ? 8 : 1);
        // The z-loss: |coeff| times lse^2 at most (scale + log E)^2 per row, the grad's
        // 2 |coeff g| / T |lse| (a + chain) p; the row sum's n_B roundings (< 300 at these T).
        if (c.op == kZLoss || c.op == kZLossGrad)
          terms = std::fabs(c.d[0]) * (scale + 8) * (scale + 8) * (scale + 8) * 300;
        double tol = bound_u * 0x1p-24 * 2 * (1 + cond) * (std::fabs(y) + terms) + 0x1p-140;
        if (t.dtype != INFINI_DTYPE_F32) tol += ulpOf(t.dtype, std::fabs(y));
        tol += aux_bound.floor;
        ok = std::fabs(x - y) <= tol;
      }
      if (!ok) {
        char msg[256];
        std::snprintf(msg, sizeof msg, "tensor %zu element %zu: cpu %.9g, cpu_reference %.9g\n", k,
                      (i - kGuard) / es, x, y);
        std::string inputs;
        for (size_t m = 0; m < c.t.size(); ++m) {
          if (c.t[m].role != kInput || !isFloatDtype(c.t[m].dtype)) continue;
          const size_t ies = dtypeBytes(c.t[m].dtype);
          inputs += "  input t" + std::to_string(m) + " span:";
          for (size_t e = 0; e < 16 && (e + 1) * ies <= fill[m].size(); ++e) {
            char v[32];
            std::snprintf(v, sizeof v, " %.9g", valueAt(&fill[m][e * ies], c.t[m].dtype));
            inputs += v;
          }
          inputs += "\n";
        }
        fail((std::string(device) + " differs from cpu_reference").c_str(),
             msg + describe(c) + inputs);
      }
    }
  }
}

// ---- the routers against their double oracle -------------------------------------------------
// cpu_reference computes the routers in double and rounds each result once
// (devices/cpu_reference/moe_gating.cc). The harness recomputes those doubles with the same
// formulas in the same order, to get each key's and each output's bound (the docs' "Accuracy":
// u (K + cond) scale + the floors, K = moe_gating), and checks the device within that bound and
// cpu_reference within one rounding, so that the oracle here is cpu_reference's. A selection
// may differ from the oracle's only between keys within the bound of each other (near ties).

constexpr double kU = 0x1p-24;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// The element offset (within the span) of element n, row-major over the shape.
ptrdiff_t elementAt(const Tensor &t, size_t n) {
  ptrdiff_t pos = static_cast<ptrdiff_t>(t.origin), step = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    const size_t i = n % t.shape[d];
    n /= t.shape[d];
    pos += static_cast<ptrdiff_t>(i) * (t.null_strides ? step : t.strides[d]);
    step *= static_cast<ptrdiff_t>(t.shape[d]);
  }
  return pos;
}
size_t numelOf(const Tensor &t) {
  size_t n = 1;
  for (size_t s : t.shape) n *= s;  // spans passed computeSpan(): no overflow
  return n;
}

struct RouterRun {
  const Case &c;
  const Run &run;
  const uint8_t *at(size_t k, size_t n) const {
    const Tensor &t = c.t[k];
    return &run.buffers[k].bytes[kGuard + elementAt(t, n) * dtypeBytes(t.dtype)];
  }
  double get(size_t k, size_t n) const { return valueAt(at(k, n), c.t[k].dtype); }
  int64_t index(size_t k, size_t n) const {
    if (c.t[k].dtype == INFINI_DTYPE_I32) {
      int32_t v;
      std::memcpy(&v, at(k, n), 4);
      return v;
    }
    int64_t v;
    std::memcpy(&v, at(k, n), 8);
    return v;
  }
  std::vector<double> row(size_t k, size_t r, size_t n) const {
    std::vector<double> v(n);
    for (size_t j = 0; j < n; ++j) v[j] = get(k, r * n + j);
    return v;
  }
};

// The oracle's selection (cpu_reference's): key descending, NaN first, ties lower index first.
bool before(double a, size_t i, double b, size_t j) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && (!std::isnan(b) || i < j);
  return a > b || (a == b && i < j);
}
std::vector<size_t> topKOf(const std::vector<double> &key, std::vector<size_t> cand, size_t k) {
  std::vector<size_t> chosen;
  for (size_t n = 0; n < k && !cand.empty(); ++n) {
    size_t best = 0;
    for (size_t c = 1; c < cand.size(); ++c)
      if (before(key[cand[c]], cand[c], key[cand[best]], cand[best])) best = c;
    chosen.push_back(cand[best]);
    cand.erase(cand.begin() + static_cast<ptrdiff_t>(best));
  }
  return chosen;
}
struct Grouping {
  size_t count = 1, keep = 1, best = 1;  // best: how many of a group's largest its score sums
};
// A group's score: the sum of its g.best largest v in selection order (as cpu_reference).
double groupScore(const std::vector<double> &v, const std::vector<size_t> &members,
                  const Grouping &g) {
  double sum = 0;
  for (size_t j : topKOf(v, members, g.best)) sum += v[j];
  return sum;
}
// MoeGatingTopK's selection: the kept groups, then the top k of their experts.
std::vector<size_t> selectOf(const std::vector<double> &v, const Grouping &g, size_t k) {
  const size_t E = v.size(), size = E / g.count;
  std::vector<size_t> all(E), cand;
  for (size_t j = 0; j < E; ++j) all[j] = j;
  if (g.count <= 1) return topKOf(v, all, k);
  std::vector<double> score(g.count);
  std::vector<size_t> groups(g.count);
  for (size_t q = 0; q < g.count; ++q) {
    groups[q] = q;
    std::vector<size_t> members;
    for (size_t j = q * size; j < (q + 1) * size; ++j) members.push_back(j);
    score[q] = groupScore(v, members, g);
  }
  std::vector<bool> kept(g.count, false);
  for (size_t q : topKOf(score, groups, g.keep)) kept[q] = true;
  for (size_t j = 0; j < E; ++j)
    if (kept[j / size]) cand.push_back(j);
  return topKOf(v, cand, k);
}

// softmax as cpu_reference computes it, with each p_j's condition (the docs' a_j + chain + A;
// 0 where p_j is 0 or not finite, whose bound is the floor or exactness).
struct Probs {
  std::vector<double> p, cond;
  double max_cond = 0;
};
Probs softmaxOf(const std::vector<double> &x, double chain) {
  Probs s;
  double m = -INFINITY;
  for (double v : x) m = std::isnan(v) || std::isnan(m) ? NAN : std::fmax(m, v);
  double sum = 0, A = 0;
  s.p.resize(x.size());
  for (size_t j = 0; j < x.size(); ++j) sum += s.p[j] = std::exp(x[j] - m);
  for (double &v : s.p) v /= sum;
  for (size_t j = 0; j < x.size(); ++j)
    if (s.p[j] > 0 && std::isfinite(s.p[j])) A += std::fabs(m - x[j]) * s.p[j];
  s.cond.assign(x.size(), 0.0);
  for (size_t j = 0; j < x.size(); ++j)
    if (s.p[j] > 0 && std::isfinite(s.p[j] * A)) s.cond[j] = std::fabs(m - x[j]) + chain + A;
  for (double v : s.cond) s.max_cond = std::fmax(s.max_cond, v);
  return s;
}
Probs sigmoidOf(const std::vector<double> &x) {
  Probs s;
  for (double v : x) s.p.push_back(1.0 / (1.0 + std::exp(-v)));
  s.cond.assign(x.size(), 2.0);  // tests/cpp/moe_gating_test.cc's
  s.max_cond = 2;
  return s;
}
// norm_type 2's p = sqrt(softplus(x)) (src/exact/softplus.h's formula, written again here).
Probs sqrtSoftplusOf(const std::vector<double> &x) {
  Probs s;
  for (double v : x) {
    const double softplus =
        std::isnan(v) ? v : std::fmax(v, 0.0) + std::log1p(std::exp(-std::fabs(v)));
    s.p.push_back(v < -700 ? std::exp(0.5 * v) : std::sqrt(softplus));
  }
  s.cond.assign(x.size(), 2.0);
  s.max_cond = 2;
  return s;
}
double chainOf(size_t n) {
  return std::ceil(static_cast<double>(n) / 16) + 4;
}

double maxFinite(int dtype) {
  return dtype == INFINI_DTYPE_F16    ? 65504.0
         : dtype == INFINI_DTYPE_BF16 ? 3.3895313892515355e38
                                      : 3.4028234663852886e38;
}

// Whether a stored value is within tol of the truth (NaN only for NaN; an infinity also where
// the truth rounds past the dtype's largest finite value).
bool within(double got, double truth, double tol, int dtype) {
  if (std::isnan(got) || std::isnan(truth)) return std::isnan(got) && std::isnan(truth);
  if (got == truth) return true;
  if (std::isinf(truth)) return false;
  // an infinity where truth +- tol reaches past the dtype's largest finite value on its side
  if (std::isinf(got))
    return got > 0 ? truth + tol >= maxFinite(dtype) : truth - tol <= -maxFinite(dtype);
  return std::fabs(got - truth) <= tol;
}

// u (K + cond) scale + floor for the device; for cpu_reference one rounding of the truth (its
// doubles may differ from these in their last bits).
struct Tolerance {
  bool ref = false;
  double K = 4;
  double of(int dtype, double truth, double scale, double cond, double floor) const {
    const double ulp = dtype == INFINI_DTYPE_F32 ? 0 : ulpOf(dtype, std::fabs(truth));
    if (ref) return 0x1p-24 * std::fabs(truth) + 0x1p-40 * scale + 0x1p-149 + ulp;
    return kU * (K + cond) * scale + floor + 0x1p-149 + ulp;
  }
  // A key's: its p's bound and the rounding of p + bias.
  double key(double p, double v, double cond) const {
    if (!std::isfinite(v)) return 0;
    if (ref) return 0x1p-40 * (std::fabs(p) + std::fabs(v));
    return kU * (K + cond + 2) * (std::fabs(p) + std::fabs(v)) + 0x1p-124;
  }
};

// With groups: some kept set K the group scores allow (each score in [lo, hi], its members' keys
// all down or all up: K is possible iff min over K of hi >= max outside K of lo) that holds the
// chosen experts' groups and, besides, only groups none of whose experts beats the weakest chosen
// one (keys moved in the choice's favour). Moving the keys alone is not enough here: a kept group
// the choice takes nothing from may tie with one whose expert would beat it.
std::string checkGroups(const std::vector<double> &key, const std::vector<double> &delta,
                        const std::vector<double> &moved, const std::vector<bool> &chosen,
                        const Grouping &g) {
  const size_t E = key.size(), size = E / g.count;
  size_t weakest = SIZE_MAX;  // the last chosen expert in selection order of the moved keys
  for (size_t j = 0; j < E; ++j)
    if (chosen[j] && (weakest == SIZE_MAX || before(moved[weakest], weakest, moved[j], j)))
      weakest = j;
  const auto scoreOf = [&](size_t q, double sign) {
    std::vector<double> v(key);
    std::vector<size_t> members;
    for (size_t j = q * size; j < (q + 1) * size; ++j) {
      if (std::isfinite(v[j])) v[j] += sign * delta[j];
      members.push_back(j);
    }
    const double s = groupScore(v, members, g);
    return std::isnan(s) ? INFINITY : s;  // NaN ranks first
  };
  std::vector<double> lo(g.count), hi(g.count);
  std::vector<bool> must(g.count, false), eligible(g.count, true);
  for (size_t q = 0; q < g.count; ++q) {
    lo[q] = scoreOf(q, -1);
    hi[q] = scoreOf(q, 1);
    for (size_t j = q * size; j < (q + 1) * size; ++j) {
      must[q] = must[q] || chosen[j];
      if (!chosen[j] && weakest != SIZE_MAX && before(moved[j], j, moved[weakest], weakest))
        eligible[q] = false;
    }
  }
  for (size_t q = 0; q < g.count; ++q)
    if (must[q] && !eligible[q])
      return "group " + std::to_string(q) + " holds an expert beating the choice beyond the bound";
  // Some threshold T = min over K of hi: K holds every group with lo > T, only groups with
  // hi >= T, and k_group of them.
  for (size_t t = 0; t < g.count; ++t) {
    const double T = hi[t];
    size_t forced = 0, possible = 0;
    bool ok = true;
    for (size_t q = 0; q < g.count; ++q) {
      const bool in = must[q] || lo[q] > T;
      if (in && (!eligible[q] || hi[q] < T)) ok = false;
      forced += in;
      possible += eligible[q] && hi[q] >= T;
    }
    if (ok && forced <= g.keep && g.keep <= possible) return "";
  }
  return "no kept groups the scores allow hold the choice";
}

// "" when `got` is a selection of k experts the oracle could make from keys each within delta of
// `key`: distinct, in [0, E), the same set as the exact selection on the keys moved by their bound
// in its favour (the chosen up, the rest down: monotone, so any admissible set is that one), in
// selection order but where neighbouring keys are within their bounds.
std::string checkSelection(const std::vector<double> &key, const std::vector<double> &delta,
                           const std::vector<int64_t> &got, const Grouping &g) {
  const size_t E = key.size(), k = got.size();
  std::vector<bool> chosen(E, false);
  for (size_t i = 0; i < k; ++i) {
    if (got[i] < 0 || got[i] >= static_cast<int64_t>(E))
      return "slot " + std::to_string(i) + " holds " + std::to_string(got[i]) + ", not an expert";
    if (chosen[got[i]]) return "expert " + std::to_string(got[i]) + " chosen twice";
    chosen[got[i]] = true;
  }
  std::vector<double> moved = key;
  for (size_t j = 0; j < E; ++j)
    if (std::isfinite(key[j])) moved[j] += chosen[j] ? delta[j] : -delta[j];
  if (g.count > 1) {
    const std::string why = checkGroups(key, delta, moved, chosen, g);
    if (!why.empty()) return why;
  } else {
    for (size_t j : selectOf(moved, g, k))
      if (!chosen[j])
        return "expert " + std::to_string(j) + " (key " + num(key[j]) +
               ") beats the choice beyond the bound";
  }
  for (size_t i = 0; i + 1 < k; ++i) {
    const size_t a = static_cast<size_t>(got[i]), b = static_cast<size_t>(got[i + 1]);
    if (!before(key[a], a, key[b], b) &&
        !(std::isfinite(key[a]) && std::isfinite(key[b]) && key[b] - key[a] <= delta[a] + delta[b]))
      return "slots " + std::to_string(i) + ", " + std::to_string(i + 1) + " out of order";
  }
  return "";
}

// MoeGatingTopK's y for the selection `got` (MoeGatingWeights' for its given expert_idx), c's
// routed_scaling_factor c.d[0] and eps c.d[1]: each y_i's truth, condition and floor.
struct TopKWeights {
  std::vector<double> want, cond;
  double floor = 0;
  bool meaningful = true;
  TopKWeights(const Case &c, const Probs &pr, const std::vector<int64_t> &got) {
    const size_t k = got.size();
    const double scale = static_cast<float>(c.d[0]), eps = static_cast<float>(c.d[1]);
    double sum = 0, sum_cond = 0;  // D carries the selected p's errors
    for (int64_t s : got) sum += pr.p[s], sum_cond = std::fmax(sum_cond, pr.cond[s]);
    const double D = sum + eps;
    for (size_t i = 0; i < k; ++i) {
      want.push_back(pr.p[got[i]] / D * scale);
      cond.push_back(pr.cond[got[i]] + sum_cond + static_cast<double>(k) + 3);
    }
    // p's absolute floor (2^-125 each) through the normalization: (k + 1) |c| floor / D;
    // past |c| (D below the floors) y is meaningless and any value goes.
    // Plus w / D's own rounding where it falls below F32's normal range (an eps near 1e23:
    // w / D underflows), times c: 2^-149 |c|.
    floor = std::fabs(scale) * (static_cast<double>(k + 1) * 0x1p-124 / D + 0x1p-149);
    meaningful = floor < std::fabs(scale);
  }
};

void compareRouter(const char *device, const Case &c, const Run &run, const Tolerance &tol) {
  const RouterRun v{c, run};
  const Op op = c.op;
  const bool weights = op == kRouterWeights;  // MoeGatingTopK's y at the given expert_idx
  const size_t xs = op == kRouterSoftmax ? 4 : op == kRouterTopK ? 3 : weights ? 1 : 2;
  const bool forward = op == kRouterSoftmax || op == kRouterTopK;
  const int fd = c.t[xs].dtype;
  const auto bad = [&](const std::string &what, const std::string &detail) {
    fail((std::string(device) + ": " + what).c_str(), detail + "\n" + describe(c));
  };
  const Tensor &xt = c.t[xs], &kt = c.t[forward || weights ? 0 : 1];
  if (xt.shape.size() < 2 || xt.shape.back() == 0 || kt.shape.empty())
    bad("a router accepted x of rank < 2 or E = 0", "");
  const size_t E = xt.shape.back(), R = numelOf(xt) / E, k = kt.shape.back();
  // Every given tensor of the documented size (x's leading shape times k or E, E, or 1).
  for (size_t s = 0; s < c.t.size(); ++s) {
    if (!c.t[s].present) continue;
    const bool wide = c.t[s].shape.size() == xt.shape.size() && c.t[s].shape.back() == E &&
                      (op == kRouterTopK ? s == 2 || s == 3
                                         : s == xs || (op == kRouterSoftmax ? s == 3 : s == 0));
    const size_t want = op == kRouterTopK && s == 4 ? E
                        : (op == kRouterSoftmax && s == 5) || (op == kRouterSoftmaxGrad && s == 4)
                            ? R
                        : wide ? R * E
                               : R * k;
    if (numelOf(c.t[s]) != want)
      bad("a router accepted a tensor of the wrong size", "tensor " + std::to_string(s));
  }
  const size_t fin = op == kRouterSoftmax ? 5 : op == kRouterSoftmaxGrad ? 4 : SIZE_MAX;
  for (size_t r = 0; r < R; ++r) {
    const std::vector<double> x = v.row(xs, r, E);
    std::string xdesc = "row " + std::to_string(r) + " x:";
    for (size_t j = 0; j < E && j < 40; ++j) xdesc += " " + num(x[j]);
    const bool finished = fin != SIZE_MAX && c.t[fin].present && *v.at(fin, r) != 0;
    if (weights) {
      const Probs pr = c.i[0] == 1   ? sigmoidOf(x)
                       : c.i[0] == 2 ? sqrtSoftplusOf(x)
                                     : softmaxOf(x, chainOf(E));
      std::vector<int64_t> got(k);
      for (size_t i = 0; i < k; ++i) {
        got[i] = v.index(2, r * k + i);
        if (got[i] < 0 || got[i] >= static_cast<int64_t>(E))
          bad("MoeGatingWeights accepted an expert_idx outside [0, E)", std::to_string(got[i]));
      }
      TopKWeights w(c, pr, got);
      if (!w.meaningful) continue;
      for (size_t i = 0; i < k; ++i) {
        const double y = v.get(0, r * k + i);
        if (!within(y, w.want[i], tol.of(fd, w.want[i], std::fabs(w.want[i]), w.cond[i], w.floor),
                    fd))
          bad("y outside the bound", "slot " + std::to_string(i) + " (expert " +
                                         std::to_string(got[i]) + "): " + num(y) + " vs " +
                                         num(w.want[i]) + "\n" + xdesc);
      }
      continue;
    }
    if (forward) {
      const bool renorm = op == kRouterSoftmax && c.i[1] == 1;
      const bool sigmoid = op == kRouterTopK && c.i[5] == 1;
      const bool sqrt_softplus = op == kRouterTopK && c.i[5] == 2;
      const Probs pr = renorm          ? Probs{}
                       : sigmoid       ? sigmoidOf(x)
                       : sqrt_softplus ? sqrtSoftplusOf(x)
                                       : softmaxOf(x, chainOf(E));
      const size_t probs_slot = op == kRouterSoftmax ? 3 : 2;
      if (!renorm && c.t[probs_slot].present)
        for (size_t j = 0; j < E; ++j) {
          const double got = v.get(probs_slot, r * E + j), p = pr.p[j];
          if (!within(got, p, tol.of(INFINI_DTYPE_F32, p, std::fabs(p), pr.cond[j], 0x1p-125),
                      INFINI_DTYPE_F32))
            bad("p (softmax_out / norm_out) outside the bound",
                "expert " + std::to_string(j) + ": " + num(got) + " vs " + num(p) + "\n" + xdesc);
        }
      if (op == kRouterSoftmax && c.t[2].present)
        for (size_t i = 0; i < k; ++i)
          if (v.index(2, r * k + i) != static_cast<int64_t>(i * R + r))
            bad("row_idx is not i * R + r", "slot " + std::to_string(i));
      if (finished) {
        for (size_t i = 0; i < k; ++i)
          if (v.get(0, r * k + i) != 0 || v.index(1, r * k + i) != static_cast<int64_t>(E))
            bad("a finished row is not y = 0, expert_idx = E", "slot " + std::to_string(i));
        continue;
      }
      // The keys: p (+ bias), or x itself (renorm 1: exact).
      std::vector<double> key(E), delta(E, 0.0);
      for (size_t j = 0; j < E; ++j) {
        if (renorm) {
          key[j] = x[j];
          continue;
        }
        key[j] = pr.p[j] + (op == kRouterTopK && c.t[4].present ? v.get(4, j) : 0.0);
        delta[j] = tol.key(pr.p[j], key[j], pr.cond[j]);
      }
      Grouping g;
      if (op == kRouterTopK) {
        g.keep = static_cast<size_t>(c.i[1]);
        g.count = static_cast<size_t>(c.i[2]);
        const size_t mode = static_cast<size_t>(c.i[3]);
        g.best = mode == 0 ? 1 : mode == 1 ? 2 : k / g.keep;
      }
      std::vector<int64_t> got(k);
      for (size_t i = 0; i < k; ++i) got[i] = v.index(1, r * k + i);
      const std::string why = checkSelection(key, delta, got, g);
      if (!why.empty()) {
        std::string keys = "keys:";
        for (size_t j = 0; j < E && j < 40; ++j) keys += " " + num(key[j]);
        std::string chose = "chose:";
        for (int64_t s : got) chose += " " + std::to_string(s);
        bad("selection outside the bound", why + "\n" + chose + "\n" + keys + "\n" + xdesc);
      }
      // y at this device's choice.
      std::vector<double> want(k), cond(k);
      double floor = 0x1p-125;
      if (renorm) {
        std::vector<double> picked;
        for (int64_t s : got) picked.push_back(x[s]);
        const Probs sp = softmaxOf(picked, std::fmax(static_cast<double>(k), chainOf(k)));
        want = sp.p;
        cond = sp.cond;
      } else if (op == kRouterSoftmax) {
        for (size_t i = 0; i < k; ++i) want[i] = pr.p[got[i]], cond[i] = pr.cond[got[i]];
      } else {
        const TopKWeights w(c, pr, got);
        want = w.want;
        cond = w.cond;
        floor = w.floor;
        if (!w.meaningful) continue;
      }
      for (size_t i = 0; i < k; ++i) {
        const double y = v.get(0, r * k + i);
        if (!within(y, want[i], tol.of(fd, want[i], std::fabs(want[i]), cond[i], floor), fd))
          bad("y outside the bound", "slot " + std::to_string(i) + " (expert " +
                                         std::to_string(got[i]) + "): " + num(y) + " vs " +
                                         num(want[i]) + "\n" + xdesc);
      }
      continue;
    }
    // The grads, for the given expert_idx (the call checked its range).
    std::vector<double> grad(E, 0.0), terms(E, 0.0);
    double cond = 0, floor = 0;
    bool floored = false;    // a p of the row below the floor (F32 may hold 0 there)
    bool overflows = false;  // c / D or a grad_w past F32's range (a huge c over a tiny D)
    if (!finished) {
      const std::vector<double> g = v.row(1, r, k);
      std::vector<size_t> s(k);
      for (size_t i = 0; i < k; ++i) {
        const int64_t e = v.index(3, r * k + i);
        if (e < 0 || e >= static_cast<int64_t>(E))
          bad("a grad accepted an expert_idx outside [0, E)", std::to_string(e));
        s[i] = static_cast<size_t>(e);
      }
      double gsum = 0;
      bool g_finite = true;
      for (double gi : g) gsum += std::fabs(gi), g_finite = g_finite && std::isfinite(gi);
      const Probs sm = softmaxOf(x, chainOf(E));
      const bool renorm = op == kRouterSoftmaxGrad && c.i[0] == 1;
      const bool sigmoid = op == kRouterTopKGrad && c.i[0] == 1;
      const bool sqrt_softplus = op == kRouterTopKGrad && c.i[0] == 2;
      const bool elementwise = sigmoid || sqrt_softplus;
      // p_j's condition and, through the sum over the selected, theirs (docs: twice the largest).
      cond = 2 * sm.max_cond + 2.0 * static_cast<double>(k);
      if (renorm) {
        std::vector<double> picked;
        for (size_t j : s) picked.push_back(x[j]);
        const Probs sp = softmaxOf(picked, std::fmax(static_cast<double>(k), chainOf(k)));
        double dot = 0, mag = 0;
        for (size_t i = 0; i < k; ++i) dot += g[i] * sp.p[i], mag += std::fabs(g[i]) * sp.p[i];
        for (size_t i = 0; i < k; ++i) {
          grad[s[i]] += sp.p[i] * (g[i] - dot);
          terms[s[i]] += sp.p[i] * (std::fabs(g[i]) + mag);
        }
        cond = std::fmax(cond, 2 * sp.max_cond + 2.0 * static_cast<double>(k));
        // p's floor times the g's, and the dot's k products g_i p_i, each of which may round
        // into the subnormals (2^-150 apiece) with tiny g, times p_j <= 1.
        floor = 0x1p-124 * gsum + 0x1p-150 * static_cast<double>(k);
        for (double p : sp.p) floored = floored || p < 0x1p-120;
      } else {
        const Probs pr = sigmoid ? sigmoidOf(x) : sqrt_softplus ? sqrtSoftplusOf(x) : sm;
        const std::vector<double> &p = pr.p;
        for (double pj : p) floored = floored || pj < 0x1p-120;
        std::vector<double> gp(E, 0.0), gp_mag(E, 0.0);
        if (op == kRouterSoftmaxGrad) {
          double dot = 0, mag = 0;
          for (size_t i = 0; i < k; ++i) dot += g[i] * p[s[i]], mag += std::fabs(g[i]) * p[s[i]];
          for (size_t i = 0; i < k; ++i) gp[s[i]] += g[i], gp_mag[s[i]] += std::fabs(g[i]);
          for (size_t j = 0; j < E; ++j) {
            grad[j] = p[j] * (gp[j] - dot);
            terms[j] = p[j] * (gp_mag[j] + mag);
          }
          floor = 0x1p-124 * gsum + 0x1p-150 * static_cast<double>(k);  // as renorm 1's
        } else {
          const double scale = static_cast<float>(c.d[0]), eps = static_cast<float>(c.d[1]);
          double sum = 0, t = 0, t_mag = 0;
          for (size_t i = 0; i < k; ++i) {
            sum += p[s[i]];
            t += g[i] * p[s[i]];
            t_mag += std::fabs(g[i]) * p[s[i]];
          }
          const double D = sum + eps;
          // The documented F32 steps c / D and grad_w overflow there (c 1e33 over D = eps
          // 1e-20): an infinity, or NaN (inf * 0), where the truth is finite. Not modelled: a
          // non-finite grad_x is let through on such rows (tests/fuzz/README.md, Findings).
          // Likewise where D is within the p's floors (F32 may hold every p, and D, as 0: 0 / 0).
          overflows = !(std::fabs(scale) / D < 0x1p126) ||  // c / D alone, times a 0 after
                      !(std::fabs(scale) / D * (gsum + std::fabs(t) / D) < 0x1p126) ||
                      !(D > static_cast<double>(k + 1) * 0x1p-124);
          double q = 0, q_mag = 0;
          for (size_t i = 0; i < k; ++i) {
            const double gw = scale / D * (g[i] - t / D);
            gp[s[i]] += gw;
            gp_mag[s[i]] += std::fabs(scale) / D * (std::fabs(g[i]) + t_mag / D);
            q += gw * p[s[i]];
            q_mag += std::fabs(scale) / D * (std::fabs(g[i]) + t_mag / D) * p[s[i]];
          }
          for (size_t j = 0; j < E; ++j) {
            // cpu_reference's slope: e / (1 + e)^2, e = exp(-|x|), for 1 - p cancels in double;
            // sqrtsoftplus: sigmoid(x) / (2 p), e^(x / 2) / 2 far left, 0 at +-inf
            const double e = std::exp(-std::fabs(x[j]));
            const double slope = sigmoid            ? e / ((1 + e) * (1 + e))
                                 : std::isinf(x[j]) ? 0.0
                                 : x[j] < -700      ? 0.5 * std::exp(0.5 * x[j])
                                                    : 1.0 / (1.0 + std::exp(-x[j])) / (2.0 * p[j]);
            grad[j] = elementwise ? gp[j] * slope : p[j] * (gp[j] - q);
            terms[j] = elementwise ? gp_mag[j] * slope : p[j] * (gp_mag[j] + q_mag);
          }
          cond = (elementwise ? 2.0 : 2 * sm.max_cond) + 3.0 * static_cast<double>(k) + 3;
          // p's floor through 1 / D and 1 / D^2 (gw's derivatives in w), times the grads' sizes.
          floor = 0x1p-120 * static_cast<double>(k) * (std::fabs(scale) + 1) * (gsum + 1) *
                      (1 / D + 1 / (D * D)) +
                  0x1p-148 * static_cast<double>(k) * std::fabs(scale) / D;  // t / D subnormal
        }
      }
      floored = floored && !g_finite;
    }
    for (size_t j = 0; j < E; ++j) {
      const double got = v.get(0, r * E + j);
      if (finished) {
        if (got != 0) bad("a finished row's grad_x is not 0", num(got));
        continue;
      }
      // Non-finite grad_y where F32 holds a floored p as 0: inf * 0 is NaN there, an infinity in
      // double (the floor again).
      if ((floored || overflows) && (!std::isfinite(got) || !std::isfinite(grad[j]))) continue;
      if (!within(got, grad[j], tol.of(fd, grad[j], terms[j], cond, floor), fd))
        bad("grad_x outside the bound", "expert " + std::to_string(j) + ": " + num(got) + " vs " +
                                            num(grad[j]) + " (terms " + num(terms[j]) + ")\n" +
                                            xdesc);
    }
  }
}

// cpu and opencl are designed to give the same bits for the routers (docs/moe_gating_top_k*.md,
// "Accuracy"), and every device cpu_reference's for the expert-count operators: every output
// byte (the gaps between a strided output's elements too) alike where both succeed.
void checkIdentical(const char *device, const char *other, const Case &c, const Run &run,
                    const Run &cpu) {
  if (!run.called || !cpu.called || run.call != INFINI_STATUS_SUCCESS ||
      cpu.call != INFINI_STATUS_SUCCESS)
    return;
  for (size_t k = 0; k < c.t.size(); ++k) {
    if (c.t[k].role != kOutput && c.t[k].role != kOutIndex) continue;
    const auto &a = run.buffers[k].bytes, &b = cpu.buffers[k].bytes;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        fail((std::string(device) + " and " + other + " differ in an output's bits").c_str(),
             "tensor " + std::to_string(k) + " byte " + std::to_string(i - kGuard) + ": " +
                 std::to_string(a[i]) + " vs " + std::to_string(b[i]) + "\n" + describe(c));
  }
}

// The same statuses as cpu_reference (the workspace, whose size may differ, aside) and, where
// both succeed, the same results within bound_u (the operator's bound, strict or relaxed).
void checkAgainstReference(const char *device, const Case &c, const Run &run, const Run &ref,
                           const std::vector<std::vector<uint8_t>> &fill, double bound_u) {
  if (run.create != ref.create)
    fail((std::string(device) + " and cpu_reference disagree on create").c_str(),
         std::string(infiniStatusString(run.create)) + " vs " + infiniStatusString(ref.create) +
             "\n" + describe(c));
  if (run.called && ref.called && run.call != ref.call &&
      (c.workspace_mode == 0 || c.workspace_mode == 3))
    fail((std::string(device) + " and cpu_reference disagree on the call").c_str(),
         std::string(infiniStatusString(run.call)) + " vs " + infiniStatusString(ref.call) +
             " (workspace sizes " + std::to_string(run.workspace) + ", " +
             std::to_string(ref.workspace) + ")\n" + describe(c));
  if (run.called && ref.called && run.call == INFINI_STATUS_SUCCESS &&
      ref.call == INFINI_STATUS_SUCCESS) {
    if (isExact(c.op)) {
      checkIdentical(device, "cpu_reference", c, run, ref);
      return;
    }
    if (!isRouter(c.op)) {
      compare(device, c, run, ref, fill, bound_u);
      return;
    }
    compareRouter(device, c, run, Tolerance{false, bound_u});
    compareRouter("cpu_reference", c, ref, Tolerance{true, bound_u});
  }
}

// cpu_relaxed and cl_relaxed: the same devices in the relaxed F32 mode.
struct Handles {
  infiniopHandle_t cpu = nullptr, ref = nullptr, cl = nullptr;
  infiniopHandle_t cpu_relaxed = nullptr, cl_relaxed = nullptr;
  Handles() {
    if (infiniopCreateHandle(&cpu, INFINI_DEVICE_CPU, 0) != INFINI_STATUS_SUCCESS ||
        infiniopCreateHandle(&ref, INFINI_DEVICE_CPU_REFERENCE, 0) != INFINI_STATUS_SUCCESS ||
        !openRelaxed(INFINI_DEVICE_CPU, &cpu_relaxed))
      fail("no cpu or cpu_reference handle", infiniopGetLastError());
    const char *env = std::getenv("INFINIOP_FUZZ_OPENCL");
    if (env && *env == '1' &&
        (infiniopCreateHandle(&cl, INFINI_DEVICE_OPENCL, 0) != INFINI_STATUS_SUCCESS ||
         !openRelaxed(INFINI_DEVICE_OPENCL, &cl_relaxed)))
      fail("INFINIOP_FUZZ_OPENCL=1 but no opencl handle", infiniopGetLastError());
  }
  static bool openRelaxed(infiniDevice_t device, infiniopHandle_t *handle) {
    return infiniopCreateHandle(handle, device, 0) == INFINI_STATUS_SUCCESS &&
           infiniopSetHandleFpmathMode(*handle, INFINIOP_FPMATH_RELAXED) == INFINI_STATUS_SUCCESS;
  }
  // At exit, before LeakSanitizer looks: whatever a handle still held would count as leaked.
  ~Handles() {
    for (infiniopHandle_t h : {cpu, ref, cl, cpu_relaxed, cl_relaxed})
      if (h && infiniopDestroyHandle(h) != INFINI_STATUS_SUCCESS)
        fail("handle destroy failed", infiniopGetLastError());
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Handles handles;
  Input in(data, size);
  Case c = decode(in);
  bool runnable = true;
  size_t total = 0;
  for (Tensor &t : c.t) {
    if (!computeSpan(t)) runnable = false;
    total += t.span * dtypeBytes(t.dtype);
  }
  if (total > (size_t{1} << 20)) runnable = false;
  std::vector<std::vector<uint8_t>> fill(c.t.size());
  if (runnable)
    for (size_t k = 0; k < c.t.size(); ++k) fill[k] = fillBytes(in, c.t[k]);
  const Run ref = runOn(handles.ref, false, c, fill, runnable);
  const double bound_u = kBoundU[c.op];
  const Run cpu = runOn(handles.cpu, false, c, fill, runnable);
  checkAgainstReference("cpu", c, cpu, ref, fill, bound_u);
  // opencl: the same call on device copies of the same bytes; the routers bit for bit as cpu.
  if (handles.cl) {
    const Run cl = runOn(handles.cl, true, c, fill, runnable);
    checkAgainstReference("opencl", c, cl, ref, fill, bound_u);
    if (isRouter(c.op) || c.op == kAuxLoss || c.op == kAuxLossGrad)
      checkIdentical("opencl", "cpu", c, cl, cpu);
  }
  // The elementwise operators in the relaxed mode: the same statuses, within K = 8.
  if (c.op < kMoeFinalize) {
    checkAgainstReference("cpu (relaxed)", c, runOn(handles.cpu_relaxed, false, c, fill, runnable),
                          ref, fill, kRelaxedBoundU);
    if (handles.cl_relaxed)
      checkAgainstReference("opencl (relaxed)", c,
                            runOn(handles.cl_relaxed, true, c, fill, runnable), ref, fill,
                            kRelaxedBoundU);
  }
  return 0;
}
