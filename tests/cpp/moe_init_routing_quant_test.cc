// SPDX-License-Identifier: Apache-2.0
// MoeInitRoutingQuantV2 (docs/moe_init_routing_quant.md) on every device against this file's
// oracle, in long double and independent of src/exact: the routing by a stable sort of the
// positions p = r*K + k by expert; each kept row's values t = v scale + offset (static) or
// z = v m (dynamic, m the smooth scale of the row's expert, of row 0, or 1), the dynamic scale
// amax / qmax rounded to F32 (at least 2^-126), each byte t or z / s rounded once to nearest even
// and saturated with this file's own INT8 and FP8 E4M3 encoders. Every byte and scale must be the
// oracle's, every device's the same as cpu_reference's, bit for bit, and the index and count
// outputs exactly MoeInitRoutingV2's on the same inputs. Where the long double value lies within
// 2^-56 (relative) of a rounding midpoint (of the byte grid, or of F32 for a scale) the element is
// skipped and counted: there the float64 value decides (docs/quantization.md); ties that are
// exact in float64 are checked by hand (ByHand). Cases: static with offsets (ties after the
// offset, saturation, negatives, NaN and infinities), dynamic with (E, H), (1, H) and no smooth
// scale, INT8 and FP8 (subnormals), NaN / inf rows (the NaN scale), dropless with active_num,
// drop/pad with capacity (dropped positions, unfilled slots: zeros and scale 0), INT32 / INT64
// indices, every x dtype, strided layouts, a threaded size, and bad inputs (nothing written).
// Outputs are poisoned before each call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "index_values.h"
#include "infiniop/ops/moe_init_routing_quant_v2.h"
#include "infiniop/ops/moe_init_routing_v2.h"
#include "quant_names.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

using infiniop::bitsOf;
using infiniop::floatOf;

using namespace quant_names;  // NOLINT: the dtypes' and attributes' short names

// How close (relative) to a midpoint the oracle does not decide: a few long double ulps, 16 times.
constexpr long double kTolerance = 0x1p-56L;

// ---------------------------------------------------------------- the oracle's encoders
// u >= 0 in units of a grid, rounded to nearest even; *ambiguous where u is near a midpoint.
long double nearestEven(long double u, bool *ambiguous) {
  const long double frac = u - std::floor(u);
  if (std::fabs(frac - 0.5L) <= kTolerance * std::max(u, 1.0L)) *ambiguous = true;
  return std::nearbyint(u);
}

uint8_t encodeInt8(long double v, bool *ambiguous) {
  if (std::isnan(v)) return 0;
  if (v >= 127) return 0x7f;
  if (v <= -127) return 0x81;
  const long double q = nearestEven(std::fabs(v), ambiguous);
  return static_cast<uint8_t>(static_cast<int8_t>(v < 0 ? -q : q));
}

// OCP E4M3 (e4m3fn): bias 7, 3 mantissa bits, subnormals k 2^-9, max 448 (0x7E), NaN 0x7F.
uint8_t encodeFp8(long double v, bool *ambiguous) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const long double a = std::fabs(v);
  if (a >= 448) return sign | 0x7e;
  if (a < 0x1p-6L) return sign | static_cast<uint8_t>(nearestEven(a * 0x1p9L, ambiguous));
  const int e = std::ilogb(a);  // a in [2^e, 2^(e+1))
  const auto k = static_cast<int>(nearestEven(std::ldexp(a, 3 - e), ambiguous));  // [8, 16]
  return sign | static_cast<uint8_t>(((e + 7) << 3) + k - 8);                     // k = 16 carries
}

// amax / qmax rounded to F32 (NaN: 0x7FC00000; at least 2^-126); *ambiguous near an F32 midpoint.
float dynamicScaleOf(long double amax, long double qmax, bool *ambiguous) {
  if (std::isnan(amax)) return floatOf(0x7fc00000u);
  const long double q = amax / qmax;
  if (std::isinf(q)) return INFINITY;
  if (q < 0x1p-126L) return 0x1p-126f;
  const long double spacing = std::ldexp(1.0L, std::ilogb(q) - 23);
  const long double f = nearestEven(q / spacing, ambiguous) * spacing;
  return f >= 0x1p128L ? INFINITY : static_cast<float>(f);
}

