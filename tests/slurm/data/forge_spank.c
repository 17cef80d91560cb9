/* A SPANK plugin a user could load on their own client (SLURM_CONF pointing at their own
 * plugstack.conf) to forge what job_submit/scaleguard reads: for every file in
 * $FORGE_SPANK_DIR it sets a spank job-control variable named like the file, with the file's
 * exact bytes as value (newlines, '=', 1 MB ...). Built by the live tests; never installed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(forge, 1);

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0, n;
  char *buf = malloc(cap + 1);
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac; (void)av;
  const char *dir = getenv("FORGE_SPANK_DIR");
  if (!dir || spank_remote(sp)) return 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *value = read_all(path);
    if (!value) continue;
    if (spank_job_control_setenv(sp, e->d_name, value, 1) != ESPANK_SUCCESS)
      slurm_error("forge: cannot set %s", e->d_name);
    free(value);
  }
  closedir(d);
  return 0;
}
