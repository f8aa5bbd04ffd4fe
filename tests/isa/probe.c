// SPDX-License-Identifier: Apache-2.0
/* Prints the target the cpu device dispatches to (after INFINIOP_CPU_ISA), or why no cpu handle
 * can be made (status and message on stderr, exit 1). */
#include <infiniop.h>
#include <stdio.h>

int main(void) {
  infiniopHandle_t handle;
  const infiniStatus_t status = infiniopCreateHandle(&handle, INFINI_DEVICE_CPU, 0);
  if (status != INFINI_STATUS_SUCCESS) {
    fprintf(stderr, "%s: %s\n", infiniStatusString(status), infiniopGetLastError());
    return 1;
  }
  printf("%s\n", infiniopCpuIsaName());
  infiniopDestroyHandle(handle);
  return 0;
}
