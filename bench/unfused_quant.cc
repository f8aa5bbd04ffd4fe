// SPDX-License-Identifier: Apache-2.0
// SwiGluQuant against the unfused pair it replaces, in one process on the cpu device: SwiGlu
// writing BF16 y, then a separate per-group FP8 (or per-token INT8) quantization of y, as a
// framework without the fused operator runs it (vLLM's per_token_group_quant_fp8 after
// silu_and_mul; sgl-kernel's CPU act_quant). The second pass is plain C++ over the BF16 y with
// OpenMP, written for the compiler to vectorize: amax, the F32 scale amax / qmax, the bytes from
// y / s by the FP8 bit pattern's rounding. It is a speed baseline only (its bytes are those of
// the rounded y, not the exact ones).
//   infiniop-unfused-quant [--shape RxH] [--threads N] [--reps N] [--int8]
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "unfused_quant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "infiniop.h"

HWY_BEFORE_NAMESPACE();
namespace unfused::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row of H BF16 values in groups of `group` (a multiple of the lanes) into bytes and scales.
void QuantizeRow(const hwy::bfloat16_t *in, size_t H, size_t group, bool int8, uint8_t *out,
                 float *scales) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<hwy::bfloat16_t, decltype(d)> dbf;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const hn::Rebind<int8_t, decltype(d)> di8;
  const size_t N = hn::Lanes(d);
  for (size_t g = 0; g < H / group; ++g) {
    const hwy::bfloat16_t *x = in + g * group;
    auto largest = hn::Zero(d);
    for (size_t i = 0; i < group; i += N)
      largest = hn::Max(largest, hn::Abs(hn::PromoteTo(d, hn::LoadU(dbf, x + i))));
    const float amax = hn::GetLane(hn::MaxOfLanes(d, largest));
    const float s = std::max(amax / (int8 ? 127.0f : 448.0f), 0x1p-126f);
    scales[g] = s;
    const auto inv = hn::Set(d, 1.0f / s);
    for (size_t i = 0; i < group; i += N) {
      const auto t = hn::Mul(hn::PromoteTo(d, hn::LoadU(dbf, x + i)), inv);
      if (int8) {
        const auto q = hn::ConvertTo(
            di, hn::Round(hn::Min(hn::Max(t, hn::Set(d, -127.0f)), hn::Set(d, 127.0f))));
        hn::StoreU(hn::BitCast(du8, hn::DemoteTo(di8, q)), du8, out + g * group + i);
      } else {
        const auto a = hn::Min(hn::Abs(t), hn::Set(d, 448.0f));
        const auto sub = hn::Lt(a, hn::Set(d, 0x1p-6f));
        const auto bits = hn::BitCast(di, hn::IfThenElse(sub, hn::Add(a, hn::Set(d, 0x1p-6f)), a));
        const auto base =
            hn::IfThenElse(hn::RebindMask(di, sub), hn::Set(di, 968), hn::Set(di, 960));
        const auto code = hn::Sub(hn::ShiftRight<20>(hn::Add(bits, hn::Set(di, 0x80000))), base);
        const auto sign = hn::And(hn::ShiftRight<24>(hn::BitCast(di, t)), hn::Set(di, 0x80));
        hn::StoreU(hn::DemoteTo(du8, hn::Or(code, sign)), du8, out + g * group + i);
      }
    }
  }
}

}  // namespace unfused::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace unfused {
HWY_EXPORT(QuantizeRow);
void quantizeRow(const hwy::bfloat16_t *in, size_t H, size_t group, bool int8, uint8_t *out,
                 float *scales) {
  HWY_DYNAMIC_DISPATCH(QuantizeRow)(in, H, group, int8, out, scales);
}
}  // namespace unfused

