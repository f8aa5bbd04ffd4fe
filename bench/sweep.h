// SPDX-License-Identifier: Apache-2.0
// --sweep: each operator at a ladder of sizes, from in-cache to well past the last-level cache.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "infiniop.h"
#include "ops.h"

namespace bench {

constexpr size_t kSweepMin = size_t{1} << 12;            // 4K output elements
constexpr size_t kSweepMax = size_t{1} << 26;            // 64M
constexpr size_t kSweepMemoryLimit = size_t{8} << 30;    // bytes: tensors + copy buffers
constexpr double kSweepTimeBudget = 0.2;                 // seconds of calls per size
constexpr size_t kSweepCheckBudget = size_t{1} << 16;    // sampled output elements per size
constexpr size_t kSweepWholeCheckMax = size_t{1} << 22;  // above: ops checked whole go unchecked

// 4K, 16K, ..., up to `largest` output elements (powers of 4).
std::vector<size_t> sweepSizes(size_t largest);

// The shape for about n output elements, from `base` (--shape or the operator's default) with its
// first dim scaled: rows of an elementwise shape, R of a MoE one (K and H kept). An elementwise
// shape whose one row already exceeds n becomes one row with its last dim cut. Returns "" and
// sets *shape, or says why the size is skipped (below one MoE row; over kSweepMemoryLimit).
std::string sweepShape(const OpInfo &op, infiniDtype_t dtype, std::vector<size_t> base, size_t n,
                       std::vector<size_t> *shape);

}  // namespace bench
