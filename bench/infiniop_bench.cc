// infiniop-bench: correctness and speed of every operator, in the spirit of oneDNN's benchdnn.
// Each case runs on the chosen device, is checked against cpu_reference, then timed against a
// copy of the same number of bytes measured in the same run.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infiniop.h"
#include "ops.h"

namespace bench {
namespace {

struct Options {
  std::vector<std::string> ops;
  std::vector<infiniDtype_t> dtypes = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16};
  std::vector<infiniDevice_t> devices = {INFINI_DEVICE_CPU};
  std::vector<size_t> shape;  // empty: the operator's default
  int reps = 0;               // 0: adaptive
  bool csv = false, check = true;
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(
      stderr,
      "infiniop-bench: %s\n"
      "usage: infiniop-bench [OP...] [--dtype f32|f16|bf16|all] [--device "
      "cpu|cpu_reference|all]\n"
      "                      [--shape AxBxC] [--threads N] [--reps N] [--csv] [--no-check]\n"
      "operators:",
      why);
  for (const OpInfo &op : allOps()) std::fprintf(stderr, " %s", op.name);
  std::fprintf(stderr, "\n");
  std::exit(2);
}

std::vector<size_t> parseShape(const std::string &text) {
  std::vector<size_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    char *stop = nullptr;
    const unsigned long long v = std::strtoull(part.c_str(), &stop, 10);
    if (part.empty() || *stop || v == 0) usage(("bad --shape " + text).c_str());
    shape.push_back(v);
    start = end + 1;
  }
  return shape;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--dtype") {
      const std::string v = value();
      if (v == "all")
        o.dtypes = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16};
      else if (v == "f32")
        o.dtypes = {INFINI_DTYPE_F32};
      else if (v == "f16")
        o.dtypes = {INFINI_DTYPE_F16};
      else if (v == "bf16")
        o.dtypes = {INFINI_DTYPE_BF16};
      else
        usage(("unknown dtype " + v).c_str());
    } else if (a == "--device") {
      const std::string v = value();
      if (v == "all")
        o.devices = {INFINI_DEVICE_CPU, INFINI_DEVICE_CPU_REFERENCE};
      else if (v == "cpu")
        o.devices = {INFINI_DEVICE_CPU};
      else if (v == "cpu_reference")
        o.devices = {INFINI_DEVICE_CPU_REFERENCE};
      else
        usage(("unknown device " + v).c_str());
    } else if (a == "--shape") {
      o.shape = parseShape(value());
    } else if (a == "--threads") {
      const int n = std::atoi(value().c_str());
      if (n < 1) usage("--threads needs a positive count");
      omp_set_num_threads(n);
    } else if (a == "--reps") {
      o.reps = std::atoi(value().c_str());
      if (o.reps < 1) usage("--reps needs a positive count");
    } else if (a == "--csv") {
      o.csv = true;
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "-h" || a == "--help") {
      usage("help");
    } else if (!a.empty() && a[0] != '-' && findOp(a)) {
      o.ops.push_back(a);
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.ops.empty())
    for (const OpInfo &op : allOps()) o.ops.push_back(op.name);
  return o;
}

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double best = 0, median = 0;
};

Timing timeIt(int reps, const std::function<void()> &fn) {
  fn();  // warm-up: page faults, caches, thread pool
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double start = seconds();
    fn();
    t.push_back(seconds() - start);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

// The same bytes moved by a plain parallel memcpy: reads bytes/2, writes bytes/2.
Timing timeCopy(size_t bytes, int reps) {
  const size_t half = std::max<size_t>(bytes / 2, 64);
  std::unique_ptr<char[]> src(new char[half]), dst(new char[half]);
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < static_cast<long long>(half); i += 4096)
    std::memset(src.get() + i, 1, std::min<size_t>(4096, half - i));
  return timeIt(reps, [&] {
#pragma omp parallel
    {
      const size_t team = omp_get_num_threads(), me = omp_get_thread_num();
      const size_t chunk = (half + team - 1) / team, begin = std::min(half, me * chunk);
      const size_t end = std::min(half, begin + chunk);
      if (begin < end) std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
    }
  });
}

