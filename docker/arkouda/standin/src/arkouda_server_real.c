/*
 * arkouda_server_real STAND-IN: the per-locale program of the test double for Arkouda's Chapel server.
 *
 * A real GASNet-EX udp-conduit client, started on every host by the real amudprun (ssh spawner) exactly as
 * Chapel's arkouda_server_real is. Every locale joins the GASNet job, sends its description (host, pid, uid,
 * cores, memory) to every other locale as an active message, waits for every locale's message and for the
 * acknowledgements of its own, then passes a GASNet barrier and prints one line saying so. Locale 0 then
 * runs /opt/arkouda/bin/arkouda_standin_server (ARKOUDA_STANDIN_SERVER overrides the path) as its child with
 * the program's arguments, ARKOUDA_STANDIN_NUMLOCALES = gasnet_nodes() and ARKOUDA_STANDIN_LOCALES = the
 * table the active messages carried; it ends the GASNet job with the child's exit status (killed by signal
 * k: 128+k). The other locales keep serving GASNet until the job ends. A locale that dies ends the job the
 * way GASNet ends it (amudprun exits non-zero).
 *
 * Chapel runtime flags are consumed here as Chapel's runtime does: `-E NAME=VALUE` (Chapel's amudprun
 * launcher passes the whole launcher environment so, since the ssh spawner starts each locale with sshd's
 * environment) and `-nl N` / `--numLocales[=]N` (checked against gasnet_nodes()). Every other argument is
 * passed to the child unchanged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream, prctl */
#endif
#include <gasnetex.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BANNER "arkouda_server_real STAND-IN (test double for Arkouda's Chapel program, a GASNet-EX udp client; not Arkouda)"
#define PREFIX "arkouda_server_real STAND-IN: "
#define DEFAULT_SERVER "/opt/arkouda/bin/arkouda_standin_server"
#define HOST_MAX 256
#define STR2(x) #x
#define STR(x) STR2(x)
#define GASNET_VERSION_STR STR(GASNET_RELEASE_VERSION_MAJOR) "." STR(GASNET_RELEASE_VERSION_MINOR) "." STR(GASNET_RELEASE_VERSION_PATCH)

typedef struct {
  int32_t rank;
  int32_t pid;
  int32_t uid;
  int32_t num_pus;
  int64_t physical_memory;
  char host[HOST_MAX];
  char address[64]; /* the address sshd was reached at (SSH_CONNECTION), "" if not started over ssh */
} locale_info_t;

static locale_info_t *table;             /* one entry per rank, filled by the active messages */
static volatile gex_Rank_t infos_received; /* other ranks' descriptions received */
static volatile gex_Rank_t acks_received;  /* acknowledgements of our own description */
static volatile pid_t child_pid;
static volatile sig_atomic_t forwarded_signal;

enum { HIDX_INFO = GEX_AM_INDEX_BASE, HIDX_ACK };

static void info_handler(gex_Token_t token, void *buf, size_t nbytes) {
  gex_Token_Info_t ti;
  gex_Token_Info(token, &ti, GEX_TI_SRCRANK);
  if (nbytes == sizeof(locale_info_t)) {
    memcpy(&table[ti.gex_srcrank], buf, sizeof(locale_info_t));
    table[ti.gex_srcrank].host[HOST_MAX - 1] = '\0';
  }
  infos_received++; /* handlers run inside Poll on this (single) thread */
  gex_AM_ReplyShort0(token, HIDX_ACK, 0);
}

static void ack_handler(gex_Token_t token) {
  (void)token;
  acks_received++;
}

static gex_AM_Entry_t handlers[] = {
    {HIDX_INFO, (gex_AM_Fn_t)info_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_MEDIUM, 0, NULL, "standin_info"},
    {HIDX_ACK, (gex_AM_Fn_t)ack_handler, GEX_FLAG_AM_REPLY | GEX_FLAG_AM_SHORT, 0, NULL, "standin_ack"},
};

static void die(const char *msg) {
  fprintf(stderr, PREFIX "error: %s\n", msg);
  fflush(stderr);
  gasnet_exit(1);
}

static char ssh_address[64]; /* read before -E options overwrite the environment */

static void describe_self(locale_info_t *me, gex_Rank_t rank) {
  memset(me, 0, sizeof(*me));
  me->rank = (int32_t)rank;
  me->pid = (int32_t)getpid();
  me->uid = (int32_t)getuid();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  me->num_pus = cpus > 0 ? (int32_t)cpus : 0;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  me->physical_memory = (pages > 0 && page > 0) ? (int64_t)pages * page : 0;
  if (gethostname(me->host, HOST_MAX - 1) != 0) snprintf(me->host, HOST_MAX, "unknown");
  memcpy(me->address, ssh_address, sizeof me->address);
}

