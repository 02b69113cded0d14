# Shared helpers for dpopt targets.

# Warnings for our own code.
set(DPOPT_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare)

# dpopt_library(NAME SOURCES ... DEPS ...)
function(dpopt_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(ARG_SOURCES)
    add_library(${name} STATIC ${ARG_SOURCES})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    target_compile_options(${name} PRIVATE ${DPOPT_WARNINGS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# Test targets of several source files compile as CMake unity builds: up to
# DPOPT_TEST_UNITY_BATCH files per translation unit, so that the Eigen,
# GoogleTest and library templates they share are instantiated and optimised
# once per batch instead of once per file. Every file's tests still run; a
# name at namespace scope must be unique within the target (the test files
# name their helpers after what they test). Off with -DDPOPT_TEST_UNITY=OFF.
option(DPOPT_TEST_UNITY "Compile multi-file test targets as unity builds" ON)
set(DPOPT_TEST_UNITY_BATCH 4 CACHE STRING
    "Test source files per unity translation unit")

# dpopt_test(NAME SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s] [COST s])
# One ctest entry per test binary; GoogleTest + gmock main. COST: the
# test's rough run time in seconds, for tests of a minute or more: ctest -jN
# starts the costliest tests first, so that on a fresh build (no timing
# history yet) a long test does not start last and run alone at the end.
function(dpopt_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;COST" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} dpopt_test_support
                        GTest::gmock GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${DPOPT_WARNINGS}
                         ${DPOPT_TEST_COMPILE_OPTIONS})
  if(TARGET dpopt_test_pch)
    target_precompile_headers(${name} REUSE_FROM dpopt_test_pch)
  endif()
  list(LENGTH ARG_SOURCES num_sources)
  if(DPOPT_TEST_UNITY AND num_sources GREATER 1)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON
                          UNITY_BUILD_BATCH_SIZE ${DPOPT_TEST_UNITY_BATCH})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(DPOPT_SANITIZE OR DPOPT_FUZZ)
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 4")  # ASan/UBSan are slower
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
                       LABELS "${ARG_LABELS}"
                       ENVIRONMENT "DPOPT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(ARG_COST)
    set_tests_properties(${name} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

# Adds every immediate subdirectory of the current source dir that has a
# CMakeLists.txt, so each area owns its own build file.
function(dpopt_add_subdirectories)
  file(GLOB children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT children)
  foreach(child ${children})
    if(IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${child}
       AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt)
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()
