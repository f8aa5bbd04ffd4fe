// SPDX-License-Identifier: Apache-2.0
// infiniop-cost: one operator's calculate call, made once to warm up and once more inside
// infiniop_cost_measured_call, the function that bench/cost.sh has valgrind's callgrind count (its
// instructions over the output elements: the cost per element, the same on every run whatever the
// machine's load). Prints the output element count.
//
//   infiniop-cost OP DTYPE [--fpmath strict|relaxed] [--shape AxBxC] [--range R]
//   infiniop-cost --list
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "case.h"
#include "infiniop.h"
#include "ops.h"

// Out of line and unmangled: callgrind's --toggle-collect names it.
extern "C" __attribute__((noinline)) infiniStatus_t infiniop_cost_measured_call(bench::Case *c) {
  return c->run();
}

namespace {

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr,
               "infiniop-cost: %s\nusage: infiniop-cost OP f32|f16|bf16 [--fpmath strict|relaxed] "
               "[--shape AxBxC] [--range R]\n",
               why.c_str());
  std::exit(2);
}

std::vector<size_t> parseShape(const std::string &text) {
  std::vector<size_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = text.find('x', start);
    const std::string part = text.substr(start, x == std::string::npos ? x : x - start);
    char *end = nullptr;
    const unsigned long v = std::strtoul(part.c_str(), &end, 10);
    if (part.empty() || *end || v == 0) usage("bad --shape '" + text + "'");
    shape.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return shape;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const bench::OpInfo &op : bench::allOps()) std::printf("%s\n", op.name);
    return 0;
  }
  if (argc < 3) usage("needs an operator and a dtype (--list: the operators)");
  const bench::OpInfo *op = bench::findOp(argv[1]);
  if (op == nullptr) usage(std::string("no operator '") + argv[1] + "'");
  const std::string dtype_name = argv[2];
  const infiniDtype_t dtype = dtype_name == "f32"    ? INFINI_DTYPE_F32
                              : dtype_name == "f16"  ? INFINI_DTYPE_F16
                              : dtype_name == "bf16" ? INFINI_DTYPE_BF16
                                                     : INFINI_DTYPE_INVALID;
  if (dtype == INFINI_DTYPE_INVALID) usage("bad dtype '" + dtype_name + "'");
  infiniopFpmathMode_t fpmath = INFINIOP_FPMATH_STRICT;
  std::vector<size_t> shape = op->default_shape;
  float range = 4.0f;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--fpmath" && (v == "strict" || v == "relaxed")) {
      fpmath = v == "strict" ? INFINIOP_FPMATH_STRICT : INFINIOP_FPMATH_RELAXED;
    } else if (a == "--shape") {
      shape = parseShape(v);
    } else if (a == "--range") {
      range = std::strtof(v.c_str(), nullptr);
      if (!(range > 0)) usage("bad --range '" + v + "'");
    } else {
      usage("unknown argument " + a + " " + v);
    }
  }
  std::string error;
  const std::unique_ptr<bench::Case> c =
      bench::Case::create(*op, INFINI_DEVICE_CPU, dtype, shape, fpmath, &error, range);
  if (!c) usage(error);
  if (c->run() != INFINI_STATUS_SUCCESS ||
      infiniop_cost_measured_call(c.get()) != INFINI_STATUS_SUCCESS) {
    std::fprintf(stderr, "infiniop-cost: %s\n", infiniopGetLastError());
    return 1;
  }
  std::printf("%zu\n", c->elements());
  return 0;
}
