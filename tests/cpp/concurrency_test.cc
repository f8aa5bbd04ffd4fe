// SPDX-License-Identifier: Apache-2.0
// Concurrency (issue 16 item 2). The contract: a descriptor may be used by several threads at
// once, handles and descriptors may be made and destroyed by several threads at once, and the
// last error belongs to the calling thread. These tests do that with 8 threads on every built
// device; they pass in the plain build and are the suite of CI's ThreadSanitizer build
// (.ci/run), where a data race fails them even when the results happen to come out right.
//
// The library's own OpenMP threads: under TSan they run one per call (INFINIOP_NUM_THREADS=1),
// because Debian's libgomp is not instrumented and TSan cannot see its barriers (every parallel
// region would be reported); the plain build runs them at full width beside the caller threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device_memory.h"
#include "device_param.h"
#include "op_specs.h"
#include "tensor_buffer.h"

namespace infiniop_test {
namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 3;

// One call of `op` on `handle` with inputs made from `seed`, on `stream`; returns every
// buffer's bytes afterwards (outputs, inputs and guard elements), read back from the device.
std::vector<std::vector<uint8_t>> runOnce(infiniopHandle_t handle, const OpSpec &op, void *desc,
                                          int seed, void *stream) {
  std::vector<std::unique_ptr<TensorBuffer>> buffers;
  DeviceMirror device(handle);
  Ptrs ptrs;
  for (const Slot &s : op.slots) {
    buffers.push_back(std::make_unique<TensorBuffer>(s.shape, s.dtype));
    TensorBuffer &b = *buffers.back();
    if (!s.values.empty()) {
      writeValues(b, s.values);
    } else if (!s.output) {  // signed, distinct per element and per seed
      b.fill([seed](size_t i) {
        return static_cast<float>(static_cast<int>((i * 7919 + seed * 104729) % 2001) - 1000) /
               125.0f;
      });
    }
    device.add(b);
    ptrs.push_back(s.absent ? nullptr : device(b));
  }
  size_t workspace_size = 0;
  EXPECT_EQ(op.workspace(desc, &workspace_size), INFINI_STATUS_SUCCESS);
  void *workspace = device.scratch(workspace_size);
  EXPECT_EQ(op.calculate(desc, workspace, workspace_size, ptrs, stream), INFINI_STATUS_SUCCESS)
      << op.name << ": " << infiniopGetLastError();
  EXPECT_STREQ(infiniopGetLastError(), "") << "a successful call leaves the last error empty";
  if (stream) {
    EXPECT_EQ(infiniopStreamSynchronize(handle, stream), INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
  }
  device.download();
  std::vector<std::vector<uint8_t>> bytes;
  for (const auto &b : buffers) bytes.push_back(b->storage());
  return bytes;
}

// The descriptor of `op`'s configuration, with its tensor descriptors (destroyed after).
struct Made {
  void *desc = nullptr;
  std::vector<infiniopTensorDescriptor_t> tensors;
  const OpSpec *op = nullptr;
  ~Made() {
    if (desc) {
      EXPECT_EQ(op->destroy(desc), INFINI_STATUS_SUCCESS) << infiniopGetLastError();
    }
    for (auto t : tensors) EXPECT_EQ(infiniopDestroyTensorDescriptor(t), INFINI_STATUS_SUCCESS);
  }
};

void make(infiniopHandle_t handle, const OpSpec &op, Made &made) {
  made.op = &op;
  Descs descs;
  for (const Slot &s : op.slots) {
    infiniopTensorDescriptor_t t = nullptr;
    if (!s.absent) {
      EXPECT_EQ(
          infiniopCreateTensorDescriptor(&t, s.shape.size(), s.shape.data(), nullptr, s.dtype),
          INFINI_STATUS_SUCCESS);
      made.tensors.push_back(t);
    }
    descs.push_back(t);
  }
  EXPECT_EQ(op.create(handle, &made.desc, descs, op.attrs), INFINI_STATUS_SUCCESS)
      << op.name << ": " << infiniopGetLastError();
}

// Waits until `count` reaches `n` (threads meeting without C++20's std::barrier).
void waitFor(const std::atomic<int> &count, int n) {
  while (count.load() < n) std::this_thread::yield();
}

// Runs body(thread index) on kThreads threads that start together.
template <class Body>
void onThreads(const Body &body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      waitFor(ready, kThreads);
      body(t);
    });
  for (auto &t : threads) t.join();
}