// ---------------------------------------------------------------- one case
enum class Smooth { none, one, per_expert };

struct Case {
  infiniopQuantMode_t quant = kDynamic;
  infiniDtype_t format = I8, dtype = F32;
  int64_t mode = 0;  // drop_pad_mode
  size_t R = 4, K = 2, H = 8, E = 3;
  int64_t active_num = 0, capacity = 0, count_flag = 1;
  bool before_flag = true;
  Smooth smooth = Smooth::per_expert;
  infiniDtype_t expert_dt = I32, row_dt = I32, count_dt = I32;
  float scale = 0.75f, offset = 0.5f;  // static
  bool strided = false;                // x column-major, expanded_x padded, 1-D outputs stride 2
  bool empty_as_null = false;          // NULL for tensors of no elements (the C ABI allows it)
  uint64_t seed = 1;
};

std::string describe(const Case &c) {
  return std::string(c.quant == kStatic ? "static" : "dynamic") + " " +
         infiniop::dtypeName(c.format) + " x " + infiniop::dtypeName(c.dtype) +
         " mode=" + std::to_string(c.mode) + " R=" + std::to_string(c.R) +
         " K=" + std::to_string(c.K) + " H=" + std::to_string(c.H) + " E=" + std::to_string(c.E) +
         " active_num=" + std::to_string(c.active_num) + " C=" + std::to_string(c.capacity) +
         " smooth=" + std::to_string(static_cast<int>(c.smooth)) + " expert_idx " +
         infiniop::dtypeName(c.expert_dt) + " row_idx " + infiniop::dtypeName(c.row_dt) +
         " counts " + infiniop::dtypeName(c.count_dt) + (c.strided ? " strided" : "");
}

// A case of R tokens, K experts each of E, hidden size H (the other fields at their defaults).
Case sized(size_t R, size_t K, size_t H, size_t E) {
  Case c;
  c.R = R;
  c.K = K;
  c.H = H;
  c.E = E;
  return c;
}

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<ptrdiff_t> columnMajor(const std::vector<size_t> &shape) {
  return {1, static_cast<ptrdiff_t>(std::max<size_t>(shape[0], 1))};
}

// Every tensor of a call (absent ones not given to the operator).
struct Tensors {
  size_t rows = 0;  // expanded rows: A or E*C
  TensorBuffer x, expert_idx, expanded_x, row_idx, counts, before, dynamic_scale, scale, offset;
  bool has_scale = false, has_offset = false;
};

Tensors makeTensors(const Case &c) {
  const size_t RK = c.R * c.K;
  const size_t A = c.active_num > 0 && static_cast<size_t>(c.active_num) < RK
                       ? static_cast<size_t>(c.active_num)
                       : RK;
  const auto C = static_cast<size_t>(c.capacity);
  const size_t rows = c.mode == 1 ? c.E * C : A;
  std::vector<size_t> ex_shape =
      c.mode == 1 ? std::vector<size_t>{c.E, C, c.H} : std::vector<size_t>{A, c.H};
  std::vector<ptrdiff_t> ex_strides;
  if (c.strided) {  // rows padded by 3 bytes
    const auto row = static_cast<ptrdiff_t>(c.H + 3);
    ex_strides = c.mode == 1 ? std::vector<ptrdiff_t>{row * static_cast<ptrdiff_t>(C), row, 1}
                             : std::vector<ptrdiff_t>{row, 1};
  }
  std::vector<size_t> ds_shape(ex_shape.begin(), ex_shape.end() - 1);
  const std::vector<ptrdiff_t> flat2 =
      c.strided ? std::vector<ptrdiff_t>{2} : std::vector<ptrdiff_t>{};
  const size_t smooth_rows = c.smooth == Smooth::per_expert ? c.E : 1;
  Tensors t{
      rows,
      TensorBuffer({c.R, c.H}, c.strided ? columnMajor({c.R, c.H}) : std::vector<ptrdiff_t>{},
                   c.dtype),
      TensorBuffer({c.R, c.K}, c.expert_dt),
      TensorBuffer(ex_shape, ex_strides, c.format),
      TensorBuffer({RK}, flat2, c.row_dt),
      TensorBuffer({c.E}, flat2, c.count_dt),
      TensorBuffer({c.E}, c.count_dt),
      TensorBuffer(ds_shape, c.strided && c.mode == 0 ? flat2 : std::vector<ptrdiff_t>{}, F32),
      c.quant == kStatic ? TensorBuffer({1}, F32) : TensorBuffer({smooth_rows, c.H}, F32),
      TensorBuffer({1}, F32),
  };
  t.has_scale = c.quant == kStatic || c.smooth != Smooth::none;
  t.has_offset = c.quant == kStatic;
  return t;
}

