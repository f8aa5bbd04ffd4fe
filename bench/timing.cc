// SPDX-License-Identifier: Apache-2.0
#include "timing.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "nt_copy.h"

namespace bench {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class Fn>
double timeOnce(const Fn &fn) {
  const double start = now();
  fn();
  return now() - start;
}

// Calls fn(begin, end) on each thread's contiguous share of [0, n); shares start on 64-byte
// boundaries, so each thread's streaming stores start aligned.
template <class Fn>
void parallelChunks(size_t n, const Fn &fn) {
#pragma omp parallel
  {
    const size_t team = static_cast<size_t>(omp_get_num_threads());
    const size_t chunk = ((n + team - 1) / team + 63) / 64 * 64;
    const size_t begin = std::min(n, chunk * static_cast<size_t>(omp_get_thread_num()));
    const size_t end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  }
}

Timing summarize(std::vector<double> times) {
  if (times.empty()) return {};
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2], static_cast<int>(times.size())};
}

}  // namespace

Timings measure(const std::function<void()> &op, size_t copy_bytes, int reps, double budget_s) {
  const size_t half = std::max<size_t>(copy_bytes / 2, 1), padded = (half + 63) / 64 * 64;
  using Buffer = std::unique_ptr<char, void (*)(void *)>;
  Buffer src(static_cast<char *>(std::aligned_alloc(64, padded)), std::free);
  Buffer dst(static_cast<char *>(std::aligned_alloc(64, padded)), std::free);
  parallelChunks(half, [&](size_t begin, size_t end) {  // first touch by the copying thread
    for (size_t i = begin; i < end; ++i) src.get()[i] = static_cast<char>(i * 131 + 7);
    std::memset(dst.get() + begin, 0, end - begin);
  });
  const auto copy = [&] {
    parallelChunks(half, [&](size_t begin, size_t end) {
      std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
    });
  };
  const bool have_nt = ntCopyTarget() != nullptr;
  const auto nt = [&] {
    parallelChunks(half, [&](size_t begin, size_t end) {
      ntCopy(dst.get() + begin, src.get() + begin, end - begin);
    });
  };

  op();  // warm-up: page faults, caches, the thread pool
  if (have_nt) {
    nt();  // first, into the zeroed dst: a wrong head, body or tail shows
    if (std::memcmp(dst.get(), src.get(), half) != 0) {
      std::fprintf(stderr, "infiniop-bench: the streaming copy of %zu bytes is wrong\n", half);
      std::abort();
    }
  }
  copy();
  std::vector<double> op_times, copy_times, nt_times;
  double total = 0;
  const auto more = [&] {
    const size_t done = op_times.size();
    if (copy_times.empty() || (have_nt && nt_times.empty())) return true;
    return reps > 0 ? done < static_cast<size_t>(reps)
                    : done < 4 || (total < budget_s && done < 100000);
  };
  while (more()) {
    op_times.push_back(timeOnce(op));
    total += op_times.back();
    if (have_nt && op_times.size() % 2 == 0)
      nt_times.push_back(timeOnce(nt));
    else
      copy_times.push_back(timeOnce(copy));
  }
  return {summarize(op_times), summarize(copy_times), summarize(nt_times)};
}

}  // namespace bench
