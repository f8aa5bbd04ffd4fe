// The operator table of infiniop-bench: how to build, run and check each operator.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "infiniop.h"

namespace bench {

struct CheckResult {
  bool passed;
  double max_ulp;  // largest |device - reference|, in ulps of the output's largest |reference|
  const char *label;
};

// One operator instance on one device, with its inputs filled and outputs allocated.
class Case {
 public:
  virtual ~Case() = default;
  size_t elements = 0;  // output elements per call
  size_t bytes = 0;     // every input read once + every output written once
  virtual infiniStatus_t run() = 0;
  // Runs cpu_reference on a prefix of the rows (at most ~1M elements) and compares.
  virtual CheckResult checkAgainstReference() = 0;
};

struct OpInfo {
  const char *name;
  std::vector<size_t> default_shape;  // the shape of the (half-size) output
  std::function<std::unique_ptr<Case>(infiniDevice_t, infiniDtype_t, const std::vector<size_t> &,
                                      std::string *error)>
      make;
};

const std::vector<OpInfo> &allOps();
const OpInfo *findOp(const std::string &name);

}  // namespace bench
