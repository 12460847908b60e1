# Installation: `make install PREFIX=... DESTDIR=...` (cmake --install).
#
# The installed tree is relocatable: nothing below bakes CMAKE_INSTALL_PREFIX
# into a file. Programs use RPATH $ORIGIN/../lib and find their machine
# presets from their own location; hetmem-cc, the pkg-config files, the CMake
# package configs, the module files and the Python packages all work out the
# prefix from where they sit.
#
#   bin/                      hetmem hetmem-cc pshuffle
#   lib/                      libhetmem.so.<v> libhetmem_inst.a libhetmem_preload.so libpshuffle.so.<v>
#   lib/pkgconfig/            hetmem.pc pshuffle.pc
#   lib/cmake/{hetmem,pshuffle}/   package configs with imported targets
#   lib/python3.X/dist-packages/   the hetmem and pshuffle Python packages
#   include/                  hetmem/*.h pshuffle.h
#   share/hetmem/machines/    machine presets
#   share/man/man1/           man pages (help2man, from --help)
#   share/modulefiles/hetmem/<version>{,.lua}
#   share/doc/hetmem/         README, docs, examples
include(CMakePackageConfigHelpers)

set(_hm_gen ${PROJECT_BINARY_DIR}/install-files)
file(RELATIVE_PATH _hm_pc_to_prefix /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" _hm_pc_to_prefix "${_hm_pc_to_prefix}")

# -- libhetmem.so: the public API of hetmem_core as a shared library ---------
# Compiled again from hetmem_core's sources with default visibility, since
# hetmem_core's objects are hidden (it is linked into programs and into the
# preload library, which must not export it). The version script exports
# hm_* and keeps the internal hm__* local, so a new public function is
# exported by its name alone.
get_target_property(_hm_core_src hetmem_core SOURCES)
get_target_property(_hm_core_libs hetmem_core LINK_LIBRARIES)
add_library(hetmem_shared SHARED ${_hm_core_src})
target_include_directories(hetmem_shared
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(hetmem_shared PRIVATE ${_hm_core_libs})
target_compile_definitions(hetmem_shared PRIVATE $<TARGET_PROPERTY:hetmem_core,COMPILE_DEFINITIONS>)
target_compile_options(hetmem_shared PRIVATE -fno-semantic-interposition)
target_link_options(hetmem_shared PRIVATE
  -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/libhetmem.map -Wl,--no-undefined)
set_target_properties(hetmem_shared PROPERTIES
  OUTPUT_NAME hetmem EXPORT_NAME hetmem
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libhetmem.map
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
add_library(hetmem::hetmem ALIAS hetmem_shared)

# -- programs and libraries ----------------------------------------------------
install(TARGETS hetmem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS hetmem_shared EXPORT hetmemTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET hetmem_preload)
  install(TARGETS hetmem_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET hetmem_inst)
  install(TARGETS hetmem_inst ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(PROGRAMS ${_hm_gen}/hetmem-cc ${_hm_gen}/hetmem-c++ ${_hm_gen}/hetmem-fort DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# Every public header, by glob, so that a new component's header is installed.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hetmem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/share/machines/ DESTINATION ${CMAKE_INSTALL_DATADIR}/hetmem/machines
  FILES_MATCHING PATTERN "*.json")

# -- docs ------------------------------------------------------------------------
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  PATTERN "*.json" EXCLUDE)

# -- Python packages -------------------------------------------------------------
# Installed for HETMEM_PYTHON (Debian's /usr/bin/python3, where torch and
# mpi4py live) in its layout under the prefix, PREFIX/lib/python3.X/dist-packages:
# on sys.path as is for PREFIX=/usr/local, through PYTHONPATH (the module file)
# elsewhere.
if(EXISTS /usr/bin/python3)
  set(_hm_py_default /usr/bin/python3)
else()
  find_program(_hm_py_default NAMES python3)
endif()
set(HETMEM_PYTHON "${_hm_py_default}" CACHE FILEPATH "Python the Python packages are installed for")
set(_hm_pydir lib/python3/dist-packages)
if(HETMEM_PYTHON)
  execute_process(COMMAND ${HETMEM_PYTHON} -c
    "import sys; print('lib/python%d.%d/dist-packages' % sys.version_info[:2])"
    OUTPUT_VARIABLE _hm_pydir_out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _hm_py_rc)
  if(_hm_py_rc EQUAL 0 AND _hm_pydir_out)
    set(_hm_pydir ${_hm_pydir_out})
  endif()
endif()
set(HETMEM_INSTALL_PYTHONDIR ${_hm_pydir} CACHE STRING "Python packages' folder, relative to the prefix")
# The packages' VERSION files are links to the top-level VERSION, installed
# here as a plain file.
foreach(_pkg python/hetmem pshuffle/python/pshuffle)
  get_filename_component(_name ${_pkg} NAME)
  if(_name STREQUAL "pshuffle" AND NOT TARGET pshuffle)
    continue()
  endif()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_pkg} DESTINATION ${HETMEM_INSTALL_PYTHONDIR}
    PATTERN "__pycache__" EXCLUDE PATTERN "VERSION" EXCLUDE PATTERN "*.pyc" EXCLUDE)
  install(FILES ${PROJECT_SOURCE_DIR}/VERSION DESTINATION ${HETMEM_INSTALL_PYTHONDIR}/${_name})
endforeach()

# -- pkg-config --------------------------------------------------------------------
configure_file(${PROJECT_SOURCE_DIR}/cmake/hetmem.pc.in ${_hm_gen}/hetmem.pc @ONLY)
install(FILES ${_hm_gen}/hetmem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# -- CMake package configs -------------------------------------------------------
set(_hm_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hetmemConfig.cmake.in
  ${_hm_gen}/hetmemConfig.cmake INSTALL_DESTINATION ${_hm_cmakedir}/hetmem
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_DATADIR)
write_basic_package_version_file(${_hm_gen}/hetmemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(EXPORT hetmemTargets NAMESPACE hetmem:: DESTINATION ${_hm_cmakedir}/hetmem)
install(FILES ${_hm_gen}/hetmemConfig.cmake ${_hm_gen}/hetmemConfigVersion.cmake
  DESTINATION ${_hm_cmakedir}/hetmem)

# -- pshuffle -------------------------------------------------------------------------
if(TARGET pshuffle)
  target_compile_definitions(pshuffle_cli PRIVATE PSHUFFLE_VERSION="${PROJECT_VERSION}")
  # Open MPI and MPICH ship a pkg-config file for their C binding; pshuffle.h
  # includes mpi.h, so pshuffle.pc requires it when there is one.
  set(PS_PC_REQUIRES "")
  foreach(_m ompi-c mpich mpi-c)
    pkg_check_modules(_hm_mpipc QUIET ${_m})
    if(_hm_mpipc_FOUND)
      set(PS_PC_REQUIRES "Requires: ${_m}")
      break()
    endif()
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/pshuffle/pshuffle.pc.in ${_hm_gen}/pshuffle.pc @ONLY)
  install(TARGETS pshuffle EXPORT pshuffleTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS pshuffle_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/pshuffle/include/pshuffle.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${_hm_gen}/pshuffle.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pshuffleConfig.cmake.in
    ${_hm_gen}/pshuffleConfig.cmake INSTALL_DESTINATION ${_hm_cmakedir}/pshuffle)
  write_basic_package_version_file(${_hm_gen}/pshuffleConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(EXPORT pshuffleTargets NAMESPACE pshuffle:: DESTINATION ${_hm_cmakedir}/pshuffle)
  install(FILES ${_hm_gen}/pshuffleConfig.cmake ${_hm_gen}/pshuffleConfigVersion.cmake
    DESTINATION ${_hm_cmakedir}/pshuffle)
  install(FILES ${PROJECT_SOURCE_DIR}/pshuffle/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/pshuffle)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/pshuffle/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/pshuffle)
endif()

# -- man pages, from the programs' --help and --version ---------------------------
find_program(HELP2MAN help2man)
if(CMAKE_CROSSCOMPILING)
  message(STATUS "cross-compiling: man pages are not built (they run the programs)")
elseif(HELP2MAN)
  set(_hm_man ${PROJECT_BINARY_DIR}/man/man1)
  set(_hm_man_args $<TARGET_FILE:hetmem>)
  set(_hm_man_deps hetmem ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh)
  if(TARGET hetmem_inst)
    list(APPEND _hm_man_args --cc ${HETMEM_CC})
    list(APPEND _hm_man_deps ${HETMEM_CC})
  endif()
  if(TARGET pshuffle_cli)
    list(APPEND _hm_man_args --pshuffle $<TARGET_FILE:pshuffle_cli>)
    list(APPEND _hm_man_deps pshuffle_cli)
  endif()
  add_custom_command(OUTPUT ${_hm_man}/hetmem.1
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/gen-man.sh ${_hm_man} ${_hm_man_args}
    DEPENDS ${_hm_man_deps}
    COMMENT "man pages (help2man)" VERBATIM)
  add_custom_target(hetmem_man ALL DEPENDS ${_hm_man}/hetmem.1)
  install(DIRECTORY ${_hm_man} DESTINATION ${CMAKE_INSTALL_MANDIR})
else()
  message(STATUS "help2man not found: man pages are not built (apt install help2man)")
endif()

# -- environment modules (Lmod: Lua; environment-modules: Tcl) --------------------
set(HM_MOD_PYTHONDIR ${HETMEM_INSTALL_PYTHONDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/modulefile.lua.in ${_hm_gen}/${PROJECT_VERSION}.lua @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/modulefile.tcl.in ${_hm_gen}/${PROJECT_VERSION} @ONLY)
install(FILES ${_hm_gen}/${PROJECT_VERSION}.lua ${_hm_gen}/${PROJECT_VERSION}
  DESTINATION ${CMAKE_INSTALL_DATADIR}/modulefiles/hetmem)
