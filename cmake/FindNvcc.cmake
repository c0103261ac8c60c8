# umscope_find_nvcc(<var>): path of an nvcc, or empty.
#
# With UMSCOPE_PYPI_CUDA=1 (environment or -D) only the PyPI toolchain counts:
# the nvcc of nvidia-cuda-nvcc importable by the Python that runs the build
# (pip's isolated build environment gets it from the build.requires override
# in pyproject.toml), and it is an error when there is none.
# Otherwise the order is: $CUDACXX (so a changed CUDACXX wins over a compiler
# cached in a persisted build directory), CMAKE_CUDA_COMPILER, nvcc on PATH,
# /usr/local/cuda/bin, then the PyPI nvcc as above.

function(_umscope_pypi_cuda_root out)
  # The directory nvidia/cu13 (bin, include, lib) of NVIDIA's CUDA 13 wheels.
  set(py "")
  if(DEFINED Python_EXECUTABLE)
    set(py "${Python_EXECUTABLE}")
  elseif(DEFINED Python3_EXECUTABLE)
    set(py "${Python3_EXECUTABLE}")
  else()
    find_package(Python3 COMPONENTS Interpreter QUIET)
    set(py "${Python3_EXECUTABLE}")
  endif()
  set(root "")
  if(py)
    execute_process(
      COMMAND "${py}" -c "import nvidia, os; print(';'.join(os.path.join(p, 'cu13') for p in nvidia.__path__))"
      OUTPUT_VARIABLE candidates OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    foreach(c IN LISTS candidates)
      if(NOT root AND EXISTS "${c}/bin/nvcc")
        set(root "${c}")
      endif()
    endforeach()
  endif()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

function(umscope_pypi_cuda_wanted out)
  set(want OFF)
  if(UMSCOPE_PYPI_CUDA)
    set(want ON)
  elseif(DEFINED ENV{UMSCOPE_PYPI_CUDA} AND "$ENV{UMSCOPE_PYPI_CUDA}" MATCHES "^(1|ON|on|TRUE|true|YES|yes)$")
    set(want ON)
  endif()
  set(${out} ${want} PARENT_SCOPE)
endfunction()

function(umscope_find_nvcc out)
  set(found "")
  umscope_pypi_cuda_wanted(pypi)
  if(pypi)
    _umscope_pypi_cuda_root(root)
    if(NOT root)
      message(FATAL_ERROR "UMSCOPE_PYPI_CUDA=1 but the build's Python cannot import nvidia-cuda-nvcc "
                          "(nvidia/cu13/bin/nvcc); with pip's isolated build the pyproject override installs it, "
                          "with --no-build-isolation install the packages of the extra 'cuda-build' first (see README, Building)")
    endif()
    set(found "${root}/bin/nvcc")
  elseif(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
    if(NOT EXISTS "$ENV{CUDACXX}")
      message(FATAL_ERROR "CUDACXX=$ENV{CUDACXX} does not exist")
    endif()
    set(found "$ENV{CUDACXX}")
  elseif(CMAKE_CUDA_COMPILER AND EXISTS "${CMAKE_CUDA_COMPILER}")
    set(found "${CMAKE_CUDA_COMPILER}")
  else()
    find_program(UMSCOPE_NVCC nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(UMSCOPE_NVCC)
      set(found "${UMSCOPE_NVCC}")
    else()
      _umscope_pypi_cuda_root(root)
      if(root)
        set(found "${root}/bin/nvcc")
      endif()
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# umscope_use_nvcc(<path>): makes <path> the CUDA compiler even where a
# persisted build directory cached another one: CMake keeps the compiler it
# detected first (CMakeFiles/<version>/CMakeCUDACompiler.cmake), so when the
# choice changed, that detection is dropped and redone.
macro(umscope_use_nvcc path)
  if(DEFINED CACHE{UMSCOPE_NVCC_USED} AND NOT "${UMSCOPE_NVCC_USED}" STREQUAL "${path}")
    message(STATUS "umscope: CUDA compiler changed from ${UMSCOPE_NVCC_USED} to ${path}: detecting it anew")
    file(REMOVE "${CMAKE_BINARY_DIR}/CMakeFiles/${CMAKE_VERSION}/CMakeCUDACompiler.cmake")
    foreach(v CMAKE_CUDA_COMPILER CMAKE_CUDA_HOST_COMPILER CMAKE_CUDA_COMPILER_TOOLKIT_ROOT
              CMAKE_CUDA_COMPILER_LIBRARY_ROOT CUPTI_INCLUDE_DIR CUPTI_LIBRARY)
      unset(${v} CACHE)
    endforeach()
  endif()
  set(UMSCOPE_NVCC_USED "${path}" CACHE INTERNAL "the nvcc this build directory was configured with")
  set(CMAKE_CUDA_COMPILER "${path}" CACHE FILEPATH "CUDA compiler" FORCE)
endmacro()
