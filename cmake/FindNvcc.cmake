# umscope_find_nvcc(<var>): path of an nvcc, or empty.
# Order: CMAKE_CUDA_COMPILER, $CUDACXX, nvcc on PATH, /usr/local/cuda, then the
# nvcc that the PyPI package nvidia-cuda-nvcc installs next to the Python that
# runs the build (its headers and libcudart_static.a come from
# nvidia-cuda-runtime and nvidia-cuda-cccl, installed beside it).
function(umscope_find_nvcc out)
  set(found "")
  if(CMAKE_CUDA_COMPILER AND EXISTS "${CMAKE_CUDA_COMPILER}")
    set(found "${CMAKE_CUDA_COMPILER}")
  elseif(DEFINED ENV{CUDACXX} AND EXISTS "$ENV{CUDACXX}")
    set(found "$ENV{CUDACXX}")
  else()
    find_program(UMSCOPE_NVCC nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(UMSCOPE_NVCC)
      set(found "${UMSCOPE_NVCC}")
    else()
      find_package(Python3 COMPONENTS Interpreter QUIET)
      set(py "${Python3_EXECUTABLE}")
      if(DEFINED Python_EXECUTABLE)
        set(py "${Python_EXECUTABLE}")
      endif()
      if(py)
        execute_process(
          COMMAND "${py}" -c "import nvidia, os; print(';'.join(os.path.join(p, 'cu13', 'bin', 'nvcc') for p in nvidia.__path__))"
          OUTPUT_VARIABLE candidates OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        foreach(c IN LISTS candidates)
          if(NOT found AND EXISTS "${c}")
            set(found "${c}")
          endif()
        endforeach()
      endif()
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()
