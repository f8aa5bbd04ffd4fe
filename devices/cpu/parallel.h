// SPDX-License-Identifier: Apache-2.0
// Thread split for the cpu device: OpenMP over flat element ranges, only when the work is
// large enough to repay waking the threads.
#pragma once

#include <omp.h>

#include <algorithm>

#include "elementwise/plan.h"

namespace infiniop::cpu {

// Per-target range body: runs elements [begin, end) of the plan.
using RangeFn = void (*)(const elementwise::Plan &plan, const void *attributes,
                         char *const *operands, size_t begin, size_t end);

// Below this many elements one thread does the whole call (a fork/join costs a few
// microseconds, about what one core needs for this many elements of a light kernel).
constexpr size_t kParallelThreshold = size_t{1} << 15;

// A call that moves at least this many bytes (inputs read + outputs written) writes its
// outputs with non-temporal stores: they would not stay in the cache for the next operator
// anyway, and ordinary stores first read every output line into the cache (a third of a
// two-operand operator's traffic) and evict the inputs on the way. $INFINIOP_STREAM_MIN_BYTES
// overrides it (0: always; the bench's --sweep shows where it pays on a machine).
size_t streamMinBytes();
constexpr size_t kStreamMinBytes = size_t{32} << 20;

inline bool streamOutputs(const elementwise::Plan &plan) {
  return plan.numel * plan.element_size * static_cast<size_t>(plan.numOperands()) >=
         streamMinBytes();
}

// Threads one large call may use: $INFINIOP_NUM_THREADS when it is a positive integer, else
// omp_get_max_threads() (OMP_NUM_THREADS or omp_set_num_threads); never more than the processors
// this process may run on (more only slow a memory-bound kernel), and 1 inside an enclosing OpenMP
// parallel region (the caller already splits the work). Each calling thread gets its own team,
// so K callers use up to K times this many threads.
int callThreads();

// Runs elements [begin, end) of the plan, split over threads when there are enough of them.
void runRanges(const elementwise::Plan &plan, const void *attributes, char *const *operands,
               size_t begin, size_t end, RangeFn range);

}  // namespace infiniop::cpu

// In a file compiled per target through foreach_target.h, where the functor `Functor` is declared
// in HWY_NAMESPACE: defines the per-target range body of the cpu kernel `name`. Use outside
// namespaces, then INFINIOP_CPU_ELEMENTWISE_DISPATCH(name) inside `#if HWY_ONCE`.
#define INFINIOP_CPU_ELEMENTWISE_RANGE(name, Functor)                                             \
  HWY_BEFORE_NAMESPACE();                                                                         \
  namespace infiniop::cpu::HWY_NAMESPACE {                                                        \
  void name##_range(const elementwise::Plan &plan, const void *attributes, char *const *operands, \
                    size_t begin, size_t end) {                                                   \
    ElementwiseRange<Functor>(plan, attributes, operands, begin, end);                            \
  }                                                                                               \
  }                                                                                               \
  HWY_AFTER_NAMESPACE()

// Defines the kernel `name` of the cpu device: dispatch to the best target, then split threads.
#define INFINIOP_CPU_ELEMENTWISE_DISPATCH(name)                                             \
  namespace infiniop::cpu {                                                                 \
  HWY_EXPORT(name##_range);                                                                 \
  void name(const elementwise::Plan &plan, const void *attributes, char *const *operands,   \
            size_t begin, size_t end) {                                                     \
    runRanges(plan, attributes, operands, begin, end, &HWY_DYNAMIC_DISPATCH(name##_range)); \
  }                                                                                         \
  }

namespace infiniop::cpu {

// Runs body(begin, end) over [0, n), one contiguous range per thread when n items of
// `cost_per_item` elements are worth waking the threads for. Each item is done by exactly one
// thread, so a body that computes each item on its own gives the same bits for any thread count.
template <class Body>
void parallelRanges(size_t n, size_t cost_per_item, const Body &body) {
  const bool worth_it = n > 1 && n * (cost_per_item == 0 ? 1 : cost_per_item) >= kParallelThreshold;
  if (!worth_it) {
    if (n > 0) body(size_t{0}, n);
    return;
  }
  const int threads = callThreads();
  if (threads <= 1) {
    body(size_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const size_t team = static_cast<size_t>(omp_get_num_threads());
    const size_t chunk = (n + team - 1) / team;
    const size_t begin = std::min(n, chunk * static_cast<size_t>(omp_get_thread_num()));
    const size_t end = std::min(n, begin + chunk);
    if (begin < end) body(begin, end);
  }
}

}  // namespace infiniop::cpu
