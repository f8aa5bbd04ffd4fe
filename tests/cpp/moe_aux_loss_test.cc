// SPDX-License-Identifier: Apache-2.0
// MoeAuxLoss and MoeAuxLossGrad (docs/moe_aux_loss.md) on every device: the loss against a
// float64 oracle written from Megatron-LM's formulas (switch_load_balancing_loss_func: the
// probabilities summed over tokens, times tokens_per_expert; sequence_load_balancing_loss_func:
// probs viewed (L, B, E), cost_coeff = counts / (L k / E), mean over the sequence, sum over
// experts, mean over the batch), the grad against the derivative of the same formulas, within the
// documented bounds; softmax, normalized sigmoid and sqrtsoftplus, F32/F16/BF16 logits, signed
// wide-range logits, B = 1 (T and a global N) and B > 1, strided x, the same bits at 1 and 2
// threads, T = 0, out-of-range counts and bad descriptors. Every output is poisoned before each
// call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "index_values.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr auto I32 = INFINI_DTYPE_I32;
constexpr auto I64 = INFINI_DTYPE_I64;
constexpr auto F32 = INFINI_DTYPE_F32;
constexpr auto F16 = INFINI_DTYPE_F16;
constexpr auto BF16 = INFINI_DTYPE_BF16;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---- the float64 oracle, from Megatron-LM's definitions ----------------------------------------

// sqrt(softplus(x)) (score 2, DeepSeek-V4), in double with nothing cancelling.
double sqrtSoftplus(double x) {
  return std::sqrt(std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))));
}
// The score s(x) of the normalized scores and its slope ds/dx.
double unnormalized(double x, int score) {
  return score == 1 ? 1 / (1 + std::exp(-x)) : sqrtSoftplus(x);
}
double slopeOf(double x, int score) {
  const double sigmoid = 1 / (1 + std::exp(-x));
  if (score == 1) return sigmoid / (1 + std::exp(x));  // s (1 - s)
  const double r = sqrtSoftplus(x);
  return r > 0 ? sigmoid / (2 * r) : 0.0;
}

// compute_routing_scores_for_aux_loss: softmax(x), or sigmoid(x) / (sum sigmoid(x) + 1e-20)
// (sqrtsoftplus: the same normalization).
std::vector<double> scoresOf(const std::vector<double> &x, int score) {
  std::vector<double> p(x.size());
  if (score == 0) {
    double m = -INFINITY, S = 0;
    for (double v : x) m = std::max(m, v);
    for (size_t e = 0; e < x.size(); ++e) S += p[e] = std::exp(x[e] - m);
    for (double &v : p) v /= S;
  } else {
    double S = 0;
    for (size_t e = 0; e < x.size(); ++e) S += p[e] = unnormalized(x[e], score);
    for (double &v : p) v /= S + 1e-20;
  }
  return p;
}

struct Case {
  size_t T, E, B;  // B = 0: the Switch loss with counts (E)
  int64_t topk, total;
  double coeff;
  int score;
};

// switch_load_balancing_loss_func / sequence_load_balancing_loss_func on rows x (T, E) and
// counts n (B or 1 rows of E).
double megatronLoss(const Case &c, const std::vector<std::vector<double>> &x,
                    const std::vector<std::vector<double>> &n) {
  const auto E = static_cast<double>(c.E);
  if (c.B == 0) {
    std::vector<double> aggregated(c.E, 0.0);
    for (size_t t = 0; t < c.T; ++t) {
      const std::vector<double> p = scoresOf(x[t], c.score);
      for (size_t e = 0; e < c.E; ++e) aggregated[e] += p[e];
    }
    double sum = 0;
    for (size_t e = 0; e < c.E; ++e) sum += aggregated[e] * n[0][e];
    const auto N = static_cast<double>(c.total);
    return sum * (E * c.coeff / (static_cast<double>(c.topk) * N * N));
  }
  const size_t L = c.T / c.B;
  double loss = 0;
  for (size_t b = 0; b < c.B; ++b) {
    std::vector<double> mean(c.E, 0.0);
    for (size_t s = 0; s < L; ++s) {
      const std::vector<double> p = scoresOf(x[s * c.B + b], c.score);  // (seq, batch)
      for (size_t e = 0; e < c.E; ++e) mean[e] += p[e] / static_cast<double>(L);
    }
    double sum = 0;
    for (size_t e = 0; e < c.E; ++e)
      sum += n[b][e] / (static_cast<double>(L) * static_cast<double>(c.topk) / E) * mean[e];
    loss += sum / static_cast<double>(c.B);
  }
  return loss * c.coeff;
}

