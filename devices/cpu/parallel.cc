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

int callThreads() {
  static const int configured = [] {
    const char *text = std::getenv("INFINIOP_NUM_THREADS");
    char *end = nullptr;
    const long value = text ? std::strtol(text, &end, 10) : 0;
    // Anything but a positive integer (unset, empty, 0, -3, "four") leaves OpenMP's setting.
    return text && *text && end && !*end && value > 0 ? static_cast<int>(std::min(value, 1L << 20))
                                                      : 0;
  }();
  if (omp_in_parallel()) return 1;
  const int wanted = configured > 0 ? configured : omp_get_max_threads();
  return std::max(1, std::min(wanted, omp_get_num_procs()));
}

void runRanges(const elementwise::Plan &plan, const void *attributes, char *const *operands,
               size_t first, size_t last, RangeFn range) {
  const size_t n = last - first;
  const int threads = n < kParallelThreshold ? 1 : callThreads();
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
