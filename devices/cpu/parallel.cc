// SPDX-License-Identifier: Apache-2.0
#include "cpu/parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

namespace infiniop::cpu {

size_t streamMinBytes() {
  static const size_t bytes = [] {
    const char *text = std::getenv("INFINIOP_STREAM_MIN_BYTES");
    char *end = nullptr;
    const unsigned long long value = text ? std::strtoull(text, &end, 10) : 0;
    if (text && *text && end && !*end) return static_cast<size_t>(value);
    return kStreamMinBytes;
  }();
  return bytes;
}

void runRanges(const elementwise::Plan &plan, const void *attributes, char *const *operands,
               size_t first, size_t last, RangeFn range) {
  const size_t n = last - first;
  const int threads = n < kParallelThreshold ? 1 : omp_get_max_threads();
  if (threads <= 1) {
    range(plan, attributes, operands, first, last);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // Chunks are whole multiples of 64 elements so that threads never share a cache line of a
    // contiguous output.
    const size_t team = static_cast<size_t>(omp_get_num_threads());
    const size_t chunk = ((n + team - 1) / team + 63) / 64 * 64;
    const size_t begin = std::min(n, chunk * static_cast<size_t>(omp_get_thread_num()));
    const size_t end = std::min(n, begin + chunk);
    if (begin < end) range(plan, attributes, operands, first + begin, first + end);
  }
}

}  // namespace infiniop::cpu