// The same loss's derivative by x (grad_loss g): grad_p_te = g K n_{b(t),e} through the score's
// Jacobian. Also the bound's scale per element, |K g| a_j (n_j + <p, n>), a_j = p_j or the
// sigmoid's slope / D.
void megatronGrad(const Case &c, const std::vector<std::vector<double>> &x,
                  const std::vector<std::vector<double>> &n, double g, std::vector<double> *grad,
                  std::vector<double> *scale, std::vector<double> *floor) {
  const double B = c.B == 0 ? 1.0 : static_cast<double>(c.B);
  const double L = c.B == 0 ? static_cast<double>(c.total) : static_cast<double>(c.T) / B;
  const double K = c.coeff * static_cast<double>(c.E) / (static_cast<double>(c.topk) * B * L * L);
  grad->assign(c.T * c.E, 0.0);
  scale->assign(c.T * c.E, 0.0);
  floor->assign(c.T * c.E, 0.0);
  for (size_t t = 0; t < c.T; ++t) {
    const std::vector<double> &nb = n[c.B == 0 ? 0 : t % c.B];
    const std::vector<double> p = scoresOf(x[t], c.score);
    double w = 0, S = 0;
    for (size_t e = 0; e < c.E; ++e) w += p[e] * nb[e];
    std::vector<double> s(c.E);
    for (size_t e = 0; e < c.E; ++e) S += s[e] = unnormalized(x[t][e], c.score);
    for (size_t e = 0; e < c.E; ++e) {
      const double a = c.score == 0 ? p[e] : slopeOf(x[t][e], c.score) / (S + 1e-20);
      (*grad)[t * c.E + e] = g * K * a * (nb[e] - w);
      (*scale)[t * c.E + e] = std::fabs(g * K) * a * (nb[e] + w);
      // The floor: exponentials and sigmoids (and slopes) below 2^-125.5 are 0 (the routers').
      (*floor)[t * c.E + e] =
          std::fabs(g * K) * (nb[e] + w) * 0x1p-125 / (c.score == 0 ? 1.0 : S + 1e-20);
    }
  }
}

// ---- the fixture -------------------------------------------------------------------------------

