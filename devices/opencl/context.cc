// SPDX-License-Identifier: Apache-2.0
// Device choice, and the lifetime of an OpenCL handle's state: context, default queue, tables.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "opencl/error.h"
#include "opencl/runtime.h"

namespace infiniop::opencl {
namespace {

constexpr const char *kWhere = "infiniopCreateHandle";

struct DeviceEntry {
  cl_platform_id platform;
  cl_device_id device;
};

template <class Object, class Info, class Getter>
std::string infoString(Getter getter, Object object, Info param) {
  size_t size = 0;
  if (getter(object, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
  std::string text(size, '\0');
  if (getter(object, param, size, text.data(), nullptr) != CL_SUCCESS) return "?";
  text.resize(text.find('\0') == std::string::npos ? size : text.find('\0'));
  return text;
}

std::string typeName(cl_device_id device) {
  cl_device_type type = 0;
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

// "0: pthread-cpu cpu (Portable Computing Language)": one line per device, for error messages.
std::string describe(const std::vector<DeviceEntry> &devices) {
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    text += (i ? "; " : "") + std::to_string(i) + ": " +
            infoString(clGetDeviceInfo, devices[i].device, CL_DEVICE_NAME) + " " +
            typeName(devices[i].device) + " (" +
            infoString(clGetPlatformInfo, devices[i].platform, CL_PLATFORM_NAME) + ")";
  }
  return text;
}

// Every device of every platform, in the order that device_id indexes.
infiniStatus_t listDevices(std::vector<DeviceEntry> *devices) {
  cl_uint num_platforms = 0;
  const cl_int code = clGetPlatformIDs(0, nullptr, &num_platforms);
  // The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR (-1001) when no driver is installed.
  if (code == -1001 || (code == CL_SUCCESS && num_platforms == 0))
    return fail(INFINI_STATUS_DEVICE_NOT_FOUND, std::string(kWhere) + ": no OpenCL platform");
  INFINIOP_CL_CHECK(kWhere, "clGetPlatformIDs", code);
  std::vector<cl_platform_id> platforms(num_platforms);
  INFINIOP_CL_CHECK(kWhere, "clGetPlatformIDs",
                    clGetPlatformIDs(num_platforms, platforms.data(), nullptr));
  for (cl_platform_id platform : platforms) {
    cl_uint count = 0;
    const cl_int found = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
    if (found == CL_DEVICE_NOT_FOUND) continue;  // a platform without devices adds none
    INFINIOP_CL_CHECK(kWhere, "clGetDeviceIDs", found);
    std::vector<cl_device_id> ids(count);
    INFINIOP_CL_CHECK(kWhere, "clGetDeviceIDs",
                      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr));
    for (cl_device_id id : ids) devices->push_back({platform, id});
  }
  return INFINI_STATUS_SUCCESS;
}

// $INFINIOP_OPENCL_DEVICE, when set and not empty, replaces the caller's device_id.
infiniStatus_t chooseIndex(int device_id, long *index) {
  *index = device_id;
  const char *env = std::getenv("INFINIOP_OPENCL_DEVICE");
  if (!env || !*env) return INFINI_STATUS_SUCCESS;
  char *end = nullptr;
  errno = 0;
  *index = std::strtol(env, &end, 10);
  // Digits only: strtol alone also takes leading blanks and a sign (" 0", "+1").
  if (!std::isdigit(static_cast<unsigned char>(*env)) || errno || *end || *index < 0)
    return fail(INFINI_STATUS_DEVICE_NOT_FOUND, std::string(kWhere) + ": INFINIOP_OPENCL_DEVICE='" +
                                                    env + "' is not a device index");
  return INFINI_STATUS_SUCCESS;
}

}  // namespace

infiniStatus_t createState(int device_id, std::unique_ptr<DeviceState> *result) {
  long index = 0;
  INFINIOP_CHECK(chooseIndex(device_id, &index));
  std::vector<DeviceEntry> devices;
  INFINIOP_CHECK(listDevices(&devices));
  if (index < 0 || static_cast<size_t>(index) >= devices.size())
    return fail(INFINI_STATUS_DEVICE_NOT_FOUND,
                std::string(kWhere) + ": no OpenCL device " + std::to_string(index) +
                    "; there are " + std::to_string(devices.size()) + ": " + describe(devices));

  // Owned from here on: any failure below releases what was created so far.
  auto state = std::make_unique<State>();
  state->platform = devices[index].platform;
  state->device = devices[index].device;
  INFINIOP_CL_CHECK(kWhere, "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                    clGetDeviceInfo(state->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                    sizeof state->max_alloc, &state->max_alloc, nullptr));
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(state->platform), 0};
  cl_int code = CL_SUCCESS;
  state->context = clCreateContext(properties, 1, &state->device, nullptr, nullptr, &code);
  INFINIOP_CL_CHECK(kWhere, "clCreateContext", code);
  // In order, no profiling: work on one stream runs in the order it was enqueued, as on CUDA.
  state->queue = clCreateCommandQueue(state->context, state->device, 0, &code);
  INFINIOP_CL_CHECK(kWhere, "clCreateCommandQueue", code);
  *result = std::move(state);
  return INFINI_STATUS_SUCCESS;
}

State::~State() {
  // Finish before releasing: a buffer must outlive the copies and kernels still queued on it.
  for (cl_command_queue stream : streams) {
    clFinish(stream);
    clReleaseCommandQueue(stream);
  }
  if (queue) clFinish(queue);
  for (const auto &entry : allocations)
    if (entry.second.mem) clReleaseMemObject(entry.second.mem);
  if (queue) clReleaseCommandQueue(queue);
  for (const auto &entry : programs) clReleaseProgram(entry.second);
  if (context) clReleaseContext(context);
}

int deviceCount() {
  std::vector<DeviceEntry> devices;
  return listDevices(&devices) == INFINI_STATUS_SUCCESS ? static_cast<int>(devices.size()) : 0;
}

}  // namespace infiniop::opencl
