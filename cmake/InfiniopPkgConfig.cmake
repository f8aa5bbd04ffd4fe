# SPDX-License-Identifier: Apache-2.0
# infiniop_configure_pkgconfig(<template> <output>): configures infiniop.pc for the install layout
# in CMAKE_INSTALL_PREFIX, CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR. The file is meant to
# be installed to ${CMAKE_INSTALL_LIBDIR}/pkgconfig. Used by the top-level CMakeLists.txt and, in
# script mode, by tests/install/write_pc.cmake (which checks a distribution layout without
# reconfiguring the build).
#
# With a relative libdir the prefix is found from the .pc file's own place, ${pcfiledir} followed by
# one ".." per component of "<libdir>/pkgconfig": "lib" -> ../.., "lib/x86_64-linux-gnu" ->
# ../../..; so the file stays right after `cmake --install --prefix <dir>`, under DESTDIR and when
# the installed tree is moved (pkgconf does not prepend PKG_CONFIG_SYSROOT_DIR to a path already
# inside it). An absolute libdir cannot move with the prefix, so the prefix is written as
# configured; an absolute libdir or includedir is written as it is.
function(infiniop_configure_pkgconfig template output)
  set(pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  cmake_path(NORMAL_PATH pcdir)
  if(IS_ABSOLUTE "${pcdir}" OR pcdir MATCHES "^\\.\\.(/|$)")
    set(INFINIOP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  else()
    set(INFINIOP_PC_PREFIX "\${pcfiledir}")
    string(REGEX MATCHALL "[^/]+" components "${pcdir}")
    foreach(component IN LISTS components)
      string(APPEND INFINIOP_PC_PREFIX "/..")
    endforeach()
  endif()
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(INFINIOP_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(INFINIOP_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  configure_file("${template}" "${output}" @ONLY)
endfunction()