class MoeAuxLossTest : public DeviceTest {
 protected:
  // One MoeAuxLoss call; `loss` poisoned before.
  infiniStatus_t forward(TensorBuffer &loss, TensorBuffer &x, TensorBuffer &counts, const Case &c) {
    std::memset(loss.storageBytes(), 0xA5, loss.storage().size());
    infiniopTensorDescriptor_t ld = loss.descriptor(), xd = x.descriptor(),
                               cd = counts.descriptor();
    infiniopMoeAuxLossDescriptor_t desc = nullptr;
    infiniStatus_t status = infiniopCreateMoeAuxLossDescriptor(handle(), &desc, ld, xd, cd, c.score,
                                                               c.topk, c.total, c.coeff);
    error_ = infiniopGetLastError();
    infiniopDestroyTensorDescriptor(ld);
    infiniopDestroyTensorDescriptor(xd);
    infiniopDestroyTensorDescriptor(cd);
    if (status != INFINI_STATUS_SUCCESS) {
      EXPECT_EQ(desc, nullptr);
      return status;
    }
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeAuxLossWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(loss);
    device.add(x);
    device.add(counts);
    status = infiniopMoeAuxLoss(desc, device.scratch(size), size, device(loss), device(x),
                                device(counts), nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeAuxLossDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }
  // One MoeAuxLossGrad call; grad_x poisoned before.
  infiniStatus_t backward(TensorBuffer &grad_x, TensorBuffer &grad_loss, TensorBuffer &x,
                          TensorBuffer &counts, const Case &c) {
    grad_x.poison();
    infiniopTensorDescriptor_t gd = grad_x.descriptor(), ld = grad_loss.descriptor(),
                               xd = x.descriptor(), cd = counts.descriptor();
    infiniopMoeAuxLossGradDescriptor_t desc = nullptr;
    infiniStatus_t status = infiniopCreateMoeAuxLossGradDescriptor(
        handle(), &desc, gd, ld, xd, cd, c.score, c.topk, c.total, c.coeff);
    error_ = infiniopGetLastError();
    for (auto d : {gd, ld, xd, cd}) infiniopDestroyTensorDescriptor(d);
    if (status != INFINI_STATUS_SUCCESS) {
      EXPECT_EQ(desc, nullptr);
      return status;
    }
    size_t size = 0;
    EXPECT_EQ(infiniopGetMoeAuxLossGradWorkspaceSize(desc, &size), INFINI_STATUS_SUCCESS);
    DeviceMirror device(handle());
    device.add(grad_x);
    device.add(grad_loss);
    device.add(x);
    device.add(counts);
    status = infiniopMoeAuxLossGrad(desc, device.scratch(size), size, device(grad_x),
                                    device(grad_loss), device(x), device(counts), nullptr);
    error_ = infiniopGetLastError();
    device.download();
    EXPECT_EQ(infiniopDestroyMoeAuxLossGradDescriptor(desc), INFINI_STATUS_SUCCESS);
    return status;
  }

  // Random logits of `dtype` (range `range`), counts in [0, 2 T k / E], then the loss and grad
  // against the oracle. x (T, E) row-major, or transposed storage when `strided`.
  void check(const Case &c, infiniDtype_t dtype, infiniDtype_t count_dtype, float range,
             uint64_t seed, bool strided = false) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " B " +
                 std::to_string(c.B) + " score " + std::to_string(c.score) + " dtype " +
                 std::to_string(dtype) + " range " + std::to_string(range));
    TensorBuffer x({c.T, c.E}, strided ? columnMajorStrides({c.T, c.E}) : std::vector<ptrdiff_t>{},
                   dtype);
    x.fill([&](size_t i) { return signedValue(seed, i, range); });
    const size_t rows = c.B == 0 ? 1 : c.B;
    TensorBuffer counts(c.B == 0 ? std::vector<size_t>{c.E} : std::vector<size_t>{c.B, c.E},
                        count_dtype);
    const uint64_t top = 2 * static_cast<uint64_t>(c.total) * c.topk / c.E + 1;
    std::vector<std::vector<double>> n(rows, std::vector<double>(c.E));
    for (size_t i = 0; i < rows * c.E; ++i) {
      uint64_t z = (seed * 31 + i) * 0x9E3779B97F4A7C15ull;
      z ^= z >> 29;
      const auto v = static_cast<int64_t>(z % top);
      setInt(counts, i, v);
      n[i / c.E][i % c.E] = static_cast<double>(v);
    }
    std::vector<std::vector<double>> xs(c.T, std::vector<double>(c.E));
    for (size_t t = 0; t < c.T; ++t)
      for (size_t e = 0; e < c.E; ++e) xs[t][e] = x.get(t * c.E + e);

    TensorBuffer loss({}, F32);
    ASSERT_EQ(forward(loss, x, counts, c), INFINI_STATUS_SUCCESS) << error_;
    const double exact = megatronLoss(c, xs, n);
    const double got = loss.get(0);
    // docs/moe_aux_loss.md: |loss - exact| <= (E / 16 + T / 256 + 300) 2^-23 |exact| +
    // K T E n 2^-124 / D (the scores' floor; D = 1 for softmax, 1e-20 for the sigmoids) +
    // T n 2^-149 + 2^-149, n the largest count.
    double n_max = 0;
    for (const auto &row : n)
      for (double v : row) n_max = std::fmax(n_max, v);
    const double Bd = c.B == 0 ? 1.0 : static_cast<double>(c.B);
    const double L = c.B == 0 ? static_cast<double>(c.total) : static_cast<double>(c.T) / Bd;
    const double K =
        c.coeff * static_cast<double>(c.E) / (static_cast<double>(c.topk) * Bd * L * L);
    const double T = static_cast<double>(c.T);
    const double bound =
        (static_cast<double>(c.E) / 16 + T / 256 + 300) * 0x1p-23 * std::fabs(exact) +
        K * T * static_cast<double>(c.E) * n_max * 0x1p-124 / (c.score == 0 ? 1.0 : 1e-20) +
        T * n_max * 0x1p-149 + 0x1p-149;
    EXPECT_LE(std::fabs(got - exact), bound) << "loss " << got << " exact " << exact;

