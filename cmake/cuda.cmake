# CUDA toolkit, NCCL and CUPTI: optional. AUTO builds the GPU parts when nvcc and the libraries are
# found; ON fails the configure when they are not; OFF never looks. STRAGGLAR_HAVE_CUDA tells the rest.
set(STRAGGLAR_HAVE_CUDA OFF)
if(NOT STRAGGLAR_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STRAGGLAR_CUDA must be AUTO, ON or OFF, got '${STRAGGLAR_CUDA}'")
endif()

if(NOT STRAGGLAR_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    # The toolkit's lib/ holds NCCL and CUPTI on our machines; lib64/ and extras/ on others.
    set(_cuda_lib_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
                        ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64)
    find_path(STRAGGLAR_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(STRAGGLAR_NCCL_LIBRARY NAMES nccl HINTS ${_cuda_lib_hints})
    find_library(STRAGGLAR_CUPTI_LIBRARY NAMES cupti HINTS ${_cuda_lib_hints})
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER AND STRAGGLAR_NCCL_INCLUDE_DIR
     AND STRAGGLAR_NCCL_LIBRARY AND STRAGGLAR_CUPTI_LIBRARY)
    set(STRAGGLAR_HAVE_CUDA ON)
  elseif(STRAGGLAR_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STRAGGLAR_CUDA=ON but the CUDA toolkit (${CUDAToolkit_FOUND}), nvcc "
                        "(${CMAKE_CUDA_COMPILER}), NCCL (${STRAGGLAR_NCCL_LIBRARY}) or CUPTI "
                        "(${STRAGGLAR_CUPTI_LIBRARY}) is missing")
  endif()
endif()

if(STRAGGLAR_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # CUDA sources take the C++ standard (CMAKE_CXX_STANDARD 20) as their dialect, but CMake 3.25
  # does not know nvcc's flag for C++20: tell it.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  add_library(stragglar_nccl INTERFACE)
  target_include_directories(stragglar_nccl INTERFACE ${STRAGGLAR_NCCL_INCLUDE_DIR})
  target_link_libraries(stragglar_nccl INTERFACE ${STRAGGLAR_NCCL_LIBRARY} CUDA::cudart)
  # nccl.h alone: code inside libstragglar.so reaches NCCL through dlsym and must not link it.
  add_library(stragglar_nccl_headers INTERFACE)
  target_include_directories(stragglar_nccl_headers INTERFACE ${STRAGGLAR_NCCL_INCLUDE_DIR}
                                                              ${CUDAToolkit_INCLUDE_DIRS})
  message(STATUS "stragglar: CUDA ${CUDAToolkit_VERSION} (archs ${CMAKE_CUDA_ARCHITECTURES}), "
                 "NCCL ${STRAGGLAR_NCCL_LIBRARY}, CUPTI ${STRAGGLAR_CUPTI_LIBRARY}")
else()
  message(STATUS "stragglar: building without CUDA (STRAGGLAR_CUDA=${STRAGGLAR_CUDA})")
endif()
