# umscope's version and commit, written into the package when it is built (umscope/_version.py), so that
# runs and documents name the code that ran, never the git repository around wherever they are run.
# The commit: $UMSCOPE_COMMIT if set, else git's HEAD of this source tree (marked -dirty when tracked files
# differ), but only where this tree is the top of its own repository: an unpacked tree without .git that
# sits inside another repository must not take that repository's commit. "unknown" otherwise.
set(UMSCOPE_BUILD_COMMIT "unknown")
if(DEFINED ENV{UMSCOPE_COMMIT} AND NOT "$ENV{UMSCOPE_COMMIT}" STREQUAL "")
  set(UMSCOPE_BUILD_COMMIT "$ENV{UMSCOPE_COMMIT}")
else()
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${CMAKE_SOURCE_DIR}" rev-parse --show-toplevel
                    OUTPUT_VARIABLE _top OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0)
      get_filename_component(_top "${_top}" REALPATH)
      get_filename_component(_src "${CMAKE_SOURCE_DIR}" REALPATH)
    endif()
    if(_rc EQUAL 0 AND _top STREQUAL _src)
      execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${CMAKE_SOURCE_DIR}" rev-parse --short HEAD
                      OUTPUT_VARIABLE _head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
      execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${CMAKE_SOURCE_DIR}" status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE _dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_rc EQUAL 0 AND NOT _head STREQUAL "")
        set(UMSCOPE_BUILD_COMMIT "${_head}")
        if(NOT _dirty STREQUAL "")
          set(UMSCOPE_BUILD_COMMIT "${_head}-dirty")
        endif()
      endif()
    endif()
  endif()
endif()
if(DEFINED SKBUILD_PROJECT_VERSION)
  set(UMSCOPE_BUILD_VERSION "${SKBUILD_PROJECT_VERSION}")
else()
  set(UMSCOPE_BUILD_VERSION "${PROJECT_VERSION}")
endif()
string(TIMESTAMP UMSCOPE_BUILD_TIME "%Y-%m-%dT%H:%M:%SZ" UTC)
file(WRITE "${CMAKE_BINARY_DIR}/_version.py"
     "# Written by CMake when umscope was built (cmake/Provenance.cmake).\n"
     "version = \"${UMSCOPE_BUILD_VERSION}\"\n"
     "commit = \"${UMSCOPE_BUILD_COMMIT}\"\n"
     "built = \"${UMSCOPE_BUILD_TIME}\"\n")
install(FILES "${CMAKE_BINARY_DIR}/_version.py" DESTINATION umscope)
message(STATUS "umscope ${UMSCOPE_BUILD_VERSION}, commit ${UMSCOPE_BUILD_COMMIT}")
