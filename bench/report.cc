// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <omp.h>

#include <cstdio>

#include "infiniop.h"

namespace bench {
namespace {

// The derived numbers of a row, at its best times; a copy not measured gives 0.
struct Rates {
  double gelem, gbs, copy_gbs, nt_gbs;
  double ratio() const { return gbs / copy_gbs; }
  double ratioNt() const { return nt_gbs > 0 ? gbs / nt_gbs : 0; }
};
Rates ratesOf(const Row &r) {
  const double nt_best = r.nt_time.reps > 0 ? r.nt_time.best : 0;
  return {r.elements / r.op_time.best / 1e9, r.bytes / r.op_time.best / 1e9,
          r.bytes / r.copy_time.best / 1e9, nt_best > 0 ? r.bytes / nt_best / 1e9 : 0};
}

// printf of `value` in `format`, or "-" right-aligned in `width` where `known` is false.
void cell(bool known, int width, const char *format, double value) {
  if (known)
    std::printf(format, value);
  else
    std::printf("%*s ", width, "-");
}

std::string sampleText(const CheckResult &r) {
  return r.checked == 0 ? "-" : r.stride == 1 ? "all" : "1/" + std::to_string(r.stride);
}

void printTableRow(const Row &r) {
  const Rates x = ratesOf(r);
  const bool timed = r.op_time.reps > 0, nt = timed && x.nt_gbs > 0;
  std::printf("%-30s %-4s %-13s %-10s ", r.op.c_str(), r.dtype.c_str(), r.device.c_str(),
              r.shape.c_str());
  cell(timed, 8, "%8.3f ", r.op_time.best * 1e3);
  cell(timed, 9, "%9.3f ", r.op_time.median * 1e3);
  cell(r.first_s >= 0, 8, "%8.2f ", r.first_s * 1e3);
  cell(timed, 7, "%7.3f ", x.gelem);
  cell(timed, 7, "%7.2f ", x.gbs);
  cell(timed, 8, "%8.2f ", x.copy_gbs);
  cell(timed, 5, "%5.2f ", x.ratio());
  cell(nt, 6, "%6.2f ", x.nt_gbs);
  cell(nt, 8, "%8.2f ", x.ratioNt());
  cell(r.vs_cpu > 0, 6, "%6.2f ", r.vs_cpu);
  cell(timed, 5, "%5.0f ", r.op_time.reps);
  std::printf("%-5s %-6s ", r.check.c_str(), sampleText(r.result).c_str());
  if (r.result.checked)
    std::printf("%.3g\n", r.result.max_ulp);
  else
    std::printf("-\n");
}

void printSweepRow(const Row &r) {
  const Rates x = ratesOf(r);
  const bool timed = r.op_time.reps > 0, nt = timed && x.nt_gbs > 0;
  std::printf("%-30s %-4s %-13s %-12s %10zu ", r.op.c_str(), r.dtype.c_str(), r.device.c_str(),
              r.shape.c_str(), r.elements);
  cell(timed, 8, "%8.3f ", r.op_time.best * 1e9 / r.elements);
  cell(timed, 7, "%7.2f ", x.gbs);
  cell(timed, 8, "%8.2f ", x.copy_gbs);
  cell(nt, 6, "%6.2f ", x.nt_gbs);
  cell(timed, 5, "%5.2f ", x.ratio());
  cell(nt, 8, "%8.2f ", x.ratioNt());
  cell(r.vs_cpu > 0, 6, "%6.2f ", r.vs_cpu);
  cell(timed, 6, "%6.0f ", r.op_time.reps);
  std::printf("%-5s %-6s\n", r.check.c_str(), sampleText(r.result).c_str());
}

void printCsvRow(const Row &r) {
  const Rates x = ratesOf(r);
  const bool timed = r.op_time.reps > 0, nt = timed && x.nt_gbs > 0;
  std::printf("%s,%s,%s,%s,%zu,%zu,", r.op.c_str(), r.dtype.c_str(), r.device.c_str(),
              r.shape.c_str(), r.elements, r.bytes);
  if (timed)
    std::printf("%.6f,%.6f,%.4f,%.3f,%.3f,%.4f,%d,", r.op_time.best * 1e3, r.op_time.median * 1e3,
                x.gelem, x.gbs, x.copy_gbs, x.ratio(), r.op_time.reps);
  else
    std::printf(",,,,,,,");
  std::string note = r.note;
  for (char &c : note)
    if (c == '"') c = '\'';
  std::printf("%s,%zu,%zu,%zu,%.4g,%s,%d,\"%s\",", r.check.c_str(), r.result.checked,
              r.result.stride, r.result.bad, r.result.max_ulp, infiniopCpuIsaName(),
              omp_get_max_threads(), note.c_str());
  if (r.first_s >= 0) std::printf("%.3f", r.first_s * 1e3);
  std::printf(",");
  if (r.vs_cpu > 0) std::printf("%.4f", r.vs_cpu);
  std::printf(",");
  if (nt)
    std::printf("%.3f,%.4f", x.nt_gbs, x.ratioNt());
  else
    std::printf(",");
  std::printf("\n");
}

}  // namespace

void printHeader(Layout layout) {
  switch (layout) {
    case Layout::kCsv:  // columns are only ever added at the end: scripts index them
      std::printf(
          "op,dtype,device,shape,elements,bytes,best_ms,median_ms,gelem_s,gb_s,copy_gb_s,ratio,"
          "reps,check,checked,sample_stride,bad,max_ulp,isa,threads,note,first_ms,vs_cpu,"
          "nt_gb_s,ratio_nt\n");
      return;
    case Layout::kSweep:
      std::printf("%-30s %-4s %-13s %-12s %10s %8s %7s %8s %6s %5s %8s %6s %6s %-5s %s\n", "op",
                  "type", "device", "shape", "elements", "ns/elem", "GB/s", "copyGB/s", "ntGB/s",
                  "ratio", "ratio_nt", "vs_cpu", "reps", "check", "sample");
      return;
    case Layout::kTable:
      std::printf(
          "%-30s %-4s %-13s %-10s %8s %9s %8s %7s %7s %8s %5s %6s %8s %6s %5s %-5s %-6s %s\n", "op",
          "type", "device", "shape", "best_ms", "median_ms", "first_ms", "Gelem/s", "GB/s",
          "copyGB/s", "ratio", "ntGB/s", "ratio_nt", "vs_cpu", "reps", "check", "sample",
          "max_ulp");
      return;
  }
}

void printRow(Layout layout, const Row &row) {
  if (layout == Layout::kCsv) return printCsvRow(row);
  if (layout == Layout::kSweep)
    printSweepRow(row);
  else
    printTableRow(row);
  if (!row.note.empty()) std::printf("    %s\n", row.note.c_str());
}

}  // namespace bench