/* SSH_CONNECTION = "<client ip> <client port> <server ip> <server port>": the server ip is the host entry
 * of GASNET_SSH_SERVERS this locale was started on. */
static void read_ssh_address(void) {
  const char *c = getenv("SSH_CONNECTION");
  char client[64], server[64];
  if (c && sscanf(c, "%63s %*s %63s", client, server) == 2) snprintf(ssh_address, sizeof ssh_address, "%s", server);
}

/* JSON string body of s (host names need no escaping in practice; escape anyway). */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* with_address: the report line also names the ssh address; the server's table has exactly its keys. */
static char *locales_json(gex_Rank_t n, int with_address) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) die("open_memstream failed");
  fputc('[', f);
  for (gex_Rank_t i = 0; i < n; i++) {
    const locale_info_t *l = &table[i];
    fprintf(f, "%s{\"id\":%d,\"name\":", i ? "," : "", (int)i);
    json_str(f, l->host);
    fprintf(f, ",\"pid\":%d,\"uid\":%d,\"numPUs\":%d,\"physicalMemory\":%lld", (int)l->pid, (int)l->uid,
            (int)l->num_pus, (long long)l->physical_memory);
    if (with_address) {
      fputs(",\"sshAddress\":", f);
      if (l->address[0]) json_str(f, l->address);
      else fputs("null", f);
    }
    fputc('}', f);
  }
  fputc(']', f);
  fclose(f);
  return buf;
}

/* Consume Chapel runtime flags (-E NAME=VALUE, -nl N, --numLocales[=]N); keep the rest in order. */
static char **program_args(int argc, char **argv, long *num_locales) {
  char **out = calloc((size_t)argc + 1, sizeof(char *));
  int k = 0;
  if (!out) die("out of memory");
  *num_locales = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-E") == 0 && i + 1 < argc) {
      char *kv = argv[++i], *eq = strchr(kv, '=');
      if (eq && eq != kv) {
        *eq = '\0';
        setenv(kv, eq + 1, 1);
        *eq = '=';
      }
    } else if ((strcmp(a, "-nl") == 0 || strcmp(a, "--numLocales") == 0) && i + 1 < argc) {
      *num_locales = strtol(argv[++i], NULL, 10);
    } else if (strncmp(a, "--numLocales=", 13) == 0) {
      *num_locales = strtol(a + 13, NULL, 10);
    } else {
      out[k++] = argv[i];
    }
  }
  out[k] = NULL;
  return out;
}

static void forward_signal(int sig) {
  forwarded_signal = sig;
  if (child_pid > 0) kill(child_pid, sig);
}

static void kill_child_at_exit(void) {
  if (child_pid > 0) kill(child_pid, SIGTERM);
}

static pid_t start_server(char **args, gex_Rank_t n) {
  const char *server = getenv("ARKOUDA_STANDIN_SERVER");
  if (!server || !*server) server = DEFAULT_SERVER;
  char nl[32];
  snprintf(nl, sizeof nl, "%u", (unsigned)n);
  char *locales = locales_json(n, 0);
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    /* The server must not outlive this locale (a GASNet job that ends kills us, maybe with SIGKILL). */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(143);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    setenv("ARKOUDA_STANDIN_NUMLOCALES", nl, 1);
    setenv("ARKOUDA_STANDIN_LOCALES", locales, 1);
    int count = 0;
    while (args[count]) count++;
    char **argv = calloc((size_t)count + 2, sizeof(char *));
    if (!argv) _exit(127);
    argv[0] = (char *)server;
    for (int i = 0; i < count; i++) argv[i + 1] = args[i];
    execv(server, argv);
    fprintf(stderr, PREFIX "error: cannot run %s: %s (ARKOUDA_STANDIN_SERVER names the server program)\n", server,
            strerror(errno));
    _exit(127);
  }
  free(locales);
  return pid;
}

