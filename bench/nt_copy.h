// SPDX-License-Identifier: Apache-2.0
// The bench's roofline baseline: a copy with non-temporal (streaming) stores, which write whole
// cache lines to memory without first reading them into the cache, so it moves a byte count as
// fast as this machine's memory allows. Highway, dispatched at run time to the best target.
#pragma once

#include <cstddef>

namespace bench {

// Copies n bytes from src to dst (not overlapping): ordinary stores for the part before dst's
// first whole-vector boundary and after its last, streaming stores between, then a store fence
// so that the stores are done when it returns. Meant for one thread's share of a buffer.
void ntCopy(char *dst, const char *src, size_t n);

// The Highway target ntCopy runs at (e.g. "AVX3"), or null where the bench was built without
// Highway: then ntCopy is not available and must not be called.
const char *ntCopyTarget();

}  // namespace bench
