#include "ops.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace bench {
namespace {

// ---------------------------------------------------------------- storage helpers
float decode(infiniDtype_t t, const void *p) {
  uint16_t h;
  uint32_t u;
  float f;
  switch (t) {
    case INFINI_DTYPE_F16: {
      std::memcpy(&h, p, 2);
      const uint32_t sign = uint32_t{h & 0x8000u} << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
      float mag = e == 0x1f ? INFINITY
                  : e == 0  ? m * 0x1p-24f
                            : std::ldexp(1.0f + m / 1024.0f, int(e) - 15);
      if (e == 0x1f && m) mag = NAN;
      std::memcpy(&u, &mag, 4);
      u |= sign;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case INFINI_DTYPE_BF16:
      std::memcpy(&h, p, 2);
      u = uint32_t{h} << 16;
      std::memcpy(&f, &u, 4);
      return f;
    default:
      std::memcpy(&f, p, 4);
      return f;
  }
}

// Truncation is fine for bench inputs: they only need to be representable values.
void encode(infiniDtype_t t, void *p, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (t == INFINI_DTYPE_F32) {
    std::memcpy(p, &v, 4);
  } else if (t == INFINI_DTYPE_BF16) {
    const uint16_t h = static_cast<uint16_t>(u >> 16);
    std::memcpy(p, &h, 2);
  } else {  // |v| <= 10 here: normal F16 range or zero
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
    const int e = int((u >> 23) & 0xff) - 127;
    uint16_t h = sign;
    if (e >= -14) h |= static_cast<uint16_t>(((e + 15) << 10) | ((u >> 13) & 0x3ff));
    std::memcpy(p, &h, 2);
  }
}

size_t sizeOf(infiniDtype_t t) {
  return t == INFINI_DTYPE_F32 ? 4 : 2;
}

double ulpAt(infiniDtype_t t, double v) {
  const int mantissa = t == INFINI_DTYPE_F16 ? 10 : t == INFINI_DTYPE_BF16 ? 7 : 23;
  const int min_exp = t == INFINI_DTYPE_F16 ? -14 : -126;
  const int e = v == 0 ? min_exp : std::max(std::ilogb(v), min_exp);
  return std::ldexp(1.0, e - mantissa);
}

struct Buffer {
  std::vector<size_t> shape;
  size_t count = 0;
  std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
};

Buffer makeBuffer(std::vector<size_t> shape, infiniDtype_t t) {
  Buffer b;
  b.count = 1;
  for (size_t s : shape) b.count *= s;
  b.shape = std::move(shape);
  const size_t bytes = (b.count * sizeOf(t) + 63) / 64 * 64;
  b.data.reset(static_cast<char *>(std::aligned_alloc(64, bytes ? bytes : 64)));
  return b;
}

infiniopTensorDescriptor_t describe(const std::vector<size_t> &shape, infiniDtype_t t) {
  infiniopTensorDescriptor_t d = nullptr;
  infiniopCreateTensorDescriptor(&d, shape.size(), shape.data(), nullptr, t);
  return d;
}

// ---------------------------------------------------------------- one operator, any device
// Creates the operator for the given tensor shapes and returns its calculate call, or sets error.
using Calculate = std::function<infiniStatus_t(void *const *outs, const void *const *ins)>;
using Factory = std::function<Calculate(
    infiniopHandle_t, const std::vector<infiniopTensorDescriptor_t> &outs,
    const std::vector<infiniopTensorDescriptor_t> &ins, std::string *error)>;

struct Signature {
  int outputs_full, inputs_full;  // bitmasks: which tensors have the doubled last dim
  int num_outputs, num_inputs;
  Factory factory;
};

std::vector<size_t> fullShape(std::vector<size_t> s) {
  s.back() *= 2;
  return s;
}

class ElementwiseCase : public Case {
 public:
  ElementwiseCase(const Signature &sig, infiniDevice_t device, infiniDtype_t dtype,
                  std::vector<size_t> shape)
      : sig_(sig), device_(device), dtype_(dtype), shape_(std::move(shape)) {}
  ~ElementwiseCase() override {
    if (handle_) infiniopDestroyHandle(handle_);
  }

  bool init(std::string *error) {
    if (infiniopCreateHandle(&handle_, device_, 0) != INFINI_STATUS_SUCCESS) {
      *error = infiniopGetLastError();
      return false;
    }
    for (int k = 0; k < sig_.num_outputs; ++k)
      outs_.push_back(makeBuffer(sig_.outputs_full >> k & 1 ? fullShape(shape_) : shape_, dtype_));
    for (int k = 0; k < sig_.num_inputs; ++k)
      ins_.push_back(makeBuffer(sig_.inputs_full >> k & 1 ? fullShape(shape_) : shape_, dtype_));
    // Signed inputs over [-10, 10] from a fixed-seed generator, written in parallel.
    for (size_t k = 0; k < ins_.size(); ++k) {
      Buffer &b = ins_[k];
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < static_cast<long long>(b.count); ++i) {
        uint64_t z =
            (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 29;
        encode(dtype_, b.data.get() + i * sizeOf(dtype_),
               static_cast<float>((static_cast<double>(z >> 11) * 0x1p-53 * 2 - 1) * 10));
      }
    }
    for (Buffer &b : outs_) {
      elements += b.count;
      std::memset(b.data.get(), 0, b.count * sizeOf(dtype_));
    }
    for (const Buffer &b : ins_) bytes += b.count * sizeOf(dtype_);
    for (const Buffer &b : outs_) bytes += b.count * sizeOf(dtype_);
    calculate_ = build(handle_, shape_, error);
    return static_cast<bool>(calculate_);
  }

  infiniStatus_t run() override {
    std::vector<void *> o;
    std::vector<const void *> i;
    for (Buffer &b : outs_) o.push_back(b.data.get());
    for (Buffer &b : ins_) i.push_back(b.data.get());
    return calculate_(o.data(), i.data());
  }

  CheckResult checkAgainstReference() override {
    // The first rows of every (row-major) tensor are a prefix of its buffer.
    std::vector<size_t> prefix = shape_;
    size_t inner = 1;
    for (size_t d = 1; d < prefix.size(); ++d) inner *= prefix[d];
    prefix[0] =
        std::max<size_t>(1, std::min(prefix[0], (size_t{1} << 20) / std::max<size_t>(inner, 1)));
    infiniopHandle_t ref = nullptr;
    infiniopCreateHandle(&ref, INFINI_DEVICE_CPU_REFERENCE, 0);
    std::string error;
    const Calculate calc = build(ref, prefix, &error);
    std::vector<Buffer> expected;
    std::vector<void *> o;
    std::vector<const void *> i;
    for (int k = 0; k < sig_.num_outputs; ++k) {
      expected.push_back(
          makeBuffer(sig_.outputs_full >> k & 1 ? fullShape(prefix) : prefix, dtype_));
      o.push_back(expected.back().data.get());
    }
    for (Buffer &b : ins_) i.push_back(b.data.get());
    CheckResult result{false, 0.0, "FAIL"};
    if (calc && calc(o.data(), i.data()) == INFINI_STATUS_SUCCESS) {
      result = {true, 0.0, "PASS"};
      // Errors are measured in ulps of the largest reference magnitude of each output (a
      // norm-wise error, as benchdnn does): tails and the cancellation at derivatives' zeros
      // are judged by their absolute error, which is what matters to a training step.
      for (size_t k = 0; k < outs_.size(); ++k) {
        double largest = 0;
        for (size_t e = 0; e < expected[k].count; ++e) {
          const double want = decode(dtype_, expected[k].data.get() + e * sizeOf(dtype_));
          if (std::isfinite(want)) largest = std::max(largest, std::fabs(want));
        }
        const double unit = ulpAt(dtype_, largest);
        for (size_t e = 0; e < expected[k].count; ++e) {
          const size_t at = e * sizeOf(dtype_);
          const double want = decode(dtype_, expected[k].data.get() + at);
          const double got = decode(dtype_, outs_[k].data.get() + at);
          if (std::isnan(want) != std::isnan(got)) result.max_ulp = INFINITY;
          if (std::isnan(want) || want == got) continue;
          result.max_ulp = std::max(result.max_ulp, std::fabs(got - want) / unit);
        }
      }
      // F32 keeps the kernels' few-ulp error; F16/BF16 round both to within an output ulp.
      const double limit = dtype_ == INFINI_DTYPE_F32 ? 16.0 : 1.0;
      if (!(result.max_ulp <= limit)) result = {false, result.max_ulp, "FAIL"};
    }
    infiniopDestroyHandle(ref);
    return result;
  }

 private:
  Calculate build(infiniopHandle_t handle, const std::vector<size_t> &shape, std::string *error) {
    std::vector<infiniopTensorDescriptor_t> od, id;
    for (int k = 0; k < sig_.num_outputs; ++k)
      od.push_back(describe(sig_.outputs_full >> k & 1 ? fullShape(shape) : shape, dtype_));
    for (int k = 0; k < sig_.num_inputs; ++k)
      id.push_back(describe(sig_.inputs_full >> k & 1 ? fullShape(shape) : shape, dtype_));
    Calculate c = sig_.factory(handle, od, id, error);
    for (auto d : od) infiniopDestroyTensorDescriptor(d);
    for (auto d : id) infiniopDestroyTensorDescriptor(d);
    return c;
  }

  Signature sig_;
  infiniDevice_t device_;
  infiniDtype_t dtype_;
  std::vector<size_t> shape_;
  infiniopHandle_t handle_ = nullptr;
  std::vector<Buffer> outs_, ins_;
  Calculate calculate_;
};

// Wraps a created descriptor: the calculate call owns it through a shared pointer.
template <class Desc, class Destroy, class Run>
Calculate own(infiniStatus_t created, Desc desc, Destroy destroy, Run run, std::string *error) {
  if (created != INFINI_STATUS_SUCCESS) {
    *error = std::string(infiniStatusString(created)) + ": " + infiniopGetLastError();
    return nullptr;
  }
  std::shared_ptr<std::remove_pointer_t<Desc>> owner(desc, destroy);
  return [owner, run](void *const *o, const void *const *i) { return run(owner.get(), o, i); };
}

std::unique_ptr<Case> makeCase(const Signature &sig, infiniDevice_t device, infiniDtype_t dtype,
                               const std::vector<size_t> &shape, std::string *error) {
  auto c = std::make_unique<ElementwiseCase>(sig, device, dtype, shape);
  if (!c->init(error)) return nullptr;
  return c;
}

OpInfo elementwise(const char *name, Signature sig) {
  return {name,
          {4096, 4096},
          [sig](infiniDevice_t d, infiniDtype_t t, const std::vector<size_t> &s, std::string *e) {
            return makeCase(sig, d, t, s, e);
          }};
}

template <infiniopGeluApproximate_t kApproximate>
Signature geluMul() {
  return {0, 1, 1, 1, [](infiniopHandle_t h, const auto &o, const auto &i, std::string *e) {
            infiniopGeluMulDescriptor_t d = nullptr;
            const infiniStatus_t created =
                infiniopCreateGeluMulDescriptor(h, &d, o[0], i[0], kApproximate);
            return own(
                created, d, infiniopDestroyGeluMulDescriptor,
                [](infiniopGeluMulDescriptor_t d, void *const *o, const void *const *i) {
                  return infiniopGeluMul(d, nullptr, 0, o[0], i[0], nullptr);
                },
                e);
          }};
}

template <infiniopGeluApproximate_t kApproximate>
Signature geluMulBackward() {
  return {1, 2, 1, 2, [](infiniopHandle_t h, const auto &o, const auto &i, std::string *e) {
            infiniopGeluMulBackwardDescriptor_t d = nullptr;
            const infiniStatus_t created =
                infiniopCreateGeluMulBackwardDescriptor(h, &d, o[0], i[0], i[1], kApproximate);
            return own(
                created, d, infiniopDestroyGeluMulBackwardDescriptor,
                [](infiniopGeluMulBackwardDescriptor_t d, void *const *o, const void *const *i) {
                  return infiniopGeluMulBackward(d, nullptr, 0, o[0], i[0], i[1], nullptr);
                },
                e);
          }};
}

}  // namespace

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> ops = {
      elementwise("gelu_backward",
                  {0, 0, 1, 2,
                   [](infiniopHandle_t h, const auto &o, const auto &i, std::string *e) {
                     infiniopGeluBackwardDescriptor_t d = nullptr;
                     const infiniStatus_t created =
                         infiniopCreateGeluBackwardDescriptor(h, &d, o[0], i[0], i[1]);
                     return own(
                         created, d, infiniopDestroyGeluBackwardDescriptor,
                         [](infiniopGeluBackwardDescriptor_t d, void *const *o,
                            const void *const *i) {
                           return infiniopGeluBackward(d, nullptr, 0, o[0], i[0], i[1], nullptr);
                         },
                         e);
                   }}),
      elementwise("swiglu", {0, 1, 1, 1,
                             [](infiniopHandle_t h, const auto &o, const auto &i, std::string *e) {
                               infiniopSwiGluDescriptor_t d = nullptr;
                               const infiniStatus_t created =
                                   infiniopCreateSwiGluDescriptor(h, &d, o[0], i[0], -1);
                               return own(
                                   created, d, infiniopDestroySwiGluDescriptor,
                                   [](infiniopSwiGluDescriptor_t d, void *const *o,
                                      const void *const *i) {
                                     return infiniopSwiGlu(d, nullptr, 0, o[0], i[0], nullptr);
                                   },
                                   e);
                             }}),
      elementwise("swiglu_backward",
                  {1, 2, 1, 2,
                   [](infiniopHandle_t h, const auto &o, const auto &i, std::string *e) {
                     infiniopSwiGluBackwardDescriptor_t d = nullptr;
                     const infiniStatus_t created =
                         infiniopCreateSwiGluBackwardDescriptor(h, &d, o[0], i[0], i[1], -1);
                     return own(
                         created, d, infiniopDestroySwiGluBackwardDescriptor,
                         [](infiniopSwiGluBackwardDescriptor_t d, void *const *o,
                            const void *const *i) {
                           return infiniopSwiGluBackward(d, nullptr, 0, o[0], i[0], i[1], nullptr);
                         },
                         e);
                   }}),
      elementwise("gelu_mul", geluMul<INFINIOP_GELU_APPROXIMATE_NONE>()),
      elementwise("gelu_mul_tanh", geluMul<INFINIOP_GELU_APPROXIMATE_TANH>()),
      elementwise("gelu_mul_backward", geluMulBackward<INFINIOP_GELU_APPROXIMATE_NONE>()),
      elementwise("gelu_mul_backward_tanh", geluMulBackward<INFINIOP_GELU_APPROXIMATE_TANH>()),
  };
  return ops;
}

const OpInfo *findOp(const std::string &name) {
  for (const OpInfo &op : allOps())
    if (name == op.name) return &op;
  return nullptr;
}

}  // namespace bench