// Signed values from near zero to large, some exact ties of the byte grid after the static map.
void fillInputs(const Case &c, Tensors &t) {
  for (size_t i = 0; i < t.x.numel(); ++i) {
    const uint64_t z = mix(c.seed * 1000003 + i);
    const double unit = static_cast<double>(z >> 11) * 0x1p-53 * 2 - 1;  // [-1, 1)
    float v = static_cast<float>(unit * ((z & 3) == 0 ? 300.0 : (z & 3) == 1 ? 2.0 : 0.01));
    if ((z & 31) == 5) v = static_cast<float>(static_cast<int>(unit * 40)) * 0.5f;  // halves
    t.x.set(i, v);
  }
  for (size_t i = 0; i < t.expert_idx.numel(); ++i) {
    const uint64_t z = mix(c.seed * 7919 + i + 17);
    setInt(t.expert_idx, i,
           static_cast<int64_t>(z % 2 ? z % c.E : (z >> 8) % std::max<size_t>(1, c.E / 2)));
  }
  if (c.quant == kStatic) {
    t.scale.set(0, c.scale);
    t.offset.set(0, c.offset);
  } else {
    for (size_t i = 0; i < t.scale.numel(); ++i)
      t.scale.set(i, static_cast<float>(0.25 + static_cast<double>(mix(i + 99) % 1000) / 256.0) *
                         ((i % 7) == 3 ? -1.0f : 1.0f));
  }
}

// The routing: the expanded row of each position (-1 dropped), the counts per expert.
struct Routing {
  std::vector<int64_t> row;
  std::vector<int64_t> counts;
};
Routing route(const Case &c, TensorBuffer &expert_idx) {
  const size_t n = c.R * c.K;
  std::vector<int64_t> ex(n);
  for (size_t p = 0; p < n; ++p) ex[p] = getInt(expert_idx, p);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ex[a] < ex[b]; });
  Routing r{std::vector<int64_t>(n, -1), std::vector<int64_t>(c.E, 0)};
  for (int64_t e : ex) ++r.counts[static_cast<size_t>(e)];
  std::vector<int64_t> seen(c.E, 0);
  for (size_t s = 0; s < n; ++s) {
    const size_t p = order[s];
    const auto e = static_cast<size_t>(ex[p]);
    const int64_t j = seen[e]++;
    r.row[p] = c.mode == 0      ? static_cast<int64_t>(s)
               : j < c.capacity ? static_cast<int64_t>(e) * c.capacity + j
                                : -1;
  }
  return r;
}

struct Expected {
  std::vector<uint8_t> bytes;  // expanded rows x H
  std::vector<float> scales;   // per expanded row (dynamic)
  std::vector<bool> skip, written;
  size_t skipped = 0;
};