    const float g = 0.75f;
    TensorBuffer grad_loss({}, F32), grad_x({c.T, c.E}, dtype);
    grad_loss.set(0, g);
    ASSERT_EQ(backward(grad_x, grad_loss, x, counts, c), INFINI_STATUS_SUCCESS) << error_;
    std::vector<double> want, scale, floor;
    megatronGrad(c, xs, n, g, &want, &scale, &floor);
    // |grad - exact| <= (E / 16 + 32) 2^-23 |K g| a_j (n_j + <p, n>) + an ulp of grad_x's dtype
    // + the floor |K g| (n_j + <p, n>) 2^-125 (/ D for the sigmoid).
    size_t bad = 0;
    for (size_t i = 0; i < c.T * c.E; ++i) {
      const double gi = grad_x.get(i);
      const double tol = (static_cast<double>(c.E) / 16 + 32) * 0x1p-23 * scale[i] +
                         ulpOf(dtype, want[i]) + floor[i] + 0x1p-149;
      if (!(std::fabs(gi - want[i]) <= tol) && ++bad <= 5)
        ADD_FAILURE() << "grad_x[" << i << "] " << gi << " exact " << want[i] << " tol " << tol;
    }
    EXPECT_EQ(bad, 0u);
  }
  std::string error_;
};

TEST_P(MoeAuxLossTest, SwitchEveryDtypeAndScore) {
  for (int score : {0, 1, 2})
    for (infiniDtype_t dtype : {F32, F16, BF16}) {
      const Case c{300, 64, 0, 6, 300, 1e-2, score};
      check(c, dtype, I64, 8.0f, 11 + score);
    }
}

TEST_P(MoeAuxLossTest, SwitchWideRangeAndGlobalTokens) {
  for (int score : {0, 1, 2}) {
    check(Case{257, 48, 0, 8, 257, 1e-3, score}, F32, I32, 80.0f, 21);   // signed, wide
    check(Case{130, 40, 0, 2, 4096, 1e-2, score}, F32, I64, 20.0f, 22);  // N across ranks
    check(Case{33, 7, 0, 3, 33, 0.5, score}, F32, I32, 200.0f, 23, /*strided=*/true);
  }
}

TEST_P(MoeAuxLossTest, SequenceLevel) {
  for (int score : {0, 1, 2}) {
    check(Case{512, 64, 4, 6, 512, 1e-3, score}, F32, I64, 10.0f, 31);
    check(Case{96, 32, 3, 4, 96, 1e-2, score}, BF16, I32, 30.0f, 32);
    check(Case{40, 16, 1, 2, 40, 1e-2, score}, F16, I32, 5.0f, 33);  // (1, E): one sequence
  }
}

TEST_P(MoeAuxLossTest, NoRowsGivesZero) {
  TensorBuffer x({0, 8}, F32), counts({8}, I32), loss({}, F32);
  for (size_t e = 0; e < 8; ++e) setInt(counts, e, 1);
  ASSERT_EQ(forward(loss, x, counts, Case{0, 8, 0, 2, 10, 1e-2, 0}), INFINI_STATUS_SUCCESS)
      << error_;
  EXPECT_EQ(bitsOf(loss.get(0)), 0u);
  TensorBuffer grad_x({0, 8}, F32), grad_loss({}, F32);
  grad_loss.set(0, 1.0f);
  EXPECT_EQ(backward(grad_x, grad_loss, x, counts, Case{0, 8, 0, 2, 10, 1e-2, 0}),
            INFINI_STATUS_SUCCESS)
      << error_;
}

