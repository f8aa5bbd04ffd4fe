# SPDX-License-Identifier: Apache-2.0
# infiniop_add_device(<name> SOURCES <file>... [LIBRARIES <target>...])
#
# Called by a device folder's CMakeLists.txt (devices/<name>/): compiles its sources into the
# library with the device's libraries, and tells devices/registry.cc, the only file that lists
# devices, that this one is built (INFINIOP_WITH_<NAME>=1). Relative paths are the folder's.
function(infiniop_add_device name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LIBRARIES")
  target_sources(infiniop_objects PRIVATE ${arg_SOURCES})
  if(arg_LIBRARIES)
    target_link_libraries(infiniop_objects PUBLIC ${arg_LIBRARIES})
    target_link_libraries(infiniop PRIVATE ${arg_LIBRARIES})
  endif()
  string(TOUPPER "${name}" upper)
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/devices/registry.cc
               TARGET_DIRECTORY infiniop_objects
               APPEND PROPERTY COMPILE_DEFINITIONS INFINIOP_WITH_${upper}=1)
endfunction()