static void nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000}; /* 20 ms: serve GASNet without spinning a core */
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  /* Run by hand (not by amudprun): answer --version/--help instead of becoming a GASNet master. */
  if (!getenv("AMUDP_WORKER_ARGS")) {
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
        printf("%s\nGASNet-EX %s, conduit %s; start it with arkouda_server -nl N (amudprun -np N %s ...)\n",
               BANNER, GASNET_VERSION_STR, GASNET_CONDUIT_NAME_STR, argv[0]);
        return 0;
      }
    }
  }

  read_ssh_address();
  gex_Client_t client;
  gex_EP_t ep;
  gex_TM_t tm;
  if (gex_Client_Init(&client, &ep, &tm, "arkouda_server_real", &argc, &argv, 0) != GASNET_OK) {
    fprintf(stderr, PREFIX "error: GASNet initialisation failed (start it with arkouda_server -nl N)\n");
    return 1;
  }
  if (gex_EP_RegisterHandlers(ep, handlers, sizeof handlers / sizeof handlers[0]) != GASNET_OK)
    die("registering the active-message handlers failed");
  /* Nothing here computes: wait for the other locales by blocking, not spinning (udp-conduit does this by itself
     only for its localhost spawner), so locales that share cores do not burn them while they wait. */
  gasnet_set_waitmode(GASNET_WAIT_BLOCK);

  const gex_Rank_t me = gex_TM_QueryRank(tm), n = gex_TM_QuerySize(tm);
  long nl_arg;
  char **args = program_args(argc, argv, &nl_arg);
  if (nl_arg >= 0 && nl_arg != (long)n) {
    char msg[160];
    snprintf(msg, sizeof msg, "-nl %ld does not match the GASNet job's %u nodes", nl_arg, (unsigned)n);
    die(msg);
  }

  table = calloc(n, sizeof(locale_info_t));
  if (!table) die("out of memory");
  describe_self(&table[me], me);
  printf(PREFIX "locale %u of %u joined the GASNet job (GASNet-EX %s, %s conduit): host=%s pid=%d uid=%d ssh=%s\n",
         (unsigned)me, (unsigned)n, GASNET_VERSION_STR, GASNET_CONDUIT_NAME_STR, table[me].host,
         (int)table[me].pid, (int)table[me].uid, table[me].address[0] ? table[me].address : "none");
  fflush(stdout);

  /* No active message before every locale has registered its handlers. */
  gex_Event_Wait(gex_Coll_BarrierNB(tm, 0));
  /* Every locale sends its description to every other locale as an active message, each one acknowledged. */
  for (gex_Rank_t r = 0; r < n; r++) {
    if (r == me) continue;
    gex_AM_RequestMedium0(tm, r, HIDX_INFO, &table[me], sizeof(locale_info_t), GEX_EVENT_NOW, 0);
  }
  GASNET_BLOCKUNTIL(infos_received == n - 1 && acks_received == n - 1);

  gex_Event_Wait(gex_Coll_BarrierNB(tm, 0));
  printf(PREFIX "locale %u of %u passed the GASNet barrier after exchanging active messages with %u locale(s): "
         "host=%s pid=%d uid=%d ssh=%s\n",
         (unsigned)me, (unsigned)n, (unsigned)(n - 1), table[me].host, (int)table[me].pid, (int)table[me].uid,
         table[me].address[0] ? table[me].address : "none");
  fflush(stdout);

  if (me != 0) {
    for (;;) { /* serve GASNet until the job ends (the master's exit signal ends this process) */
      gasnet_AMPoll();
      nap();
    }
  }

  char *json = locales_json(n, 1);
  printf("ARKOUDA-STANDIN-GASNET-LOCALES {\"numLocales\":%u,\"locales\":%s,\"spawner\":{", (unsigned)n, json);
  free(json);
  /* The launcher's spawner settings (from Chapel's -E options, i.e. what amudprun was given). */
  static const char *const spawner_env[] = {"GASNET_SPAWNFN", "GASNET_SSH_SERVERS", "GASNET_SSH_CMD",
                                            "GASNET_SSH_OPTIONS", "GASNET_SSH_REMOTE_PATH", "GASNET_MASTERIP"};
  for (size_t i = 0; i < sizeof spawner_env / sizeof spawner_env[0]; i++) {
    const char *v = getenv(spawner_env[i]);
    printf("%s\"%s\":", i ? "," : "", spawner_env[i]);
    if (v) json_str(stdout, v);
    else fputs("null", stdout);
  }
  printf("}}\n");
  fflush(stdout);

  atexit(kill_child_at_exit);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  child_pid = start_server(args, n);

  int status = 0, code;
  for (;;) {
    gasnet_AMPoll();
    pid_t got = waitpid(child_pid, &status, WNOHANG);
    if (got == child_pid) break;
    if (got < 0 && errno != EINTR) die("waitpid failed");
    nap();
  }
  child_pid = 0;
  code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  printf(PREFIX "locale 0: the server exited with status %d; ending the GASNet job with it\n", code);
  fflush(stdout);
  gasnet_exit(code);
  return code;
}
