// SPDX-License-Identifier: Apache-2.0
// infiniop-onednn-error: the F32 relative error of gelu_erf, oneDNN's eltwise (the instruction
// count the erf family is compared with, docs/performance.md) beside the library's cpu device, per
// range of x, against x Phi(x) = x erfc(-x / sqrt 2) / 2 in double (glibc's erfc: far below F32's
// u = 2^-24). Built where oneDNN's headers are (libdnnl-dev); ONEDNN_MAX_CPU_ISA and
// INFINIOP_CPU_ISA pick the targets.
//
//   infiniop-onednn-error [elements per range]   (default 2^20)
#include <dnnl.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "infiniop.h"

namespace {

// infiniop's gelu_erf of x on the cpu device; false where a call fails.
bool infiniopGeluErf(const std::vector<float> &x, std::vector<float> &y) {
  infiniopHandle_t handle = nullptr;
  if (infiniopCreateHandle(&handle, INFINI_DEVICE_CPU, 0) != INFINI_STATUS_SUCCESS) return false;
  const size_t shape[] = {x.size()};
  infiniopTensorDescriptor_t t = nullptr;
  infiniopGeluDescriptor_t desc = nullptr;
  bool ok = infiniopCreateTensorDescriptor(&t, 1, shape, nullptr, INFINI_DTYPE_F32) ==
                INFINI_STATUS_SUCCESS &&
            infiniopCreateGeluDescriptor(handle, &desc, t, t, INFINIOP_GELU_APPROXIMATE_NONE) ==
                INFINI_STATUS_SUCCESS;
  size_t workspace_size = 0;
  ok = ok && infiniopGetGeluWorkspaceSize(desc, &workspace_size) == INFINI_STATUS_SUCCESS;
  std::vector<unsigned char> workspace(workspace_size + 1);
  ok = ok && infiniopGelu(desc, workspace.data(), workspace_size, y.data(), x.data(), nullptr) ==
                 INFINI_STATUS_SUCCESS;
  if (!ok) std::fprintf(stderr, "infiniop: %s\n", infiniopGetLastError());
  if (desc) infiniopDestroyGeluDescriptor(desc);
  if (t) infiniopDestroyTensorDescriptor(t);
  infiniopDestroyHandle(handle);
  return ok;
}

void onednnGeluErf(std::vector<float> &x, std::vector<float> &y) {
  using namespace dnnl;
  engine cpu(engine::kind::cpu, 0);
  stream s(cpu);
  const memory::desc md({static_cast<memory::dim>(x.size())}, memory::data_type::f32,
                        memory::format_tag::a);
  memory src(md, cpu, x.data()), dst(md, cpu, y.data());
  const eltwise_forward::primitive_desc pd(
      eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_gelu_erf, md, 0.f,
                            0.f),
      cpu);
  eltwise_forward(pd).execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  s.wait();
}

// The largest |y - exact| / |exact| in u over the lanes whose exact value is not 0.
double worstError(const std::vector<float> &x, const std::vector<float> &y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = x[i] * 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
    if (exact != 0) worst = std::fmax(worst, std::fabs(y[i] - exact) / std::fabs(exact) * 0x1p24);
  }
  return worst;
}

}  // namespace

int main(int argc, char **argv) {
  const size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : size_t{1} << 20;
  const float bounds[] = {-13, -10, -6, -4, -2, -1, 0, 1, 4, 10};
  std::printf("# gelu_erf F32, max relative error in u = 2^-24 (%zu evenly spaced x per range)\n",
              n);
  std::printf("| x in | oneDNN | infiniop |\n|---|---|---|\n");
  for (size_t r = 0; r + 1 < std::size(bounds); ++r) {
    std::vector<float> x(n), mine(n), theirs(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = bounds[r] + (bounds[r + 1] - bounds[r]) * ((i + 0.5f) / static_cast<float>(n));
    onednnGeluErf(x, theirs);
    if (!infiniopGeluErf(x, mine)) return 1;
    std::printf("| [%g, %g) | %.3g | %.3g |\n", bounds[r], bounds[r + 1], worstError(x, theirs),
                worstError(x, mine));
  }
  return 0;
}
