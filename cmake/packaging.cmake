# SPDX-License-Identifier: BSD-3-Clause
# packaging.cmake: Debian packages of the three install components, made by
# CPack (`cpack -G DEB` in a build folder, installed under /usr):
#   libechomq<SOVERSION>  Runtime: libechomq.so.<SOVERSION> (libechomq0.1)
#   libechomq-dev         Development: echomq.h, echomq.hpp, libechomq.so,
#                         libechomq.a, echomq.pc, the CMake package files
#                         and the documentation
#   echomq                Tool: the echomq program and echomq(1)
# The runtime package is named for the SONAME, so two releases that break
# the ABI install side by side. Configured with -DCMAKE_INSTALL_PREFIX=/usr
# (as scripts/test.sh's install stage does) the library goes to Debian's
# multiarch folder, usr/lib/<triplet> (GNUInstallDirs). Dependencies on system libraries come from
# dpkg-shlibdeps (Debian: dpkg-dev); between the three, the exact version.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME echomq)
set(CPACK_PACKAGE_VENDOR "the echomq authors")
set(CPACK_PACKAGE_CONTACT "the echomq authors <maintainers@users.noreply.a-seed-4550f78c.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "reliable at-least-once work queues on Redis and Valkey Streams")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL Runtime Development Tool)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tool's libechomq is the one of the runtime package being built.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libechomq${EMQ_SOVERSION})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# A shlibs file for packages built against it, and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Within one SONAME a newer release serves programs built with an older.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libechomq-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
# libechomq.a and `pkg-config --static` need OpenSSL's development files.
if(EMQ_TLS)
  set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "libssl-dev")
endif()
set(CPACK_DEBIAN_TOOL_PACKAGE_NAME echomq)
set(CPACK_DEBIAN_TOOL_PACKAGE_SECTION utils)

# Every package carries usr/share/doc/<package>/copyright (Debian policy
# 12.5), in the machine-readable format, made from LICENSE: the license
# text indented by one space, an empty line written " .".
file(STRINGS ${PROJECT_SOURCE_DIR}/LICENSE emq_license_lines)
set(emq_copyright "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: echomq

Files: *
Copyright: 2026 the echomq authors
License: BSD-3-Clause
")
foreach(line IN LISTS emq_license_lines)
  if(line STREQUAL "")
    string(APPEND emq_copyright " .\n")
  else()
    string(APPEND emq_copyright " ${line}\n")
  endif()
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/debian/copyright "${emq_copyright}")
foreach(component Runtime Development Tool)
  string(TOUPPER ${component} emq_upper)
  install(FILES ${PROJECT_BINARY_DIR}/debian/copyright
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${emq_upper}_PACKAGE_NAME}
    COMPONENT ${component})
endforeach()

include(CPack)
cpack_add_component(Runtime DISPLAY_NAME "libechomq"
  DESCRIPTION "The shared library libechomq")
cpack_add_component(Development DISPLAY_NAME "libechomq development files"
  DESCRIPTION "Headers, static library, pkg-config and CMake files, documentation"
  DEPENDS Runtime)
cpack_add_component(Tool DISPLAY_NAME "echomq"
  DESCRIPTION "The echomq command-line tool and its man page"
  DEPENDS Runtime)
