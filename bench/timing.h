// SPDX-License-Identifier: Apache-2.0
// Wall-clock timing of an operator next to the copies it is compared with.
#pragma once

#include <cstddef>
#include <functional>

namespace bench {

struct Timing {
  double best = 0, median = 0;  // seconds
  int reps = 0;                 // 0: not measured
};

struct Timings {
  Timing op;
  Timing copy;  // glibc memcpy
  Timing nt;    // the streaming-store copy (nt_copy.h); reps 0 where the build has none
};

// Times `op` and two copies of copy_bytes/2 between two buffers (copy_bytes/2 read +
// copy_bytes/2 written, split statically over the OpenMP threads): glibc's memcpy and the
// streaming-store copy. After one warm-up call of each, every copy call comes right after one of
// the operator's, memcpy and the streaming copy in turn, so that all three see the same load on
// a shared machine and the same cache state: `reps` calls of `op` (at least 2, so that each copy
// runs), or (reps = 0) as many as fit in about `budget_s` seconds of `op` (at least 4, at most
// 100000).
Timings measure(const std::function<void()> &op, size_t copy_bytes, int reps, double budget_s);

}  // namespace bench