Expected oracle(const Case &c, Tensors &t) {
  const Routing routing = route(c, t.expert_idx);
  const bool fp8 = c.format == F8;
  const long double qmax = fp8 ? 448 : 127;
  Expected out{std::vector<uint8_t>(t.rows * c.H, 0), std::vector<float>(t.rows, 0.0f),
               std::vector<bool>(t.rows * c.H, false), std::vector<bool>(t.rows, c.mode == 1), 0};
  for (size_t p = 0; p < c.R * c.K; ++p) {
    const int64_t d = routing.row[p];
    if (d < 0 || static_cast<size_t>(d) >= t.rows) continue;
    const size_t r = p / c.K, row = static_cast<size_t>(d);
    const size_t e = static_cast<size_t>(getInt(t.expert_idx, p));
    out.written[row] = true;
    std::vector<long double> z(c.H);
    for (size_t col = 0; col < c.H; ++col) {
      const long double v = t.x.get(r * c.H + col);
      if (c.quant == kStatic)
        z[col] = v * static_cast<long double>(c.scale) + static_cast<long double>(c.offset);
      else if (c.smooth == Smooth::none)
        z[col] = v;
      else
        z[col] = v * static_cast<long double>(
                         t.scale.get((c.smooth == Smooth::per_expert ? e : 0) * c.H + col));
    }
    long double s = 1;
    if (c.quant == kDynamic) {
      long double amax = 0;
      for (long double v : z)
        amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, std::fabs(v));
      bool ambiguous = false;
      const float scale = dynamicScaleOf(amax, qmax, &ambiguous);
      out.scales[row] = scale;
      if (ambiguous) {  // the row's bytes depend on it: skip the whole row
        for (size_t col = 0; col < c.H; ++col) out.skip[row * c.H + col] = true;
        out.skipped += c.H + 1;
        continue;
      }
      s = scale;
    }
    for (size_t col = 0; col < c.H; ++col) {
      bool ambiguous = false;
      const long double v = z[col] / s;
      out.bytes[row * c.H + col] = fp8 ? encodeFp8(v, &ambiguous) : encodeInt8(v, &ambiguous);
      if (ambiguous) {
        out.skip[row * c.H + col] = true;
        ++out.skipped;
      }
    }
  }
  return out;
}

uint8_t byteOf(TensorBuffer &t, size_t i) {
  return static_cast<uint8_t>(*t.at(i));
}
uint32_t scaleBits(TensorBuffer &t, size_t i) {
  return bitsOf(t.get(i));
}

// The descriptors of `tensors` (NULL for NULL), and their destruction.
using TensorList = std::initializer_list<TensorBuffer *>;
std::vector<infiniopTensorDescriptor_t> descriptorsOf(TensorList tensors) {
  std::vector<infiniopTensorDescriptor_t> d;
  for (TensorBuffer *b : tensors) d.push_back(b ? b->descriptor() : nullptr);
  return d;
}
void destroyAll(const std::vector<infiniopTensorDescriptor_t> &d) {
  for (auto x : d)
    if (x) infiniopDestroyTensorDescriptor(x);
}
void stage(DeviceMirror &m, TensorList tensors) {
  for (TensorBuffer *b : tensors) m.add(b);
}

// Runs MoeInitRoutingQuantV2 on `h` with the tensors (outputs as they are).
infiniStatus_t callQuant(infiniopHandle_t h, const Case &c, Tensors &t, std::string *error) {
  const bool dynamic = c.quant == kDynamic;
  TensorBuffer *scale = t.has_scale ? &t.scale : nullptr,
               *offset = t.has_offset ? &t.offset : nullptr;
  TensorBuffer *ds = dynamic ? &t.dynamic_scale : nullptr;
  TensorBuffer *counts = c.mode == 0 && c.count_flag ? &t.counts : nullptr;
  TensorBuffer *before = c.mode == 1 && c.before_flag ? &t.before : nullptr;
  const TensorList all = {&t.expanded_x, &t.row_idx,    counts, before, ds,
                          &t.x,          &t.expert_idx, scale,  offset};
  const auto d = descriptorsOf(all);
  infiniopMoeInitRoutingQuantV2Descriptor_t op = nullptr;
  infiniStatus_t status = infiniopCreateMoeInitRoutingQuantV2Descriptor(
      h, &op, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], c.active_num, c.capacity,
      static_cast<int64_t>(c.E), c.mode, c.count_flag, c.before_flag, c.quant);
  destroyAll(d);
  *error = infiniopGetLastError();
  if (status != INFINI_STATUS_SUCCESS) return status;
  size_t size = 0;
  EXPECT_EQ(infiniopGetMoeInitRoutingQuantV2WorkspaceSize(op, &size), INFINI_STATUS_SUCCESS);
  DeviceMirror m(h);
  stage(m, all);
  void *ws = m.scratch(size);
  m.passEmptyAsNull(c.empty_as_null);
  status = infiniopMoeInitRoutingQuantV2(op, ws, size, m(&t.expanded_x), m(&t.row_idx), m(counts),
                                         m(before), m(ds), m(&t.x), m(&t.expert_idx), m(scale),
                                         m(offset), nullptr);
  *error = infiniopGetLastError();
  m.download();
  EXPECT_EQ(infiniopDestroyMoeInitRoutingQuantV2Descriptor(op), INFINI_STATUS_SUCCESS);
  return status;
}

