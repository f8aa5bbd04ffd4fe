// SPDX-License-Identifier: Apache-2.0
#include "sweep.h"

#include "case.h"

namespace bench {

std::vector<size_t> sweepSizes(size_t largest) {
  std::vector<size_t> sizes;
  for (size_t n = kSweepMin; n <= largest; n *= 4) sizes.push_back(n);
  return sizes;
}

std::string sweepShape(const OpInfo &op, infiniDtype_t dtype, std::vector<size_t> base, size_t n,
                       std::vector<size_t> *shape) {
  base.front() = 1;
  const size_t per_row = Case::elementsOf(op, base);
  if (per_row <= n) {
    base.front() = (n + per_row / 2) / per_row;  // nearest: the MoE grad's rows are K*H + K
  } else if (!op.gathers() && per_row / base.back() <= n) {
    base.back() = base.back() * n / per_row;  // elementwise: outputs scale with the last dim
  } else {
    return "one row of " + shapeText(base) + " is " + std::to_string(per_row) + " output elements";
  }
  // The case's tensors, and the two copy buffers of half their bytes each.
  const size_t bytes = 2 * Case::bytesOf(op, dtype, base);
  if (bytes > kSweepMemoryLimit)
    return shapeText(base) + " needs " + std::to_string(bytes >> 20) + " MiB, over " +
           std::to_string(kSweepMemoryLimit >> 20) + " MiB";
  *shape = base;
  return "";
}

}  // namespace bench
