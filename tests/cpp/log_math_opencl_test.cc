// SPDX-License-Identifier: Apache-2.0
// devices/opencl/kernels/math.cl's log_f32 and log1p_f32 against the cpu device's Log and Log1p
// (devices/cpu/math-inl.h, at the best Highway target: log_math_test.cc holds every target to
// the same bits): the same inputs as log_math_test.cc and the special values, every result's
// bits equal. The program is the library's own `common` (the embedded storage.cl,
// math_constants.h and math.cl, as every kernel program starts) and a kernel of one line, built
// with the library's options on the first OpenCL device; skipped where there is none.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "log_math.h"
#include "opencl/cl.h"
#include "opencl/sources.h"

namespace infiniop_test::log_math {
namespace {

constexpr const char *kKernel = R"CL(
__kernel void log_math(__global const float *in, __global float *out, const uint function) {
  const size_t i = get_global_id(0);
  const float v = in[i];
  out[i] = function == 0   ? log_f32(v)
           : function == 1 ? log1p_f32(v)
           : function == 2 ? softplus_f32(v)
                           : sqrt_softplus_f32(v);
}
)CL";

class LogMathOpencl : public ::testing::Test {
 protected:
  void SetUp() override {
    cl_uint platforms = 0;
    if (clGetPlatformIDs(0, nullptr, &platforms) != CL_SUCCESS || platforms == 0)
      GTEST_SKIP() << "no OpenCL platform";
    std::vector<cl_platform_id> ids(platforms);
    ASSERT_EQ(clGetPlatformIDs(platforms, ids.data(), nullptr), CL_SUCCESS);
    for (cl_platform_id platform : ids)
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device_, nullptr) == CL_SUCCESS) break;
    if (!device_) GTEST_SKIP() << "no OpenCL device";
    cl_int code = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &code);
    ASSERT_EQ(code, CL_SUCCESS);
    queue_ = clCreateCommandQueue(context_, device_, 0, &code);
    ASSERT_EQ(code, CL_SUCCESS);
    const std::string source = std::string(infiniop::opencl::sources::common) + kKernel;
    const char *text = source.c_str();
    program_ = clCreateProgramWithSource(context_, 1, &text, nullptr, &code);
    ASSERT_EQ(code, CL_SUCCESS);
    // the library's options for an F32 program (devices/opencl/elementwise.cc)
    code = clBuildProgram(program_, 1, &device_, "-cl-std=CL1.2 -DSTORAGE_F32", nullptr, nullptr);
    if (code != CL_SUCCESS) {
      size_t size = 0;
      clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
      std::string log(size, '\0');
      clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
      FAIL() << "clBuildProgram: " << code << "\n" << log;
    }
    kernel_ = clCreateKernel(program_, "log_math", &code);
    ASSERT_EQ(code, CL_SUCCESS);
  }
  void TearDown() override {
    if (kernel_) clReleaseKernel(kernel_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }

  // f over `in` on the device.
  std::vector<float> run(Function f, const std::vector<float> &in) {
    const size_t bytes = in.size() * sizeof(float);
    std::vector<float> out(in.size());
    cl_int code = CL_SUCCESS;
    cl_mem input = clCreateBuffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                                  const_cast<float *>(in.data()), &code);
    EXPECT_EQ(code, CL_SUCCESS);
    cl_mem output = clCreateBuffer(context_, CL_MEM_WRITE_ONLY, bytes, nullptr, &code);
    EXPECT_EQ(code, CL_SUCCESS);
    const cl_uint function = static_cast<cl_uint>(f);
    EXPECT_EQ(clSetKernelArg(kernel_, 0, sizeof input, &input), CL_SUCCESS);
    EXPECT_EQ(clSetKernelArg(kernel_, 1, sizeof output, &output), CL_SUCCESS);
    EXPECT_EQ(clSetKernelArg(kernel_, 2, sizeof function, &function), CL_SUCCESS);
    const size_t items = in.size();
    EXPECT_EQ(
        clEnqueueNDRangeKernel(queue_, kernel_, 1, nullptr, &items, nullptr, 0, nullptr, nullptr),
        CL_SUCCESS);
    EXPECT_EQ(
        clEnqueueReadBuffer(queue_, output, CL_TRUE, 0, bytes, out.data(), 0, nullptr, nullptr),
        CL_SUCCESS);
    clReleaseMemObject(input);
    clReleaseMemObject(output);
    return out;
  }

  // Every set's results on the device equal the cpu device's, bit for bit.
 public:
  void compare(Function f, std::vector<Inputs> sets) {
    const std::vector<int64_t> all = targets();
    ASSERT_FALSE(all.empty());
    for (const Inputs &set : sets) {
      const size_t n = set.values.size();
      std::vector<float> cpu(n);
      ASSERT_STREQ(evaluate(f, all[0], set.values.data(), cpu.data(), n), targetName(all[0]));
      const std::vector<float> device = run(f, set.values);
      size_t differ = 0, at = n;
      for (size_t i = 0; i < n; ++i)
        if (bitsOf(device[i]) != bitsOf(cpu[i]) && differ++ == 0) at = i;
      EXPECT_EQ(differ, 0u) << functionName(f) << ", " << set.name << ": opencl differs from "
                            << targetName(all[0]) << " at " << differ << " inputs, first "
                            << set.values[at] << ": " << device[at] << " vs " << cpu[at];
      std::printf("%s, %s: %zu inputs, opencl's bits %s %s's\n", functionName(f), set.name.c_str(),
                  n, differ ? "differ from" : "equal to", targetName(all[0]));
    }
  }

 protected:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
};

// The special inputs of log_math_test.cc's by-value tests.
Inputs specials() {
  std::vector<float> values;
  for (uint32_t bits :
       {0u, 0x80000000u, 1u, 0x80000001u, 0x32800000u, 0x3F800000u, 0x40000000u, 0x7F7FFFFFu,
        0x7F800000u, 0xFF800000u, 0xBF800000u, 0xBE800000u, 0x7FC00000u, 0x7FC00001u, 0xFFC12345u})
    values.push_back(fromBits(bits));
  return {"special values", values, false};
}

// f's sets and the special values.
void compareWithSpecials(LogMathOpencl *test, Function f, std::vector<Inputs> sets) {
  sets.push_back(specials());
  test->compare(f, sets);
}

TEST_F(LogMathOpencl, LogSameBitsAsCpu) {
  compareWithSpecials(this, Function::kLog, logInputs());
}

TEST_F(LogMathOpencl, Log1pSameBitsAsCpu) {
  compareWithSpecials(this, Function::kLog1p, log1pInputs());
}

TEST_F(LogMathOpencl, SoftplusSameBitsAsCpu) {
  compareWithSpecials(this, Function::kSoftplus, softplusInputs());
}

TEST_F(LogMathOpencl, SqrtSoftplusSameBitsAsCpu) {
  compareWithSpecials(this, Function::kSqrtSoftplus, softplusInputs());
}

}  // namespace
}  // namespace infiniop_test::log_math
