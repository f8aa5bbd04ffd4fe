# SPDX-License-Identifier: Apache-2.0
# Run by `cmake --install` (CMakeLists.txt's install(CODE)), after the Python package is copied:
# writes <package>/_install.json, {"library_dir": <the library's folder relative to the package's
# folder>, "library": <its SONAME file name>}, for python/infiniop/_library.py. Both folders are
# resolved against the prefix of this install (--prefix overrides the configured one), so the
# relative path also holds after a DESTDIR staging is moved into place.
# In: INFINIOP_PYTHON_DIR, INFINIOP_LIB_DIR (absolute, or relative to the prefix), INFINIOP_LIB_NAME.
cmake_path(ABSOLUTE_PATH INFINIOP_PYTHON_DIR BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}"
           NORMALIZE OUTPUT_VARIABLE package_dir)
cmake_path(APPEND package_dir infiniop)
cmake_path(ABSOLUTE_PATH INFINIOP_LIB_DIR BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}" NORMALIZE
           OUTPUT_VARIABLE lib_dir)
file(RELATIVE_PATH relative "${package_dir}" "${lib_dir}")
string(REGEX REPLACE "/$" "" relative "${relative}")
if(relative STREQUAL "")
  set(relative ".")
endif()
set(record "$ENV{DESTDIR}${package_dir}/_install.json")
message(STATUS "Installing: ${record}")
file(WRITE "${record}"
     "{\"library_dir\": \"${relative}\", \"library\": \"${INFINIOP_LIB_NAME}\"}\n")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${record}")
