# Build time (issue 51, docs/benchmarks.md "Build and test time"): precompiled headers and
# unity builds, so that the README's first command compiles the simulator in about half the
# time on 2 cores. Both only change how the sources are compiled, never what they mean:
#   -DFAULTLINE_PCH=OFF          no precompiled headers
#   -DFAULTLINE_UNITY_BUILD=OFF  one object per source file
# With both OFF the build is the plain one file, one object build: the one that shows a missing
# #include, which a precompiled header or a neighbour in a unity batch would hide. A name
# defined in two .cc files of one library or test program (helpers in anonymous namespaces,
# file-level `using`) clashes in a unity batch: give each its own name.
#
# Precompiled headers: Boost.Graph (policies/api/cluster_view.h, seen by every file that sees
# the World), nlohmann/json and the standard library are parsed once per build instead of once
# per file. GCC uses a precompiled header only where it was built with the same code-generation
# flags: the libraries (-fPIC) share one, the test programs (-fPIE) another; where GCC refuses one
# it says so (-Winvalid-pch) and parses the headers as usual. policies/ gets its own, without
# nlohmann/json (the include rules, tests/lint_includes.cmake: policies/ never sees JSON).
#
# ccache: works with both; with precompiled headers it needs sloppiness=pch_defines,time_macros
# (ccache's documentation, "Precompiled headers"), which this file adds to the launcher's
# environment when CMAKE_CXX_COMPILER_LAUNCHER is ccache; without it ccache still runs but
# does not cache the files that use a precompiled header.

option(FAULTLINE_PCH "Precompiled headers for Boost.Graph, nlohmann/json and the standard library" ON)
option(FAULTLINE_UNITY_BUILD "Unity build of the libraries and test programs (several .cc files per object)" ON)

# The standard headers most files include, and the third-party ones that dominate parsing.
set(FAULTLINE_PCH_STD
  <algorithm> <array> <cmath> <cstddef> <cstdint> <cstdio> <cstdlib> <cstring> <functional>
  <limits> <map> <memory> <optional> <set> <sstream> <stdexcept> <string> <string_view>
  <unordered_map> <utility> <variant> <vector>)
set(FAULTLINE_PCH_POLICIES ${FAULTLINE_PCH_STD} <boost/graph/adjacency_list.hpp>)
set(FAULTLINE_PCH_LIBS ${FAULTLINE_PCH_POLICIES} <chrono> <filesystem> <fstream> <iostream>
  <nlohmann/json.hpp>)

if(FAULTLINE_PCH AND CMAKE_CXX_COMPILER_LAUNCHER MATCHES "(^|/)ccache$")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER_LAUNCHER} --get-config sloppiness
    OUTPUT_VARIABLE _faultline_sloppiness OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(_faultline_sloppiness "${_faultline_sloppiness},pch_defines,time_macros")
  string(REGEX REPLACE "^," "" _faultline_sloppiness "${_faultline_sloppiness}")
  set(CMAKE_CXX_COMPILER_LAUNCHER
    ${CMAKE_COMMAND} -E env "CCACHE_SLOPPINESS=${_faultline_sloppiness}" ${CMAKE_CXX_COMPILER_LAUNCHER})
endif()

# The precompiled header of the libraries outside policies/: built by a target of its own
# (no dependencies, so it builds beside faultline_policies_api's) and reused by each library.
function(faultline_pch_libraries)
  if(NOT FAULTLINE_PCH)
    return()
  endif()
  add_library(faultline_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch.cc)
  target_link_libraries(faultline_pch PRIVATE Boost::boost nlohmann_json::nlohmann_json)
  target_precompile_headers(faultline_pch PRIVATE ${FAULTLINE_PCH_LIBS})
  foreach(t IN LISTS ARGN)
    set_target_properties(${t} PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM faultline_pch)
  endforeach()
endfunction()

# policies/: faultline_policies_api builds the header, faultline_policies (which waits for it
# anyway) reuses it.
function(faultline_pch_policies)
  if(NOT FAULTLINE_PCH)
    return()
  endif()
  target_precompile_headers(faultline_policies_api PRIVATE ${FAULTLINE_PCH_POLICIES})
  set_target_properties(faultline_policies PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM faultline_policies_api)
endfunction()

# The executables declared under tests/ (every directory below it), into `out`.
function(faultline_test_programs out)
  set(programs)
  set(dirs ${PROJECT_SOURCE_DIR}/tests)
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(sub DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${sub})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        list(APPEND programs ${t})
      endif()
    endforeach()
  endwhile()
  set(${out} ${programs} PARENT_SCOPE)
endfunction()

# The test programs that link GoogleTest and have no compile options of their own (those with
# -O0 -g or sanitizers would refuse the header) share one, built by an empty program.
function(faultline_pch_tests)
  if(NOT FAULTLINE_PCH)
    return()
  endif()
  add_executable(faultline_pch_tests ${PROJECT_SOURCE_DIR}/cmake/pch_main.cc)
  # Boost's headers without Boost::boost's BOOST_ALL_NO_LIB: GCC refuses a header built with a
  # macro defined that the file using it does not define (faultline_sim_tests links no Boost),
  # while the opposite is fine.
  target_include_directories(faultline_pch_tests PRIVATE $<TARGET_PROPERTY:Boost::boost,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(faultline_pch_tests PRIVATE nlohmann_json::nlohmann_json GTest::gtest)
  target_precompile_headers(faultline_pch_tests PRIVATE ${FAULTLINE_PCH_LIBS} <gtest/gtest.h>)
  get_target_property(reference_options faultline_pch_tests COMPILE_OPTIONS)
  faultline_test_programs(programs)
  foreach(t IN LISTS programs)
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(options ${t} COMPILE_OPTIONS)
    if(t STREQUAL "faultline_pch_tests" OR NOT libs MATCHES "GTest::"
       OR NOT options STREQUAL reference_options)
      continue()
    endif()
    set_target_properties(${t} PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM faultline_pch_tests)
  endforeach()
endfunction()

# A unity build in `batches` objects of about equal size: on 2 cores a library's objects
# build two at a time (make builds a library's dependencies first), so an even number of
# batches keeps both busy.
function(faultline_unity target batches)
  if(NOT FAULTLINE_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.cc$")
  list(LENGTH sources n)
  math(EXPR size "(${n} + ${batches} - 1) / ${batches}")
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${size})
endfunction()

# The test programs' unity build: every executable under tests/ with three .cc files or more
# (the GoogleTest programs and the protocol fuzzer alike) builds in an even number of batches
# of at most six files (3 to 12 files: 2 batches; 13 to 24: 4), so that GoogleTest's,
# nlohmann/json's and the World's templates are instantiated once per batch instead of once
# per file, and both cores have a batch to build. Called at the end of tests/CMakeLists.txt,
# once every test program is declared; a batch reuses the precompiled header as a file did.
function(faultline_unity_tests)
  if(NOT FAULTLINE_UNITY_BUILD)
    return()
  endif()
  faultline_test_programs(programs)
  foreach(t IN LISTS programs)
    get_target_property(sources ${t} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cc$")
    list(LENGTH sources n)
    if(n LESS 3)
      continue()
    endif()
    math(EXPR batches "2 * ((${n} + 11) / 12)")
    faultline_unity(${t} ${batches})
  endforeach()
endfunction()
