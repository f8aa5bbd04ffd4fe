// SPDX-License-Identifier: Apache-2.0
#include "opencl/program.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "core/handle.h"
#include "opencl/runtime.h"

namespace infiniop::opencl {
namespace {

std::string deviceString(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  text.resize(size - 1);  // the terminating NUL
  return text;
}

std::string buildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) !=
          CL_SUCCESS ||
      size == 0)
    return "(no build log)";
  std::string log(size, '\0');
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  log.resize(size - 1);
  return log;
}

// Where a binary of this program may live on disk: $INFINIOP_OPENCL_CACHE_DIR, a name from a hash
// of everything that determines the binary (device, driver, options, source). Empty: no disk
// cache.
std::string cachePath(const State &s, const std::string &source, const std::string &options) {
  const char *dir = std::getenv("INFINIOP_OPENCL_CACHE_DIR");
  if (!dir || !*dir) return "";
  const std::string identity =
      deviceString(s.device, CL_DEVICE_NAME) + '\n' + deviceString(s.device, CL_DRIVER_VERSION) +
      '\n' + deviceString(s.device, CL_DEVICE_VERSION) + '\n' + options + '\n' + source;
  char name[32];
  std::snprintf(name, sizeof name, "%016zx.bin", std::hash<std::string>()(identity));
  return std::string(dir) + "/" + name;
}

// A cache file: this header, then the binary. Drivers do not survive every malformed binary
// (PoCL asserts on a truncated one), so a file whose size or checksum does not match its header
// (a full disk, a crash mid-copy, corruption) is never passed to the driver: the program is
// rebuilt from source and the file rewritten.
struct CacheHeader {
  char magic[8];
  uint64_t size;      // of the binary
  uint64_t checksum;  // FNV-1a of the binary
};
constexpr char kCacheMagic[8] = {'i', 'n', 'f', 'o', 'p', 'c', 'l', '1'};

uint64_t checksum(const unsigned char *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

// A program from a cached binary, or NULL if there is none, it fails the header's checks or it
// does not load.
cl_program loadBinary(const State &s, const std::string &path, const std::string &options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  const std::vector<unsigned char> file((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  CacheHeader header{};
  if (file.size() <= sizeof header) return nullptr;
  std::memcpy(&header, file.data(), sizeof header);
  const unsigned char *data = file.data() + sizeof header;
  const size_t size = file.size() - sizeof header;
  if (std::memcmp(header.magic, kCacheMagic, sizeof kCacheMagic) != 0 || header.size != size ||
      header.checksum != checksum(data, size))
    return nullptr;
  cl_int code = CL_SUCCESS, binary_status = CL_SUCCESS;
  cl_program program =
      clCreateProgramWithBinary(s.context, 1, &s.device, &size, &data, &binary_status, &code);
  if (code != CL_SUCCESS || binary_status != CL_SUCCESS) {
    if (program) clReleaseProgram(program);
    return nullptr;
  }
  if (clBuildProgram(program, 1, &s.device, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(program);
    return nullptr;
  }
  return program;
}

// Best effort: a cache that cannot be written only costs the next process a build.
void storeBinary(cl_program program, const std::string &path) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) !=
          CL_SUCCESS ||
      size == 0)
    return;
  std::vector<unsigned char> binary(size);
  unsigned char *data = binary.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr) != CL_SUCCESS)
    return;
  // A name of this process and program's own: concurrent writers never share a temporary file.
  const std::string temporary = path + ".tmp" + std::to_string(getpid()) + "." +
                                std::to_string(reinterpret_cast<uintptr_t>(program));
  CacheHeader header{};
  std::memcpy(header.magic, kCacheMagic, sizeof kCacheMagic);
  header.size = size;
  header.checksum = checksum(data, size);
  bool written = false;
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(reinterpret_cast<const char *>(&header), sizeof header);
    written = static_cast<bool>(
        out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size)));
  }
  // rename is atomic: readers see all of the binary or none of it.
  if (!written || std::rename(temporary.c_str(), path.c_str()) != 0) std::remove(temporary.c_str());
}

infiniStatus_t buildFromSource(const char *where, const State &s, const std::string &source,
                               const std::string &options, cl_program *result) {
  const char *text = source.c_str();
  const size_t length = source.size();
  cl_int code = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(s.context, 1, &text, &length, &code);
  INFINIOP_CL_CHECK(where, "clCreateProgramWithSource", code);
  code = clBuildProgram(program, 1, &s.device, options.c_str(), nullptr, nullptr);
  if (code != CL_SUCCESS) {
    const std::string log = buildLog(program, s.device);
    clReleaseProgram(program);
    return fail(INFINI_STATUS_INTERNAL_ERROR, std::string(where) + ": clBuildProgram(" + options +
                                                  "): " + clErrorName(code) + "; build log:\n" +
                                                  log);
  }
  *result = program;
  return INFINI_STATUS_SUCCESS;
}

}  // namespace

