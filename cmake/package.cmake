# Packages: CPack's DEB generator, one .deb per install() COMPONENT of cmake/install.cmake:
#   scaleguard                the CLI, shipped configs and job templates, man pages, docs
#   scaleguard-run            the runner, its man page, the Lmod modulefile
#   scaleguard-slurm-plugins  scaleguard.so (SPANK) and job_submit_scaleguard.so in the Slurm
#                             PluginDir, built for the Slurm release whose headers it was
#                             compiled with (Depends/Provides/Description name it)
# `scripts/package` configures a build for /usr and runs cpack (packaging/README.md). The
# packages are only right for a build configured for installation: CMAKE_INSTALL_PREFIX=/usr
# and SCALEGUARD_CONFIG_DIR=share/scaleguard (the programs' compiled-in config directory).
include(GNUInstallDirs)

# --- the Lmod / environment-modules modulefile (runner component) -------------------------
set(SCALEGUARD_MODULEFILES_DIR "${CMAKE_INSTALL_DATADIR}/modulefiles" CACHE STRING
    "where the scaleguard modulefile is installed (relative = under the install prefix)")
configure_file(${PROJECT_SOURCE_DIR}/packaging/modulefiles/scaleguard.lua.in
               ${PROJECT_BINARY_DIR}/packaging/modulefiles/scaleguard/${PROJECT_VERSION}.lua @ONLY)
if(TARGET scaleguard-run)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/modulefiles/scaleguard/${PROJECT_VERSION}.lua
          DESTINATION ${SCALEGUARD_MODULEFILES_DIR}/scaleguard COMPONENT runner)
endif()

# --- the Slurm release the plugins are built for -------------------------------------------
set(scaleguard_slurm_release "")
if(SLURM_INCLUDE_DIR AND EXISTS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h")
  # SLURM_VERSION_NUMBER 0x160508 = 22.05.8 (every release's slurm_version.h has it).
  file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" version_line
       REGEX "^#define SLURM_VERSION_NUMBER")
  string(REGEX MATCH "0x[0-9a-fA-F]+" version_hex "${version_line}")
  if(version_hex)
    math(EXPR version_num "${version_hex}")
    math(EXPR major "${version_num} >> 16")
    math(EXPR minor "(${version_num} >> 8) & 255")
    math(EXPR micro "${version_num} & 255")
    math(EXPR next_minor "${minor} + 1")
    foreach(v minor next_minor)
      if(${v} LESS 10)
        set(${v} "0${${v}}")
      endif()
    endforeach()
    set(scaleguard_slurm_release "${major}.${minor}")                 # 22.05
    set(scaleguard_slurm_version "${major}.${minor}.${micro}")        # 22.05.8
    set(scaleguard_slurm_next "${major}.${next_minor}")               # 22.06: the upper bound
  endif()
endif()

# Depends of the plugin package: the Debian package that owns the Slurm PluginDir the plugins
# install into (slurm-wlm-basic-plugins on Debian), held to the release the plugins were
# compiled against — Slurm refuses plugins of another major release. Empty for a Slurm that
# dpkg does not know (a SchedMD build under /opt/slurm). -DSCALEGUARD_PACKAGE_SLURM_DEPENDS=...
# replaces it (empty: none); detected again at every configure otherwise.
if(NOT DEFINED SCALEGUARD_PACKAGE_SLURM_DEPENDS)
  set(slurm_owner "")
  find_program(DPKG_QUERY dpkg-query)
  set(plugin_dir_abs "${SCALEGUARD_SLURM_PLUGIN_DIR}")
  if(NOT IS_ABSOLUTE "${plugin_dir_abs}")
    set(plugin_dir_abs "${CMAKE_INSTALL_PREFIX}/${plugin_dir_abs}")
  endif()
  if(DPKG_QUERY AND scaleguard_slurm_release AND NOT SCALEGUARD_SLURM_PREFIX
     AND EXISTS "${plugin_dir_abs}/auth_munge.so")
    execute_process(COMMAND ${DPKG_QUERY} -S "${plugin_dir_abs}/auth_munge.so"
                    OUTPUT_VARIABLE owner_line ERROR_QUIET RESULT_VARIABLE owner_rc)
    if(owner_rc EQUAL 0)
      string(REGEX REPLACE "^([^:]+):.*" "\\1" slurm_owner "${owner_line}")
      string(STRIP "${slurm_owner}" slurm_owner)
    endif()
  endif()
  set(slurm_depends "")
  if(slurm_owner)
    set(slurm_depends "${slurm_owner} (>= ${scaleguard_slurm_release}), ${slurm_owner} (<< ${scaleguard_slurm_next})")
  endif()
