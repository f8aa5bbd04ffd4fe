// SPDX-License-Identifier: Apache-2.0
/* examples/c/devices.c: the device types this build of the library has, and what each knows of
 * itself (name, how many devices this machine has, whether device memory is host memory).
 *
 *   cc devices.c $(pkg-config --cflags --libs infiniop) && ./a.out
 *
 * Exit status 0 when the list holds cpu_reference (every build has it) and each entry answers,
 * 2 when given an argument (it takes none: it lists every device). */
#include <infiniop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc > 1) {
    fprintf(stderr,
            "%s: unexpected argument '%s'; it takes none and lists every device\n"
            "usage: %s\n",
            argv[0], argv[1], argv[0]);
    return 2;
  }
  int count = 0, status = 1, has_reference = 0;
  infiniDevice_t *types = NULL;
  /* Once with capacity 0 to size the array, then to fill it. */
  infiniStatus_t s = infiniopGetDeviceTypes(NULL, 0, &count);
  if (s == INFINI_STATUS_SUCCESS) {
    types = malloc((count > 0 ? count : 1) * sizeof *types);
    s = types ? infiniopGetDeviceTypes(types, count, &count) : INFINI_STATUS_INTERNAL_ERROR;
  }
  if (s != INFINI_STATUS_SUCCESS) {
    fprintf(stderr, "infiniopGetDeviceTypes: %s: %s\n", infiniStatusString(s),
            infiniopGetLastError());
    goto done;
  }
  for (int i = 0; i < count; ++i) {
    infiniopDeviceInfo_t info;
    s = infiniopGetDeviceInfo(types[i], &info);
    if (s != INFINI_STATUS_SUCCESS) {
      fprintf(stderr, "infiniopGetDeviceInfo(%d): %s: %s\n", (int)types[i], infiniStatusString(s),
              infiniopGetLastError());
      goto done;
    }
    printf("%-14s type %d: %d device(s), %s memory\n", info.name, (int)types[i], info.count,
           info.host_memory ? "host" : "device");
    if (types[i] == INFINI_DEVICE_CPU_REFERENCE && strcmp(info.name, "cpu_reference") == 0)
      has_reference = 1;
  }
  if (infiniopCreateHandle(NULL, INFINI_DEVICE_CPU_REFERENCE, 0) == INFINI_STATUS_NULL_POINTER)
    printf("a NULL handle pointer is refused: %s\n", infiniopGetLastError());
  status = has_reference ? 0 : 1;
  if (!has_reference) fprintf(stderr, "cpu_reference is missing from the list\n");

done:
  free(types);
  return status;
}
