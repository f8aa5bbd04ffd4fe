// SPDX-License-Identifier: Apache-2.0
// How an elementwise descriptor runs one plan on its device: made once at creation by the
// device's kernel table (core/kernel.h; a runner may build or fetch a program then), and run by
// each calculate.
#pragma once

#include <memory>

#include "elementwise/plan.h"
#include "infinicore.h"

namespace infiniop::elementwise {

class Runner : public ::infiniop::Runner {
 public:
  // Computes elements [begin, end) of the plan, in its iteration order, or with `zero_fill`
  // sets the outputs there to 0. `operands` are device addresses (source pointer plus offset),
  // outputs first. Host devices finish before returning; queued devices enqueue on `stream`.
  // Every argument is checked before anything is written.
  virtual infiniStatus_t run(const void *attributes, char *const *operands, size_t begin,
                             size_t end, bool zero_fill, void *stream) const = 0;
};

}  // namespace infiniop::elementwise