else()
  set(slurm_depends "${SCALEGUARD_PACKAGE_SLURM_DEPENDS}")
endif()

if(scaleguard_slurm_release AND (TARGET scaleguard_spank OR TARGET job_submit_scaleguard))
  # A record on the installed system of which Slurm the plugins were compiled against.
  file(WRITE ${PROJECT_BINARY_DIR}/packaging/slurm-release
       "scaleguard ${PROJECT_VERSION} Slurm plugins built against Slurm ${scaleguard_slurm_version} headers (${SLURM_INCLUDE_DIR}); they load in Slurm ${scaleguard_slurm_release}.x only\n")
  install(FILES ${PROJECT_BINARY_DIR}/packaging/slurm-release
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/scaleguard-slurm-plugins COMPONENT slurm_plugins)
endif()

# --- CPack ---------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME scaleguard)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR scaleguard)
set(CPACK_PACKAGE_CONTACT "scaleguard maintainers <root@localhost>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: each package's description starts with its own summary.
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(components cli)
if(TARGET scaleguard-run)
  list(APPEND components runner)
endif()
if(TARGET scaleguard_spank AND TARGET job_submit_scaleguard)
  list(APPEND components slurm_plugins)
endif()
set(CPACK_COMPONENTS_ALL ${components})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)   # fast to build; the packages are small
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)    # dpkg-shlibdeps: Boost, LibTorch, MPI, HDF5, ...
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(full_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME scaleguard)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "GPU training planner for Slurm clusters: the scaleguard CLI
The scaleguard CLI (plan, policy check, report), the default admin policy,
the hardware and price catalog, NCCL profiles, sbatch templates, man pages
and guides (configs in ${SCALEGUARD_CONFIG_PATH}).")

set(CPACK_DEBIAN_RUNNER_PACKAGE_NAME scaleguard-run)
set(CPACK_DEBIAN_RUNNER_PACKAGE_DEPENDS "scaleguard (= ${full_version})")
set(CPACK_COMPONENT_RUNNER_DESCRIPTION
    "scaleguard-run: runs a training job with its planned strategy
Started by srun --mpi=pmix or mpirun; trains a LibTorch model data
parallel, sharded or pipelined, writes HDF5 shard checkpoints and handles
preemption. Ships an Lmod modulefile (module load scaleguard).")

set(CPACK_DEBIAN_SLURM_PLUGINS_PACKAGE_NAME scaleguard-slurm-plugins)
set(plugin_depends "scaleguard (= ${full_version})")
if(slurm_depends)
  string(APPEND plugin_depends ", ${slurm_depends}")
endif()
set(CPACK_DEBIAN_SLURM_PLUGINS_PACKAGE_DEPENDS "${plugin_depends}")
if(scaleguard_slurm_release)
  set(CPACK_DEBIAN_SLURM_PLUGINS_PACKAGE_PROVIDES "scaleguard-slurm-plugins-${scaleguard_slurm_release}")
  set(CPACK_DEBIAN_SLURM_PLUGINS_PACKAGE_ENHANCES "slurmctld, slurmd, slurm-client")
  set(built_for "Built for Slurm ${scaleguard_slurm_release} (headers ${scaleguard_slurm_version}); Slurm loads\nthem in that release only.")
else()
  set(built_for "")
endif()
set(CPACK_COMPONENT_SLURM_PLUGINS_DESCRIPTION
    "scaleguard Slurm plugins for Slurm ${scaleguard_slurm_release}
job_submit/scaleguard (slurmctld: rejects, rewrites or accepts and
annotates every job) and the scaleguard SPANK plugin (--train-* options
for sbatch, srun and salloc), installed in
${SCALEGUARD_SLURM_PLUGIN_DIR}.
${built_for}")

include(CPack)
