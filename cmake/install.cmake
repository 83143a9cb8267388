# `cmake --install BUILD [--prefix P]`: the programs in bin/, the preload libraries in
# lib/stragglar/ (a private directory, as libfaketime does: they are LD_PRELOADed by path, never
# linked against, so they stay off the linker's search path and need no SONAME), and the
# dashboards, alert rules and docs in share/stragglar/. Components, one Debian package each
# (cmake/packaging.cmake): core (the CLI, the NCCL preload, the dashboards and docs), mpi (the MPI
# preload and its bench) and cuda (stragglar-bench, which links NCCL and the CUDA runtime).
#
# Installed files carry no RUNPATH (CMake drops the build tree's at install): they find their
# libraries where the system's loader does (ldconfig), as packaged programs must.

install(TARGETS stragglar RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT core)
if(TARGET stragglar_preload)
  install(TARGETS stragglar_preload LIBRARY DESTINATION ${STRAGGLAR_INSTALL_PRELOADDIR}
          COMPONENT core)
endif()
if(TARGET stragglar_mpi)
  install(TARGETS stragglar_mpi LIBRARY DESTINATION ${STRAGGLAR_INSTALL_PRELOADDIR}
          COMPONENT mpi)
endif()
if(TARGET stragglar-mpi-bench)
  install(TARGETS stragglar-mpi-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT mpi)
endif()
if(TARGET stragglar-bench)
  install(TARGETS stragglar-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cuda)
endif()

set(STRAGGLAR_INSTALL_SHAREDIR ${CMAKE_INSTALL_DATADIR}/stragglar)
install(FILES dashboards/stragglar-dashboard.json dashboards/stragglar-rules.yml
              dashboards/stragglar-rules.test.yml
        DESTINATION ${STRAGGLAR_INSTALL_SHAREDIR}/dashboards COMPONENT core)
install(FILES README.md DESTINATION ${STRAGGLAR_INSTALL_SHAREDIR} COMPONENT core)
install(DIRECTORY docs/ DESTINATION ${STRAGGLAR_INSTALL_SHAREDIR}/docs COMPONENT core
        PATTERN "results" EXCLUDE)

# Debian's per-package documentation: the copyright file and the changelog, compressed as
# Debian policy asks (gzip -n -9: no name or time stamp, so the package builds reproducibly).
configure_file(packaging/changelog.in ${PROJECT_BINARY_DIR}/packaging/changelog @ONLY)
execute_process(
  COMMAND gzip -n -9 -c ${PROJECT_BINARY_DIR}/packaging/changelog
  OUTPUT_FILE ${PROJECT_BINARY_DIR}/packaging/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
foreach(component_package core:stragglar mpi:stragglar-mpi cuda:stragglar-bench)
  string(REPLACE ":" ";" pair ${component_package})
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES packaging/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
endforeach()