class Concurrency : public DeviceTestBase,
                    public ::testing::WithParamInterface<std::tuple<infiniDevice_t, size_t>> {
 protected:
  void SetUp() override { selectDeviceType(std::get<0>(GetParam())); }
  const OpSpec &op() const { return specs()[std::get<1>(GetParam())]; }
};

// 8 threads share one descriptor, each on its own buffers and its own stream, and get the bits
// one thread gets from the same inputs.
TEST_P(Concurrency, SharedDescriptorMatchesOneThread) {
  Made made;
  make(handle(), op(), made);
  ASSERT_NE(made.desc, nullptr);
  std::vector<std::vector<std::vector<uint8_t>>> expected;
  for (int t = 0; t < kThreads; ++t)
    expected.push_back(runOnce(handle(), op(), made.desc, t, nullptr));
  std::atomic<int> mismatches{0};
  onThreads([&](int t) {
    void *stream = nullptr;
    EXPECT_EQ(infiniopStreamCreate(handle(), &stream), INFINI_STATUS_SUCCESS)
        << infiniopGetLastError();
    for (int round = 0; round < kRounds; ++round)
      if (runOnce(handle(), op(), made.desc, t, stream) != expected[t]) ++mismatches;
    EXPECT_EQ(infiniopStreamDestroy(handle(), stream), INFINI_STATUS_SUCCESS);
  });
  EXPECT_EQ(mismatches.load(), 0) << "calls on a shared descriptor differ from one thread's";
}

