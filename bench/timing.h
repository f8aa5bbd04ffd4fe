// SPDX-License-Identifier: Apache-2.0
// Wall-clock timing of an operator next to the memcpy baseline it is compared with.
#pragma once

#include <cstddef>
#include <functional>

namespace bench {

struct Timing {
  double best = 0, median = 0;  // seconds
  int reps = 0;
};

struct Timings {
  Timing op, copy;
};

// Times `op` and a parallel memcpy of copy_bytes/2 between two buffers (copy_bytes/2 read +
// copy_bytes/2 written, split statically over the OpenMP threads). After one warm-up call of
// each, the calls alternate, so that both see the same load on a shared machine: `reps` pairs,
// or (reps = 0) as many as fit in about `budget_s` seconds of `op` (at least 3, at most 100000).
Timings measure(const std::function<void()> &op, size_t copy_bytes, int reps, double budget_s);

}  // namespace bench
