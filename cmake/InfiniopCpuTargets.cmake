# SPDX-License-Identifier: Apache-2.0
# INFINIOP_CPU_TARGETS: which Highway targets the cpu device is compiled for (docs/devices.md,
# "Build presets and INFINIOP_CPU_TARGETS").
#
#   all      every target Highway compiles by default, chosen at run time: the release and
#            install build (AVX3, AVX2, SSE4, SSSE3 and the fallback target on x86).
#   native   only the static target of -march=native (-DHWY_COMPILE_ONLY_STATIC=1): for
#            development; the objects need this processor.
#   a list   e.g. AVX2;SSE4;SCALAR or avx2,sse4,scalar: exactly those, runtime dispatch among
#            them (HWY_DISABLED_TARGETS is every other target of this architecture).
#
# The flags go to every C++ object of the project (library, tests, bench, fuzzer): Highway's
# target macros must be the same wherever it is included, since the tests enumerate and force
# the targets through the library's own libhwy (tests/cpp/device_param.h).
#
# Highway 1.0.3 always compiles one fallback target below the SIMD ones, and it cannot be
# disabled while it is the baseline (detect_targets.h: "At least one baseline target must be
# defined and enabled"). Which one depends on the compiler: SCALAR under GCC < 12.3
# (HWY_BROKEN_EMU128, GCC bug 106322), EMU128 under clang and later GCC. So in a list SCALAR and
# EMU128 both name "the fallback", whichever this compiler has. A list without either raises the
# baseline to its lowest x86 target instead: every object is compiled with that target's
# features (the -m flags of Highway's own target attribute), so the library then needs a
# processor with them. infiniop_check_cpu_targets() (devices/cpu/CMakeLists.txt) compiles a probe
# with the resulting flags and stops when Highway's set differs from the list.

set(INFINIOP_CPU_TARGETS all CACHE STRING
    "Highway targets of the cpu device: all | native | a list such as AVX2;SSE4;SCALAR")

# Highway's target names (hwy/detect_targets.h) by architecture, best first, and the features
# of each x86 target (hwy/ops/set_macros-inl.h, HWY_TARGET_STR_*) for a raised baseline.
set(infiniop_hwy_targets_x86 AVX3_DL AVX3 AVX2 SSE4 SSSE3)
set(infiniop_hwy_targets_arm SVE2_128 SVE_256 SVE2 SVE NEON)
set(infiniop_hwy_targets_ppc PPC8)
set(infiniop_hwy_targets_rvv RVV)
set(infiniop_hwy_targets_wasm WASM_EMU256 WASM)
set(infiniop_hwy_fallbacks EMU128 SCALAR)
set(infiniop_hwy_flags_SSSE3 -msse2 -mssse3)
set(infiniop_hwy_flags_SSE4 ${infiniop_hwy_flags_SSSE3} -msse4.1 -msse4.2 -mpclmul -maes)
set(infiniop_hwy_flags_AVX2 ${infiniop_hwy_flags_SSE4} -mavx -mavx2 -mbmi -mbmi2 -mfma -mf16c)
set(infiniop_hwy_flags_AVX3 ${infiniop_hwy_flags_AVX2} -mavx512f -mavx512vl -mavx512dq -mavx512bw)
set(infiniop_hwy_flags_AVX3_DL ${infiniop_hwy_flags_AVX3} -mvpclmulqdq -mavx512vbmi -mavx512vbmi2
                               -mvaes -mavxvnni -mavx512bitalg -mavx512vpopcntdq)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86|x86)$")
  set(infiniop_hwy_arch x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64|arm.*)$")
  set(infiniop_hwy_arch arm)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(ppc|powerpc)")
  set(infiniop_hwy_arch ppc)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^riscv")
  set(infiniop_hwy_arch rvv)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "wasm")
  set(infiniop_hwy_arch wasm)
else()
  set(infiniop_hwy_arch "")
endif()
set(infiniop_hwy_all_targets ${infiniop_hwy_targets_x86} ${infiniop_hwy_targets_arm}
    ${infiniop_hwy_targets_ppc} ${infiniop_hwy_targets_rvv} ${infiniop_hwy_targets_wasm})
if(infiniop_hwy_arch)
  set(infiniop_hwy_arch_targets ${infiniop_hwy_targets_${infiniop_hwy_arch}})
else()
  set(infiniop_hwy_arch_targets ${infiniop_hwy_all_targets})
