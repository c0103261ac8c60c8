# Cross-compiling for aarch64 (Grace, sbsa) on an x86_64 host with Debian's cross toolchain
# (apt install g++-aarch64-linux-gnu). CUDA parts: the host's nvcc compiles device code (it does not
# depend on the host CPU) and hands host code to the cross g++ (CMAKE_CUDA_HOST_COMPILER); the CUDA
# headers and the aarch64 libraries it links (cudart_static, CUPTI) come from NVIDIA's manylinux
# aarch64 wheels, unpacked into UMSCOPE_SBSA_CUDA (.ci/aarch64 does this).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CUDA_HOST_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# find_library/find_path re-root their hints under CMAKE_FIND_ROOT_PATH: the CUDA root nvcc belongs to
# (its targets/sbsa-linux holds the aarch64 libraries) is a root too, so its own paths stay as they are.
if(DEFINED ENV{CUDACXX} AND NOT "$ENV{CUDACXX}" STREQUAL "")
  get_filename_component(_umscope_nvcc_bin "$ENV{CUDACXX}" DIRECTORY)
  get_filename_component(_umscope_cuda_root "${_umscope_nvcc_bin}" DIRECTORY)
  list(APPEND CMAKE_FIND_ROOT_PATH "${_umscope_cuda_root}")
endif()
