// SPDX-License-Identifier: Apache-2.0
// infiniop-bench: correctness and speed of infiniop's operators, in the spirit of oneDNN's
// benchdnn. Each case runs on the chosen device, is checked against cpu_reference on a sample,
// then timed, next to two parallel copies of the same byte count timed in the same run: glibc's
// memcpy and a streaming-store copy (the memory roofline). --sweep does so at a ladder of sizes.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "case.h"
#include "infiniop.h"
#include "numeric.h"
#include "nt_copy.h"
#include "ops.h"
#include "report.h"
#include "sweep.h"
#include "timing.h"

namespace bench {
namespace {

constexpr size_t kCheckBudget = size_t{1} << 20;  // output elements compared per case, at most
constexpr double kTimeBudget = 1.0;               // seconds of calls per case, adaptive --reps

struct Options {
  std::vector<const OpInfo *> ops;
  std::vector<infiniDtype_t> dtypes = {INFINI_DTYPE_F32, INFINI_DTYPE_F16, INFINI_DTYPE_BF16};
  std::vector<infiniDevice_t> devices = {INFINI_DEVICE_CPU};
  std::vector<size_t> shape;  // empty: each operator's default
  int threads = 0;            // 0: OpenMP's default (all)
  int reps = 0;               // 0: adaptive
  bool csv = false, check = true;
  bool sweep = false;
  infiniopFpmathMode_t fpmath = INFINIOP_FPMATH_STRICT;
  size_t sweep_max = kSweepMax;  // output elements
};

void printUsage(FILE *to) {
  std::fprintf(to,
               "usage: infiniop-bench [OP...] [--device NAME|all] (NAME: a device of this build)\n"
               "                      [--dtype f32|f16|bf16|all] [--shape AxBxC] [--threads N]\n"
               "                      [--reps N] [--csv] [--no-check] [--sweep] [--sweep-max N]\n"
               "                      [--fpmath strict|relaxed] (relaxed: F32 rows as dtype "
               "f32-relaxed)\n"
               "no OP: every operator. Operators:");
  for (const OpInfo &op : allOps()) std::fprintf(to, " %s", op.name);
  std::fprintf(to, "\n");
}

[[noreturn]] void badArgument(const std::string &why) {
  std::fprintf(stderr, "infiniop-bench: %s\n", why.c_str());
  printUsage(stderr);
  std::exit(2);
}

long positive(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < 1 || v > (1L << 40))
    badArgument(flag + " needs a positive integer, not '" + text + "'");
  return v;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) badArgument("missing value after " + a);
      return std::string(argv[++i]);
    };
    if (a == "--dtype") {
      const std::string v = value();
      if (v == "f32")
        o.dtypes = {INFINI_DTYPE_F32};
      else if (v == "f16")
        o.dtypes = {INFINI_DTYPE_F16};
      else if (v == "bf16")
        o.dtypes = {INFINI_DTYPE_BF16};
      else if (v != "all")
        badArgument("unknown dtype '" + v + "'");
    } else if (a == "--device") {
      // The library's own list (infiniopGetDeviceTypes): "all" is every device of this build;
      // main() drops those this machine has none of.
      const std::string v = value();
      o.devices.clear();
      std::string names;
      for (infiniDevice_t d : builtDevices()) {
        if (v == "all" || v == deviceName(d)) o.devices.push_back(d);
        names += std::string(names.empty() ? "" : ", ") + deviceName(d);
      }
      if (o.devices.empty())
        badArgument("unknown device '" + v + "'; this build has " + names + ", or all");
    } else if (a == "--shape") {
      const std::string v = value();
      o.shape.clear();
      for (size_t start = 0; start <= v.size();) {
        const size_t end = std::min(v.find('x', start), v.size());
        o.shape.push_back(positive("--shape", v.substr(start, end - start)));
        start = end + 1;
      }
    } else if (a == "--threads") {
      o.threads = static_cast<int>(positive(a, value()));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(std::min(positive(a, value()), 1L << 24));
    } else if (a == "--csv") {
      o.csv = true;
    } else if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "--sweep-max") {  // N, NK or NM (x 2^10, x 2^20) output elements
      std::string v = value();
      const char unit = v.empty() ? 0 : v.back();
      const int shift = unit == 'K' || unit == 'k' ? 10 : unit == 'M' || unit == 'm' ? 20 : 0;
      if (shift) v.pop_back();
      o.sweep_max = static_cast<size_t>(positive(a, v)) << shift;
      if (o.sweep_max < kSweepMin) badArgument("--sweep-max is at least 4K (4096)");
      o.sweep = true;
    } else if (a == "--fpmath") {
      const std::string v = value();
      if (v == "relaxed")
        o.fpmath = INFINIOP_FPMATH_RELAXED;
      else if (v != "strict")
        badArgument("unknown fpmath mode '" + v + "'; strict or relaxed");
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "-h" || a == "--help") {
      printUsage(stdout);
      std::exit(0);
    } else if (const OpInfo *op = findOp(a)) {
      o.ops.push_back(op);
    } else {
      badArgument("unknown " + std::string(a[0] == '-' ? "option" : "operator") + " '" + a + "'");
    }
  }
  if (o.ops.empty())
    for (const OpInfo &op : allOps()) o.ops.push_back(&op);
  return o;
}