endif()

# Parses INFINIOP_CPU_TARGETS into infiniop_cpu_targets_mode (all, native or list),
# infiniop_cpu_target_flags (C++ compile options), infiniop_cpu_target_definitions and, for a
# list, infiniop_cpu_target_list (canonical names, best first).
function(infiniop_parse_cpu_targets)
  set(flags)
  set(definitions)
  set(targets)
  string(STRIP "${INFINIOP_CPU_TARGETS}" value)
  string(TOLOWER "${value}" mode)
  if(mode STREQUAL "native")
    set(flags -march=native)
    set(definitions HWY_COMPILE_ONLY_STATIC=1)
  elseif(NOT mode STREQUAL "all")
    set(mode list)
    string(REPLACE "," ";" items "${value}")
    set(valid "all, native, or a list of: ${infiniop_hwy_arch_targets} EMU128 SCALAR")
    string(REPLACE ";" " " valid "${valid}")
    foreach(item IN LISTS items)
      string(STRIP "${item}" item)
      string(TOUPPER "${item}" name)
      string(REGEX REPLACE "^HWY_" "" name "${name}")
      if(name STREQUAL "")
        continue()
      endif()
      if(NOT name IN_LIST infiniop_hwy_all_targets AND NOT name IN_LIST infiniop_hwy_fallbacks)
        message(FATAL_ERROR "INFINIOP_CPU_TARGETS=${INFINIOP_CPU_TARGETS}: '${item}' is no "
                            "Highway target; valid: ${valid} (separated by ; or ,)")
      endif()
      if(NOT name IN_LIST infiniop_hwy_arch_targets AND NOT name IN_LIST infiniop_hwy_fallbacks)
        message(FATAL_ERROR "INFINIOP_CPU_TARGETS=${INFINIOP_CPU_TARGETS}: ${name} is not a "
                            "target of this processor architecture (${CMAKE_SYSTEM_PROCESSOR}); "
                            "valid: ${valid}")
      endif()
      list(APPEND targets ${name})
    endforeach()
    list(REMOVE_DUPLICATES targets)
    if(NOT targets)
      message(FATAL_ERROR "INFINIOP_CPU_TARGETS is empty; valid: ${valid}")
    endif()
    # Every other target of this architecture is disabled; the fallback too when none is listed.
    set(disabled)
    set(lowest "")
    foreach(name IN LISTS infiniop_hwy_arch_targets)
      if(name IN_LIST targets)
        set(lowest ${name})
      else()
        list(APPEND disabled HWY_${name})
      endif()
    endforeach()
    if(NOT "SCALAR" IN_LIST targets AND NOT "EMU128" IN_LIST targets)
      list(APPEND disabled HWY_EMU128 HWY_SCALAR)
      if(DEFINED infiniop_hwy_flags_${lowest})
        set(flags ${infiniop_hwy_flags_${lowest}})
      endif()
    endif()
    if(disabled)
      # '+' for '|': the target bits are distinct, and the value needs no shell quoting.
      list(JOIN disabled "+" disabled)
      list(APPEND definitions HWY_DISABLED_TARGETS=${disabled})
    endif()
    if("AVX3_DL" IN_LIST targets)
      # Highway 1.0.3 compiles AVX3_DL only when asked (or when it is the baseline).
      list(APPEND definitions HWY_WANT_AVX3_DL=1)
    endif()
  endif()
  set(infiniop_cpu_targets_mode ${mode} PARENT_SCOPE)
  set(infiniop_cpu_target_flags ${flags} PARENT_SCOPE)
  set(infiniop_cpu_target_definitions ${definitions} PARENT_SCOPE)
  set(infiniop_cpu_target_list ${targets} PARENT_SCOPE)
endfunction()
infiniop_parse_cpu_targets()

foreach(flag IN LISTS infiniop_cpu_target_flags)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${flag}>)
endforeach()
foreach(definition IN LISTS infiniop_cpu_target_definitions)
  add_compile_definitions($<$<COMPILE_LANGUAGE:CXX>:${definition}>)
endforeach()

