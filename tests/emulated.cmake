# SPDX-License-Identifier: Apache-2.0
# The C++ suites of a cross build (docs/devices.md, "Arm"), each program run under the emulator
# (CMAKE_CROSSCOMPILING_EMULATOR, from the toolchain file) once per emulated processor: a
# processor is an emulator option that sets its vector length and the INFINIOP_CPU_ISA cap that
# picks the Highway target, as the x86 suite's capped runs do. Per processor:
#   emulated.<name>.isa              the library reports the target the processor should get
#   emulated.<name>.bit_identity     the bit-identity groups at that target, each group's output
#                                    digest equal to x86's (tests/bit_identity_digests.txt)
#   emulated.<name>.log_math         the F32 logarithms at that target and those below it: within
#                                    their bound, the bits x86 gives (tests/cpp/log_math_test.cc)
#   emulated.<name>.suite.<i>of<n>   shard i of infiniop-tests at that target (gtest's sharding:
#                                    test j of the list runs in shard j mod n)
# and once (at the first processor) the concurrency, framework and fault-injection programs.
#
# What qemu costs differs several-fold between x86 hosts, and with the vector length. On a 2-core
# Intel Sapphire Rapids, once a process has run SVE code at 256 or 512 bits, every later
# floating-point helper of qemu 7.2 runs slow (its generated 256-bit AVX code leaves the upper
# halves dirty; the shim below clears them at each emulated fused multiply-add), and a wide suite
# costs twice NEON's even so; bit identity, four times. So the whole suite runs where it is cheap
# on every host (NEON, SVE at 128 bits), and at 256 and 512 bits, where bit identity already
# proves every group's bits equal to x86's, a fixed sample of the suite's shards (below); the
# others are registered too, with the label emulated-extra: `ctest --preset aarch64-full` runs
# every shard at every SVE length (about 4 minutes more on that host).
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "infiniop: cross build without CMAKE_CROSSCOMPILING_EMULATOR: no tests run")
  return()
endif()

# The suite's shards: each at most 40 s at a wide SVE length on the host above.
set(suite_shards 8)
math(EXPR last_shard "${suite_shards} - 1")  # foreach RANGE counts from 0

# "name|emulator -cpu option|INFINIOP_CPU_ISA|expected target|suite shards|suite s|bits s|bits
# half":
# qemu-aarch64's `max` processor (SVE2) at 128-, 256- and 512-bit vectors
# (sve-default-vector-length is in bytes). "suite shards" lists the shards CI runs: "all", or
# their numbers (1 to 8, comma-separated), or none. "suite s" is the slowest shard and "bits s"
# the bit-identity program, in seconds, measured on the host above two programs at a time
# (ctest -j2); each test's timeout is three times its figure and a minute, and the figure is its
# COST, so that ctest starts the long ones first. The length-agnostic SVE code runs the whole
# suite at 128 bits; at 256 and 512 bits a quarter each, the two quarters disjoint, so every
# second shard runs at one wide length. Every processor runs the bit-identity groups at its
# target (the cap, or the one Highway picks there: SVE2_128, SVE_256, SVE2, the same source at a
# fixed or any width), every operator x variant x dtype against x86's digests: all of them at
# 128 bits ("bits half" empty), and at 256 and 512 bits, where the program costs four times as
# much, half of them (1 or 2: gtest's sharding, group j in half j mod 2 + 1), the halves crossed
# so that every group runs at each wide length and at each of SVE and SVE_256 / SVE2 (SVE at 256
# bits takes half 1 and SVE_256 half 2; at 512 bits SVE takes half 2 and SVE2 half 1). The other
# half is registered too, labelled emulated-extra, as the suite's unsampled shards.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(default_processors
      "NEON|max,sve-default-vector-length=16|NEON|NEON|all|25|35|"
      "SVE_128|max,sve-default-vector-length=16|SVE|SVE|all|25|35|"
      "SVE_256|max,sve-default-vector-length=32|SVE|SVE|1,5|40|135|1"
      "SVE_512|max,sve-default-vector-length=64|SVE|SVE|3,7|40|130|2"
      "SVE2_128|max,sve-default-vector-length=16|SVE2_128|SVE2_128||0|35|"
      "SVE_256_fixed|max,sve-default-vector-length=32|SVE_256|SVE_256||0|130|2"
      "SVE2_512|max,sve-default-vector-length=64|SVE2|SVE2||0|130|1")
else()
  set(default_processors "default||||all|60|60|")
endif()
# -DINFINIOP_EMULATED_CPUS="..." (entries as above, ;-separated) replaces the list.
if(DEFINED INFINIOP_EMULATED_CPUS)
  set(default_processors ${INFINIOP_EMULATED_CPUS})
endif()