// The same bits at 1 and 2 threads (the cpu device splits blocks and rows over threads).
TEST_P(MoeAuxLossTest, SameBitsAtOneAndTwoThreads) {
  const Case c{2000, 128, 0, 8, 2000, 1e-2, 0};
  TensorBuffer x({c.T, c.E}, F32), counts({c.E}, I32);
  x.fill([](size_t i) { return signedValue(41, i, 12.0f); });
  for (size_t e = 0; e < c.E; ++e) setInt(counts, e, static_cast<int64_t>((e * 37) % 250));
  const char *old = std::getenv("INFINIOP_NUM_THREADS");
  const std::string saved = old ? old : "";
  std::vector<uint32_t> loss_bits;
  std::vector<std::vector<uint8_t>> grads;
  for (int score : {0, 1, 2})
    for (const char *threads : {"1", "2"}) {
      setenv("INFINIOP_NUM_THREADS", threads, 1);
      Case cs = c;
      cs.score = score;
      TensorBuffer loss({}, F32), grad_x({c.T, c.E}, F32), grad_loss({}, F32);
      grad_loss.set(0, 1.5f);
      ASSERT_EQ(forward(loss, x, counts, cs), INFINI_STATUS_SUCCESS) << error_;
      ASSERT_EQ(backward(grad_x, grad_loss, x, counts, cs), INFINI_STATUS_SUCCESS) << error_;
      loss_bits.push_back(bitsOf(loss.get(0)));
      grads.push_back(grad_x.storage());
    }
  if (old)
    setenv("INFINIOP_NUM_THREADS", saved.c_str(), 1);
  else
    unsetenv("INFINIOP_NUM_THREADS");
  EXPECT_EQ(loss_bits[0], loss_bits[1]);
  EXPECT_EQ(loss_bits[2], loss_bits[3]);
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[2], grads[3]);
  EXPECT_EQ(loss_bits[4], loss_bits[5]);
  EXPECT_EQ(grads[4], grads[5]);
}

TEST_P(MoeAuxLossTest, BadCountsWriteNothing) {
  const Case c{8, 4, 0, 2, 8, 1e-2, 0};
  TensorBuffer x({8, 4}, F32), counts({4}, I64), loss({}, F32);
  x.fill([](size_t i) { return signedValue(5, i, 3.0f); });
  for (int64_t bad : {int64_t{-1}, (int64_t{1} << 24) + 1}) {
    for (size_t e = 0; e < 4; ++e) setInt(counts, e, 2);
    setInt(counts, 2, bad);
    EXPECT_EQ(forward(loss, x, counts, c), INFINI_STATUS_BAD_PARAM);
    EXPECT_NE(error_.find("tokens_per_expert"), std::string::npos) << error_;
    EXPECT_EQ(bitsOf(loss.get(0)), 0xA5A5A5A5u) << "written";
    TensorBuffer grad_x({8, 4}, F32), grad_loss({}, F32);
    grad_loss.set(0, 1.0f);
    grad_x.fill([](size_t) { return 7.0f; });
    const std::vector<uint8_t> before = grad_x.storage();
    infiniopTensorDescriptor_t gd = grad_x.descriptor(), ld = grad_loss.descriptor(),
                               xd = x.descriptor(), cd = counts.descriptor();
    infiniopMoeAuxLossGradDescriptor_t desc = nullptr;
    ASSERT_EQ(infiniopCreateMoeAuxLossGradDescriptor(handle(), &desc, gd, ld, xd, cd, 0, 2, 8, 0.1),
              INFINI_STATUS_SUCCESS);
    for (auto d : {gd, ld, xd, cd}) infiniopDestroyTensorDescriptor(d);
    DeviceMirror device(handle());
    device.add(grad_x);
    device.add(grad_loss);
    device.add(x);
    device.add(counts);
    EXPECT_EQ(infiniopMoeAuxLossGrad(desc, nullptr, 0, device(grad_x), device(grad_loss), device(x),
                                     device(counts), nullptr),
              INFINI_STATUS_BAD_PARAM);
    device.download();
    EXPECT_EQ(grad_x.storage(), before) << "written";
    infiniopDestroyMoeAuxLossGradDescriptor(desc);
  }
  // At the limit 2^24 the count is taken.
  for (size_t e = 0; e < 4; ++e) setInt(counts, e, int64_t{1} << 24);
  EXPECT_EQ(forward(loss, x, counts, c), INFINI_STATUS_SUCCESS) << error_;
}

