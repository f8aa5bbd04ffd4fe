# SPDX-License-Identifier: Apache-2.0
# The C++ suites of a cross build (docs/devices.md, "Arm"), each program run whole under the
# emulator (CMAKE_CROSSCOMPILING_EMULATOR, from the toolchain file) once per emulated processor:
# a processor is an emulator option that sets its vector length and the INFINIOP_CPU_ISA cap
# that picks the Highway target, as the x86 suite's capped runs do. Per processor:
#   emulated.<name>.isa           the library reports the target the processor should get
#   emulated.<name>.bit_identity  the bit-identity groups at that target, each group's output
#                                 digest equal to x86's (tests/bit_identity_digests.txt)
#   emulated.<name>.suite         infiniop-tests at that target (the cap: only that target runs),
#                                 for the processors so marked
# and once (at the first processor) the concurrency, framework and fault-injection programs.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "infiniop: cross build without CMAKE_CROSSCOMPILING_EMULATOR: no tests run")
  return()
endif()

# "name|emulator -cpu option|INFINIOP_CPU_ISA|expected target|suite": qemu-aarch64's `max`
# processor (SVE2) at 128-, 256- and 512-bit vectors (sve-default-vector-length is in bytes). The
# C++ suite runs at NEON and at the length-agnostic SVE code at the three lengths (suite 1); the
# target Highway picks at each length (SVE2_128, SVE_256, SVE2: the same source at a fixed or any
# width) runs the bit-identity groups, every operator x variant x dtype against x86's digests, as
# every processor here does.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(default_processors
      "NEON|max,sve-default-vector-length=16|NEON|NEON|1"
      "SVE_128|max,sve-default-vector-length=16|SVE|SVE|1"
      "SVE_256|max,sve-default-vector-length=32|SVE|SVE|1"
      "SVE_512|max,sve-default-vector-length=64|SVE|SVE|1"
      "SVE2_128|max,sve-default-vector-length=16|SVE2_128|SVE2_128|0"
      "SVE_256_fixed|max,sve-default-vector-length=32|SVE_256|SVE_256|0"
      "SVE2_512|max,sve-default-vector-length=64|SVE2|SVE2|0")
else()
  set(default_processors "default|||||1")
endif()
# -DINFINIOP_EMULATED_CPUS="..." (entries as above, ;-separated) replaces the list.
if(DEFINED INFINIOP_EMULATED_CPUS)
  set(default_processors ${INFINIOP_EMULATED_CPUS})
endif()

set(emulator ${CMAKE_CROSSCOMPILING_EMULATOR})
set(expected_digests ${CMAKE_CURRENT_SOURCE_DIR}/bit_identity_digests.txt)
set(first TRUE)
foreach(processor IN LISTS default_processors)
  string(REPLACE "|" ";" fields "${processor}")
  list(GET fields 0 name)
  list(GET fields 1 cpu)
  list(GET fields 2 cap)
  list(GET fields 3 target)
  list(GET fields 4 suite)
  set(run ${emulator})
  if(cpu)
    list(APPEND run -cpu ${cpu})
  endif()
  # INFINIOP_TEST_EMULATED: the large cases check a sample of their elements and the full-size MoE
  # model runs at fewer tokens (checkStride in device_param.h, realisticTokens).
  set(environment "INFINIOP_CPU_ISA=${cap};INFINIOP_TEST_EMULATED=1")

  if(target)
    add_test(NAME emulated.${name}.isa COMMAND ${run} $<TARGET_FILE:infiniop-cpu-isa>)
    set_tests_properties(emulated.${name}.isa PROPERTIES ENVIRONMENT "${environment}"
                         PASS_REGULAR_EXPRESSION "^${target}\n$")
  endif()
  # The cap leaves one target: the bit-identity groups compare it with x86's digests.
  add_test(NAME emulated.${name}.bit_identity
           COMMAND ${run} $<TARGET_FILE:infiniop-bit-identity-tests>)
  set_tests_properties(emulated.${name}.bit_identity PROPERTIES ENVIRONMENT
                       "${environment};INFINIOP_BIT_DIGESTS_EXPECTED=${expected_digests}")
  if(suite)
    add_test(NAME emulated.${name}.suite COMMAND ${run} $<TARGET_FILE:infiniop-tests>)
    # COST: ctest starts the suites (about 2 minutes each under qemu) before the short programs,
    # which then fill the other job.
    set_tests_properties(emulated.${name}.suite PROPERTIES ENVIRONMENT "${environment}"
                         TIMEOUT 900 COST 100)
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
