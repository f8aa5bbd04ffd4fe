// SPDX-License-Identifier: Apache-2.0
#include "case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include "numeric.h"

namespace bench {
namespace {

std::string failure(infiniStatus_t status) {
  return std::string(infiniStatusString(status)) + ": " + infiniopGetLastError();
}

size_t product(const std::vector<size_t> &shape) {
  size_t n = 1;
  for (size_t s : shape) n *= s;
  return n;
}

// Element i of input tensor k: uniform over [-bound, bound), the same for any thread count.
float inputValue(size_t k, size_t i, float bound) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (k + 1) * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) * 0x1p-24f * 2.0f - 1.0f) * bound;
}

// expanded_row_idx: a fixed shuffle of [0, n) (tokens land on distinct rows in expert order);
// expert_idx: pseudo-random experts in [0, kMoeExperts), the routers' grads' in [0, experts);
// DequantSwigluQuant's accumulators.
void fillIndex(Extent e, int32_t *p, size_t n, size_t experts) {
  std::mt19937 random(12345);
  if (e == Extent::kAccumulators) {  // signed, up to 2^20 (an INT8 GEMM's partial sums)
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(random() % (1u << 21)) - (1 << 20);
    return;
  }
  if (e == Extent::kRowIndex) {
    std::iota(p, p + n, 0);
    std::shuffle(p, p + n, random);
    return;
  }
  const size_t range = e == Extent::kGateExperts ? experts : kMoeExperts;
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(random() % range);
}

// Puts each of the `rows` rows of a router's (y, expert_idx) = (y, g) in the expert order of w
// where the row selects the same experts in another order (see Case::check). k experts a row,
// y's elements of `size` bytes.
void alignRouterRows(char *y, size_t size, int32_t *g, const int32_t *w, size_t k, size_t rows) {
  std::vector<char> row_y(k * size);
  std::vector<int32_t> order(k);
  for (size_t r = 0; r < rows; ++r) {
    int32_t *gr = g + r * k;
    const int32_t *wr = w + r * k;
    if (std::equal(gr, gr + k, wr) || !std::is_permutation(gr, gr + k, wr)) continue;
    char *yr = y + r * k * size;
    std::vector<char> taken(k, 0);
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < k; ++j)
        if (!taken[j] && gr[j] == wr[i]) {
          taken[j] = 1;
          order[i] = static_cast<int32_t>(j);
          break;
        }
    for (size_t i = 0; i < k; ++i) std::memcpy(row_y.data() + i * size, yr + order[i] * size, size);
    std::memcpy(yr, row_y.data(), row_y.size());
    std::copy(wr, wr + k, gr);
  }
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

}  // namespace