namespace {

#define CHECK(call)                                                    \
  do {                                                                 \
    const infiniStatus_t s_ = (call);                                  \
    if (s_ != INFINI_STATUS_SUCCESS) {                                 \
      std::fprintf(stderr, "%s: %s\n", #call, infiniopGetLastError()); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

// The separate quantization pass over y (rows x H BF16), rows over the threads.
void quantize(const uint16_t *y, size_t rows, size_t H, size_t group, bool int8, uint8_t *q,
              float *scales) {
  const size_t groups = H / group;
#pragma omp parallel for schedule(static)
  for (long long r = 0; r < static_cast<long long>(rows); ++r)
    unfused::quantizeRow(reinterpret_cast<const hwy::bfloat16_t *>(y) + r * H, H, group, int8,
                         q + r * H, scales + r * groups);
}

template <class F>
double bestSeconds(int reps, const F &f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

infiniopTensorDescriptor_t tensor(std::vector<size_t> shape, infiniDtype_t dtype) {
  infiniopTensorDescriptor_t d = nullptr;
  CHECK(infiniopCreateTensorDescriptor(&d, shape.size(), shape.data(), nullptr, dtype));
  return d;
}

}  // namespace

int main(int argc, char **argv) {
  size_t rows = 4096, H = 4096;
  int reps = 20;
  bool int8 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shape" && i + 1 < argc) {
      std::sscanf(argv[++i], "%zux%zu", &rows, &H);
    } else if (a == "--threads" && i + 1 < argc) {
      omp_set_num_threads(std::atoi(argv[++i]));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--int8") {
      int8 = true;
    } else {
      std::fprintf(stderr, "usage: %s [--shape RxH] [--threads N] [--reps N] [--int8]\n", argv[0]);
      return 2;
    }
  }
  const size_t group = int8 ? H : 128, groups = H / group;
  std::vector<uint16_t> x(rows * 2 * H), y(rows * H);
  std::vector<uint8_t> q(rows * H);
  std::vector<float> scales(rows * groups);
  for (size_t i = 0; i < x.size(); ++i) {  // signed, over [-10, 10)
    const float v = (static_cast<float>((i * 2654435761u) % 65536) / 32768.0f - 1.0f) * 10.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    x[i] = static_cast<uint16_t>(bits >> 16);
  }
  infiniopHandle_t handle = nullptr;
  CHECK(infiniopCreateHandle(&handle, INFINI_DEVICE_CPU, 0));
  auto xd = tensor({rows, 2 * H}, INFINI_DTYPE_BF16), yd = tensor({rows, H}, INFINI_DTYPE_BF16);
  auto qd = tensor({rows, H}, int8 ? INFINI_DTYPE_I8 : INFINI_DTYPE_F8);
  auto sd = tensor({rows, groups}, INFINI_DTYPE_F32);
  infiniopSwiGluDescriptor_t swiglu = nullptr;
  infiniopSwiGluQuantDescriptor_t fused = nullptr;
  CHECK(infiniopCreateSwiGluDescriptor(handle, &swiglu, yd, xd, -1));
  CHECK(infiniopCreateSwiGluQuantDescriptor(
      handle, &fused, qd, sd, xd, nullptr, nullptr, 1, INFINIOP_QUANT_DYNAMIC,
      static_cast<int64_t>(int8 ? 0 : group), INFINIOP_QUANT_SCALE_F32));
  const double t_swiglu = bestSeconds(
      reps, [&] { CHECK(infiniopSwiGlu(swiglu, nullptr, 0, y.data(), x.data(), nullptr)); });
  const double t_quant =
      bestSeconds(reps, [&] { quantize(y.data(), rows, H, group, int8, q.data(), scales.data()); });
  const double t_pair = bestSeconds(reps, [&] {
    CHECK(infiniopSwiGlu(swiglu, nullptr, 0, y.data(), x.data(), nullptr));
    quantize(y.data(), rows, H, group, int8, q.data(), scales.data());
  });
  const double t_fused = bestSeconds(reps, [&] {
    CHECK(infiniopSwiGluQuant(fused, nullptr, 0, q.data(), scales.data(), x.data(), nullptr,
                              nullptr, nullptr));
  });
  const double n = static_cast<double>(rows * H);
  const double fused_bytes = n * (4 + 1) + rows * groups * 4.0, swiglu_bytes = n * 6;
  std::printf("%zux%zu BF16 -> %s, %d threads, best of %d\n", rows, H,
              int8 ? "INT8 per token" : "FP8 per group of 128", omp_get_max_threads(), reps);
  std::printf("  SwiGlu alone            %8.3f ms  %6.2f GB/s\n", t_swiglu * 1e3,
              swiglu_bytes / t_swiglu * 1e-9);
  std::printf("  separate quantization   %8.3f ms\n", t_quant * 1e3);
  std::printf("  SwiGlu + quantization   %8.3f ms\n", t_pair * 1e3);
  std::printf("  SwiGluQuant (fused)     %8.3f ms  %6.2f GB/s  (%.2fx the pair's time)\n",
              t_fused * 1e3, fused_bytes / t_fused * 1e-9, t_fused / t_pair);
  infiniopDestroySwiGluQuantDescriptor(fused);
  infiniopDestroySwiGluDescriptor(swiglu);
  for (auto d : {xd, yd, qd, sd}) infiniopDestroyTensorDescriptor(d);
  infiniopDestroyHandle(handle);
  return 0;
}
#endif  // HWY_ONCE