// 8 threads each make and destroy their own handle (or share the process's OpenCL handle, whose
// creation takes seconds) and descriptors, call, and compare with this thread's result.
TEST_P(Concurrency, HandlesAndDescriptorsMadeAndDestroyedAtOnce) {
  const bool own_handles = deviceInfo(std::get<0>(GetParam())).host_memory;
  Made made;
  make(handle(), op(), made);
  ASSERT_NE(made.desc, nullptr);
  const auto expected = runOnce(handle(), op(), made.desc, 1, nullptr);
  std::atomic<int> mismatches{0};
  onThreads([&](int) {
    for (int round = 0; round < kRounds; ++round) {
      infiniopHandle_t h = handle();
      if (own_handles) {
        EXPECT_EQ(infiniopCreateHandle(&h, std::get<0>(GetParam()), 0), INFINI_STATUS_SUCCESS)
            << infiniopGetLastError();
      }
      {
        Made mine;
        make(h, op(), mine);
        if (!mine.desc || runOnce(h, op(), mine.desc, 1, nullptr) != expected) ++mismatches;
      }
      if (own_handles) {
        EXPECT_EQ(infiniopDestroyHandle(h), INFINI_STATUS_SUCCESS);
      }
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

std::vector<std::tuple<infiniDevice_t, size_t>> deviceOperators() {
  std::vector<std::tuple<infiniDevice_t, size_t>> all;
  for (infiniDevice_t device : builtDeviceTypes())
    if (!cappedRun() || device == INFINI_DEVICE_CPU)
      for (size_t i = 0; i < specs().size(); ++i) all.emplace_back(device, i);
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    All, Concurrency, ::testing::ValuesIn(deviceOperators()),
    [](const ::testing::TestParamInfo<std::tuple<infiniDevice_t, size_t>> &info) {
      return deviceInfo(std::get<0>(info.param)).name + std::string("_") +
             specs()[std::get<1>(info.param)].name;
    });

// Under load, each thread's last error is its own last call's: half the threads fail, half
// succeed, 200 times each; a failing thread reads the message one thread reads for that call.
TEST(LastError, BelongsToTheCallingThread) {
  const size_t shape[] = {4, 4, 4};
  auto call = [&](bool fail) {
    infiniopTensorDescriptor_t desc = nullptr;
    const infiniStatus_t status =
        infiniopCreateTensorDescriptor(&desc, 3, fail ? nullptr : shape, nullptr, INFINI_DTYPE_F32);
    const std::string message = infiniopGetLastError();
    if (desc) infiniopDestroyTensorDescriptor(desc);
    return std::make_pair(status, message);
  };
  const auto failed = call(true);
  ASSERT_NE(failed.first, INFINI_STATUS_SUCCESS);
  ASSERT_NE(failed.second, "");
  std::atomic<int> wrong{0};
  onThreads([&](int t) {
    for (int i = 0; i < 200; ++i) {
      const auto got = call(t % 2 == 1);
      if (got != (t % 2 == 1 ? failed : std::make_pair(INFINI_STATUS_SUCCESS, std::string())))
        ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

// Threads of this process, from /proc (Linux); -1 elsewhere.
int processThreads() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return ec ? -1 : n;
}

// What docs/devices.md promises of the library's threads: each calling thread's large call
// uses at most INFINIOP_NUM_THREADS (else OMP_NUM_THREADS, else one per processor) threads,
// its own team; a call from inside an OpenMP parallel region uses none beyond the caller.
size_t callThreadsDocumented() {
  const char *text = std::getenv("INFINIOP_NUM_THREADS");
  const int configured = text ? std::atoi(text) : 0;
  const int wanted = configured > 0 ? configured : omp_get_max_threads();
  return static_cast<size_t>(std::max(1, std::min(wanted, omp_get_num_procs())));
}

// A GeluBackward large enough to split (2^16 elements) on a fresh cpu handle; returns grad_input.
std::vector<uint8_t> largeCall(infiniopHandle_t handle) {
  TensorBuffer grad_input({256, 256}, INFINI_DTYPE_F32), input({256, 256}, INFINI_DTYPE_F32),
      grad_output({256, 256}, INFINI_DTYPE_F32);
  input.fill([](size_t i) { return static_cast<float>(static_cast<int>(i % 1001) - 500) / 50; });
  grad_output.fill([](size_t i) { return static_cast<float>(static_cast<int>(i % 37) - 18); });
  auto gi = grad_input.descriptor(), in = input.descriptor(), go = grad_output.descriptor();
  infiniopGeluBackwardDescriptor_t desc = nullptr;
  EXPECT_EQ(infiniopCreateGeluBackwardDescriptor(handle, &desc, gi, in, go), INFINI_STATUS_SUCCESS);
  EXPECT_EQ(infiniopGeluBackward(desc, nullptr, 0, grad_input.data(), input.data(),
                                 grad_output.data(), nullptr),
            INFINI_STATUS_SUCCESS)
      << infiniopGetLastError();
  infiniopDestroyGeluBackwardDescriptor(desc);
  for (auto t : {gi, in, go}) infiniopDestroyTensorDescriptor(t);
  return grad_input.storage();
}

class LibraryThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isBuilt(INFINI_DEVICE_CPU)) GTEST_SKIP() << "no cpu device in this build";
    if (processThreads() < 0) GTEST_SKIP() << "no /proc/self/task here";
    handle_ = std::make_unique<Handle>(INFINI_DEVICE_CPU);
    expected_ = largeCall(handle_->get());
  }
  std::unique_ptr<Handle> handle_;
  std::vector<uint8_t> expected_;
};

// 8 caller threads, each with a large call: at most 8 teams of callThreadsDocumented() threads
// (counted while every caller is still alive, since libgomp keeps a caller's team until it
// exits), and the same bits as one caller.
TEST_F(LibraryThreads, EachCallerGetsOneBoundedTeam) {
  const int before = processThreads();
  std::atomic<int> called{0}, counted{0};
  std::atomic<int> mismatches{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t)
    callers.emplace_back([&] {
      if (largeCall(handle_->get()) != expected_) ++mismatches;
      ++called;
      waitFor(counted, 1);  // alive until counted
    });
  waitFor(called, kThreads);
  const int during = processThreads();
  ++counted;
  for (auto &t : callers) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_LE(static_cast<size_t>(during - before), kThreads * callThreadsDocumented())
      << "threads before " << before << ", with 8 callers " << during;
}

// A call from inside an OpenMP parallel region runs on its caller alone: no nested teams.
TEST_F(LibraryThreads, NoNestedTeamInsideAParallelRegion) {
  const int before = processThreads();
  std::atomic<int> mismatches{0};
  int team = 0, during = 0;
#pragma omp parallel num_threads(4)
  {
#pragma omp single
    team = omp_get_num_threads();
    if (largeCall(handle_->get()) != expected_) ++mismatches;
#pragma omp barrier
#pragma omp single
    during = processThreads();
  }
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_LE(during - before, team - 1) << "the region's own workers only";
}

}  // namespace

// device_param.cc instantiates the operator tests' DeviceTest, which this executable has none of.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceTest);

}  // namespace infiniop_test
