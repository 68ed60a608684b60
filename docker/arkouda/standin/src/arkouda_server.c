/*
 * arkouda_server STAND-IN: the launcher half of the test double for Arkouda's Chapel server.
 *
 * Does what the launcher Chapel generates for CHPL_COMM=gasnet CHPL_COMM_SUBSTRATE=udp CHPL_LAUNCHER=amudprun
 * does (Chapel's runtime/src/launch/amudprun/launch-amudprun.c and chpl-launcher-common.c):
 *   arkouda_server -nl N ARGS...  ->  exec amudprun -np N <dir of argv[0]>/arkouda_server_real -nl N ARGS...
 * with, when GASNET_SPAWNFN is unset or S (the ssh spawner), `-E NAME=VALUE` appended for every variable of
 * the launcher's environment (the ssh spawner starts each locale with sshd's environment, not ours). All
 * spawner settings (GASNET_SSH_SERVERS, GASNET_SSH_CMD, GASNET_SSH_OPTIONS, GASNET_SSH_REMOTE_PATH,
 * GASNET_MASTERIP, ...) are read by the real amudprun itself, not here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AMUDPRUN
#define AMUDPRUN "/opt/gasnet/bin/amudprun"
#endif
#define BANNER "arkouda_server STAND-IN (test double for Arkouda's Chapel launcher: runs GASNet's real amudprun; not Arkouda)"

extern char **environ;

static int usage_error(const char *msg) {
  fprintf(stderr, "arkouda_server STAND-IN: error: %s\n", msg);
  return 2;
}

/* Chapel's launcher: a positive locale count, else one line naming the flag. */
static long parse_count(const char *s) {
  char *end = NULL;
  errno = 0;
  long n = strtol(s, &end, 10);
  if (errno || !end || *end || n < 1 || n > 1000000) return -1;
  return n;
}

int main(int argc, char **argv) {
  long nl = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--version") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      printf("%s\nusage: %s -nl N [Arkouda server options]\nruns: %s -np N %s_real -nl N [options] [-E NAME=VALUE ...]\n",
             BANNER, argv[0], AMUDPRUN, argv[0]);
      return 0;
    }
    const char *value = NULL;
    if (strcmp(a, "-nl") == 0 || strcmp(a, "--numLocales") == 0) {
      if (i + 1 >= argc) return usage_error("-nl needs a value: -nl <number of locales>");
      value = argv[i + 1];
    } else if (strncmp(a, "--numLocales=", 13) == 0) {
      value = a + 13;
    }
    if (value) {
      nl = parse_count(value);
      if (nl < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "number of locales must be a positive integer, got '%.100s' (-nl N)", value);
        return usage_error(msg);
      }
    }
  }
  if (nl == 0) return usage_error("Specify number of locales via -nl <#> or --numLocales=<#> on the command line");

  /* <argv[0]>_real, as Chapel's chpl_compute_real_binary_name does. */
  size_t real_len = strlen(argv[0]) + sizeof "_real";
  char *real = malloc(real_len);
  if (!real) return 1;
  snprintf(real, real_len, "%s_real", argv[0]);

  int envc = 0;
  const char *spawnfn = getenv("GASNET_SPAWNFN");
  int add_env = spawnfn == NULL || strcmp(spawnfn, "S") == 0;
  if (add_env)
    while (environ[envc]) envc++;

  char nlbuf[32];
  snprintf(nlbuf, sizeof nlbuf, "%ld", nl);
  char **largv = calloc((size_t)argc + 2 * (size_t)envc + 8, sizeof(char *));
  if (!largv) return 1;
  int k = 0;
  largv[k++] = (char *)AMUDPRUN;
  largv[k++] = (char *)"-np";
  largv[k++] = nlbuf;
  largv[k++] = real;
  for (int i = 1; i < argc; i++) largv[k++] = argv[i];
  for (int i = 0; i < envc; i++) {
    largv[k++] = (char *)"-E";
    largv[k++] = environ[i];
  }
  largv[k] = NULL;
  fflush(stdout);
  execv(AMUDPRUN, largv);
  fprintf(stderr, "arkouda_server STAND-IN: error: cannot run %s: %s (the image must contain GASNet's amudprun)\n",
          AMUDPRUN, strerror(errno));
  return 127;
}