// MoeInitRoutingV2 on the same routing inputs (its own expanded_x of x's dtype), for the index
// and count outputs.
infiniStatus_t callPlain(infiniopHandle_t h, const Case &c, Tensors &t, TensorBuffer &row_idx,
                         TensorBuffer &counts, TensorBuffer &before) {
  std::vector<size_t> ex_shape = t.expanded_x.shape();
  TensorBuffer expanded(ex_shape, c.dtype);
  TensorBuffer *cnt = c.mode == 0 && c.count_flag ? &counts : nullptr;
  TensorBuffer *bef = c.mode == 1 && c.before_flag ? &before : nullptr;
  const TensorList all = {&expanded, &row_idx, cnt, bef, &t.x, &t.expert_idx};
  const auto d = descriptorsOf(all);
  infiniopMoeInitRoutingV2Descriptor_t op = nullptr;
  infiniStatus_t status = infiniopCreateMoeInitRoutingV2Descriptor(
      h, &op, d[0], d[1], d[2], d[3], d[4], d[5], c.active_num, c.capacity,
      static_cast<int64_t>(c.E), c.mode, c.count_flag, c.before_flag);
  destroyAll(d);
  if (status != INFINI_STATUS_SUCCESS) return status;
  size_t size = 0;
  EXPECT_EQ(infiniopGetMoeInitRoutingV2WorkspaceSize(op, &size), INFINI_STATUS_SUCCESS);
  DeviceMirror m(h);
  stage(m, all);
  void *ws = m.scratch(size);
  m.passEmptyAsNull(c.empty_as_null);
  status = infiniopMoeInitRoutingV2(op, ws, size, m(&expanded), m(&row_idx), m(cnt), m(bef),
                                    m(&t.x), m(&t.expert_idx), nullptr);
  m.download();
  EXPECT_EQ(infiniopDestroyMoeInitRoutingV2Descriptor(op), INFINI_STATUS_SUCCESS);
  return status;
}

void poisonOutputs(Tensors &t) {
  for (TensorBuffer *b : {&t.expanded_x, &t.row_idx, &t.counts, &t.before, &t.dynamic_scale})
    poisonBytes(*b);
}

