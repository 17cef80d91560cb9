/* One dlopen of a Slurm plugin in a fresh process, as slurmctld loads it at start-up: Slurm's
 * own library first (RTLD_GLOBAL: the plugin's slurm_* references resolve against it, and the
 * plugin binds them all at once, -z now), then the plugin (RTLD_NOW). Prints the plugin's
 * dlopen time in microseconds. A fresh process per sample: a C++ plugin with unique symbols
 * is never really unloaded, so a dlopen loop in one process would time nothing after the
 * first. Used by plugin_load.sh, which alternates plugins and takes medians. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBSLURMFULL PLUGIN.so\n", argv[0]);
    return 2;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void* plugin = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!plugin) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  printf("%.1f\n", (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3);
  return 0;
}