const char *dtypeName(infiniDtype_t t) {
  return t == INFINI_DTYPE_F32 ? "f32" : t == INFINI_DTYPE_F16 ? "f16" : "bf16";
}
const char *deviceName(infiniDevice_t d) {
  return d == INFINI_DEVICE_CPU             ? "cpu"
         : d == INFINI_DEVICE_CPU_REFERENCE ? "cpu_reference"
                                            : "opencl";
}
std::string shapeText(const std::vector<size_t> &s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

}  // namespace
}  // namespace bench

int main(int argc, char **argv) {
  using namespace bench;
  const Options opt = parse(argc, argv);
  const bool tty = isatty(2);
  std::printf("# infiniop-bench: cpu ISA %s, %d threads\n", infiniopCpuIsaName(),
              omp_get_max_threads());
  if (opt.csv)
    std::printf(
        "op,dtype,device,shape,elements,best_ms,median_ms,gelem_s,gb_s,copy_gb_s,ratio,check,max_"
        "ulp\n");
  else
    std::printf("%-22s %-5s %-13s %-14s %9s %9s %8s %7s %8s %6s %-5s %s\n", "op", "dtype", "device",
                "shape", "best_ms", "median_ms", "Gelem/s", "GB/s", "copyGB/s", "ratio", "check",
                "max_ulp");
  const size_t total = opt.ops.size() * opt.dtypes.size() * opt.devices.size();
  size_t index = 0;
  bool all_passed = true;
  for (const std::string &name : opt.ops) {
    const OpInfo &op = *findOp(name);
    const std::vector<size_t> shape = opt.shape.empty() ? op.default_shape : opt.shape;
    for (infiniDtype_t dtype : opt.dtypes) {
      for (infiniDevice_t device : opt.devices) {
        ++index;
        std::fprintf(stderr, "%s[%zu/%zu] %s %s %s %s ...%s", tty ? "\r" : "", index, total,
                     op.name, dtypeName(dtype), deviceName(device), shapeText(shape).c_str(),
                     tty ? "" : "\n");
        std::string error;
        std::unique_ptr<Case> c = op.make(device, dtype, shape, &error);
        if (!c) {
          std::printf("%s %s %s: %s\n", op.name, dtypeName(dtype), deviceName(device),
                      error.c_str());
          all_passed = false;
          continue;
        }
        if (c->run() != INFINI_STATUS_SUCCESS) {
          std::printf("%s: %s %s\n", op.name, "calculate failed:", infiniopGetLastError());
          all_passed = false;
          continue;
        }
        CheckResult check{true, 0.0, "skip"};
        if (opt.check) check = c->checkAgainstReference();
        all_passed = all_passed && check.passed;
        // Adaptive repetitions: about half a second of the operator, 3 to 50 runs.
        int reps = opt.reps;
        if (reps == 0) {
          const double once = seconds();
          c->run();
          reps = std::clamp(static_cast<int>(0.5 / std::max(seconds() - once, 1e-6)), 3, 50);
        }
        const Timing t = timeIt(reps, [&] { c->run(); });
        const Timing copy = timeCopy(c->bytes, reps);
        const double gelem = c->elements / t.best / 1e9, gbs = c->bytes / t.best / 1e9;
        const double copy_gbs = c->bytes / copy.best / 1e9;
        if (tty) std::fprintf(stderr, "\r\033[K");
        if (opt.csv)
          std::printf("%s,%s,%s,%s,%zu,%.4f,%.4f,%.3f,%.2f,%.2f,%.3f,%s,%.2f\n", op.name,
                      dtypeName(dtype), deviceName(device), shapeText(shape).c_str(), c->elements,
                      t.best * 1e3, t.median * 1e3, gelem, gbs, copy_gbs, gbs / copy_gbs,
                      check.label, check.max_ulp);
        else
          std::printf("%-22s %-5s %-13s %-14s %9.3f %9.3f %8.3f %7.2f %8.2f %6.2f %-5s %.2f\n",
                      op.name, dtypeName(dtype), deviceName(device), shapeText(shape).c_str(),
                      t.best * 1e3, t.median * 1e3, gelem, gbs, copy_gbs, gbs / copy_gbs,
                      check.label, check.max_ulp);
        std::fflush(stdout);
      }
    }
  }
  return all_passed ? 0 : 1;
}