class MoeInitRoutingQuant : public DeviceTest {
 protected:
  // One call against the oracle, MoeInitRoutingV2's index outputs and cpu_reference's bytes.
  void expectCase(const Case &c, Tensors *given = nullptr) {
    SCOPED_TRACE(describe(c));
    Tensors own = makeTensors(c);
    Tensors &t = given ? *given : own;
    if (!given) fillInputs(c, t);
    poisonOutputs(t);
    std::string error;
    ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_SUCCESS) << error;
    const Expected want = oracle(c, t);
    skipped_ += want.skipped;
    const bool dynamic = c.quant == kDynamic;
    for (size_t row = 0; row < t.rows; ++row) {
      if (!want.written[row]) {  // past active_num: not written
        for (size_t col = 0; col < c.H; ++col)
          ASSERT_EQ(byteOf(t.expanded_x, row * c.H + col), 0xA5) << "row " << row << " written";
        continue;
      }
      for (size_t col = 0; col < c.H; ++col) {
        const size_t i = row * c.H + col;
        if (!want.skip[i])
          ASSERT_EQ(int(byteOf(t.expanded_x, i)), int(want.bytes[i]))
              << "expanded_x row " << row << " column " << col;
      }
      if (dynamic)
        ASSERT_EQ(scaleBits(t.dynamic_scale, row), bitsOf(want.scales[row]))
            << "dynamic_quant_scale row " << row << ": " << t.dynamic_scale.get(row) << " want "
            << want.scales[row];
    }
    if (!dynamic)
      for (uint8_t b : t.dynamic_scale.storage()) ASSERT_EQ(b, 0xA5) << "scale written (static)";
    // The index and count outputs: MoeInitRoutingV2's, byte for byte (poisoned alike).
    TensorBuffer row_idx = t.row_idx, counts = t.counts, before = t.before;
    for (TensorBuffer *b : {&row_idx, &counts, &before}) poisonBytes(*b);
    ASSERT_EQ(callPlain(handle(), c, t, row_idx, counts, before), INFINI_STATUS_SUCCESS);
    EXPECT_EQ(t.row_idx.storage(), row_idx.storage()) << "expanded_row_idx vs MoeInitRoutingV2";
    EXPECT_EQ(t.counts.storage(), counts.storage()) << "counts vs MoeInitRoutingV2";
    EXPECT_EQ(t.before.storage(), before.storage()) << "before-capacity vs MoeInitRoutingV2";
    // And the routing itself against the oracle's.
    const Routing routing = route(c, t.expert_idx);
    for (size_t p = 0; p < routing.row.size(); ++p)
      ASSERT_EQ(getInt(t.row_idx, p), routing.row[p]) << "expanded_row_idx " << p;
    if (deviceOf(GetParam()) == INFINI_DEVICE_CPU_REFERENCE) return;
    Tensors ref = t;
    poisonOutputs(ref);
    Handle reference(INFINI_DEVICE_CPU_REFERENCE);
    ASSERT_EQ(callQuant(reference.get(), c, ref, &error), INFINI_STATUS_SUCCESS) << error;
    ASSERT_EQ(t.expanded_x.storage(), ref.expanded_x.storage()) << "expanded_x vs cpu_reference";
    ASSERT_EQ(t.dynamic_scale.storage(), ref.dynamic_scale.storage())
        << "dynamic_quant_scale vs cpu_reference";
    ASSERT_EQ(t.row_idx.storage(), ref.row_idx.storage()) << "expanded_row_idx vs cpu_reference";
  }

  void TearDown() override {
    if (skipped_)
      std::printf("MoeInitRoutingQuant: %zu elements skipped at a midpoint\n", skipped_);
    DeviceTest::TearDown();
  }

  size_t skipped_ = 0;
};

