// SPDX-License-Identifier: Apache-2.0
/* examples/c/example_device.h: the device argument of the operator examples, `cpu` (the
 * default) or `cpu_reference`: they pass host arrays as device pointers, which only the CPU
 * devices accept. Anything else is a usage error, so a typo or `opencl` never silently runs on
 * the cpu device. */
#ifndef INFINIOP_EXAMPLE_DEVICE_H
#define INFINIOP_EXAMPLE_DEVICE_H

#include <infiniop.h>
#include <stdio.h>
#include <string.h>

/* The exit status of a usage error (as for most command line tools). */
#define EXAMPLE_USAGE_ERROR 2

/* Reads the optional device name argv[1] into *device: 1 when it is one of the accepted names
 * (or absent), else 0 after printing the usage on stderr. */
static int example_device(int argc, char **argv, infiniDevice_t *device) {
  static const struct {
    const char *name;
    infiniDevice_t device;
  } accepted[] = {{"cpu", INFINI_DEVICE_CPU}, {"cpu_reference", INFINI_DEVICE_CPU_REFERENCE}};
  *device = INFINI_DEVICE_CPU;
  if (argc == 1) return 1;
  if (argc == 2) {
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; ++i) {
      if (strcmp(argv[1], accepted[i].name) == 0) {
        *device = accepted[i].device;
        return 1;
      }
    }
    fprintf(stderr, "%s: unknown device '%s'; the accepted devices are cpu and cpu_reference\n",
            argv[0], argv[1]);
  } else {
    fprintf(stderr, "%s: one argument at most, the device\n", argv[0]);
  }
  fprintf(stderr, "usage: %s [cpu|cpu_reference]  (default: cpu)\n", argv[0]);
  return 0;
}

#endif /* INFINIOP_EXAMPLE_DEVICE_H */