# infiniop_check_cpu_targets(<hwy target>): compiles a probe with the flags above against
# Highway's headers, reads back which targets Highway compiles (HWY_TARGETS) and its static
# target, reports them, stops when they are not what INFINIOP_CPU_TARGETS asks for, and leaves
# them in the global property INFINIOP_CPU_TARGETS_COMPILED (best first; the tests register the
# INFINIOP_CPU_ISA-capped runs only for these).
function(infiniop_check_cpu_targets hwy_target)
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/infiniop_cpu_targets)
  set(names ${infiniop_hwy_all_targets} ${infiniop_hwy_fallbacks})
  set(source "#include \"hwy/detect_targets.h\"\n")
  string(APPEND source "static const char kInfo[] = \"INFO:hwy_targets[\"\n")
  foreach(name IN LISTS names)
    string(APPEND source "#if (HWY_TARGETS & HWY_${name})\n\"${name},\"\n#endif\n")
  endforeach()
  string(APPEND source "\"]INFO:hwy_static[\"\n")
  foreach(name IN LISTS names)
    string(APPEND source "#if HWY_STATIC_TARGET == HWY_${name}\n\"${name}\"\n#endif\n")
  endforeach()
  string(APPEND source "\"]\";\nint main(int argc, char **) { return kInfo[argc]; }\n")
  file(WRITE ${dir}/probe.cc "${source}")
  set(definitions ${infiniop_cpu_target_flags})
  foreach(definition IN LISTS infiniop_cpu_target_definitions)
    list(APPEND definitions -D${definition})
  endforeach()
  try_compile(compiled ${dir}/build SOURCES ${dir}/probe.cc
              COMPILE_DEFINITIONS ${definitions}
              LINK_LIBRARIES ${hwy_target}
              CXX_STANDARD 17
              OUTPUT_VARIABLE output
              COPY_FILE ${dir}/probe
              NO_CACHE)
  if(NOT compiled)
    string(REGEX MATCHALL "[^\n]*(error|Error)[^\n]*" errors "${output}")
    list(JOIN errors "\n" errors)
    message(FATAL_ERROR "INFINIOP_CPU_TARGETS=${INFINIOP_CPU_TARGETS}: Highway cannot compile "
                        "this target set (flags: ${definitions} ${CMAKE_CXX_FLAGS}):\n${errors}\n"
                        "Highway 1.0.3 needs its fallback target (SCALAR or EMU128) or a list "
                        "whose lowest target can be the baseline.")
  endif()
  file(STRINGS ${dir}/probe info REGEX "INFO:hwy_targets\\[[^]]*\\]INFO:hwy_static\\[[^]]*\\]")
  if(NOT info MATCHES "INFO:hwy_targets\\[([^]]*)\\]INFO:hwy_static\\[([^]]*)\\]")
    message(FATAL_ERROR "infiniop_check_cpu_targets: no target list in ${dir}/probe")
  endif()
  set(static ${CMAKE_MATCH_2})
  string(REPLACE "," ";" targets "${CMAKE_MATCH_1}")
  list(REMOVE_ITEM targets "")
  list(JOIN targets " " shown)
  message(STATUS "infiniop: cpu Highway targets (INFINIOP_CPU_TARGETS=${INFINIOP_CPU_TARGETS}): "
                 "${shown}; baseline ${static}")
  if(infiniop_cpu_targets_mode STREQUAL "list")
    # SCALAR and EMU128 both name the fallback, whichever this compiler has.
    set(listed ${infiniop_cpu_target_list})
    set(got ${targets})
    foreach(var IN ITEMS listed got)
      if("SCALAR" IN_LIST ${var} OR "EMU128" IN_LIST ${var})
        list(REMOVE_ITEM ${var} SCALAR EMU128)
        list(APPEND ${var} fallback)
      endif()
    endforeach()
    set(missing ${listed})
    list(REMOVE_ITEM missing ${got})
    set(extra ${got})
    list(REMOVE_ITEM extra ${listed})
    if(missing OR extra)
      list(JOIN missing " " missing)
      list(JOIN extra " " extra)
      message(FATAL_ERROR "INFINIOP_CPU_TARGETS=${INFINIOP_CPU_TARGETS}: Highway compiles "
                          "${shown} here (missing: ${missing}; not asked for: ${extra}). "
                          "-march or HWY_* macros in CMAKE_CXX_FLAGS (now '${CMAKE_CXX_FLAGS}') "
                          "change the set: leave them to INFINIOP_CPU_TARGETS.")
    endif()
  endif()
  set_property(GLOBAL PROPERTY INFINIOP_CPU_TARGETS_COMPILED "${targets}")
endfunction()