// Values worked by hand, one token routed to one expert: the exact float64 ties included.
TEST_P(MoeInitRoutingQuant, ByHand) {
  struct Row {
    infiniopQuantMode_t quant;
    float x, scale, offset;
    uint8_t int8, fp8;
  };
  // Static y = x scale + offset (in double); dynamic over a row [x, 1] with no smooth scale.
  const Row rows[] = {
      {kStatic, 1.0f, 2.0f, 0.5f, 2, 0x42},         // 2.5: an INT8 tie, to even; FP8 2.5 exact
      {kStatic, 1.0f, 2.0f, 1.5f, 4, 0x46},         // 3.5: an INT8 tie, to even 4; FP8 exact
      {kStatic, -1.0f, 3.0f, 0.5f, 0xfe, 0xc2},     // -2.5: -2; FP8 -2.5 exact
      {kStatic, 1.0f, 1.0625f, 0.0f, 1, 0x38},      // FP8 tie between 1 and 1.125: 1 (even)
      {kStatic, 1.0f, 1.0f, 0.1875f, 1, 0x3a},      // FP8 tie after the offset: 1.25 (even)
      {kStatic, 100.0f, 2.0f, 0.5f, 0x7f, 0x75},    // 200.5: INT8 saturates; FP8 208 (nearer)
      {kStatic, -300.0f, 2.0f, -1.0f, 0x81, 0xfe},  // -601: both saturate
      {kStatic, 0.25f, 0.0078125f, 0.0f, 0, 0x01},  // 2^-9: FP8's smallest subnormal
      {kStatic, 232.0f, 2.0f, 0.0f, 0x7f, 0x7e},    // 464: FP8 saturates (no 480)
      {kStatic, NAN, 1.0f, 0.0f, 0, 0x7f},
      {kStatic, INFINITY, 1.0f, 0.0f, 0x7f, 0x7e},
      {kStatic, -INFINITY, 1.0f, 0.0f, 0x81, 0xfe},
      {kStatic, -0.0f, 1.0f, -0.0f, 0, 0x80},  // -0 + -0: -0 keeps FP8's sign
      {kStatic, -0.0f, 1.0f, 0.0f, 0, 0x00},   // -0 + 0 is +0
  };
  for (infiniDtype_t format : {I8, F8})
    for (const Row &k : rows) {
      Case c = sized(1, 1, 1, 1);
      c.quant = k.quant;
      c.format = format;
      c.scale = k.scale;
      c.offset = k.offset;
      Tensors t = makeTensors(c);
      t.x.set(0, k.x);
      setInt(t.expert_idx, 0, 0);
      t.scale.set(0, k.scale);
      t.offset.set(0, k.offset);
      poisonOutputs(t);
      std::string error;
      ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_SUCCESS) << error;
      EXPECT_EQ(int(byteOf(t.expanded_x, 0)), int(format == I8 ? k.int8 : k.fp8))
          << k.x << " * " << k.scale << " + " << k.offset << " " << infiniop::dtypeName(format);
    }
  // Dynamic, one row [127, 63.5, -0.5, 1.5]: s = 1, bytes 127, 64 (63.5 tie to even), -0 -> 0,
  // 2; FP8: s = 127/448 rounded to F32.
  Case c = sized(1, 1, 4, 1);
  c.quant = kDynamic;
  c.smooth = Smooth::none;
  Tensors t = makeTensors(c);
  const float x[] = {127.0f, 63.5f, -0.5f, 1.5f};
  for (size_t i = 0; i < 4; ++i) t.x.set(i, x[i]);
  setInt(t.expert_idx, 0, 0);
  poisonOutputs(t);
  std::string error;
  ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_SUCCESS) << error;
  EXPECT_EQ(t.dynamic_scale.get(0), 1.0f);
  const uint8_t want[] = {127, 64, 0, 2};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(int(byteOf(t.expanded_x, i)), int(want[i])) << i;
  // A row of zeros: the smallest scale 2^-126, bytes 0.
  for (size_t i = 0; i < 4; ++i) t.x.set(i, 0.0f);
  poisonOutputs(t);
  ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_SUCCESS) << error;
  EXPECT_EQ(t.dynamic_scale.get(0), 0x1p-126f);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(int(byteOf(t.expanded_x, i)), 0) << i;
  // A NaN in the row: the NaN scale 0x7FC00000, every byte NaN's (0).
  t.x.set(2, NAN);
  poisonOutputs(t);
  ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_SUCCESS) << error;
  EXPECT_EQ(scaleBits(t.dynamic_scale, 0), 0x7fc00000u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(int(byteOf(t.expanded_x, i)), 0) << i;
}

TEST_P(MoeInitRoutingQuant, StaticOffsets) {
  for (infiniDtype_t format : {I8, F8})
    for (auto [scale, offset] :
         {std::pair{0.75f, 0.5f}, {2.0f, -3.25f}, {-0.5f, 100.0f}, {0.001f, 0.0f}, {3.0f, 1e-3f}}) {
      Case c = sized(9, 3, 37, 5);
      c.quant = kStatic;
      c.format = format;
      c.scale = scale;
      c.offset = offset;
      c.seed = 11;
      expectCase(c);
    }
}

TEST_P(MoeInitRoutingQuant, DynamicSmoothScales) {
  for (infiniDtype_t format : {I8, F8})
    for (Smooth smooth : {Smooth::none, Smooth::one, Smooth::per_expert}) {
      Case c = sized(11, 3, 41, 6);
      c.format = format;
      c.smooth = smooth;
      c.seed = 3 + static_cast<uint64_t>(smooth);
      expectCase(c);
    }
}

TEST_P(MoeInitRoutingQuant, EveryDtypeAndIndexDtype) {
  for (infiniDtype_t dtype : kFloatDtypes)
    for (infiniDtype_t index : {I32, I64})
      for (infiniopQuantMode_t quant : {kStatic, kDynamic}) {
        Case c = sized(7, 2, 19, 4);
        c.dtype = dtype;
        c.quant = quant;
        c.expert_dt = index;
        c.row_dt = index == I32 ? I64 : I32;
        c.count_dt = index;
        c.format = dtype == F16 ? F8 : I8;
        expectCase(c);
      }
}

