// SPDX-License-Identifier: Apache-2.0
// The same bits on every target and device (issue 27; docs/accuracy.md "The same bits on every
// target and device"). Every operator x variant x dtype (x index width for the MoE operators) is
// one group, one test case: it runs over one hostile input set per operand on the cpu device at
// every Highway target this machine runs (forced, as device_param.h does; best first) and on every
// other built device but the cpu_reference oracle (opencl, skipped with the reason where the
// machine has none), with every output poisoned before each call by a byte of its own (so an
// element a run leaves unwritten differs too), and compares every output's bytes with the first
// run's (cpu at the best target). A difference names the group, the run, the output, how many
// elements differ and the first one: its index, the inputs at it and both values (hex, decimal).
//
// Each group prints a digest, 64-bit FNV-1a over its first run's output bytes (outputs in the
// API's order, elements in row-major order), so that machines that cannot run each other's
// targets (x86 and Arm, or qemu) can still compare:
//   INFINIOP_BIT_DIGESTS=path           writes "group digest" lines of the groups run, replacing
//                                       path at the end of the process (run the executable
//                                       itself, not ctest, which runs one group per process)
//   INFINIOP_BIT_DIGESTS_EXPECTED=path  fails each group whose digest differs from its line there
//                                       or that has none (ctest: tests/bit_identity_digests.txt)
// The process ends with "N of M groups bit-identical across <runs>" and the groups that differ.
//
// The inputs (65,536 elements per operand of the elementwise operators), made with exact or
// correctly rounded operations only, so the same on every machine: normals (Irwin-Hall),
// uniform [-100, 100], near zero, tails out to |x| = 90, values around the activations' clamp and
// cancellation points, and specials (+-0, subnormals, +-inf, NaN, 1e30, FLT_MAX), in 64-element
// blocks that are all finite, mixed, or finite but for one special, so that which lanes share a
// vector with a special value differs with the vector width. ClippedSwiglu adds attribute sets
// from the defaults to extreme (alpha 1e4 or 1e-30, limit 1e-30 or +inf, bias up to FLT_MAX), and
// clamp_mode 1's (ClippedSwigluV2, ClippedSwigluBackwardV2: limits 7, 0.5, 1e-30, 1e30, +inf). The
// MoE operators use T = 37 tokens, H = 1000 (not a multiple of any vector width), K = 3, E = 5,
// C = 20, mostly finite values (a rare special, so that most sums stay finite and show their
// order), duplicate indices, dropped tokens and active_num cuts. The expert-count operators
// (MoeExpertCounts, MoeBiasUpdate) are exact, so cpu_reference joins their runs: strided (and
// negative) views, finished rows (the value E), a count past the cpu device's threading threshold,
// no rows; biases of +-0, NaN payloads, infinities, FLT_MAX, subnormals and values where +-u
// rounds, against counts below, at and above a mean that is an integer or not, sums past 2^53.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "op_specs.h"
#include "tensor_buffer.h"

