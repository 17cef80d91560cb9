# install() rules: `cmake --install BUILD [--prefix P]` (DESTDIR works) puts
#   bin/scaleguard, bin/scaleguard-run                     the programs
#   share/scaleguard/{policy,catalog}.ini, nccl/*.ini, examples/, parallelcluster/, sbatch/
#                                                           shipped configs and job templates
#                                                           (configure with
#                                                           -DSCALEGUARD_CONFIG_DIR=share/scaleguard
#                                                           for programs that default to them)
#   share/man/man1/scaleguard{,-run}.1, man5/scaleguard-policy.5
#   share/doc/scaleguard/*.md                               guides and file formats
#   SCALEGUARD_SLURM_PLUGIN_DIR/{scaleguard,job_submit_scaleguard}.so
# The Slurm plugins go where slurmctld and slurmstepd look for them (Slurm's PluginDir), which
# is outside the prefix; scripts/parallelcluster/install.sh places configs into the Slurm
# config dir itself (an admin's edited policy must survive a reinstall).
# COMPONENT: cli (CLI, configs, man pages, docs), runner (scaleguard-run and its man page),
# slurm_plugins: the packages cmake/package.cmake makes (CPack, one .deb per component).
include(GNUInstallDirs)

# Slurm's PluginDir: a directory holding a plugin every Slurm build has (auth_munge.so),
# looked up beside the headers the plugins were built with, then in Debian's and the default
# places. Override with -DSCALEGUARD_SLURM_PLUGIN_DIR=/opt/slurm/lib/slurm.
if(NOT DEFINED SCALEGUARD_SLURM_PLUGIN_DIR)
  set(slurm_plugin_hints "")
  if(SLURM_INCLUDE_DIR)
    get_filename_component(slurm_root "${SLURM_INCLUDE_DIR}" DIRECTORY)
    list(APPEND slurm_plugin_hints "${slurm_root}/lib/slurm" "${slurm_root}/lib64/slurm")
  endif()
  list(APPEND slurm_plugin_hints
    "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm" "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm"
    /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm /opt/slurm/lib/slurm)
  find_path(slurm_auth_munge_dir auth_munge.so PATHS ${slurm_plugin_hints} NO_DEFAULT_PATH)
  if(slurm_auth_munge_dir)
    set(detected "${slurm_auth_munge_dir}")
  else()
    set(detected "${CMAKE_INSTALL_LIBDIR}/slurm")   # relative: under the prefix
  endif()
  unset(slurm_auth_munge_dir CACHE)
  set(SCALEGUARD_SLURM_PLUGIN_DIR "${detected}" CACHE PATH
      "where the Slurm plugins are installed (Slurm's PluginDir; relative = under the prefix)")
endif()

if(TARGET scaleguard)
  install(TARGETS scaleguard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
if(TARGET scaleguard-run)
  install(TARGETS scaleguard-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runner)
  # dlopen()ed by `prep --tokenizer` from here (tokenizer/include/scaleguard/tokenizer_module.h)
  install(TARGETS scaleguard_tokenizer_module LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/scaleguard COMPONENT runner)
endif()
foreach(plugin scaleguard_spank job_submit_scaleguard)
  if(TARGET ${plugin})
    install(TARGETS ${plugin} LIBRARY DESTINATION "${SCALEGUARD_SLURM_PLUGIN_DIR}" COMPONENT slurm_plugins)
  endif()
endforeach()
# prep/scaleguard (every new run of a job checked against its budgets) is job_submit_scaleguard.so
# under the name slurmctld looks for (PrEpPlugins=script,scaleguard).
if(TARGET job_submit_scaleguard)
  install(CODE "file(CREATE_LINK job_submit_scaleguard.so \"\$ENV{DESTDIR}${SCALEGUARD_SLURM_PLUGIN_DIR}/prep_scaleguard.so\" SYMBOLIC)"
          COMPONENT slurm_plugins)
endif()

set(scaleguard_datadir ${CMAKE_INSTALL_DATADIR}/scaleguard)
install(FILES configs/policy.ini configs/catalog.ini DESTINATION ${scaleguard_datadir} COMPONENT cli)
install(DIRECTORY configs/nccl/ DESTINATION ${scaleguard_datadir}/nccl COMPONENT cli
        FILES_MATCHING PATTERN "*.ini")
install(DIRECTORY configs/examples/ DESTINATION ${scaleguard_datadir}/examples COMPONENT cli)
install(DIRECTORY configs/parallelcluster/ DESTINATION ${scaleguard_datadir}/parallelcluster COMPONENT cli
        FILES_MATCHING PATTERN "*.yaml")
install(FILES scripts/sbatch/train.sbatch scripts/sbatch/sweep.sbatch DESTINATION ${scaleguard_datadir}/sbatch
        COMPONENT cli)

install(FILES man/scaleguard.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
install(FILES man/scaleguard-run.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runner)
install(FILES man/scaleguard-policy.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5 COMPONENT cli)
file(GLOB scaleguard_docs ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)
install(FILES ${scaleguard_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)
