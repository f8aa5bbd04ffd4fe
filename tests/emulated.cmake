# SPDX-License-Identifier: Apache-2.0
# The C++ suites of a cross build (docs/devices.md, "Arm"), each program run whole under the
# emulator (CMAKE_CROSSCOMPILING_EMULATOR, from the toolchain file) once per emulated processor:
# a processor is an emulator option that sets its vector length and the INFINIOP_CPU_ISA cap
# that picks the Highway target, as the x86 suite's capped runs do. Per processor:
#   emulated.<name>.isa           the library reports the target the processor should get
#   emulated.<name>.suite         infiniop-tests at that target (the cap: only that target runs)
#   emulated.<name>.bit_identity  every target the processor runs, forced in turn (uncapped), each
#                                 group's output digest equal to x86's (bit_identity_digests.txt)
# and once (at the first processor) the concurrency, framework and fault-injection programs.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "infiniop: cross build without CMAKE_CROSSCOMPILING_EMULATOR: no tests run")
  return()
endif()

# "name|emulator option|INFINIOP_CPU_ISA|expected target": qemu-aarch64's `max` processor with
# SVE2 at 128-, 256- and 512-bit vectors (its sve-default-vector-length is in bytes). At each
# length Highway picks its best target (SVE2_128 at 128 bits, SVE_256 at 256, SVE2 otherwise);
# the SVE cap runs the length-agnostic SVE code at all three, and NEON runs capped.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(default_processors
      "NEON|max,sve-default-vector-length=16|NEON|NEON"
      "SVE_128|max,sve-default-vector-length=16|SVE|SVE"
      "SVE_256|max,sve-default-vector-length=32|SVE|SVE"
      "SVE_512|max,sve-default-vector-length=64|SVE|SVE"
      "SVE2_128|max,sve-default-vector-length=16||SVE2_128"
      "SVE_256_fixed|max,sve-default-vector-length=32||SVE_256"
      "SVE2_512|max,sve-default-vector-length=64||SVE2")
else()
  set(default_processors "default|||")
endif()
set(INFINIOP_EMULATED_PROCESSORS "${default_processors}" CACHE STRING
    "Emulated processors of the cross build's tests: name|emulator -cpu option|cap|target")

set(emulator ${CMAKE_CROSSCOMPILING_EMULATOR})
set(expected_digests ${CMAKE_CURRENT_SOURCE_DIR}/bit_identity_digests.txt)
set(first TRUE)
foreach(processor IN LISTS INFINIOP_EMULATED_PROCESSORS)
  string(REPLACE "|" ";" fields "${processor}")
  list(GET fields 0 name)
  list(GET fields 1 cpu)
  list(GET fields 2 cap)
  list(GET fields 3 target)
  set(run ${emulator})
  if(cpu)
    list(APPEND run -cpu ${cpu})
  endif()
  set(environment "INFINIOP_CPU_ISA=${cap}")

  if(target)
    add_test(NAME emulated.${name}.isa COMMAND ${run} $<TARGET_FILE:infiniop-cpu-isa>)
    set_tests_properties(emulated.${name}.isa PROPERTIES ENVIRONMENT "${environment}"
                         PASS_REGULAR_EXPRESSION "^${target}\n$")
  endif()
  add_test(NAME emulated.${name}.suite COMMAND ${run} $<TARGET_FILE:infiniop-tests>)
  set_tests_properties(emulated.${name}.suite PROPERTIES ENVIRONMENT "${environment}")
  if(NOT cap)  # uncapped: every target the processor runs
    add_test(NAME emulated.${name}.bit_identity
             COMMAND ${run} $<TARGET_FILE:infiniop-bit-identity-tests>)
    set_tests_properties(emulated.${name}.bit_identity PROPERTIES
                         ENVIRONMENT "INFINIOP_BIT_DIGESTS_EXPECTED=${expected_digests}")
  endif()
  if(first)
    foreach(program IN ITEMS concurrency internal fault)
      add_test(NAME emulated.${name}.${program}
               COMMAND ${run} $<TARGET_FILE:infiniop-${program}-tests>)
      set_tests_properties(emulated.${name}.${program} PROPERTIES ENVIRONMENT "${environment}")
    endforeach()
    set(first FALSE)
  endif()
endforeach()