namespace infiniop_test {

// device_param.cc instantiates the operator tests' DeviceTest, which this executable has none of.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceTest);

namespace {

constexpr size_t kElements = 65536;  // per operand of the elementwise operators
constexpr size_t kRows = 64;         // split operators: 64 rows of 2 x 1024
// MoE: tokens, hidden size, top-k, experts, capacity, and the active_num cut.
constexpr size_t kT = 37, kH = 1000, kK = 3, kE = 5, kC = 20, kActive = 80;

constexpr auto F16 = INFINI_DTYPE_F16;
constexpr auto BF16 = INFINI_DTYPE_BF16;

// ---------------------------------------------------------------- deterministic inputs
uint64_t mix(uint64_t seed, uint64_t i) {  // splitmix64 of (seed, i)
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double unitOf(uint64_t z) {  // [0, 1)
  return static_cast<double>(z >> 11) * 0x1p-53;
}
uint64_t fnv1a(const void *data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull) {
  const auto *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t seedOf(const std::string &name) {
  return fnv1a(name.data(), name.size());
}

// The inputs use exact or correctly rounded operations only (no libm: its last bits differ between
// platforms), so that they, and so the digests, are the same on every machine.
// About a standard normal: the sum of 12 uniforms, minus 6 (Irwin-Hall).
double normalOf(uint64_t seed, size_t i) {
  double s = -6.0;
  for (uint64_t k = 0; k < 12; ++k) s += unitOf(mix(seed ^ (0x6e6f726d00 + k), i));
  return s;
}
// Log-uniform by binary exponent: 2^e (1 + m), e uniform in [lo, hi), m uniform in [0, 1).
double logUniform(uint64_t z, int lo, int hi) {
  const int e = lo + static_cast<int>(z % static_cast<uint64_t>(hi - lo));
  return std::ldexp(1.0 + unitOf(mix(z, 0x6c6f67)), e);
}
double uniform100(double u) {  // [-100, 100), one rounding
  return (u - 0.5) * 200.0;
}
float randomSubnormal(uint64_t z) {
  const uint32_t bits =
      static_cast<uint32_t>(1 + (z >> 8) % 0x7fffff) | ((z & 1) ? 0x80000000u : 0);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Where the activations clamp, saturate, cancel or leave a format's range.
const std::vector<float> &criticalPoints() {
  static const std::vector<float> points = {
      -1.2784645f,                                               // silu'(x) = 0
      -0.7517915f,                                               // gelu_erf'(x) = 0
      -0.7522f,                                                  // near gelu_tanh'(x) = 0
      87.0f,       -87.0f,         87.33655f,      -87.33655f,   // exp's clamp, ln(FLT_MIN)
      88.72284f,   -88.72284f,     103.97208f,     -103.97208f,  // ln(FLT_MAX), the subnormal end
      17.328680f,  -17.328680f,    16.635532f,     -16.635532f,  // sigmoid reaching 1: 2^-25, 2^-24
      -9.3083114f, -9.0f,          -10.0f,         10.0f,       -13.0f,  -13.2f,       -14.0f,
      -19.0f,      -26.0f,         -5.0f,          5.0f,        -3.0f,   3.0f,         7.0f,
      -7.0f,       1.0f,           -1.0f,          0.5f,        -0.5f,   65504.0f,     -65504.0f,
      65520.0f,    6.1035156e-05f, 5.9604645e-08f, 1e-20f,      -1e-20f, 3.3895314e38f};
  return points;
}

const std::vector<float> &specialValues() {
  static const std::vector<float> values = {0.0f,
                                            -0.0f,
                                            std::numeric_limits<float>::denorm_min(),
                                            -std::numeric_limits<float>::denorm_min(),
                                            1e-40f,
                                            -1e-40f,
                                            std::nextafter(FLT_MIN, 0.0f),
                                            -std::nextafter(FLT_MIN, 0.0f),
                                            FLT_MIN,
                                            -FLT_MIN,
                                            INFINITY,
                                            -INFINITY,
                                            NAN,
                                            -NAN,
                                            1e30f,
                                            -1e30f,
                                            FLT_MAX,
                                            -FLT_MAX,
                                            1e4f,
                                            -1e4f,
                                            90.0f,
                                            -90.0f,
                                            1e-30f,
                                            -1e-30f};
  return values;
}

float specialOf(uint64_t z) {
  const auto &s = specialValues();
  const size_t pick = (z >> 16) % (s.size() + 4);  // 4 in s.size() + 4: a random subnormal
  return pick < s.size() ? s[pick] : randomSubnormal(z);
}

// A finite hostile value: normal, uniform [-100, 100], near zero, tails to 90, near a critical
// point (within 64 ulp).
float finiteHostile(uint64_t seed, size_t i) {
  const uint64_t z = mix(seed, i);
  const double c = unitOf(mix(seed ^ 0x63617465, i)), u = unitOf(z);
  const double sign = (z & 1) ? -1.0 : 1.0;
  if (c < 0.30) return static_cast<float>(normalOf(seed, i));
  if (c < 0.55) return static_cast<float>(uniform100(u));
  if (c < 0.67) return static_cast<float>(sign * logUniform(z >> 8, -100, -7));  // 1e-30..1e-2
  if (c < 0.82) {                                                                // 1..90
    const double t = logUniform(z >> 8, 0, 7);
    return static_cast<float>(sign * (t > 90 ? t - 38 : t));
  }
  const auto &p = criticalPoints();
  const float point = p[(z >> 8) % p.size()];
  const int steps = static_cast<int>((z >> 40) % 129) - 64;
  return point * (1.0f + static_cast<float>(steps) * 0x1p-23f);
}

// The elementwise operands: 64-element blocks, finite (kind 0), mixed with 20% specials (1, 3),
// or finite but for one special at a lane that moves from block to block (2).
float hostileValue(uint64_t seed, size_t i) {
  const size_t block = i / 64, lane = i % 64;
  const uint64_t z = mix(seed ^ 0x7370, i);
  switch (block % 4) {
    case 0:
      return finiteHostile(seed, i);
    case 2:
      return lane == (block * 37) % 64 ? specialOf(z) : finiteHostile(seed, i);
    default:
      return unitOf(z) < 0.2 ? specialOf(z) : finiteHostile(seed, i);
  }
}

// The MoE operands: mostly finite (normals, [-100, 100], near zero and subnormal, terms around
// +-1024 that cancel in the sums, up to 1e4), one special in about 8,000 elements.
float moeValue(uint64_t seed, size_t i) {
  const uint64_t z = mix(seed, i);
  if (z % 7919 == 0) return specialOf(mix(seed ^ 0x5350, i));
  const double c = unitOf(mix(seed ^ 0x63617465, i)), u = unitOf(z);
  const double sign = (z & 2) ? -1.0 : 1.0;
  if (c < 0.5) return static_cast<float>(normalOf(seed, i));
  if (c < 0.7) return static_cast<float>(uniform100(u));
  if (c < 0.8) return static_cast<float>(sign * logUniform(z >> 8, -149, -10));  // to subnormal
  if (c < 0.9) return static_cast<float>(sign * (1024.0 + normalOf(seed ^ 0x31, i)));
  return static_cast<float>(sign * logUniform(z >> 8, 0, 14));  // 1..16384
}

// ---------------------------------------------------------------- MoE index data
struct Rng {
  uint64_t state;
  uint64_t below(uint64_t n) { return mix(state++, 0x524e47) % n; }
};

// A permutation of [0, n) with every 9th value replaced by another (duplicates, and rows that no
// index reaches).
std::vector<int64_t> permutationWithDuplicates(size_t n, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
  for (size_t i = 0; i < n; i += 9) v[i] = v[rng.below(n)];
  return v;
}
// Drop/pad values: -1 (a dropped token) one time in 8, else any slot of [0, slots).
std::vector<int64_t> dropPadIndex(size_t n, int64_t slots, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(n);
  for (auto &x : v) x = rng.below(8) == 0 ? -1 : static_cast<int64_t>(rng.below(slots));
  return v;
}
// Expert ids, expert 0 taking 40% (so that it overflows its capacity).
std::vector<int64_t> expertIds(size_t n, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(n);
  for (auto &x : v) x = rng.below(5) < 2 ? 0 : 1 + static_cast<int64_t>(rng.below(kE - 1));
  return v;
}

// ---------------------------------------------------------------- groups
// kCounts: the expert-count operators' integer data, and MoeBiasUpdate's bias written by the
// group's before_run; exact, so cpu_reference joins their runs.
// kMoeFinite: kMoe's values with the rare specials that are not finite in BF16 replaced by 0.5
// (MoeAuxLoss: one NaN would make the whole loss NaN and hide the sums' order).
enum class Data { kHostile, kMoe, kCounts, kMoeFinite };

class Case;
// The inputs at element i of output slot `slot`, as text.
using Describe = std::function<std::string(Case &, size_t slot, size_t i)>;

struct Group {
  std::string name;
  std::string op;           // the OpSpec (op_specs.h)
  std::vector<Slot> slots;  // its tensors in the API's order, with this group's shapes
  Attrs attrs;
  Data data;
  Describe describe;
  bool relaxed = false;  // created in the relaxed mode (infiniopSetHandleFpmathMode)
  std::map<std::string, std::vector<ptrdiff_t>> strides;  // by slot name; else contiguous
  // Writes the in-place operands (MoeBiasUpdate's bias) after the outputs' poison, before each
  // run.
  std::function<void(Case &)> before_run;
};

const char *dtypeName(infiniDtype_t dtype) {
  switch (dtype) {
    case INFINI_DTYPE_F32:
      return "F32";
    case INFINI_DTYPE_F16:
      return "F16";
    case INFINI_DTYPE_BF16:
      return "BF16";
    case INFINI_DTYPE_I32:
      return "I32";
    case INFINI_DTYPE_I64:
      return "I64";
    case INFINI_DTYPE_I8:
      return "I8";
    case INFINI_DTYPE_F8:
      return "F8";
    default:
      return "?";
  }
}

// The operator's slots, all absent until the group gives them a shape.
std::vector<Slot> slotsOf(const std::string &op) {
  std::vector<Slot> slots = spec(op).slots;
  for (Slot &s : slots) {
    s.absent = true;
    s.values.clear();
  }
  return slots;
}
void give(std::vector<Slot> &slots, const char *name, std::vector<size_t> shape,
          infiniDtype_t dtype, std::vector<int64_t> values = {}) {
  for (Slot &s : slots)
    if (std::strcmp(s.name, name) == 0) {
      s.shape = std::move(shape);
      s.dtype = dtype;
      s.values = std::move(values);
      s.absent = false;
      return;
    }
  ADD_FAILURE() << "test bug: no tensor " << name;
}

// One group's tensors: the slots' buffers (NULL where absent), inputs filled.
class Case {
 public:
  explicit Case(const Group &g) : group(g) {
    for (const Slot &s : g.slots) {
      if (s.absent) {
        tensors_.emplace_back();
        continue;
      }
      const auto strides = g.strides.find(s.name);
      tensors_.push_back(std::make_unique<TensorBuffer>(
          s.shape, strides == g.strides.end() ? std::vector<ptrdiff_t>{} : strides->second,
          s.dtype));
      TensorBuffer &t = *tensors_.back();
      if (s.output) continue;
      if (s.dtype == INFINI_DTYPE_I32 || s.dtype == INFINI_DTYPE_I64 ||
          s.dtype == INFINI_DTYPE_BOOL) {
        writeValues(t, s.values);
        continue;
      }
      const uint64_t seed = seedOf(s.name);
      if (g.data == Data::kMoe)
        t.fill([&](size_t i) { return moeValue(seed, i); });
      else if (g.data == Data::kMoeFinite)
        t.fill([&](size_t i) {
          const float v = moeValue(seed, i);
          return std::isfinite(v) && std::fabs(v) < 1e30f ? v : 0.5f;  // finite in BF16 too
        });
      else
        t.fill([&](size_t i) { return hostileValue(seed, i); });
    }
  }
  TensorBuffer *tensor(size_t slot) { return tensors_[slot].get(); }
  TensorBuffer *tensor(const char *name) {
    for (size_t i = 0; i < group.slots.size(); ++i)
      if (std::strcmp(group.slots[i].name, name) == 0) return tensors_[i].get();
    return nullptr;
  }

  const Group &group;

 private:
  std::vector<std::unique_ptr<TensorBuffer>> tensors_;
};

// One element as "0x3f800000 (1)": its bits and its value.
std::string showElement(infiniDtype_t dtype, const uint8_t *p) {
  char text[96];
  uint16_t h;
  uint32_t w;
  int32_t i32;
  int64_t i64v;
  switch (dtype) {
    case INFINI_DTYPE_F16:
    case INFINI_DTYPE_BF16: {
      std::memcpy(&h, p, 2);
      const float f = dtype == F16 ? infiniop::f32FromF16(h) : infiniop::f32FromBf16(h);
      std::snprintf(text, sizeof text, "0x%04x (%.9g)", h, static_cast<double>(f));
      break;
    }
    case INFINI_DTYPE_I32:
      std::memcpy(&i32, p, 4);
      std::snprintf(text, sizeof text, "%" PRId32, i32);
      break;
    case INFINI_DTYPE_I64:
      std::memcpy(&i64v, p, 8);
      std::snprintf(text, sizeof text, "%" PRId64, i64v);
      break;
    case INFINI_DTYPE_I8:  // the quantized outputs: the byte, and INT8's value
    case INFINI_DTYPE_F8:
      std::snprintf(text, sizeof text, "0x%02x (%d)", p[0],
                    static_cast<int>(static_cast<int8_t>(p[0])));
      break;
    default: {
      float f;
      std::memcpy(&w, p, 4);
      std::memcpy(&f, p, 4);
      std::snprintf(text, sizeof text, "0x%08" PRIx32 " (%.9g)", w, static_cast<double>(f));
    }
  }
  return text;
}
std::string showAt(TensorBuffer *t, size_t i) {
  return t ? showElement(t->dtype(), reinterpret_cast<const uint8_t *>(t->at(i))) : "(absent)";
}
int64_t indexAt(TensorBuffer *t, size_t i) {
  if (t->dtype() == INFINI_DTYPE_I64) {
    int64_t v;
    std::memcpy(&v, t->at(i), 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t->at(i), 4);
  return v;
}
// "[r, c]" of flat index i in `shape`.
std::string coordinates(const std::vector<size_t> &shape, size_t i) {
  std::vector<size_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < c.size(); ++d) s += (d ? ", " : "") + std::to_string(c[d]);
  return s + "]";
}
std::string named(Case &c, const char *name, size_t i) {
  TensorBuffer *t = c.tensor(name);
  return std::string(name) + (t ? coordinates(t->shape(), i) : "") + " = " + showAt(t, i);
}

// Same-shape elementwise operators: every input at the same index.
Describe sameIndex() {
  return [](Case &c, size_t, size_t i) {
    std::string s;
    for (size_t k = 0; k < c.group.slots.size(); ++k)
      if (!c.group.slots[k].output)
        s += (s.empty() ? "" : ", ") + named(c, c.group.slots[k].name, i);
    return s;
  };
}
// SwiGlu, GeluMul: y[r, j] from x1 = x[r, j], x2 = x[r, d + j].
Describe splitForward(const char *x, size_t d) {
  return [=](Case &c, size_t, size_t i) {
    const size_t r = i / d, j = i % d;
    return "x1: " + named(c, x, r * 2 * d + j) + ", x2: " + named(c, x, r * 2 * d + d + j);
  };
}
// SwiGluBackward, GeluMulBackward: x_grad[r, c] from x1, x2 and y_grad at column c mod d.
Describe splitBackward(const char *x, const char *y_grad, size_t d) {
  return [=](Case &c, size_t, size_t i) {
    const size_t r = i / (2 * d), j = i % (2 * d) % d;
    return "x1: " + named(c, x, r * 2 * d + j) + ", x2: " + named(c, x, r * 2 * d + d + j) + ", " +
           named(c, y_grad, r * d + j);
  };
}
// ClippedSwiglu(Backward): merged rows of L elements; rows from `computed` on are zero-filled.
Describe clipped(bool backward, size_t L, bool interleaved, size_t computed) {
  return [=](Case &c, size_t, size_t i) {
    const size_t half = L / 2, p = backward ? i / L : i / half;
    const size_t q = backward ? (interleaved ? i % L / 2 : i % L % half) : i % half;
    const size_t a = p * L + (interleaved ? 2 * q : q),
                 b = p * L + (interleaved ? 2 * q + 1 : half + q);
    std::string s =
        "merged row " + std::to_string(p) + ", A: " + named(c, "x", a) + ", B: " + named(c, "x", b);
    if (backward) s += ", " + named(c, "y_grad", p * half + q);
    if (p >= computed) s += " (a row past the group_index sum: zero-filled)";
    return s;
  };
}

std::string groupName(const std::string &op, const std::string &variant, infiniDtype_t dtype,
                      infiniDtype_t index = INFINI_DTYPE_INVALID) {
  std::string s = op + (variant.empty() ? "" : "_" + variant) + "_" + dtypeName(dtype);
  if (index != INFINI_DTYPE_INVALID) s += std::string("_") + dtypeName(index);
  return s;
}

void addElementwise(std::vector<Group> &groups) {
  const size_t n = kElements, d = kElements / kRows;
  for (infiniDtype_t t : kFloatDtypes) {
    for (double approximate : {0.0, 1.0}) {
      const std::string v = approximate != 0 ? "Tanh" : "Erf";
      auto s = slotsOf("Gelu");
      give(s, "output", {n}, t);
      give(s, "input", {n}, t);
      groups.push_back(
          {groupName("Gelu", v, t), "Gelu", s, {approximate}, Data::kHostile, sameIndex()});
      s = slotsOf("GeluBackwardV2");
      for (const char *name : {"grad_input", "input", "grad_output"}) give(s, name, {n}, t);
      groups.push_back({groupName("GeluBackwardV2", v, t),
                        "GeluBackwardV2",
                        s,
                        {approximate},
                        Data::kHostile,
                        sameIndex()});
      s = slotsOf("GeluMul");
      give(s, "out", {kRows, d}, t);
      give(s, "input", {kRows, 2 * d}, t);
      groups.push_back({groupName("GeluMul", v, t),
                        "GeluMul",
                        s,
                        {approximate},
                        Data::kHostile,
                        splitForward("input", d)});
      s = slotsOf("GeluMulBackward");
      give(s, "input_grad", {kRows, 2 * d}, t);
      give(s, "out_grad", {kRows, d}, t);
      give(s, "input", {kRows, 2 * d}, t);
      groups.push_back({groupName("GeluMulBackward", v, t),
                        "GeluMulBackward",
                        s,
                        {approximate},
                        Data::kHostile,
                        splitBackward("input", "out_grad", d)});
    }
    auto s = slotsOf("GeluBackward");
    for (const char *name : {"grad_input", "input", "grad_output"}) give(s, name, {n}, t);
    groups.push_back(
        {groupName("GeluBackward", "", t), "GeluBackward", s, {}, Data::kHostile, sameIndex()});
    s = slotsOf("SwiGlu");
    give(s, "y", {kRows, d}, t);
    give(s, "x", {kRows, 2 * d}, t);
    groups.push_back(
        {groupName("SwiGlu", "", t), "SwiGlu", s, {-1}, Data::kHostile, splitForward("x", d)});
    s = slotsOf("SwiGluBackward");
    give(s, "x_grad", {kRows, 2 * d}, t);
    give(s, "y_grad", {kRows, d}, t);
    give(s, "x", {kRows, 2 * d}, t);
    groups.push_back({groupName("SwiGluBackward", "", t),
                      "SwiGluBackward",
                      s,
                      {-1},
                      Data::kHostile,
                      splitBackward("x", "y_grad", d)});
  }
}

void addClippedSwiglu(std::vector<Group> &groups) {
  struct Variant {
    const char *name;
    bool interleaved, mid_dim;  // mid_dim: x (32, 8, 512) split on dim 1 with a group_index
    double alpha, limit, bias;
    bool clamp_after = false;  // clamp_mode 1 (ClippedSwigluV2: alpha and bias unused)
  };
  const double inf = INFINITY;
  const Variant variants[] = {
      {"Interleaved_Default", true, false, 1.702, 7.0, 1.0},
      {"Halves_Default", false, false, 1.702, 7.0, 1.0},
      {"InterleavedDim1GroupIndex_Default", true, true, 1.702, 7.0, 1.0},
      {"Halves_NoClip", false, false, 1.0, inf, 0.0},
      {"Interleaved_NegativeAlpha", true, false, -1.702, 7.0, -1.0},
      {"Halves_ZeroAlpha", false, false, 0.0, 1e30, 1e-30},
      {"Interleaved_Huge", true, false, 1e4, 1e30, -1e30},
      {"Halves_Tiny", false, false, 1e-30, 1e-30, static_cast<double>(FLT_MAX)},
      {"Interleaved_Default", true, false, 1.702, 7.0, 1.0, true},
      {"InterleavedDim1GroupIndex_Default", true, true, 1.702, 7.0, 1.0, true},
      {"Halves_Limit05", false, false, 1.702, 0.5, 1.0, true},
      {"Halves_NoClip", false, false, 1.0, inf, 0.0, true},
      {"Interleaved_Tiny", true, false, 1.0, 1e-30, 0.0, true},
      {"Halves_Huge", false, false, 1.0, 1e30, 0.0, true},
  };
  for (bool backward : {false, true})
    for (const Variant &v : variants) {
      const std::string op = std::string(backward ? "ClippedSwigluBackward" : "ClippedSwiglu") +
                             (v.clamp_after ? "V2" : "");
      for (infiniDtype_t t : kFloatDtypes) {
        const std::vector<size_t> x = v.mid_dim ? std::vector<size_t>{32, 8, 512}
                                                : std::vector<size_t>{kRows, 2 * kElements / kRows};
        std::vector<size_t> y = x;
        y[1] /= 2;  // dim 1 either way (-1 of the 2-D x)
        const size_t pre = x[0], L = 2 * kElements / pre;
        auto s = slotsOf(op);
        give(s, backward ? "x_grad" : "y", backward ? x : y, t);
        if (backward) give(s, "y_grad", y, t);
        give(s, "x", x, t);
        size_t computed = pre;
        if (v.mid_dim) {
          give(s, "group_index", {3}, INFINI_DTYPE_I64, {7, 0, 14});
          computed = 21;
        }
        groups.push_back({groupName(op, v.name, t),
                          op,
                          s,
                          {v.mid_dim ? 1.0 : -1.0, v.alpha, v.limit, v.bias,
                           v.interleaved ? 1.0 : 0.0, v.clamp_after ? 1.0 : 0.0},
                          Data::kHostile,
                          clipped(backward, L, v.interleaved, computed)});
      }
    }
}

// ---- MoE
// out[r, h] = x1 + x2 + sum_k scales[r, k] (expanded_x[idx(r, k)][h] + bias[expert][h]).
Describe finalizeTerms(bool row_layout) {
  return [=](Case &c, size_t, size_t i) {
    const size_t r = i / kH, h = i % kH;
    TensorBuffer *scales = c.tensor("scales"), *idx = c.tensor("expanded_row_idx");
    TensorBuffer *bias = c.tensor("bias"), *ex = c.tensor("expanded_x");
    const size_t K = scales ? kK : 1, R = kT;
    std::string s;
    if (c.tensor("x1")) s += named(c, "x1", i);
    if (c.tensor("x2")) s += ", " + named(c, "x2", i);
    for (size_t k = 0; k < K; ++k) {
      const size_t p = row_layout ? r * K + k : k * R + r;
      const int64_t d = indexAt(idx, p);
      s += (s.empty() ? "" : "; ") + std::string("k ") + std::to_string(k) + ": idx " +
           std::to_string(d);
      if (scales) s += ", " + named(c, "scales", r * K + k);
      s += ", expanded_x = " + (d < 0 ? std::string("0 (dropped)") : showAt(ex, d * kH + h));
      if (bias) {
        const int64_t e = indexAt(c.tensor("expert_idx"), r * K + k);
        s += ", bias[" + std::to_string(e) + "] = " + showAt(bias, e * kH + h);
      }
    }
    return s;
  };
}

// grad_expanded_x[d, h] = sum over positions with index d of grad_y[r, h] scales[r, k];
// grad_scales[r, k] = an H-long dot product.
Describe finalizeGradTerms(size_t active) {
  return [=](Case &c, size_t slot, size_t i) {
    TensorBuffer *scales = c.tensor("scales"), *idx = c.tensor("expanded_row_idx");
    const size_t K = scales ? kK : 1;
    if (std::strcmp(c.group.slots[slot].name, "grad_scales") == 0) {
      const int64_t d = indexAt(idx, i);
      const bool skipped = d < 0 || static_cast<size_t>(d) >= active;
      std::string row = skipped ? "0 (skipped)" : "expanded_x[" + std::to_string(d) + "]";
      if (c.tensor("bias"))
        row = "(" + row + " + bias[" + std::to_string(indexAt(c.tensor("expert_idx"), i)) + "])";
      return "idx " + std::to_string(d) + ": the dot over H = " + std::to_string(kH) + " of " +
             row + " and grad_y[" + std::to_string(i / K) + "]";
    }
    const size_t d = i / kH, h = i % kH;
    std::string s;
    for (size_t p = 0; p < idx->numel(); ++p) {
      if (indexAt(idx, p) != static_cast<int64_t>(d)) continue;
      s += (s.empty() ? "" : "; ") + std::string("position ") + std::to_string(p) + ": " +
           named(c, "grad_y", p / K * kH + h);
      if (scales) s += ", " + named(c, "scales", p);
    }
    return s.empty() ? "no index reaches this row (zero)" : s;
  };
}

// grad_x[r, h] = sum_k grad_expanded_x[idx[r K + k]][h].
Describe initGradTerms() {
  return [](Case &c, size_t, size_t i) {
    const size_t r = i / kH, h = i % kH;
    TensorBuffer *idx = c.tensor("expanded_row_idx"), *g = c.tensor("grad_expanded_x");
    const size_t rows = g->numel() / kH;
    std::string s;
    for (size_t k = 0; k < kK; ++k) {
      const int64_t d = indexAt(idx, r * kK + k);
      s += (k ? "; " : "") + std::string("k ") + std::to_string(k) + ": idx " + std::to_string(d) +
           ", grad_expanded_x = " +
           (d < 0 || static_cast<size_t>(d) >= rows ? std::string("(skipped)")
                                                    : showAt(g, d * kH + h));
    }
    return s;
  };
}

Describe initTerms() {
  return [](Case &c, size_t slot, size_t i) {
    const Slot &s = c.group.slots[slot];
    if (std::strcmp(s.name, "expanded_x") != 0) return std::string("(an index output)");
    const size_t row = i / kH, h = i % kH;
    return "expanded_x row " + std::to_string(row) + ", column " + std::to_string(h) +
           " (a copy of an x row, or a zero-filled slot)";
  };
}

void addMoe(std::vector<Group> &groups) {
  const size_t RK = kT * kK;
  for (infiniDtype_t idx_t : {INFINI_DTYPE_I32, INFINI_DTYPE_I64})
    for (infiniDtype_t t : kFloatDtypes) {
      const auto name = [&](const char *op, const char *variant) {
        return groupName(op, variant, t, idx_t);
      };
      const auto experts = expertIds(RK, 0xE1);
      // MoeFinalizeRoutingV2: attrs {drop_pad_mode}.
      {
        const char *op = "MoeFinalizeRoutingV2";
        for (bool f32_scales : {false, true}) {
          if (f32_scales && t == INFINI_DTYPE_F32) continue;
          auto s = slotsOf(op);
          give(s, "out", {kT, kH}, t);
          give(s, "expanded_x", {RK, kH}, t);
          give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xF0));
          give(s, "x1", {kT, kH}, t);
          give(s, "x2", {kT, kH}, t);
          give(s, "bias", {kE, kH}, t);
          give(s, "scales", {kT, kK}, f32_scales ? INFINI_DTYPE_F32 : t);
          give(s, "expert_idx", {kT, kK}, idx_t, experts);
          groups.push_back({name(op, f32_scales ? "Mode0_All_F32Scales" : "Mode0_All"),
                            op,
                            s,
                            {0},
                            Data::kMoe,
                            finalizeTerms(false)});
        }
        auto s = slotsOf(op);  // K = 1, nothing optional
        give(s, "out", {kT, kH}, t);
        give(s, "expanded_x", {kT, kH}, t);
        give(s, "expanded_row_idx", {kT}, idx_t, permutationWithDuplicates(kT, 0xF1));
        groups.push_back({name(op, "Mode0_Bare"), op, s, {0}, Data::kMoe, finalizeTerms(false)});
        s = slotsOf(op);  // drop/pad, column layout, everything
        give(s, "out", {kT, kH}, t);
        give(s, "expanded_x", {kE, kC, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, dropPadIndex(RK, kE * kC, 0xF2));
        give(s, "x1", {kT, kH}, t);
        give(s, "x2", {kT, kH}, t);
        give(s, "bias", {kE, kH}, t);
        give(s, "scales", {kT, kK}, t);
        give(s, "expert_idx", {kT, kK}, idx_t, experts);
        groups.push_back({name(op, "Mode1_All"), op, s, {1}, Data::kMoe, finalizeTerms(false)});
        s = slotsOf(op);  // row layout, x1 and scales only
        give(s, "out", {kT, kH}, t);
        give(s, "expanded_x", {RK, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xF3));
        give(s, "x1", {kT, kH}, t);
        give(s, "scales", {kT, kK}, t);
        groups.push_back({name(op, "Mode2_X1Scales"), op, s, {2}, Data::kMoe, finalizeTerms(true)});
        s = slotsOf(op);  // drop/pad, row layout, bias without scales (K = 1)
        give(s, "out", {kT, kH}, t);
        give(s, "expanded_x", {kE, kC, kH}, t);
        give(s, "expanded_row_idx", {kT}, idx_t, dropPadIndex(kT, kE * kC, 0xF4));
        give(s, "bias", {kE, kH}, t);
        give(s, "expert_idx", {kT, 1}, idx_t, expertIds(kT, 0xE2));
        groups.push_back({name(op, "Mode3_Bias"), op, s, {3}, Data::kMoe, finalizeTerms(true)});
      }
      // MoeFinalizeRoutingV2Grad: attrs {drop_pad_mode, active_num, expert_num, capacity}.
      {
        const char *op = "MoeFinalizeRoutingV2Grad";
        for (bool f32_scales : {false, true}) {
          if (f32_scales && t == INFINI_DTYPE_F32) continue;
          const infiniDtype_t st = f32_scales ? INFINI_DTYPE_F32 : t;
          auto s = slotsOf(op);
          give(s, "grad_expanded_x", {RK, kH}, t);
          give(s, "grad_scales", {kT, kK}, st);
          give(s, "grad_y", {kT, kH}, t);
          give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xA0));
          give(s, "expanded_x", {RK, kH}, t);
          give(s, "scales", {kT, kK}, st);
          give(s, "expert_idx", {kT, kK}, idx_t, experts);
          give(s, "bias", {kE, kH}, t);
          groups.push_back({name(op, f32_scales ? "Mode0_All_F32Scales" : "Mode0_All"),
                            op,
                            s,
                            {0, 0, 0, 0},
                            Data::kMoe,
                            finalizeGradTerms(RK)});
        }
        auto s = slotsOf(op);  // active_num cut: indices >= 80 skipped; no bias
        give(s, "grad_expanded_x", {kActive, kH}, t);
        give(s, "grad_scales", {kT, kK}, t);
        give(s, "grad_y", {kT, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xA1));
        give(s, "expanded_x", {kActive, kH}, t);
        give(s, "scales", {kT, kK}, t);
        groups.push_back({name(op, "Mode0_Active"),
                          op,
                          s,
                          {0, static_cast<double>(kActive), 0, 0},
                          Data::kMoe,
                          finalizeGradTerms(kActive)});
        s = slotsOf(op);  // K = 1, nothing optional
        give(s, "grad_expanded_x", {kT, kH}, t);
        give(s, "grad_y", {kT, kH}, t);
        give(s, "expanded_row_idx", {kT}, idx_t, permutationWithDuplicates(kT, 0xA2));
        groups.push_back(
            {name(op, "Mode0_Bare"), op, s, {0, 0, 0, 0}, Data::kMoe, finalizeGradTerms(kT)});
        s = slotsOf(op);  // drop/pad, everything
        give(s, "grad_expanded_x", {kE, kC, kH}, t);
        give(s, "grad_scales", {kT, kK}, t);
        give(s, "grad_y", {kT, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, dropPadIndex(RK, kE * kC, 0xA3));
        give(s, "expanded_x", {kE, kC, kH}, t);
        give(s, "scales", {kT, kK}, t);
        give(s, "expert_idx", {kT, kK}, idx_t, experts);
        give(s, "bias", {kE, kH}, t);
        groups.push_back({name(op, "Mode1_All"),
                          op,
                          s,
                          {1, 0, static_cast<double>(kE), static_cast<double>(kC)},
                          Data::kMoe,
                          finalizeGradTerms(kE * kC)});
      }
      // MoeInitRoutingV2: attrs {active_num, capacity, expert_num, drop_pad_mode, count flag,
      // before-capacity flag}.
      {
        const char *op = "MoeInitRoutingV2";
        auto s = slotsOf(op);
        give(s, "expanded_x", {RK, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t);
        give(s, "expert_tokens_count_or_cumsum", {kE}, idx_t);
        give(s, "x", {kT, kH}, t);
        give(s, "expert_idx", {kT, kK}, idx_t, experts);
        groups.push_back(
            {name(op, "Mode0_Cumsum"), op, s, {0, 0, kE, 0, 1, 0}, Data::kMoe, initTerms()});
        s = slotsOf(op);
        give(s, "expanded_x", {kActive, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t);
        give(s, "expert_tokens_count_or_cumsum", {kE}, idx_t);
        give(s, "x", {kT, kH}, t);
        give(s, "expert_idx", {kT, kK}, idx_t, experts);
        groups.push_back({name(op, "Mode0_Active_Count"),
                          op,
                          s,
                          {static_cast<double>(kActive), 0, kE, 0, 2, 0},
                          Data::kMoe,
                          initTerms()});
        s = slotsOf(op);
        give(s, "expanded_x", {kE, kC, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t);
        give(s, "expert_tokens_before_capacity", {kE}, idx_t);
        give(s, "x", {kT, kH}, t);
        give(s, "expert_idx", {kT, kK}, idx_t, experts);
        groups.push_back(
            {name(op, "Mode1_Capacity"), op, s, {0, kC, kE, 1, 0, 1}, Data::kMoe, initTerms()});
      }
      // MoeInitRoutingV2Grad: attrs {top_k, drop_pad_mode, active_num}.
      {
        const char *op = "MoeInitRoutingV2Grad";
        auto s = slotsOf(op);
        give(s, "grad_x", {kT, kH}, t);
        give(s, "grad_expanded_x", {RK, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xB0));
        groups.push_back({name(op, "Mode0"), op, s, {kK, 0, 0}, Data::kMoe, initGradTerms()});
        s = slotsOf(op);
        give(s, "grad_x", {kT, kH}, t);
        give(s, "grad_expanded_x", {kActive, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, permutationWithDuplicates(RK, 0xB1));
        groups.push_back({name(op, "Mode0_Active"),
                          op,
                          s,
                          {kK, 0, static_cast<double>(kActive)},
                          Data::kMoe,
                          initGradTerms()});
        s = slotsOf(op);
        give(s, "grad_x", {kT, kH}, t);
        give(s, "grad_expanded_x", {kE, kC, kH}, t);
        give(s, "expanded_row_idx", {RK}, idx_t, dropPadIndex(RK, kE * kC, 0xB2));
        groups.push_back({name(op, "Mode1"), op, s, {kK, 1, 0}, Data::kMoe, initGradTerms()});
      }
    }
}

// The router operators: R = kT rows of kRouterE experts (not a multiple of any vector width or
// of the 16 slots), k = 8; finished marks every third row; the grads' expert_idx has duplicates.
constexpr size_t kRouterE = 257, kRouterK = 8;
std::vector<int64_t> routerExperts(size_t rows, size_t E, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(rows * kRouterK);
  for (auto &x : v) x = static_cast<int64_t>(rng.below(E));
  return v;
}
std::vector<int64_t> everyThird(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 3 == 1;
  return v;
}
Describe routerRow(size_t width) {
  return [width](Case &, size_t, size_t i) { return "row " + std::to_string(i / width); };
}

void addRouter(std::vector<Group> &groups) {
  const size_t R = kT, E = kRouterE, K = kRouterK;
  for (infiniDtype_t t : {INFINI_DTYPE_F32, BF16}) {
    const auto idx_t = t == BF16 ? INFINI_DTYPE_I64 : INFINI_DTYPE_I32;
    const auto name = [&](const char *op, const char *variant) {
      return groupName(op, variant, t, idx_t);
    };
    for (int renorm : {0, 1}) {
      const char *op = "MoeGatingTopKSoftmax";
      auto s = slotsOf(op);
      give(s, "y", {R, K}, t);
      give(s, "expert_idx", {R, K}, idx_t);
      give(s, "row_idx", {R, K}, idx_t);
      if (renorm == 0) give(s, "softmax_out", {R, E}, INFINI_DTYPE_F32);
      give(s, "x", {R, E}, t);
      give(s, "finished", {R}, INFINI_DTYPE_BOOL, everyThird(R));
      groups.push_back({name(op, renorm ? "Renorm" : "All"),
                        op,
                        s,
                        {static_cast<double>(K), static_cast<double>(renorm)},
                        Data::kMoe,
                        routerRow(K)});
      op = "MoeGatingTopKSoftmaxGrad";
      s = slotsOf(op);
      give(s, "grad_x", {R, E}, t);
      give(s, "grad_y", {R, K}, t);
      give(s, "x", {R, E}, t);
      give(s, "expert_idx", {R, K}, idx_t, routerExperts(R, E, 0x9A + renorm));
      give(s, "finished", {R}, INFINI_DTYPE_BOOL, everyThird(R));
      groups.push_back({name(op, renorm ? "Renorm" : "Plain"),
                        op,
                        s,
                        {static_cast<double>(renorm)},
                        Data::kMoe,
                        routerRow(E)});
    }
    // DeepSeek-V3: 256 experts in 8 groups, k_group 4, k 8, sigmoid, F32 bias, scale 2.5.
    for (int mode : {0, 1}) {
      const char *op = "MoeGatingTopK";
      auto s = slotsOf(op);
      give(s, "y", {R, K}, t);
      give(s, "expert_idx", {R, K}, idx_t);
      give(s, "norm_out", {R, 256}, INFINI_DTYPE_F32);
      give(s, "x", {R, 256}, t);
      give(s, "bias", {256}, INFINI_DTYPE_F32);
      groups.push_back({name(op, mode ? "DeepSeekMode1" : "DeepSeekMode0"),
                        op,
                        s,
                        {static_cast<double>(K), 4, 8, static_cast<double>(mode), 0, 1, 2.5, 1e-20},
                        Data::kMoe,
                        routerRow(K)});
    }
    {
      const char *op = "MoeGatingTopK";  // softmax scores, no groups, no bias
      auto s = slotsOf(op);
      give(s, "y", {R, K}, t);
      give(s, "expert_idx", {R, K}, idx_t);
      give(s, "x", {R, E}, t);
      groups.push_back({name(op, "Softmax"),
                        op,
                        s,
                        {static_cast<double>(K), 1, 1, 0, 0, 0, 1.0, 0.0},
                        Data::kMoe,
                        routerRow(K)});
    }
    // DeepSeek-V4 (sqrtsoftplus, norm_type 2): ungrouped top-6 of 256, F32 bias, scale 1.5; and
    // Megatron's group score (group_select_mode 2) summing each group's k / k_group = 3 largest
    // (the MoE data: normal, +-100, tiny, +-1024, up to +-16384 and specials: both of the root's
    // tails).
    for (int grouped : {0, 1}) {
      const char *op = "MoeGatingTopK";
      const size_t k = grouped ? 12 : 6;
      auto s = slotsOf(op);
      give(s, "y", {R, k}, t);
      give(s, "expert_idx", {R, k}, idx_t);
      give(s, "norm_out", {R, 256}, INFINI_DTYPE_F32);
      give(s, "x", {R, 256}, t);
      give(s, "bias", {256}, INFINI_DTYPE_F32);
      const Attrs attrs =
          grouped ? Attrs{12, 4, 8, 2, 0, 2, 2.5, 1e-20} : Attrs{6, 1, 1, 0, 0, 2, 1.5, 1e-20};
      groups.push_back({name(op, grouped ? "SqrtSoftplusGroupSum3" : "DeepSeekV4"), op, s, attrs,
                        Data::kMoe, routerRow(k)});
    }
    for (int norm : {0, 1, 2}) {
      const char *op = "MoeGatingTopKGrad";
      auto s = slotsOf(op);
      give(s, "grad_x", {R, E}, t);
      give(s, "grad_y", {R, K}, t);
      give(s, "x", {R, E}, t);
      give(s, "expert_idx", {R, K}, idx_t, routerExperts(R, E, 0xA0 + norm));
      groups.push_back({name(op, norm == 2 ? "SqrtSoftplus"
                                 : norm    ? "Sigmoid"
                                           : "Softmax"),
                        op,
                        s,
                        {static_cast<double>(norm), 0, 2.5, 1e-20},
                        Data::kMoe,
                        routerRow(E)});
    }
    for (int norm : {0, 1}) {  // random indices (duplicates among them)
      const char *op = "MoeGatingWeights";
      auto s = slotsOf(op);
      give(s, "y", {R, K}, t);
      give(s, "x", {R, E}, t);
      give(s, "expert_idx", {R, K}, idx_t, routerExperts(R, E, 0xB0 + norm));
      groups.push_back({name(op, norm ? "Sigmoid" : "Softmax"),
                        op,
                        s,
                        {static_cast<double>(norm), 0, 2.5, 1e-20},
                        Data::kMoe,
                        routerRow(K)});
    }
  }
}

// ---- The expert-count operators: integer counting (MoeExpertCounts) and one exact comparison
// and one F32 addition per expert (MoeBiasUpdate), the same bits everywhere by construction.
// MoeExpertCounts: E = kRouterE experts over expert_idx (R, kRouterK) with every third row
// finished (all E, not counted), expert 0 taking a third of the rest.
std::vector<int64_t> countedExperts(size_t rows, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(rows * kRouterK);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i / kRouterK % 3 == 1 ? static_cast<int64_t>(kRouterE)
           : rng.below(3) == 0   ? 0
                                 : static_cast<int64_t>(rng.below(kRouterE));
  return v;
}
Describe countedValues() {
  return [](Case &c, size_t, size_t e) {
    TensorBuffer *idx = c.tensor("expert_idx");
    size_t n = 0;
    for (size_t i = 0; i < idx->numel(); ++i) n += indexAt(idx, i) == static_cast<int64_t>(e);
    return "expert " + std::to_string(e) + ": " + std::to_string(n) + " of the " +
           std::to_string(idx->numel()) +
           " elements of expert_idx (E = " + std::to_string(kRouterE) + " not counted)";
  };
}

// MoeBiasUpdate: E = 3 n + 2 experts; expert e's bias is the special e / 3 (each met below, at
// and above the mean: counts q - 1, q, q + 1 by e % 3), the last two experts at q; the counts sum
// to E q, plus `extra` on the last expert (S = E q + extra: a mean that is not an integer); with
// q = 0 every count is 0 (every expert at the mean).
const std::vector<uint32_t> &biasBits() {
  static const std::vector<uint32_t> bits = {
      0x00000000, 0x80000000,  // +-0
      0x7fc00000, 0xffc00000,  // NaN, -NaN
      0x7fc12345, 0x7fa00001,  // a quiet NaN's payload; a signalling NaN
      0x7f800000, 0xff800000,  // +-inf
      0x7f7fffff, 0xff7fffff,  // +-FLT_MAX
      0x7149f2ca, 0xf149f2ca,  // +-1e30
      0x00000001, 0x80000001,  // +-denorm_min
      0x00800000, 0x80800000,  // +-FLT_MIN
      0x3f800000, 0xbf800000,  // +-1 (1 + 2^-24 ties to even)
      0x3f800001,              // 1 + 2^-23
      0x501502f9, 0xd01502f9,  // +-1e10 (u below half an ulp)
      0x3a83126f, 0xba83126f,  // +-0.001 (u itself: 0 or 2u)
      0x3a03126f,              // 0.0005
      0x4b800000,              // 2^24
      0x42c80000, 0xc2c80000,  // +-100
      0x3e4ccccd,              // 0.2
  };
  return bits;
}
size_t biasExperts() {
  return 3 * biasBits().size() + 2;
}
std::vector<int64_t> biasCounts(int64_t q, int64_t extra) {
  std::vector<int64_t> v(biasExperts(), q);
  for (size_t e = 0; q > 0 && e + 2 < v.size(); ++e) v[e] = q + static_cast<int64_t>(e % 3) - 1;
  v.back() += extra;
  return v;
}
void writeBias(Case &c) {
  TensorBuffer *bias = c.tensor("bias");
  for (size_t e = 0; e < bias->numel(); ++e) {
    const uint32_t b = e / 3 < biasBits().size() ? biasBits()[e / 3] : 0x40490fdbu + e;  // ~pi
    std::memcpy(bias->at(e), &b, 4);
  }
}
Describe biasValues(std::vector<int64_t> counts) {
  return [counts](Case &, size_t, size_t e) {
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    const uint32_t b = e / 3 < biasBits().size() ? biasBits()[e / 3] : 0x40490fdbu + e;
    return "expert " + std::to_string(e) + ": counts " + std::to_string(counts[e]) + ", S " +
           std::to_string(total) + ", E " + std::to_string(counts.size()) + ", bias before " +
           showElement(INFINI_DTYPE_F32, reinterpret_cast<const uint8_t *>(&b));
  };
}

void addCounts(std::vector<Group> &groups) {
  constexpr auto I32 = INFINI_DTYPE_I32, I64 = INFINI_DTYPE_I64;
  for (infiniDtype_t counts_t : {I32, I64})
    for (infiniDtype_t idx_t : {I32, I64}) {
      const char *op = "MoeExpertCounts";
      const double E = static_cast<double>(kRouterE);
      // (kT, k) with a negative, padded row stride and a column stride of 2; counts stride 3.
      auto s = slotsOf(op);
      give(s, "counts", {kRouterE}, counts_t);
      give(s, "expert_idx", {kT, kRouterK}, idx_t, countedExperts(kT, 0xC0));
      groups.push_back(
          {groupName(op, "Strided", counts_t, idx_t), op, s, {E}, Data::kCounts, countedValues()});
      groups.back().strides = {{"counts", {3}},
                               {"expert_idx", {-static_cast<ptrdiff_t>(2 * kRouterK + 3), 2}}};
      // 4099 x 8 = 32792 elements: the cpu device's threaded histograms (from 2^15 on).
      s = slotsOf(op);
      give(s, "counts", {kRouterE}, counts_t);
      give(s, "expert_idx", {4099, kRouterK}, idx_t, countedExperts(4099, 0xC1));
      groups.push_back(
          {groupName(op, "Threaded", counts_t, idx_t), op, s, {E}, Data::kCounts, countedValues()});
      // counts (4, E) per sequence, row r in counts[r % 4]: 4100 x 8 elements (threaded).
      s = slotsOf(op);
      give(s, "counts", {4, kRouterE}, counts_t);
      give(s, "expert_idx", {4100, kRouterK}, idx_t, countedExperts(4100, 0xC2));
      groups.push_back({groupName(op, "Sequences", counts_t, idx_t),
                        op,
                        s,
                        {E},
                        Data::kCounts,
                        countedValues()});
      // No rows: every count written 0.
      s = slotsOf(op);
      give(s, "counts", {kRouterE}, counts_t);
      give(s, "expert_idx", {0, kRouterK}, idx_t);
      groups.push_back(
          {groupName(op, "NoRows", counts_t, idx_t), op, s, {E}, Data::kCounts, countedValues()});
    }
  struct Variant {
    const char *name;
    int64_t q, extra;
    double rate;
    bool i64_only;
  };
  // (2^63 - 1) / E and its remainder: sums past 2^53, where a double mean would round.
  const int64_t huge_q = INT64_MAX / static_cast<int64_t>(biasExperts());
  const int64_t huge_r = INT64_MAX % static_cast<int64_t>(biasExperts());
  const Variant variants[] = {
      {"Balanced", 7, 0, 0.001, false},
      {"Remainder", 7, 1, 0.001, false},
      {"AllZero", 0, 0, 0.001, false},
      {"RateZero", 7, 0, 0.0, false},
      {"RateNegative", 7, 0, -0.25, false},
      {"RateHalfUlpOfOne", 7, 0, 0x1p-24, false},
      {"RateMax", 7, 0, static_cast<double>(FLT_MAX), false},
      {"HugeBalanced", huge_q, 0, 0.001, true},
      {"HugeRemainder", huge_q, huge_r, 0.001, true},
  };
  for (infiniDtype_t counts_t : {I32, I64})
    for (const Variant &v : variants) {
      if (v.i64_only && counts_t != I64) continue;
      const char *op = "MoeBiasUpdate";
      const size_t E = biasExperts();
      const std::vector<int64_t> counts = biasCounts(v.q, v.extra);
      auto s = slotsOf(op);
      give(s, "bias", {E}, INFINI_DTYPE_F32);
      give(s, "counts", {E}, counts_t, counts);
      groups.push_back({groupName(op, v.name, INFINI_DTYPE_F32, counts_t),
                        op,
                        s,
                        {v.rate},
                        Data::kCounts,
                        biasValues(counts)});
      // I32: bias stride 3, counts stride 2; I64: both reversed.
      if (counts_t == I32)
        groups.back().strides = {{"bias", {3}}, {"counts", {2}}};
      else
        groups.back().strides = {{"bias", {-1}}, {"counts", {-2}}};
      groups.back().before_run = writeBias;
    }
}

// ---- The aux losses (MoeAuxLoss, MoeAuxLossGrad): T = 600 rows (three blocks of 256, the last
// partial) of E = kRouterE logits, finite kMoe values (large, tiny, subnormal), k = 8; the Switch
// loss with tokens_per_expert (E) and a global N = 1000, the sequence-level loss with (4, E);
// softmax, sigmoid and sqrtsoftplus scores; grad_loss 1.5.
std::vector<int64_t> auxCounts(size_t n, uint64_t seed) {
  Rng rng{seed};
  std::vector<int64_t> v(n);
  for (auto &x : v) x = static_cast<int64_t>(rng.below(40));
  return v;
}
void addAuxLoss(std::vector<Group> &groups) {
  constexpr size_t T = 600, E = kRouterE;
  for (infiniDtype_t t : {INFINI_DTYPE_F32, BF16}) {
    const auto count_t = t == BF16 ? INFINI_DTYPE_I64 : INFINI_DTYPE_I32;
    for (int score : {0, 1, 2})
      for (size_t B : {size_t{0}, size_t{4}}) {
        static const char *const kScores[] = {"Softmax", "Sigmoid", "Sqrtsoftplus"};
        const std::string variant = std::string(B ? "Sequence" : "Switch") + kScores[score];
        const std::vector<size_t> counts_shape =
            B ? std::vector<size_t>{B, E} : std::vector<size_t>{E};
        const Attrs attrs = {static_cast<double>(score), 8, B ? 600.0 : 1000.0, 0.01};
        const char *op = "MoeAuxLoss";
        auto s = slotsOf(op);
        give(s, "loss", {}, INFINI_DTYPE_F32);
        give(s, "x", {T, E}, t);
        give(s, "tokens_per_expert", counts_shape, count_t, auxCounts((B ? B : 1) * E, 0xA0 + B));
        groups.push_back({groupName(op, variant.c_str(), t, count_t), op, s, attrs,
                          Data::kMoeFinite, routerRow(1)});
        op = "MoeAuxLossGrad";
        s = slotsOf(op);
        give(s, "grad_x", {T, E}, t);
        give(s, "grad_loss", {}, INFINI_DTYPE_F32);
        give(s, "x", {T, E}, t);
        give(s, "tokens_per_expert", counts_shape, count_t, auxCounts((B ? B : 1) * E, 0xA0 + B));
        groups.push_back({groupName(op, variant.c_str(), t, count_t), op, s, attrs,
                          Data::kMoeFinite, routerRow(E)});
        groups.back().before_run = [](Case &c) { c.tensor("grad_loss")->set(0, 1.5f); };
      }
  }
}

// The relaxed mode's F32 groups: a copy of each elementwise F32 group (docs/accuracy.md, "The
// relaxed mode"), with "_Relaxed" appended to its name. Its bits are the same on every target and
// device too, though not the strict groups'.
void addRelaxed(std::vector<Group> &groups) {
  const size_t strict = groups.size();
  for (size_t i = 0; i < strict; ++i)
    if (groups[i].data == Data::kHostile && groups[i].slots.front().dtype == INFINI_DTYPE_F32) {
      Group g = groups[i];
      g.name += "_Relaxed";
      g.relaxed = true;
      groups.push_back(g);
    }
}

// ---- The router z-loss (MoeZLoss, MoeZLossGrad): the forward on finite logits (the MoE data
// with its specials and 1e30s replaced, so that the loss shows the order of its sums, not a NaN
// or an overflow), over
// kT rows (one block) and over 1100 rows (five blocks of 256, the last partial: the cpu device's
// threads take whole blocks), x strided in one; the grad on the MoE data as it is (a special
// makes its row NaN, every other row keeps its bits).
void finiteX(Case &c) {
  TensorBuffer *x = c.tensor("x");
  for (size_t i = 0; i < x->numel(); ++i)
    if (!(std::fabs(x->get(i)) <= 1e5f)) x->set(i, static_cast<float>(i % 17) - 8.0f);
}

void addZLoss(std::vector<Group> &groups) {
  const size_t E = kRouterE;
  for (infiniDtype_t t : {INFINI_DTYPE_F32, BF16}) {
    const char *op = "MoeZLoss";
    for (size_t rows : {kT, size_t{1100}}) {
      auto s = slotsOf(op);
      give(s, "loss", {}, INFINI_DTYPE_F32);
      give(s, "x", {rows, rows == kT ? E : 64}, t);
      groups.push_back({groupName(op, rows == kT ? "Rows" : "Blocks", t),
                        op,
                        s,
                        {1e-3},
                        Data::kMoe,
                        routerRow(1)});
      groups.back().before_run = finiteX;
    }
    {
      auto s = slotsOf(op);
      give(s, "loss", {}, INFINI_DTYPE_F32);
      give(s, "x", {kT, E}, t);
      groups.push_back({groupName(op, "Transposed", t), op, s, {-0.25}, Data::kMoe, routerRow(1)});
      groups.back().strides = {{"x", {1, static_cast<ptrdiff_t>(kT)}}};
      groups.back().before_run = finiteX;
    }
    op = "MoeZLossGrad";
    auto s = slotsOf(op);
    give(s, "grad_x", {kT, E}, t);
    give(s, "grad_loss", {}, INFINI_DTYPE_F32);
    give(s, "x", {kT, E}, t);
    groups.push_back({groupName(op, "Rows", t), op, s, {1e-3}, Data::kMoe, routerRow(E)});
  }
}

// ---- MoeExpertCapacity: comparisons and copies only, the same slots everywhere by construction
// (a total order: rank key descending, slot ascending). expert_idx as MoeExpertCounts' (every
// third row E, expert 0 a third of the rest, so it overflows C = 2 and the others mostly fit),
// hostile weights (NaN, +-0, infinities, subnormals, ties), weights_out their bits or +0.
void addCapacity(std::vector<Group> &groups) {
  constexpr auto I32 = INFINI_DTYPE_I32, I64 = INFINI_DTYPE_I64;
  const char *op = "MoeExpertCapacity";
  const double E = static_cast<double>(kRouterE);
  struct Variant {
    const char *name;
    size_t rows;
    double policy;
    infiniDtype_t weights, index;
    bool strided;
  };
  const Variant variants[] = {
      {"Position", kT, 0, F32, I32, true},
      {"Probability", kT, 1, F32, I64, true},
      {"Probability", kT, 1, F16, I32, false},
      {"Probability", kT, 1, BF16, I64, false},
      // 4099 x 8 slots: the cpu device's threaded buckets.
      {"ProbabilityThreaded", 4099, 1, BF16, I32, false},
  };
  for (const Variant &v : variants) {
    auto s = slotsOf(op);
    give(s, "kept_idx", {v.rows, kRouterK}, v.index);
    give(s, "weights_out", {v.rows, kRouterK}, v.weights);
    give(s, "expert_idx", {v.rows, kRouterK}, v.index, countedExperts(v.rows, 0xD0));
    give(s, "weights", {v.rows, kRouterK}, v.weights);
    groups.push_back({groupName(op, v.name, v.weights, v.index),
                      op,
                      s,
                      {E, 2, v.policy},
                      Data::kCounts,
                      countedValues()});
    if (v.strided)  // a negative, padded row stride and a column stride of 2
      groups.back().strides = {{"expert_idx", {-static_cast<ptrdiff_t>(2 * kRouterK + 3), 2}},
                               {"weights", {1, static_cast<ptrdiff_t>(kT)}}};
  }
}

// ---- SwiGluQuant, GeluMulQuant: exact (docs/swiglu_quant.md: the byte and the scale of the real
// values), so cpu_reference joins their runs. x (64, 2 x 1024) hostile (NaN, +-inf, +-0,
// subnormals, 1e30, FLT_MAX, tails to |x| = 90) in every x dtype; INT8 and FP8; dynamic F32
// per token and per 128 columns, UE8M0 per 128, static per 128 (scales written after each run's
// poison: 0, -0, negative, tiny, huge, +inf, NaN among them), smooth scales (H) and (E, H) with
// group_index counts 10, 0, 30, 15 (rows 55 to 63 past their sum: bytes 0, scale 0).
float staticScale(size_t i) {
  const float values[] = {0.01f,     0.0f,     -0.25f, 1e-30f, 1e30f,           -0.0f, 3.0f,
                          0x1p-149f, INFINITY, NAN,    -7.5f,  0x1.fffffep127f, 0.5f,  1.0f / 448};
  return values[(i * 7 + i / 13) % (sizeof values / sizeof values[0])];
}
void writeStaticScale(Case &c) {
  c.tensor("scale")->fill(staticScale);
}
Describe quantized(size_t d, size_t group) {
  return [=](Case &c, size_t slot, size_t i) {
    if (slot != 0) {  // scale: its row and group
      return "scale of row " + std::to_string(i / (d / group)) + ", columns from " +
             std::to_string(i % (d / group) * group);
    }
    const size_t r = i / d, j = i % d;
    return "x1: " + named(c, "x", r * 2 * d + j) + ", x2: " + named(c, "x", r * 2 * d + d + j);
  };
}
// A GatedQuant operator's slots: y (kRows, d), scale (kRows, G), x (kRows, 2d), and smooth
// scales (d), or (E, d) with group_index counts 10, 0, 30, 15 (E = 4).
std::vector<Slot> gatedQuantSlots(const char *op, size_t d, size_t G, infiniDtype_t y,
                                  infiniDtype_t x, bool smooth, bool counts) {
  auto s = slotsOf(op);
  give(s, "y", {kRows, d}, y);
  give(s, "scale", {kRows, G}, INFINI_DTYPE_F32);
  give(s, "x", {kRows, 2 * d}, x);
  if (counts) {
    give(s, "smooth_scales", {4, d}, INFINI_DTYPE_F32);
    give(s, "group_index", {4}, INFINI_DTYPE_I64, {10, 0, 30, 15});
  } else if (smooth) {
    give(s, "smooth_scales", {d}, INFINI_DTYPE_F32);
  }
  return s;
}

void addGatedQuant(std::vector<Group> &groups) {
  constexpr auto I8 = INFINI_DTYPE_I8, F8 = INFINI_DTYPE_F8;
  const size_t d = kElements / kRows;
  struct Variant {
    const char *name;
    infiniDtype_t y;
    double left, mode, group_size, format;
    bool smooth, counts;
  };
  const Variant variants[] = {
      {"Int8Token", I8, 1, 1, 0, 0, false, false},
      {"Fp8Group128Ue8m0", F8, 0, 1, 128, 1, false, false},
      {"Int8Group128Smooth", I8, 1, 1, 128, 0, true, false},
      {"Fp8Static128", F8, 1, 0, 128, 0, false, false},
      {"Fp8Group128SmoothCounts", F8, 0, 1, 128, 0, true, true},
  };
  for (const char *op : {"SwiGluQuant", "GeluMulQuant"})
    for (double approximate : {0.0, 1.0}) {
      const bool gelu = std::string(op) == "GeluMulQuant";
      if (!gelu && approximate != 0) continue;
      for (infiniDtype_t t : kFloatDtypes)
        for (const Variant &v : variants) {
          const size_t G = v.group_size > 0 ? d / static_cast<size_t>(v.group_size) : 1;
          const auto s = gatedQuantSlots(op, d, G, v.y, t, v.smooth, v.counts);
          Attrs attrs = {v.left, v.mode, v.group_size, v.format};
          if (gelu) attrs.insert(attrs.begin(), approximate);
          const std::string variant =
              gelu ? std::string(approximate != 0 ? "Tanh_" : "Erf_") + v.name : v.name;
          groups.push_back(
              {groupName(op, variant, t), op, s, attrs, Data::kHostile,
               quantized(d, v.group_size > 0 ? static_cast<size_t>(v.group_size) : d)});
          if (v.mode == 0) groups.back().before_run = writeStaticScale;
        }
    }
}

// ClippedSwigluQuant, exact as the two above, on the same hostile x (per group: a per-token row
// holds a NaN, so its bytes would all be NaN's): the vendor's attributes
// (alpha 1.702, limit 7, bias 1) interleaved and halved, and limit +inf (nothing clipped).
void addClippedSwigluQuant(std::vector<Group> &groups) {
  constexpr auto I8 = INFINI_DTYPE_I8, F8 = INFINI_DTYPE_F8;
  const char *op = "ClippedSwigluQuant";
  const size_t d = kElements / kRows;
  struct Variant {
    const char *name;
    infiniDtype_t y;
    double limit, interleaved, mode, group_size, format;
    bool counts;
  };
  const Variant variants[] = {
      {"Int8Group128Interleaved", I8, 7, 1, 1, 128, 0, false},
      {"Fp8Group128Ue8m0Halves", F8, 7, 0, 1, 128, 1, false},
      {"Fp8Static128Interleaved", F8, 7, 1, 0, 128, 0, false},
      {"Int8Group128SmoothCountsNoLimit", I8, INFINITY, 1, 1, 128, 0, true},
  };
  for (infiniDtype_t t : kFloatDtypes)
    for (const Variant &v : variants) {
      const size_t G = v.group_size > 0 ? d / static_cast<size_t>(v.group_size) : 1;
      const auto s = gatedQuantSlots(op, d, G, v.y, t, v.counts, v.counts);
      const Attrs attrs = {1.702, v.limit, 1.0, v.interleaved, v.mode, v.group_size, v.format};
      groups.push_back({groupName(op, v.name, t), op, s, attrs, Data::kHostile,
                        quantized(d, v.group_size > 0 ? static_cast<size_t>(v.group_size) : d)});
      if (v.mode == 0) groups.back().before_run = writeStaticScale;
    }
}

// ---- DequantSwigluQuant: exact (docs/dequant_swiglu_quant.md), so cpu_reference joins its runs.
// x (64, 2 x 1024) INT32 accumulators: 0, +-1, +-(2^31 - 1), INT32_MIN and signed values of every
// magnitude; the float scales, biases and smooth scales MoE-like (mostly finite, a rare special);
// INT8 and FP8, dynamic per token and per 128, UE8M0, static per 128 (the hostile static
// scales); no bias, F32, BF16, F16 (per expert) and INT32 biases; weight_scale, bias and smooth
// scales per expert with group_index counts 10, 0, 30, 15 (rows 55 to 63 past their sum).
std::vector<int64_t> accumulators(uint64_t seed, size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t z = mix(seed, i);
    switch (z % 8) {
      case 0:
        v[i] = (z >> 8) % 2 ? 2147483647 : -2147483647 - 1;
        break;
      case 1:
        v[i] = static_cast<int64_t>((z >> 8) % 3) - 1;
        break;
      default: {  // a signed value of 2^0 .. 2^31 bits
        const int bits = static_cast<int>((z >> 8) % 32);
        const auto magnitude = static_cast<int64_t>((z >> 16) & ((uint64_t{1} << bits) - 1));
        v[i] = (z >> 60) % 2 ? -magnitude : magnitude;
      }
    }
  }
  return v;
}
void addDequantSwigluQuant(std::vector<Group> &groups) {
  constexpr auto I8 = INFINI_DTYPE_I8, F8 = INFINI_DTYPE_F8, F32 = INFINI_DTYPE_F32,
                 I32 = INFINI_DTYPE_I32, NONE = INFINI_DTYPE_INVALID;
  const size_t d = kElements / kRows, E = 4;
  const char *op = "DequantSwigluQuant";
  struct Variant {
    const char *name;
    infiniDtype_t y, bias;
    double left, mode, group_size, format;
    bool smooth, experts;
  };
  const Variant variants[] = {
      {"Int8Token", I8, NONE, 1, 1, 0, 0, false, false},
      {"Fp8Group128Ue8m0BiasF32", F8, F32, 0, 1, 128, 1, false, false},
      {"Int8Group128BiasI32Smooth", I8, I32, 1, 1, 128, 0, true, false},
      {"Fp8Static128BiasBF16", F8, INFINI_DTYPE_BF16, 1, 0, 128, 0, false, false},
      {"Int8Group128PerExpertBiasF16", I8, INFINI_DTYPE_F16, 0, 1, 128, 0, true, true},
      {"Fp8TokenPerExpertBiasI32", F8, I32, 1, 1, 0, 0, true, true},
  };
  for (const Variant &v : variants) {
    const size_t G = v.group_size > 0 ? d / static_cast<size_t>(v.group_size) : 1;
    const size_t rows = v.experts ? E : 1;
    auto s = slotsOf(op);
    give(s, "y", {kRows, d}, v.y);
    give(s, "scale", {kRows, G}, F32);
    give(s, "x", {kRows, 2 * d}, I32, accumulators(0x78, kRows * 2 * d));
    give(s, "weight_scale", v.experts ? std::vector<size_t>{E, 2 * d} : std::vector<size_t>{2 * d},
         F32);
    give(s, "activation_scale", {kRows, 1}, F32);
    if (v.bias != NONE) {
      std::vector<size_t> shape =
          v.experts ? std::vector<size_t>{E, 2 * d} : std::vector<size_t>{2 * d};
      give(s, "bias", shape, v.bias,
           v.bias == I32 ? accumulators(0x62, rows * 2 * d) : std::vector<int64_t>{});
    }
    if (v.smooth)
      give(s, "smooth_scales", v.experts ? std::vector<size_t>{E, d} : std::vector<size_t>{d}, F32);
    if (v.experts) give(s, "group_index", {E}, INFINI_DTYPE_I64, {10, 0, 30, 15});
    groups.push_back({groupName(op, v.name, I32),
                      op,
                      s,
                      {v.left, v.mode, v.group_size, v.format},
                      Data::kMoe,
                      quantized(d, v.group_size > 0 ? static_cast<size_t>(v.group_size) : d)});
    if (v.mode == 0) groups.back().before_run = writeStaticScale;
  }
}

// ---- MoeInitRoutingQuantV2: exact (docs/moe_init_routing_quant.md: each byte and dynamic scale
// of the real values of an expanded row), so cpu_reference joins their runs. MoeInitRoutingV2's
// routing (kT tokens, kK experts each of kE, capacity kC, active_num kActive) over MoE-like x in
// every x dtype; dynamic with (E, H), (1, H) and no smooth scales, static (scale and offset from
// the same data), INT8 and FP8, both modes; one hostile group (NaN, inf rows: NaN scales).
void addInitRoutingQuant(std::vector<Group> &groups) {
  constexpr auto I8 = INFINI_DTYPE_I8, F8 = INFINI_DTYPE_F8, F32 = INFINI_DTYPE_F32;
  const char *op = "MoeInitRoutingQuantV2";
  const size_t RK = kT * kK;
  const auto experts = expertIds(RK, 0xE1);
  struct Variant {
    const char *name;
    infiniDtype_t y, idx;
    double mode, drop_pad;
    size_t smooth_rows;  // dynamic: 0, 1 or kE
    Data data;
  };
  const Variant variants[] = {
      {"Dynamic_Int8_SmoothEH_Cumsum", I8, INFINI_DTYPE_I32, 1, 0, kE, Data::kMoe},
      {"Dynamic_Fp8_Smooth1H_Active", F8, INFINI_DTYPE_I64, 1, 0, 1, Data::kMoe},
      {"Dynamic_Int8_NoSmooth_Capacity", I8, INFINI_DTYPE_I32, 1, 1, 0, Data::kMoe},
      {"Dynamic_Fp8_SmoothEH_Capacity_Hostile", F8, INFINI_DTYPE_I64, 1, 1, kE, Data::kHostile},
      {"Static_Int8_Count", I8, INFINI_DTYPE_I64, 0, 0, 0, Data::kMoe},
      {"Static_Fp8_Capacity", F8, INFINI_DTYPE_I32, 0, 1, 0, Data::kMoe},
  };
  for (infiniDtype_t t : kFloatDtypes)
    for (const Variant &v : variants) {
      const bool drop_pad = v.drop_pad != 0, dynamic = v.mode != 0;
      const bool active = !drop_pad && v.smooth_rows == 1;
      std::vector<size_t> rows =
          drop_pad ? std::vector<size_t>{kE, kC} : std::vector<size_t>{active ? kActive : RK};
      std::vector<size_t> expanded = rows;
      expanded.push_back(kH);
      auto s = slotsOf(op);
      give(s, "expanded_x", expanded, v.y);
      give(s, "expanded_row_idx", {RK}, v.idx);
      if (drop_pad)
        give(s, "expert_tokens_before_capacity", {kE}, v.idx);
      else
        give(s, "expert_tokens_count_or_cumsum", {kE}, v.idx);
      if (dynamic) give(s, "dynamic_quant_scale", rows, F32);
      give(s, "x", {kT, kH}, t);
      give(s, "expert_idx", {kT, kK}, v.idx, experts);
      if (!dynamic) {
        give(s, "scale", {1}, F32);
        give(s, "offset", {1}, F32);
      } else if (v.smooth_rows > 0) {
        give(s, "scale", {v.smooth_rows, kH}, F32);
      }
      const double count_flag = drop_pad ? 0 : active ? 1 : 2;
      groups.push_back({groupName(op, v.name, t, v.idx),
                        op,
                        s,
                        {active ? static_cast<double>(kActive) : 0, drop_pad ? kC : 0, kE,
                         v.drop_pad, count_flag, drop_pad ? 1.0 : 0.0, v.mode},
                        v.data,
                        initTerms()});
    }
}

const std::vector<Group> &groups() {
  static const std::vector<Group> all = [] {
    std::vector<Group> g;
    addElementwise(g);
    addClippedSwiglu(g);
    addMoe(g);
    addRouter(g);
    addCounts(g);
    addCapacity(g);
    addGatedQuant(g);
    addDequantSwigluQuant(g);
    addAuxLoss(g);
    addZLoss(g);
    addRelaxed(g);
    addClippedSwigluQuant(g);
    addInitRoutingQuant(g);
    return g;
  }();
  return all;
}

// The groups whose outputs are correctly rounded (docs/accuracy.md, "Correctly rounded 16-bit
// results"): the F16/BF16 outputs of every elementwise operator, forward and backward. Every
// device, cpu_reference included, rounds them from the exact value, so cpu_reference joins their
// runs.
// The expert-count groups are exact (integer counts; one comparison and one F32 addition per
// expert), so cpu_reference joins their runs too.
bool correctlyRounded(const Group &g) {
  if (g.data == Data::kCounts) return true;
  if (g.op == "SwiGluQuant" || g.op == "GeluMulQuant" || g.op == "ClippedSwigluQuant" ||
      g.op == "DequantSwigluQuant" || g.op == "MoeInitRoutingQuantV2")
    return true;  // exact bytes and scales
  const bool half = g.slots.front().dtype != INFINI_DTYPE_F32;
  return half && g.data == Data::kHostile;
}

// ---------------------------------------------------------------- runs
// The runs of every group: the cpu device at each Highway target (best first), then every other
// built device but the cpu_reference oracle, which only the correctly rounded groups run (last).
// Under INFINIOP_CPU_ISA, the capped target only.
std::vector<DeviceParam> runParams(bool with_reference) {
  std::vector<DeviceParam> params;
  for (DeviceParam p : allDeviceParams())
    if (with_reference || deviceOf(p) != INFINI_DEVICE_CPU_REFERENCE) params.push_back(p);
  std::stable_partition(params.begin(), params.end(), isCpu);
  return params;
}

struct RunResult {
  std::string device;
  bool ok = false;
  std::string error;
  std::vector<std::vector<uint8_t>> outputs;  // per slot: the output's bytes in row-major order
  double seconds = 0;
};

std::vector<uint8_t> logicalBytes(TensorBuffer &t) {
  const size_t size = t.elementSize();
  std::vector<uint8_t> bytes(t.numel() * size);
  for (size_t i = 0; i < t.numel(); ++i) std::memcpy(&bytes[i * size], t.at(i), size);
  return bytes;
}

// One call on `handle`, every output first filled with the byte `poison`.
RunResult runOnce(Case &c, infiniopHandle_t handle, uint8_t poison) {
  const Group &g = c.group;
  const OpSpec &op = spec(g.op);
  RunResult run;
  const size_t n = g.slots.size();
  for (size_t k = 0; k < n; ++k)
    if (g.slots[k].output && c.tensor(k))
      std::memset(c.tensor(k)->storageBytes(), poison, c.tensor(k)->storage().size());
  if (g.before_run) g.before_run(c);
  Descs descs(n, nullptr);
  for (size_t k = 0; k < n; ++k)
    if (c.tensor(k)) descs[k] = c.tensor(k)->descriptor();
  void *desc = nullptr;
  EXPECT_EQ(infiniopSetHandleFpmathMode(
                handle, g.relaxed ? INFINIOP_FPMATH_RELAXED : INFINIOP_FPMATH_STRICT),
            INFINI_STATUS_SUCCESS);
  const infiniStatus_t created = op.create(handle, &desc, descs, g.attrs);
  const std::string create_error = infiniopGetLastError();
  for (auto d : descs)
    if (d) infiniopDestroyTensorDescriptor(d);
  if (created != INFINI_STATUS_SUCCESS) {
    run.error = std::string("create: ") + infiniStatusString(created) + ": " + create_error;
    return run;
  }
  size_t workspace_size = 0;
  EXPECT_EQ(op.workspace(desc, &workspace_size), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
  {
    DeviceMirror device(handle);
    for (size_t k = 0; k < n; ++k) {
      TensorBuffer *t = c.tensor(k);
      if (!t) continue;
      if (g.slots[k].output)
        device.add(*t);
      else
        device.addInput(t->storageBytes(), t->storage().size());
    }
    void *workspace = device.scratch(workspace_size);
    Ptrs ptrs(n, nullptr);
    for (size_t k = 0; k < n; ++k) ptrs[k] = device(c.tensor(k));
    const auto start = std::chrono::steady_clock::now();
    const infiniStatus_t status = op.calculate(desc, workspace, workspace_size, ptrs, nullptr);
    const std::string error = infiniopGetLastError();
    device.download();  // waits for the call
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != INFINI_STATUS_SUCCESS)
      run.error = std::string("calculate: ") + infiniStatusString(status) + ": " + error;
  }
  EXPECT_EQ(op.destroy(desc), INFINI_STATUS_SUCCESS);
  if (!run.error.empty()) return run;
  run.outputs.resize(n);
  for (size_t k = 0; k < n; ++k)
    if (g.slots[k].output && c.tensor(k)) run.outputs[k] = logicalBytes(*c.tensor(k));
  run.ok = true;
  return run;
}

uint64_t digestOf(const RunResult &run) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto &bytes : run.outputs) h = fnv1a(bytes.data(), bytes.size(), h);
  return h;
}
std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, v);
  return text;
}

// ---------------------------------------------------------------- the whole process's results
struct Outcome {
  std::string group;
  bool identical;
  std::string digest;
  std::vector<std::string> differing;  // the runs that differ from the first (or failed)
};
struct Results {
  std::mutex mutex;
  std::vector<Outcome> outcomes;
  std::vector<std::string> devices;            // every run made, in order
  std::map<std::string, std::string> skipped;  // device -> why
  std::map<std::string, double> seconds;       // per device, summed over the groups
};
Results &results() {
  static Results r;
  return r;
}

// "group digest" lines of INFINIOP_BIT_DIGESTS_EXPECTED.
const std::map<std::string, std::string> &expectedDigests() {
  static const std::map<std::string, std::string> expected = [] {
    std::map<std::string, std::string> m;
    const char *path = std::getenv("INFINIOP_BIT_DIGESTS_EXPECTED");
    if (!path || !*path) return m;
    std::ifstream in(path);
    if (!in) ADD_FAILURE() << "INFINIOP_BIT_DIGESTS_EXPECTED: cannot read " << path;
    std::string group, digest;
    while (in >> group >> digest) m[group] = digest;
    return m;
  }();
  return expected;
}

class BitIdentity : public ::testing::TestWithParam<size_t> {};

TEST_P(BitIdentity, SameBytes) {
  const Group &g = groups()[GetParam()];
  Case c(g);
  std::vector<DeviceParam> params = runParams(correctlyRounded(g));
  std::stable_partition(params.begin(), params.end(),
                        [](DeviceParam p) { return deviceOf(p) != INFINI_DEVICE_CPU_REFERENCE; });
  std::vector<RunResult> runs;
  uint8_t poison = 0xA5;
  for (DeviceParam p : params) {
    const infiniDevice_t device = deviceOf(p);
    const std::string name = deviceParamName(p);
    poison = static_cast<uint8_t>(poison + 0x3B);  // a different byte for every run
    struct Restore {
      ~Restore() {
#if INFINIOP_TEST_FORCES_TARGETS
        hwy::SetSupportedTargetsForTest(0);
#endif
      }
    } restore;
#if INFINIOP_TEST_FORCES_TARGETS
    if (p > 0) {
      hwy::SetSupportedTargetsForTest(p);
      if (std::string(infiniopCpuIsaName()) != hwy::TargetName(p)) {
        ADD_FAILURE() << "target forcing did not reach the library: " << infiniopCpuIsaName()
                      << " for " << name;
        continue;
      }
    }
#endif
    std::unique_ptr<Handle> owned;
    infiniopHandle_t handle = nullptr;
    if (!deviceInfo(device).host_memory) {
      std::string why;
      bool skip = false;
      handle = sharedHandle(device, &why, &skip);
      if (!handle) {
        if (!skip) ADD_FAILURE() << why;
        std::lock_guard<std::mutex> lock(results().mutex);
        results().skipped[name] = why;
        continue;
      }
    } else {
      owned = std::make_unique<Handle>(device);
      handle = owned->get();
      if (!handle) continue;
    }
    runs.push_back(runOnce(c, handle, poison));
    runs.back().device = name;
  }
  ASSERT_FALSE(runs.empty()) << "no device ran";

  Outcome outcome{g.name, true, "error", {}};
  const RunResult &first = runs.front();
  if (!first.ok) {
    ADD_FAILURE() << g.name << " on " << first.device << ": " << first.error;
    outcome.identical = false;
  } else {
    outcome.digest = hex64(digestOf(first));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    const RunResult &run = runs[r];
    if (!run.ok) {
      ADD_FAILURE() << g.name << " on " << run.device << ": " << run.error;
      outcome.identical = false;
      outcome.differing.push_back(run.device + " (failed)");
      continue;
    }
    if (!first.ok) continue;
    bool same = true;
    for (size_t k = 0; k < g.slots.size(); ++k) {
      const std::vector<uint8_t> &a = first.outputs[k], &b = run.outputs[k];
      if (a == b) continue;
      same = false;
      const infiniDtype_t dtype = g.slots[k].dtype;
      const size_t size = infiniop::dtypeSize(dtype), count = a.size() / size;
      size_t differ = 0, at = count;
      for (size_t i = 0; i < count; ++i)
        if (std::memcmp(&a[i * size], &b[i * size], size) != 0) {
          ++differ;
          if (at == count) at = i;
        }
      ADD_FAILURE() << g.name << ": " << run.device << " differs from " << first.device << " in "
                    << g.slots[k].name << ": " << differ << " of " << count
                    << " elements; the first is element " << at << " "
                    << coordinates(g.slots[k].shape, at) << "\n  inputs: " << g.describe(c, k, at)
                    << "\n  " << first.device << ": " << showElement(dtype, &a[at * size]) << "\n  "
                    << run.device << ": " << showElement(dtype, &b[at * size]) << "\n  digest "
                    << hex64(digestOf(run)) << " (" << first.device << ": " << outcome.digest
                    << ")";
    }
    if (!same) {
      outcome.identical = false;
      outcome.differing.push_back(run.device);
    }
  }
  std::printf("[  DIGEST  ] %s %s\n", g.name.c_str(), outcome.digest.c_str());
  const auto &expected = expectedDigests();
  const auto found = expected.find(g.name);
  if (!expected.empty() && found == expected.end()) {
    ADD_FAILURE() << g.name << ": no digest in INFINIOP_BIT_DIGESTS_EXPECTED ("
                  << std::getenv("INFINIOP_BIT_DIGESTS_EXPECTED")
                  << "): a new group; regenerate the file (docs/accuracy.md)";
    outcome.identical = false;
    outcome.differing.push_back("INFINIOP_BIT_DIGESTS_EXPECTED");
  } else if (found != expected.end() && found->second != outcome.digest) {
    ADD_FAILURE() << g.name << ": digest " << outcome.digest << " here, " << found->second
                  << " in INFINIOP_BIT_DIGESTS_EXPECTED ("
                  << std::getenv("INFINIOP_BIT_DIGESTS_EXPECTED") << ")";
    outcome.identical = false;
    outcome.differing.push_back("INFINIOP_BIT_DIGESTS_EXPECTED");
  }

  std::lock_guard<std::mutex> lock(results().mutex);
  Results &all = results();
  for (const RunResult &run : runs) {
    if (std::find(all.devices.begin(), all.devices.end(), run.device) == all.devices.end())
      all.devices.push_back(run.device);
    all.seconds[run.device] += run.seconds;
  }
  all.outcomes.push_back(outcome);
}

INSTANTIATE_TEST_SUITE_P(Group, BitIdentity, ::testing::Range<size_t>(0, groups().size()),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                           return groups()[info.param].name;
                         });

// The summary after the last group, and the digest file.
class Summary : public ::testing::Environment {
 public:
  void TearDown() override {
    Results &all = results();
    std::lock_guard<std::mutex> lock(all.mutex);
    if (all.outcomes.empty()) return;
    size_t identical = 0;
    for (const Outcome &o : all.outcomes) identical += o.identical;
    std::string devices, times;
    for (const std::string &d : all.devices) {
      devices += (devices.empty() ? "" : ", ") + d;
      char t[64];
      std::snprintf(t, sizeof t, "%s%s %.3f s", times.empty() ? "" : ", ", d.c_str(),
                    all.seconds[d]);
      times += t;
    }
    for (const auto &s : all.skipped)
      std::printf("[bit-identity] %s skipped: %s\n", s.first.c_str(), s.second.c_str());
    for (const Outcome &o : all.outcomes) {
      if (o.identical) continue;
      std::string runs;
      for (const std::string &d : o.differing) runs += (runs.empty() ? "" : ", ") + d;
      std::printf("[bit-identity] differs: %s (%s)\n", o.group.c_str(), runs.c_str());
    }
    std::printf("[bit-identity] calls' time per run, all groups: %s\n", times.c_str());
    std::printf("[bit-identity] %zu of %zu groups bit-identical across %s\n", identical,
                all.outcomes.size(), devices.c_str());
    std::fflush(stdout);
    const char *path = std::getenv("INFINIOP_BIT_DIGESTS");
    if (path && *path) {
      std::ofstream out(path, std::ios::trunc);
      for (const Outcome &o : all.outcomes) out << o.group << ' ' << o.digest << '\n';
      if (!out) ADD_FAILURE() << "INFINIOP_BIT_DIGESTS: cannot write " << path;
    }
    all.outcomes.clear();  // --gtest_repeat: each round its own summary
  }
};

[[maybe_unused]] ::testing::Environment *const summary =
    ::testing::AddGlobalTestEnvironment(new Summary);

}  // namespace
}  // namespace infiniop_test
