// SPDX-License-Identifier: Apache-2.0
// infiniop-bench's output: one row per case, as a table or as CSV, in the normal layout or the
// --sweep one (time per element and the ratios, one row per size).
#pragma once

#include <cstddef>
#include <string>

#include "case.h"
#include "timing.h"

namespace bench {

struct Row {
  std::string op, dtype, device, shape;
  size_t elements = 0, bytes = 0;
  Timing op_time, copy_time, nt_time;
  double first_s = -1;      // descriptor creation + first call to completion; < 0: not measured
  double vs_cpu = 0;        // cpu's best time / this best time, in the same run; 0: not known
  std::string check = "-";  // PASS, FAIL, ERROR, "-" (not checked), "ref" (is the reference)
  CheckResult result;
  std::string note;  // why it failed
};

enum class Layout { kTable, kSweep, kCsv };

void printHeader(Layout layout);
void printRow(Layout layout, const Row &row);

}  // namespace bench