std::string shapeText(const std::vector<size_t> &shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

Case::Case(const OpInfo &op, infiniDtype_t dtype, std::vector<size_t> shape)
    : op_(op), dtype_(dtype), shape_(std::move(shape)) {}

Case::~Case() {
  bound_ = Bound{};  // the descriptor goes before its handle
  if (!handle_) return;
  for (std::vector<Tensor> *tensors : {&outs_, &ins_})
    for (Tensor &t : *tensors) infiniopFree(handle_, t.device);
  infiniopFree(handle_, workspace_.device);
  infiniopDestroyHandle(handle_);
}

std::vector<size_t> Case::shapeOf(Extent e, std::vector<size_t> base) {
  if (e == Extent::kSame) return base;
  if (e == Extent::kDoubleLast || e == Extent::kAccumulators) {
    base.back() *= 2;
    return base;
  }
  if (e == Extent::kInt8 || e == Extent::kFp8) return base;
  if (e == Extent::kChannelScales) return {2 * base.back()};
  if (e == Extent::kGroupScales || e == Extent::kTokenScales) {
    base.back() = e == Extent::kTokenScales ? 1 : quantGroups(base.back());
    return base;
  }
  // R x K x H, or R x H with K = 4 (the routers: R x K x E).
  const size_t R = base.front(), H = base.back(), K = moeTopk(base);
  switch (e) {
    case Extent::kGateLogits:
      return {R, H};
    case Extent::kGateTopk:
    case Extent::kGateIndex:
    case Extent::kGateRowIndex:
    case Extent::kGateExperts:
      return {R, K};
    case Extent::kGateBias:
    case Extent::kGateCounts:
      return {H};
    case Extent::kLoss:
      return {};
    case Extent::kTokens:
      return {R, H};
    case Extent::kExpanded:
    case Extent::kExpandedInt8:
      return {R * K, H};
    case Extent::kExpandedScales:
      return {R * K};
    case Extent::kTopk:
    case Extent::kExpertIndex:
      return {R, K};
    case Extent::kBias:
    case Extent::kExpertScales:
      return {kMoeExperts, H};
    case Extent::kExpertCounts:
      return {kMoeExperts};
    default:  // kRowIndex
      return {R * K};
  }
}

Case::Tensor Case::allocate(Extent e, std::vector<size_t> shape) const {
  Tensor t;
  t.count = product(shape);
  t.shape = std::move(shape);
  t.element_size = isIndex(e) ? sizeof(int32_t) : dtypeSize(dtypeOf(e));
  const size_t bytes = (t.count * t.element_size + 63) / 64 * 64;
  t.data = {static_cast<char *>(std::aligned_alloc(64, std::max<size_t>(bytes, 64))), std::free};
  return t;
}

infiniStatus_t Case::bindOn(infiniopHandle_t handle, const std::vector<size_t> &base,
                            Bound *bound) {
  Descs outs, ins;
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  const auto describe = [&](const std::vector<Extent> &extents, Descs *descs) {
    for (Extent e : extents) {
      const std::vector<size_t> shape = shapeOf(e, base);
      infiniopTensorDescriptor_t d = nullptr;
      const infiniStatus_t s =
          infiniopCreateTensorDescriptor(&d, shape.size(), shape.data(), nullptr, dtypeOf(e));
      if (s != INFINI_STATUS_SUCCESS && status == INFINI_STATUS_SUCCESS) status = s;
      descs->push_back(d);
    }
  };
  describe(op_.outputs, &outs);
  describe(op_.inputs, &ins);
  if (status == INFINI_STATUS_SUCCESS) status = op_.bind(handle, outs, ins, base, bound);
  for (auto d : outs)
    if (d) infiniopDestroyTensorDescriptor(d);
  for (auto d : ins)
    if (d) infiniopDestroyTensorDescriptor(d);
  return status;
}

std::unique_ptr<Case> Case::create(const OpInfo &op, infiniDevice_t device, infiniDtype_t dtype,
                                   const std::vector<size_t> &shape, infiniopFpmathMode_t fpmath,
                                   std::string *error, float input_bound) {
  std::unique_ptr<Case> c(new Case(op, dtype, shape));
  c->own_memory_ = !isHostMemory(device);
  infiniStatus_t status = infiniopCreateHandle(&c->handle_, device, 0);
  if (status == INFINI_STATUS_SUCCESS) status = infiniopSetHandleFpmathMode(c->handle_, fpmath);
  if (status == INFINI_STATUS_SUCCESS) {
    const auto start = std::chrono::steady_clock::now();
    status = c->bindOn(c->handle_, shape, &c->bound_);
    c->create_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (status != INFINI_STATUS_SUCCESS) {
    *error = failure(status);
    return nullptr;
  }
  for (Extent e : op.outputs) c->outs_.push_back(c->allocate(e, c->shapeOf(e, shape)));
  for (Extent e : op.inputs) c->ins_.push_back(c->allocate(e, c->shapeOf(e, shape)));
  // First touch in parallel, statically split like the kernels, so pages sit near their threads.
  for (size_t k = 0; k < c->ins_.size(); ++k) {
    Tensor &t = c->ins_[k];
    if (isIndex(op.inputs[k])) {
      fillIndex(op.inputs[k], reinterpret_cast<int32_t *>(t.data.get()), t.count, shape.back());
      continue;
    }
    const size_t size = t.element_size;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < static_cast<long long>(t.count); ++i)
      encode(c->dtypeOf(op.inputs[k]), t.data.get() + i * size, inputValue(k, i, input_bound));
  }
  for (Tensor &t : c->outs_) {
    const size_t size = t.element_size;
#pragma omp parallel for schedule(static)
    for (long long i = 0; i < static_cast<long long>(t.count); ++i)
      std::memset(t.data.get() + i * size, 0, size);
  }
  c->workspace_.count = c->bound_.workspace_size;
  c->workspace_.element_size = 1;
  c->workspace_.data = {static_cast<char *>(std::aligned_alloc(
                            64, std::max<size_t>((c->bound_.workspace_size + 63) / 64 * 64, 64))),
                        std::free};
  if (c->own_memory_) status = c->upload();
  if (status != INFINI_STATUS_SUCCESS) {
    *error = "upload: " + failure(status);
    return nullptr;
  }
  return c;
}

infiniStatus_t Case::upload() {
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  for (std::vector<Tensor> *tensors : {&outs_, &ins_}) {
    for (Tensor &t : *tensors) {
      if (status == INFINI_STATUS_SUCCESS) status = infiniopMalloc(handle_, &t.device, t.bytes());
      if (status == INFINI_STATUS_SUCCESS)
        status = infiniopMemcpyHostToDevice(handle_, t.device, t.data.get(), t.bytes(), nullptr);
    }
  }
  if (status != INFINI_STATUS_SUCCESS) return status;
  return infiniopMalloc(handle_, &workspace_.device, workspace_.bytes());
}

infiniStatus_t Case::download() {
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  for (Tensor &t : outs_)
    if (status == INFINI_STATUS_SUCCESS)
      status = infiniopMemcpyDeviceToHost(handle_, t.data.get(), t.device, t.bytes(), nullptr);
  return status;
}

infiniStatus_t Case::run() {
  std::vector<void *> o;
  std::vector<const void *> i;
  for (Tensor &t : outs_) o.push_back(pointer(t));
  for (Tensor &t : ins_) i.push_back(pointer(t));
  const infiniStatus_t status =
      bound_.calculate(pointer(workspace_), bound_.workspace_size, o.data(), i.data());
  if (status != INFINI_STATUS_SUCCESS || !own_memory_) return status;
  return infiniopStreamSynchronize(handle_, nullptr);
}

size_t Case::elements() const {
  size_t n = 0;
  for (const Tensor &t : outs_) n += t.count;
  return n;
}

size_t Case::bytes() const {
  size_t n = 0;
  for (const Tensor &t : outs_) n += t.count * t.element_size;
  for (const Tensor &t : ins_) n += t.count * t.element_size;
  return n;
}

size_t Case::elementsOf(const OpInfo &op, const std::vector<size_t> &shape) {
  size_t n = 0;
  for (Extent e : op.outputs) n += product(shapeOf(e, shape));
  return n;
}

size_t Case::bytesOf(const OpInfo &op, infiniDtype_t dtype, const std::vector<size_t> &shape) {
  size_t n = 0;
  for (const std::vector<Extent> *extents : {&op.outputs, &op.inputs})
    for (Extent e : *extents) n += product(shapeOf(e, shape)) * dtypeSize(extentDtype(e, dtype));
  return n;
}

CheckResult Case::check(size_t budget) {
  CheckResult r;
  if (own_memory_) {
    if (const infiniStatus_t s = download(); s != INFINI_STATUS_SUCCESS) {
      r.error = "download: " + failure(s);
      return r;
    }
  }
  // Sampling unit: one element, or one row of the last dim where an operator splits it.
  bool split = false;
  for (Extent e : op_.outputs) split = split || e == Extent::kDoubleLast;
  for (Extent e : op_.inputs) split = split || e == Extent::kDoubleLast;
  // Row-indexed operators are checked whole: a sample of rows would break their indices.
  const bool whole = op_.gathers();
  const size_t n = whole ? 1 : product(shape_), width = split ? shape_.back() : 1, rows = n / width;
  size_t k = std::max<size_t>(1, (n + budget - 1) / std::max<size_t>(budget, 1));
  if (k > 1) k |= 1;
  const size_t m = (rows + k - 1) / k;
  if (m == rows) k = 1;
  r.stride = k;
  const std::vector<size_t> base = whole   ? shape_
                                   : split ? std::vector<size_t>{m, width}
                                           : std::vector<size_t>{m};

  // Copies rows 0, k, 2k, ... of a case tensor into a tensor of the sample's shape.
  const auto gather = [&](Extent e, const Tensor &from) {
    Tensor to = allocate(e, shapeOf(e, base));
    const size_t row = from.count / rows * from.element_size;
    for (size_t j = 0; j < m; ++j)
      std::memcpy(to.data.get() + j * row, from.data.get() + j * k * row, row);
    return to;
  };
  std::vector<Tensor> sample_in, got, want;
  for (size_t i = 0; i < ins_.size(); ++i) sample_in.push_back(gather(op_.inputs[i], ins_[i]));
  for (size_t i = 0; i < outs_.size(); ++i) {
    got.push_back(gather(op_.outputs[i], outs_[i]));
    want.push_back(allocate(op_.outputs[i], shapeOf(op_.outputs[i], base)));
    std::memset(want.back().data.get(), 0, want.back().count * want.back().element_size);
  }

  infiniopHandle_t ref = nullptr;
  infiniStatus_t status = infiniopCreateHandle(&ref, INFINI_DEVICE_CPU_REFERENCE, 0);
  if (status == INFINI_STATUS_SUCCESS) {
    Bound bound;
    status = bindOn(ref, base, &bound);
    if (status == INFINI_STATUS_SUCCESS) {
      std::vector<char> workspace(std::max<size_t>(bound.workspace_size, 1));
      std::vector<void *> o;
      std::vector<const void *> i;
      for (Tensor &t : want) o.push_back(t.data.get());
      for (Tensor &t : sample_in) i.push_back(t.data.get());
      status = bound.calculate(workspace.data(), bound.workspace_size, o.data(), i.data());
    }
  }
  if (status != INFINI_STATUS_SUCCESS) r.error = "cpu_reference: " + failure(status);
  if (ref) infiniopDestroyHandle(ref);
  if (!r.error.empty()) return r;

  // A router's rows: cpu_reference selects in double, the devices in F32, where keys closer than
  // F32 resolves (p + bias of two experts within 1e-7 of each other) tie and go lower expert
  // first; double may order the same experts otherwise. Such a row of got is put in want's
  // expert order (y and expert_idx together) before the comparison; a different set of experts
  // is left as it is and fails.
  for (size_t t = 0; t < want.size(); ++t)
    if (op_.outputs[t] == Extent::kGateIndex) {
      const size_t k = want[t].shape.back();
      alignRouterRows(
          got[0].data.get(), got[0].element_size, reinterpret_cast<int32_t *>(got[t].data.get()),
          reinterpret_cast<const int32_t *>(want[t].data.get()), k, k ? want[t].count / k : 0);
    }

  // Tolerance per element: |got - want| <= max(64 ulp(want), floor) for F32, <= 1 ulp(want) +
  // floor for F16/BF16, with floor = 1e-6 * max |want| of that output (the gradient's scale):
  // it absorbs the cancellation where a value is tiny next to its terms. The reported error is
  // norm-wise, in ulps of max |want|, as benchdnn's.
  for (size_t t = 0; t < want.size(); ++t) {
    if (isQuant(op_.outputs[t])) {  // quantized bytes and their scales: bit for bit
      const Tensor &w = want[t], &g = got[t];
      for (size_t e = 0; e < w.count; ++e)
        if (std::memcmp(w.data.get() + e * w.element_size, g.data.get() + e * g.element_size,
                        w.element_size) != 0 &&
            r.bad++ == 0)
          r.first_bad = "output " + std::to_string(t) + " element " + std::to_string(e) +
                        ": bits differ from cpu_reference's";
      r.checked += w.count;
      continue;
    }
    if (isIndex(op_.outputs[t])) {  // other index outputs (MoeInitRoutingV2's, row_idx) are exact
      const auto *w = reinterpret_cast<const int32_t *>(want[t].data.get());
      const auto *g = reinterpret_cast<const int32_t *>(got[t].data.get());
      for (size_t e = 0; e < want[t].count; ++e)
        if (w[e] != g[e] && r.bad++ == 0)
          r.first_bad = "output " + std::to_string(t) + " element " + std::to_string(e) + ": got " +
                        std::to_string(g[e]) + ", cpu_reference " + std::to_string(w[e]);
      r.checked += want[t].count;
      continue;
    }
    const infiniDtype_t dt = dtypeOf(op_.outputs[t]);
    const size_t bytes = dtypeSize(dt);
    double largest = 0;
    for (size_t e = 0; e < want[t].count; ++e) {
      const double w = decode(dt, want[t].data.get() + e * bytes);
      if (std::isfinite(w)) largest = std::max(largest, std::fabs(w));
    }
    const double floor = 1e-6 * largest, unit = ulpAt(dt, largest);
    for (size_t e = 0; e < want[t].count; ++e) {
      const double w = decode(dt, want[t].data.get() + e * bytes);
      const double g = decode(dt, got[t].data.get() + e * bytes);
      if (w == g || (std::isnan(w) && std::isnan(g))) continue;
      const double err = std::isfinite(g - w) ? std::fabs(g - w) : INFINITY;  // NaN, inf: inf
      r.max_ulp = std::max(r.max_ulp, err / unit);
      const double ulp = ulpAt(dt, w);
      if (err <= (dt == INFINI_DTYPE_F32 ? std::max(64 * ulp, floor) : ulp + floor)) continue;
      if (r.bad++ == 0) {
        const size_t row_len = want[t].count / m;  // elements per sampled row of this output
        const size_t at = (e / row_len) * k * row_len + e % row_len;
        r.first_bad = "output " + std::to_string(t) + " element " + std::to_string(at) + ": got " +
                      number(g) + ", cpu_reference " + number(w);
      }
    }
    r.checked += want[t].count;
  }
  r.passed = r.bad == 0;
  return r;
}

}  // namespace bench