set(emulator ${CMAKE_CROSSCOMPILING_EMULATOR})
# On an x86-64 host, qemu runs with tests/emulator/clean_upper_fma.c preloaded (its comment says
# why), built with the host's C compiler; -U keeps the preload out of the emulated program's
# environment.
if(CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  find_program(INFINIOP_HOST_CC NAMES cc gcc clang REQUIRED)
  set(shim ${CMAKE_CURRENT_BINARY_DIR}/libclean_upper_fma.so)
  set(shim_source ${CMAKE_CURRENT_SOURCE_DIR}/emulator/clean_upper_fma.c)
  add_custom_command(OUTPUT ${shim}
                     COMMAND ${INFINIOP_HOST_CC} -O2 -shared -fPIC -o ${shim} ${shim_source}
                     DEPENDS ${shim_source} VERBATIM
                     COMMENT "Building the host's qemu shim libclean_upper_fma.so")
  add_custom_target(infiniop-emulator-shim ALL DEPENDS ${shim})
  set(emulator env LD_PRELOAD=${shim} ${emulator} -U LD_PRELOAD)
endif()
set(expected_digests ${CMAKE_CURRENT_SOURCE_DIR}/bit_identity_digests.txt)
set(first TRUE)
foreach(processor IN LISTS default_processors)
  string(REPLACE "|" ";" fields "${processor}")
  list(GET fields 0 name)
  list(GET fields 1 cpu)
  list(GET fields 2 cap)
  list(GET fields 3 target)
  list(GET fields 4 sampled)
  list(GET fields 5 shard_seconds)
  list(GET fields 6 bit_seconds)
  list(GET fields 7 bit_half)
  string(REPLACE "," ";" sampled "${sampled}")
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
                         PASS_REGULAR_EXPRESSION "^${target}\n$" LABELS emulated)
  endif()
  # The cap leaves one target: the bit-identity groups compare it with x86's digests (all, or
  # the half CI runs and, labelled emulated-extra, the other).
  set(bit_environment "${environment};INFINIOP_BIT_DIGESTS_EXPECTED=${expected_digests}")
  if(bit_half)
    math(EXPR bit_seconds "${bit_seconds} / 2")
    math(EXPR timeout "3 * ${bit_seconds} + 60")
    foreach(half IN ITEMS 1 2)
      set(test emulated.${name}.bit_identity.${half}of2)
      math(EXPR index "${half} - 1")
      add_test(NAME ${test} COMMAND ${run} $<TARGET_FILE:infiniop-bit-identity-tests>)
      set(labels emulated)
      if(NOT half EQUAL bit_half)
        set(labels emulated emulated-extra)
      endif()
      set_tests_properties(${test} PROPERTIES
        ENVIRONMENT "${bit_environment};GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=${index}"
        TIMEOUT ${timeout} COST ${bit_seconds} LABELS "${labels}")
    endforeach()
  else()
    math(EXPR timeout "3 * ${bit_seconds} + 60")
    add_test(NAME emulated.${name}.bit_identity
             COMMAND ${run} $<TARGET_FILE:infiniop-bit-identity-tests>)
    set_tests_properties(emulated.${name}.bit_identity PROPERTIES
      ENVIRONMENT "${bit_environment}" TIMEOUT ${timeout} COST ${bit_seconds} LABELS emulated)
  endif()

  # The F32 logarithms (tests/cpp/log_math_test.cc) at the cap and the targets below it: their
  # bound, and the fixed samples' digest equal to x86's (4-10 s on the host above).
  if(TARGET infiniop-log-math-tests)  # (with the cpu device)
    add_test(NAME emulated.${name}.log_math COMMAND ${run} $<TARGET_FILE:infiniop-log-math-tests>)
    set_tests_properties(emulated.${name}.log_math PROPERTIES ENVIRONMENT "${environment}"
                         TIMEOUT 120 COST 8 LABELS emulated)
  endif()

  # The suite's shards, where the processor runs any (test j of the list in shard j mod n).
  math(EXPR timeout "3 * ${shard_seconds} + 60")
  if(sampled)
    foreach(shard RANGE ${last_shard})
      math(EXPR number "${shard} + 1")  # 1-based, as the lists above
      set(test emulated.${name}.suite.${number}of${suite_shards})
      add_test(NAME ${test} COMMAND ${run} $<TARGET_FILE:infiniop-tests>)
      set(labels emulated)
      if(NOT sampled STREQUAL "all" AND NOT number IN_LIST sampled)
        set(labels emulated emulated-extra)
      endif()
      set_tests_properties(${test} PROPERTIES
        ENVIRONMENT "${environment};GTEST_TOTAL_SHARDS=${suite_shards};GTEST_SHARD_INDEX=${shard}"
        TIMEOUT ${timeout} COST ${shard_seconds} LABELS "${labels}")
    endforeach()
  endif()

  if(first)
    foreach(program IN ITEMS concurrency internal fault)
      add_test(NAME emulated.${name}.${program}
               COMMAND ${run} $<TARGET_FILE:infiniop-${program}-tests>)
      set_tests_properties(emulated.${name}.${program} PROPERTIES ENVIRONMENT "${environment}"
                           TIMEOUT 300 LABELS emulated)
    endforeach()
    set(first FALSE)
  endif()
endforeach()