// The stderr progress line: rewritten in place on a terminal, one line each otherwise.
class Progress {
 public:
  Progress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO)) {}
  void show(const std::string &what) {
    std::fprintf(stderr, "%s[%zu/%zu] %s ...%s", tty_ ? "\r\033[K" : "", ++done_, total_,
                 what.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void clear() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  size_t total_, done_ = 0;
  bool tty_;
};

// Creates, checks and times one case; returns false if anything failed.
bool runCase(const Options &o, const OpInfo &op, infiniDtype_t dtype, infiniDevice_t device,
             const std::vector<size_t> &shape, Row *row) {
  std::string error;
  const std::unique_ptr<Case> c = Case::create(op, device, dtype, shape, o.fpmath, &error);
  if (!c) {
    row->check = "ERROR";
    row->note = "create: " + error;
    return false;
  }
  row->elements = c->elements();
  row->bytes = c->bytes();
  const auto start = std::chrono::steady_clock::now();
  if (const infiniStatus_t s = c->run(); s != INFINI_STATUS_SUCCESS) {
    row->check = "ERROR";
    row->note = std::string("calculate: ") + infiniStatusString(s) + ": " + infiniopGetLastError();
    return false;
  }
  // The first call, on opencl the first enqueue and the wait for it, after the descriptor's
  // creation (where the program is built).
  row->first_s = c->createSeconds() +
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool ok = true;
  if (device == INFINI_DEVICE_CPU_REFERENCE) {
    row->check = "ref";
  } else if (o.check && (!o.sweep || !op.gathers() || row->elements <= kSweepWholeCheckMax)) {
    // A sweep checks a smaller sample per size: its many sizes would spend more on the
    // single-threaded reference than on the timing.
    row->result = c->check(o.sweep ? kSweepCheckBudget : kCheckBudget);
    ok = row->result.passed;
    row->check = !row->result.error.empty() ? "ERROR" : ok ? "PASS" : "FAIL";
    row->note = !row->result.error.empty() ? row->result.error
                : ok                       ? ""
                                           : std::to_string(row->result.bad) + " of " +
                           std::to_string(row->result.checked) +
                           " beyond tolerance; first: " + row->result.first_bad;
  }
  infiniStatus_t status = INFINI_STATUS_SUCCESS;
  const Timings t = measure(
      [&] {
        const infiniStatus_t s = c->run();
        if (s != INFINI_STATUS_SUCCESS) status = s;
      },
      row->bytes, o.reps, o.sweep ? kSweepTimeBudget : kTimeBudget);
  row->op_time = t.op;
  row->copy_time = t.copy;
  row->nt_time = t.nt;
  if (status != INFINI_STATUS_SUCCESS) {
    row->check = "ERROR";
    row->note =
        std::string("calculate: ") + infiniStatusString(status) + ": " + infiniopGetLastError();
    return false;
  }
  return ok;
}

// Whether a handle of `device` can be created for device_id 0 (or the device's own choice, e.g.
// $INFINIOP_OPENCL_DEVICE); if not, *why is the library's reason.
bool probe(infiniDevice_t device, std::string *why) {
  infiniopHandle_t handle = nullptr;
  if (const infiniStatus_t s = infiniopCreateHandle(&handle, device, 0);
      s != INFINI_STATUS_SUCCESS) {
    *why = std::string(infiniStatusString(s)) + ": " + infiniopGetLastError();
    return false;
  }
  infiniopDestroyHandle(handle);
  return true;
}

}  // namespace
}  // namespace bench