TEST_P(MoeInitRoutingQuant, DroplessActiveNum) {
  for (int64_t active : {0, 5, 14, 40})
    for (int64_t flag : {0, 1, 2}) {
      Case c = sized(7, 2, 9, 3);
      c.active_num = active;
      c.count_flag = flag;
      c.format = flag == 1 ? F8 : I8;
      expectCase(c);
    }
}

TEST_P(MoeInitRoutingQuant, DropPadCapacity) {
  for (int64_t capacity : {1, 2, 5, 30})
    for (infiniopQuantMode_t quant : {kStatic, kDynamic})
      for (bool before : {false, true}) {
        Case c = sized(8, 2, 13, 4);
        c.mode = 1;
        c.quant = quant;
        c.capacity = capacity;
        c.before_flag = before;
        c.format = capacity % 2 ? I8 : F8;
        expectCase(c);
      }
}

TEST_P(MoeInitRoutingQuant, NanAndInfinityRows) {
  for (infiniDtype_t format : {I8, F8})
    for (infiniopQuantMode_t quant : {kStatic, kDynamic}) {
      Case c = sized(6, 2, 10, 3);
      c.quant = quant;
      c.format = format;
      Tensors t = makeTensors(c);
      fillInputs(c, t);
      t.x.set(0 * c.H + 3, NAN);
      t.x.set(2 * c.H + 1, INFINITY);
      t.x.set(3 * c.H + 0, -INFINITY);
      t.x.set(3 * c.H + 5, INFINITY);
      t.x.set(4 * c.H + 2, 3e38f);  // times a smooth scale > 1: beyond F32, a finite double
      expectCase(c, &t);
    }
}

TEST_P(MoeInitRoutingQuant, Strided) {
  for (int64_t mode : {0, 1}) {
    Case c = sized(10, 2, 17, 4);
    c.mode = mode;
    c.capacity = 3;
    c.strided = true;
    c.format = mode ? F8 : I8;
    expectCase(c);
  }
}

TEST_P(MoeInitRoutingQuant, ThreadedSize) {
  for (int64_t mode : {0, 1}) {
    Case c = sized(256, 4, 300, 16);
    c.mode = mode;
    c.capacity = 70;
    c.format = mode ? F8 : I8;
    c.dtype = BF16;
    expectCase(c);
  }
}

TEST_P(MoeInitRoutingQuant, EmptyShapes) {
  for (auto [R, K, H] : {std::tuple<size_t, size_t, size_t>{0, 2, 8}, {3, 0, 8}, {3, 2, 0}})
    for (int64_t mode : {0, 1})
      for (bool empty_as_null : {false, true}) {  // NULL: no pointer into them may be formed
        Case c;
        c.mode = mode;
        c.capacity = 2;
        c.R = R;
        c.K = K;
        c.H = H;
        c.empty_as_null = empty_as_null;
        expectCase(c);
      }
}

// Out-of-range expert ids: BAD_PARAM at the call, nothing written.
TEST_P(MoeInitRoutingQuant, BadExpertWritesNothing) {
  Case c;
  Tensors t = makeTensors(c);
  fillInputs(c, t);
  setInt(t.expert_idx, 5, static_cast<int64_t>(c.E));
  poisonOutputs(t);
  std::string error;
  ASSERT_EQ(callQuant(handle(), c, t, &error), INFINI_STATUS_BAD_PARAM);
  EXPECT_NE(error.find("MoeInitRoutingQuantV2: expert_idx value 3"), std::string::npos) << error;
  for (TensorBuffer *b : {&t.expanded_x, &t.row_idx, &t.counts, &t.dynamic_scale})
    for (uint8_t byte : b->storage()) ASSERT_EQ(byte, 0xA5);
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeInitRoutingQuant, ::testing::ValuesIn(allDeviceParams()),
                         [](const auto &info) { return deviceParamName(info.param); });

}  // namespace
}  // namespace infiniop_test
