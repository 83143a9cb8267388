# `cpack -G DEB` (in the build directory): one Debian package per install component
# (cmake/install.cmake), installed under /usr. Depends are what dpkg-shlibdeps finds for the
# libraries each package really links; what Debian does not package (NCCL and the CUDA runtime,
# from NVIDIA's toolkit) is stated in the descriptions and, for stragglar-bench, as Recommends on
# NVIDIA's package names, so that apt takes them from NVIDIA's repository when it is configured
# and dpkg still installs without them.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stragglar)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stragglar maintainers <maintainers@users.noreply.a-seed-922d8ffb.example>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/stragglar/stragglar")

set(CPACK_COMPONENTS_ALL core)
set(CPACK_DEBIAN_CORE_PACKAGE_NAME stragglar)
set(CPACK_COMPONENT_CORE_DESCRIPTION
    "AllReduce that gets faster when one GPU is persistently late
stragglar finds a persistently late rank in NCCL and MPI training jobs and
runs StragglAR's AllReduce for it: the ready ranks reduce-scatter while they
wait, and a verified schedule finishes when the straggler arrives.

This package holds the stragglar command (plan, sim, verify, run, replay,
doctor), the NCCL preload library /usr/lib/stragglar/libstragglar.so, the
Grafana dashboard and Prometheus alert rules, and the documentation. The
preload uses the NCCL of the job it is loaded into (NCCL 2.28 or later, from
NVIDIA), so it depends on none.")
if(TARGET stragglar_mpi)
  list(APPEND CPACK_COMPONENTS_ALL mpi)
  set(CPACK_DEBIAN_MPI_PACKAGE_NAME stragglar-mpi)
  set(CPACK_COMPONENT_MPI_DESCRIPTION
      "stragglar's AllReduce for unmodified MPI programs
The MPI preload library /usr/lib/stragglar/libstragglar_mpi.so, which runs
StragglAR's AllReduce under MPI_Allreduce when one rank is persistently late,
and stragglar-mpi-bench. It links the MPI library it was built with
(OpenMPI).")
endif()
if(TARGET stragglar-bench)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME stragglar-bench)
  set(CPACK_DEBIAN_CUDA_PACKAGE_RECOMMENDS "libnccl2 (>= 2.28), cuda-cudart-13-0")
  set(CPACK_COMPONENT_CUDA_DESCRIPTION
      "nccl-tests-style AllReduce benchmark for stragglar
stragglar-bench runs AllReduce over NCCL with a late rank, one process per
rank, and compares StragglAR with NCCL's own. It needs NCCL (2.28 or later)
and the CUDA 13 runtime from NVIDIA, which Debian does not package; they are
recommended under NVIDIA's package names.")
endif()

include(CPack)