int main(int argc, char **argv) {
  using namespace bench;
  const Options o = parse(argc, argv);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  // Drops from --device all each device this machine has none of (no OpenCL driver); a run of
  // that device alone exits 3. Devices whose memory is not the host's are described.
  std::vector<infiniDevice_t> devices;
  std::string device_lines;
  for (infiniDevice_t device : o.devices) {
    std::string why;
    if (!probe(device, &why)) {
      if (o.devices.size() == 1) {
        std::fprintf(stderr, "infiniop-bench: no %s device: %s\n", deviceName(device), why.c_str());
        return 3;  // not a failure of the library: ctest's SKIP_RETURN_CODE
      }
      device_lines += std::string("# ") + deviceName(device) + " skipped: " + why + "\n";
      continue;
    }
    devices.push_back(device);
    if (isHostMemory(device)) continue;
    const char *env = std::getenv("INFINIOP_OPENCL_DEVICE");
    device_lines += std::string("# ") + deviceName(device) + ": device " +
                    (device == INFINI_DEVICE_OPENCL && env && *env
                         ? "$INFINIOP_OPENCL_DEVICE=" + std::string(env)
                         : std::string("0")) +
                    " of " + std::to_string(deviceCount(device)) +
                    "; calls timed to completion "
                    "(enqueue + infiniopStreamSynchronize); first_ms = descriptor creation "
                    "(program build) + first call, on a new handle per case; copy baselines and "
                    "--threads are the host's\n";
  }
  const char *nt_target = ntCopyTarget();
  const std::string baselines =
      nt_target ? std::string("glibc memcpy (ratio) and a streaming-store copy at ") + nt_target +
                      " (ratio_nt: the memory roofline)"
                : "glibc memcpy (ratio); no streaming-store copy (built without Highway)";
  std::fprintf(o.csv ? stderr : stdout,
               "# infiniop-bench: cpu ISA %s, %d OpenMP threads; copy baselines: %s\n"
               "# check: vs cpu_reference on <= %zu output elements per case (sample: 'all', or "
               "1/k = every k-th element, every k-th row for split ops)\n"
               "# PASS: each |err| <= max(64 ulp, floor) (f32) or 1 ulp + floor (f16, bf16), "
               "floor = 1e-6 * max|ref|; max_ulp = max |err| in ulps of max|ref|\n%s",
               infiniopCpuIsaName(), omp_get_max_threads(), baselines.c_str(),
               o.sweep ? kSweepCheckBudget : kCheckBudget, device_lines.c_str());
  const Layout layout = o.csv ? Layout::kCsv : o.sweep ? Layout::kSweep : Layout::kTable;
  printHeader(layout);
  std::fflush(stdout);

  // One size per case, or the sweep's ladder; each case's shape comes from its operator's.
  const std::vector<size_t> sizes = o.sweep ? sweepSizes(o.sweep_max) : std::vector<size_t>{0};
  Progress progress(o.ops.size() * o.dtypes.size() * devices.size() * sizes.size());
  bool all_ok = true;
  for (const OpInfo *op : o.ops) {
    const std::vector<size_t> base = o.shape.empty() ? op->default_shape : o.shape;
    for (infiniDtype_t dtype : o.dtypes) {
      for (size_t n : sizes) {
        std::vector<size_t> shape = base;
        if (o.sweep) {
          if (const std::string why = sweepShape(*op, dtype, base, n, &shape); !why.empty()) {
            std::fprintf(o.csv ? stderr : stdout, "# skipped %s %s at %zu elements: %s\n", op->name,
                         dtypeName(dtype), n, why.c_str());
            for (size_t i = 0; i < devices.size(); ++i) progress.show("skipped");
            progress.clear();
            continue;
          }
        }
        double cpu_best = 0;  // this op, dtype and shape on cpu, for vs_cpu
        for (infiniDevice_t device : devices) {
          Row row;
          row.op = op->name;
          row.dtype = dtypeName(dtype);
          // The relaxed mode changes only F32 outputs (infiniopFpmathMode_t).
          if (o.fpmath == INFINIOP_FPMATH_RELAXED && dtype == INFINI_DTYPE_F32)
            row.dtype += "-relaxed";
          row.device = deviceName(device);
          row.shape = shapeText(shape);
          progress.show(row.op + " " + row.dtype + " " + row.device + " " + row.shape);
          all_ok = runCase(o, *op, dtype, device, shape, &row) && all_ok;
          if (row.op_time.reps > 0 && device == INFINI_DEVICE_CPU) cpu_best = row.op_time.best;
          if (row.op_time.reps > 0 && device != INFINI_DEVICE_CPU && cpu_best > 0)
            row.vs_cpu = cpu_best / row.op_time.best;
          progress.clear();
          printRow(layout, row);
          std::fflush(stdout);
        }
      }
    }
  }
  return all_ok ? 0 : 1;
}