TEST_P(MoeAuxLossTest, BadDescriptors) {
  TensorBuffer x({12, 4}, F32), counts({4}, I32), loss({}, F32), seq({3, 4}, I32),
      seq5({5, 4}, I32), c5({5}, I32), cf({4}, F32), loss1({1}, F32), loss16({}, F16),
      xi({12, 4}, I32);
  for (TensorBuffer *b : {&counts, &seq, &seq5, &c5})
    for (size_t i = 0; i < b->numel(); ++i) setInt(*b, i, static_cast<int64_t>(i % 3));
  const auto st = [&](TensorBuffer &l, TensorBuffer &xx, TensorBuffer &cc, int64_t score,
                      int64_t topk, int64_t total, double coeff) {
    return forward(l, xx, cc, Case{12, 4, 0, topk, total, coeff, static_cast<int>(score)});
  };
  EXPECT_EQ(st(loss, x, counts, 0, 2, 12, 0.1), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_EQ(st(loss, x, counts, 2, 2, 12, 0.1), INFINI_STATUS_SUCCESS) << error_;  // sqrtsoftplus
  EXPECT_EQ(st(loss, x, counts, 3, 2, 12, 0.1), INFINI_STATUS_BAD_PARAM);          // score_function
  EXPECT_EQ(st(loss, x, counts, -1, 2, 12, 0.1), INFINI_STATUS_BAD_PARAM);         // score_function
  EXPECT_EQ(st(loss, x, counts, 0, 0, 12, 0.1), INFINI_STATUS_BAD_PARAM);          // topk
  EXPECT_EQ(st(loss, x, counts, 0, 2, 0, 0.1), INFINI_STATUS_BAD_PARAM);           // total_tokens
  EXPECT_EQ(st(loss, x, counts, 0, 2, 12, NAN), INFINI_STATUS_BAD_PARAM);          // coeff
  EXPECT_EQ(st(loss, x, counts, 0, 2, 12, 1e300), INFINI_STATUS_BAD_PARAM);  // K not finite in F32
  EXPECT_EQ(st(loss, x, seq, 0, 2, 12, 0.1), INFINI_STATUS_SUCCESS) << error_;
  EXPECT_EQ(st(loss, x, seq, 0, 2, 24, 0.1), INFINI_STATUS_BAD_PARAM);          // total != T
  EXPECT_EQ(st(loss, x, seq5, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_SHAPE);  // 5 !| 12
  EXPECT_EQ(st(loss, x, c5, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(st(loss, x, cf, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(st(loss1, x, counts, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_SHAPE);
  EXPECT_EQ(st(loss16, x, counts, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(st(loss, xi, counts, 0, 2, 12, 0.1), INFINI_STATUS_BAD_TENSOR_DTYPE);
  infiniopTensorDescriptor_t xd = x.descriptor(), cd = counts.descriptor();
  infiniopMoeAuxLossDescriptor_t desc = nullptr;
  EXPECT_EQ(infiniopCreateMoeAuxLossDescriptor(handle(), &desc, nullptr, xd, cd, 0, 2, 12, 0.1),
            INFINI_STATUS_NULL_POINTER);
  EXPECT_EQ(desc, nullptr);
  infiniopDestroyTensorDescriptor(xd);
  infiniopDestroyTensorDescriptor(cd);
  // The grad: grad_x of x's shape and dtype.
  TensorBuffer gx16({12, 4}, F16), gx({12, 3}, F32), gl({}, F32);
  const Case c{12, 4, 0, 2, 12, 0.1, 0};
  EXPECT_EQ(backward(gx16, gl, x, counts, c), INFINI_STATUS_BAD_TENSOR_DTYPE);
  EXPECT_EQ(backward(gx, gl, x, counts, c), INFINI_STATUS_BAD_TENSOR_SHAPE);
}

INSTANTIATE_TEST_SUITE_P(Devices, MoeAuxLossTest, ::testing::ValuesIn(allDeviceParams()),
                         [](const ::testing::TestParamInfo<DeviceParam> &info) {
                           return deviceParamName(info.param);
                         });

}  // namespace
}  // namespace infiniop_test