infiniStatus_t getProgram(const char *where, infiniopHandle_t handle,
                          std::initializer_list<const char *> sources, const std::string &options,
                          cl_program *program) {
  State &s = stateOf<State>(handle);
  // The sources are static strings: their addresses identify them.
  std::string key = options;
  for (const char *source : sources)
    key += '|' + std::to_string(reinterpret_cast<uintptr_t>(source));
  std::lock_guard<std::mutex> lock(s.program_mutex);
  if (const auto it = s.programs.find(key); it != s.programs.end()) {
    *program = it->second;
    return INFINI_STATUS_SUCCESS;
  }
  std::string source;
  for (const char *part : sources) source += part;
  const std::string path = cachePath(s, source, options);
  cl_program built = path.empty() ? nullptr : loadBinary(s, path, options);
  if (!built) {
    INFINIOP_CHECK(buildFromSource(where, s, source, options, &built));
    if (!path.empty()) storeBinary(built, path);
  }
  try {
    s.programs.emplace(key, built);
  } catch (...) {
    clReleaseProgram(built);
    throw;
  }
  *program = built;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t planBuffer(const char *where, infiniopHandle_t handle,
                          const std::vector<cl_long> &words, cl_mem *buffer) {
  cl_int code = CL_SUCCESS;
  *buffer =
      clCreateBuffer(stateOf<State>(handle).context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                     words.size() * sizeof(cl_long), const_cast<cl_long *>(words.data()), &code);
  INFINIOP_CL_CHECK(where, "clCreateBuffer", code);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t createKernel(const char *where, cl_program program, const char *name,
                            cl_kernel *kernel) {
  cl_int code = CL_SUCCESS;
  *kernel = clCreateKernel(program, name, &code);
  if (code != CL_SUCCESS)
    return clFail(std::string(where) + " (kernel " + name + ")", "clCreateKernel", code);
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t workGroupSize(const char *where, infiniopHandle_t handle, cl_kernel kernel,
                             size_t *size) {
  const cl_device_id device = stateOf<State>(handle).device;
  size_t limit = 0, multiple = 0;
  INFINIOP_CL_CHECK(where, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)",
                    clGetKernelWorkGroupInfo(kernel, device, CL_KERNEL_WORK_GROUP_SIZE,
                                             sizeof limit, &limit, nullptr));
  INFINIOP_CL_CHECK(
      where, "clGetKernelWorkGroupInfo(CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)",
      clGetKernelWorkGroupInfo(kernel, device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                               sizeof multiple, &multiple, nullptr));
  if (limit == 0) limit = 1;
  if (multiple == 0 || multiple > limit) multiple = 1;
  // About 256 items: enough to fill a GPU's SIMD lanes several times and for PoCL to vectorize
  // across work-items, while leaving many groups to spread over compute units.
  constexpr size_t kTarget = 256;
  size_t chosen = multiple;
  while (chosen * 2 <= limit && chosen * 2 <= std::max(kTarget, multiple)) chosen *= 2;
  *size = chosen;
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t launch(const char *where, cl_command_queue queue, cl_kernel kernel, size_t items,
                      size_t group, size_t rows) {
  if (items == 0 || rows == 0) return INFINI_STATUS_SUCCESS;
  // Whole groups first, then the remainder as groups of one item from a global offset: the
  // kernel then needs no bounds check, whose divergent return would keep PoCL from vectorizing
  // across work-items, and the tail compiles one extra group size only. Short rows get a group
  // of the largest power of two that fits them.
  size_t local = 1;
  while (local * 2 <= group && local * 2 <= items) local *= 2;
  const size_t whole = items / local * local, rest = items - whole;
  const size_t offsets[2][2] = {{0, 0}, {whole, 0}};
  const size_t globals[2][2] = {{whole, rows}, {rest, rows}};
  const size_t locals[2][2] = {{local, 1}, {1, 1}};
  for (int part = 0; part < 2; ++part) {
    if (globals[part][0] == 0) continue;
    INFINIOP_CL_CHECK(where, "clEnqueueNDRangeKernel",
                      clEnqueueNDRangeKernel(queue, kernel, rows > 1 ? 2 : 1, offsets[part],
                                             globals[part], locals[part], 0, nullptr, nullptr));
  }
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t resolveView(const char *where, infiniopHandle_t handle, const void *ptr,
                           ptrdiff_t lowest_byte, ptrdiff_t end_byte, size_t element_size,
                           BufferArg *arg) {
  Resolved lowest{};
  const char *low = static_cast<const char *>(ptr) + lowest_byte;
  INFINIOP_CHECK(resolve(where, handle, low, static_cast<size_t>(end_byte - lowest_byte), &lowest));
  const size_t offset = lowest.offset - static_cast<size_t>(lowest_byte);  // of ptr itself
  if (offset % element_size != 0)
    return fail(INFINI_STATUS_BAD_PARAM, std::string(where) + ": pointer at byte offset " +
                                             std::to_string(offset) +
                                             " of its allocation is not aligned to its " +
                                             std::to_string(element_size) + "-byte elements");
  *arg = {lowest.mem, offset / element_size};
  return INFINI_STATUS_SUCCESS;
}

infiniStatus_t readForCheck(const char *where, infiniopHandle_t handle, cl_command_queue queue,
                            const void *src, size_t bytes, void *host) {
  if (bytes == 0) return INFINI_STATUS_SUCCESS;
  Resolved from{};
  INFINIOP_CHECK(resolve(where, handle, src, bytes, &from));
  INFINIOP_CL_CHECK(
      where, "clEnqueueReadBuffer",
      clEnqueueReadBuffer(queue, from.mem, CL_TRUE, from.offset, bytes, host, 0, nullptr, nullptr));
  return INFINI_STATUS_SUCCESS;
}

std::string correctlyRoundedDivideOptions(infiniopHandle_t handle) {
  cl_device_fp_config config = 0;
  const bool correct = clGetDeviceInfo(stateOf<State>(handle).device, CL_DEVICE_SINGLE_FP_CONFIG,
                                       sizeof config, &config, nullptr) == CL_SUCCESS &&
                       (config & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  return correct ? " -cl-fp32-correctly-rounded-divide-sqrt -DDIVIDE_OPERATOR" : "";
}

bool hasFp64(infiniopHandle_t handle) {
  const std::string extensions =
      " " + deviceString(stateOf<State>(handle).device, CL_DEVICE_EXTENSIONS) + " ";
  return extensions.find(" cl_khr_fp64 ") != std::string::npos;
}

}  // namespace infiniop::opencl
