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
#include <fcntl.h>
#include <poll.h>
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

enum {
  HIDX_INFO = GEX_AM_INDEX_BASE,
  HIDX_ACK,
  HIDX_POPEN,   /* request medium: path; arg0 = 1 write (create/truncate), 0 read */
  HIDX_PWRITE,  /* request medium: data; args: file offset hi, lo */
  HIDX_PREAD,   /* request short: args: file offset hi, lo, length, destination offset hi, lo */
  HIDX_PCLOSE,  /* request short */
  HIDX_PSTATUS, /* reply medium: the locale's error text, empty when all went well */
  HIDX_PWACK,   /* reply short: one data chunk written */
  HIDX_PDATA    /* reply medium: data read; args: destination offset hi, lo */
};

/* Active messages handled so far by the launch's handlers: a wait naps only after a poll that handled none. */
static volatile unsigned long launch_activity;

static void info_handler(gex_Token_t token, void *buf, size_t nbytes) {
  gex_Token_Info_t ti;
  gex_Token_Info(token, &ti, GEX_TI_SRCRANK);
  if (nbytes == sizeof(locale_info_t)) {
    memcpy(&table[ti.gex_srcrank], buf, sizeof(locale_info_t));
    table[ti.gex_srcrank].host[HOST_MAX - 1] = '\0';
  }
  infos_received++; /* handlers run inside Poll on this (single) thread */
  launch_activity++;
  gex_AM_ReplyShort0(token, HIDX_ACK, 0);
}

static void ack_handler(gex_Token_t token) {
  (void)token;
  acks_received++;
  launch_activity++;
}

/* --- checkpoint part files -------------------------------------------------------------------------------
 * Arkouda writes and reads each locale's part of a checkpoint on that locale (`coforall loc ... on loc`). Here
 * locale 0 carries each part to its locale as active messages; that locale's process opens, writes or reads
 * the file in its own filesystem and answers with its error text. One part at a time (the server's checkpoint
 * commands run one after another), so each process keeps one open part. */
static volatile unsigned long am_activity; /* any part-file message handled: keep polling instead of napping */
static int part_fd = -1;
static char part_path[4096];
static char part_err[5120]; /* room for the path and the system's message */
static uint64_t part_bytes; /* written or read since the part was opened */
static gex_Rank_t my_rank;
/* locale 0, the driver's side */
static volatile int op_done;
static volatile size_t op_acks, op_chunks_in;
static char op_err[5120];
static char *op_buf;

static uint64_t arg64(gex_AM_Arg_t hi, gex_AM_Arg_t lo) { return ((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo; }

static void part_error(const char *what) {
  /* The wording of Arrow's error for a file it cannot open, which Arkouda's Parquet reader/writer passes on. */
  if (!part_err[0])
    snprintf(part_err, sizeof part_err, "%s local file '%s'. Detail: [errno %d] %s", what, part_path, errno,
             strerror(errno));
}

static void part_open(const char *path, size_t len, int for_write) {
  if (part_fd >= 0) close(part_fd);
  part_err[0] = '\0';
  part_bytes = 0;
  snprintf(part_path, sizeof part_path, "%.*s", (int)len, path);
  part_fd = for_write ? open(part_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)
                      : open(part_path, O_RDONLY | O_CLOEXEC);
  if (part_fd < 0) part_error("Failed to open");
}


/* Close the part and say in the log which locale's process wrote or read it (the proof that each locale did
   its own part, from its own pod). */
static void part_done(int was_write) {
  if (part_fd >= 0 && close(part_fd) != 0) part_error("Failed to close");
  part_fd = -1;
  if (part_err[0])
    printf(PREFIX "locale %u: checkpoint part %s failed: %s\n", (unsigned)my_rank, part_path, part_err);
  else
    printf(PREFIX "locale %u %s checkpoint part %s (%llu bytes): host=%s pid=%d\n", (unsigned)my_rank,
           was_write ? "wrote" : "read", part_path, (unsigned long long)part_bytes, table[my_rank].host,
           (int)table[my_rank].pid);
  fflush(stdout);
  part_bytes = 0;
}

static void part_write(const char *buf, size_t n, uint64_t off) {
  while (part_fd >= 0 && !part_err[0] && n > 0) {
    ssize_t w = pwrite(part_fd, buf, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      part_error("Failed to write");
      return;
    }
    buf += w, n -= (size_t)w, off += (uint64_t)w, part_bytes += (uint64_t)w;
  }
}

static size_t part_read(char *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (part_fd >= 0 && !part_err[0] && got < n) {
    ssize_t r = pread(part_fd, buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      part_error("Failed to read");
      break;
    }
    if (r == 0) {
      snprintf(part_err, sizeof part_err, "Unexpected end of stream in local file '%s' (STAND-IN: %zu bytes at %llu)",
               part_path, n, (unsigned long long)off);
      break;
    }
    got += (size_t)r;
  }
  part_bytes += got;
  return got;
}

static void popen_handler(gex_Token_t token, void *buf, size_t nbytes, gex_AM_Arg_t for_write) {
  am_activity++;
  part_open(buf, nbytes, for_write);
  if (part_err[0]) part_done(for_write); /* log the failure here: locale 0 sends no close after it */
  gex_AM_ReplyMedium0(token, HIDX_PSTATUS, part_err, strlen(part_err), GEX_EVENT_NOW, 0);
}

static void pwrite_handler(gex_Token_t token, void *buf, size_t nbytes, gex_AM_Arg_t hi, gex_AM_Arg_t lo) {
  am_activity++;
  part_write(buf, nbytes, arg64(hi, lo));
  gex_AM_ReplyShort0(token, HIDX_PWACK, 0);
}

static char *pread_buf;
static void pread_handler(gex_Token_t token, gex_AM_Arg_t hi, gex_AM_Arg_t lo, gex_AM_Arg_t len, gex_AM_Arg_t dhi,
                          gex_AM_Arg_t dlo) {
  am_activity++;
  size_t got = part_read(pread_buf, (size_t)(uint32_t)len, arg64(hi, lo));
  gex_AM_ReplyMedium2(token, HIDX_PDATA, pread_buf, got, GEX_EVENT_NOW, 0, dhi, dlo);
}

static void pclose_handler(gex_Token_t token, gex_AM_Arg_t was_write) {
  am_activity++;
  part_done(was_write);
  gex_AM_ReplyMedium0(token, HIDX_PSTATUS, part_err, strlen(part_err), GEX_EVENT_NOW, 0);
}

static void pstatus_handler(gex_Token_t token, void *buf, size_t nbytes) {
  (void)token;
  if (nbytes >= sizeof op_err) nbytes = sizeof op_err - 1;
  memcpy(op_err, buf, nbytes);
  op_err[nbytes] = '\0';
  op_done = 1;
}

static void pwack_handler(gex_Token_t token) {
  (void)token;
  op_acks++;
}

static void pdata_handler(gex_Token_t token, void *buf, size_t nbytes, gex_AM_Arg_t dhi, gex_AM_Arg_t dlo) {
  (void)token;
  memcpy(op_buf + arg64(dhi, dlo), buf, nbytes);
  op_chunks_in++;
}

static gex_AM_Entry_t handlers[] = {
    {HIDX_INFO, (gex_AM_Fn_t)info_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_MEDIUM, 0, NULL, "standin_info"},
    {HIDX_ACK, (gex_AM_Fn_t)ack_handler, GEX_FLAG_AM_REPLY | GEX_FLAG_AM_SHORT, 0, NULL, "standin_ack"},
    {HIDX_POPEN, (gex_AM_Fn_t)popen_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_MEDIUM, 1, NULL, "standin_part_open"},
    {HIDX_PWRITE, (gex_AM_Fn_t)pwrite_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_MEDIUM, 2, NULL, "standin_part_write"},
    {HIDX_PREAD, (gex_AM_Fn_t)pread_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_SHORT, 5, NULL, "standin_part_read"},
    {HIDX_PCLOSE, (gex_AM_Fn_t)pclose_handler, GEX_FLAG_AM_REQUEST | GEX_FLAG_AM_SHORT, 1, NULL, "standin_part_close"},
    {HIDX_PSTATUS, (gex_AM_Fn_t)pstatus_handler, GEX_FLAG_AM_REPLY | GEX_FLAG_AM_MEDIUM, 0, NULL, "standin_part_status"},
    {HIDX_PWACK, (gex_AM_Fn_t)pwack_handler, GEX_FLAG_AM_REPLY | GEX_FLAG_AM_SHORT, 0, NULL, "standin_part_wack"},
    {HIDX_PDATA, (gex_AM_Fn_t)pdata_handler, GEX_FLAG_AM_REPLY | GEX_FLAG_AM_MEDIUM, 2, NULL, "standin_part_data"},
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

static gex_TM_t the_tm;
static size_t chunk_max; /* the largest medium message both ways */
static int req_fd = -1, rep_fd = -1; /* the server's part-file requests, our answers (see partfiles.py) */

static int read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

static int answer(const char *kind, const char *data, size_t n) {
  char head[64];
  int k = snprintf(head, sizeof head, "%s %zu\n", kind, n);
  return write_full(rep_fd, head, (size_t)k) || write_full(rep_fd, data, n) ? -1 : 0;
}

static void part_write_on(gex_Rank_t r, const char *path, size_t pathlen, const char *data, size_t n) {
  op_err[0] = '\0';
  if (r == my_rank) { /* locale 0's own part, by this process */
    part_open(path, pathlen, 1);
    part_write(data, n, 0);
    part_done(1);
    snprintf(op_err, sizeof op_err, "%s", part_err);
    return;
  }
  op_done = 0;
  gex_AM_RequestMedium1(the_tm, r, HIDX_POPEN, (void *)path, pathlen, GEX_EVENT_NOW, 0, 1);
  GASNET_BLOCKUNTIL(op_done);
  if (op_err[0]) return;
  size_t chunks = 0;
  op_acks = 0;
  for (size_t off = 0; off < n; off += chunk_max, chunks++) {
    size_t len = n - off < chunk_max ? n - off : chunk_max;
    gex_AM_RequestMedium2(the_tm, r, HIDX_PWRITE, (void *)(data + off), len, GEX_EVENT_NOW, 0,
                          (gex_AM_Arg_t)(off >> 32), (gex_AM_Arg_t)(off & 0xffffffffu));
  }
  GASNET_BLOCKUNTIL(op_acks == chunks);
  op_done = 0;
  gex_AM_RequestShort1(the_tm, r, HIDX_PCLOSE, 0, 1);
  GASNET_BLOCKUNTIL(op_done);
}

static void part_read_on(gex_Rank_t r, const char *path, size_t pathlen, uint64_t foff, char *dest, size_t n) {
  op_err[0] = '\0';
  if (r == my_rank) {
    part_open(path, pathlen, 0);
    part_read(dest, n, foff);
    part_done(0);
    snprintf(op_err, sizeof op_err, "%s", part_err);
    return;
  }
  op_done = 0;
  gex_AM_RequestMedium1(the_tm, r, HIDX_POPEN, (void *)path, pathlen, GEX_EVENT_NOW, 0, 0);
  GASNET_BLOCKUNTIL(op_done);
  if (op_err[0]) return;
  size_t chunks = 0;
  op_buf = dest;
  op_chunks_in = 0;
  for (size_t off = 0; off < n; off += chunk_max, chunks++) {
    size_t len = n - off < chunk_max ? n - off : chunk_max;
    uint64_t at = foff + off;
    gex_AM_RequestShort5(the_tm, r, HIDX_PREAD, 0, (gex_AM_Arg_t)(at >> 32), (gex_AM_Arg_t)(at & 0xffffffffu),
                         (gex_AM_Arg_t)len, (gex_AM_Arg_t)(off >> 32), (gex_AM_Arg_t)(off & 0xffffffffu));
  }
  GASNET_BLOCKUNTIL(op_chunks_in == chunks);
  op_done = 0;
  gex_AM_RequestShort1(the_tm, r, HIDX_PCLOSE, 0, 0);
  GASNET_BLOCKUNTIL(op_done);
}

/* One request of the server (partfiles.py): "W <locale> <nbytes> <pathlen>\n<path><data>" or
   "R <locale> <offset> <length> <pathlen>\n<path>". Returns -1 when the channel is gone. */
static int serve_part_request(gex_Rank_t n) {
  char head[256];
  size_t k = 0;
  for (;;) {
    if (k == sizeof head - 1 || read_full(req_fd, head + k, 1) != 0) return -1;
    if (head[k] == '\n') break;
    k++;
  }
  head[k] = '\0';
  char kind;
  unsigned long long loc, a, b = 0, pathlen = 0;
  int fields = sscanf(head, "%c %llu %llu %llu %llu", &kind, &loc, &a, &b, &pathlen);
  if (kind == 'W' && fields == 4) pathlen = b;
  if (!((kind == 'W' && fields == 4) || (kind == 'R' && fields == 5))) return -1;
  size_t nbytes = kind == 'W' ? (size_t)a : (size_t)b;
  char *path = malloc(pathlen + 1), *data = malloc(nbytes ? nbytes : 1);
  if (!path || !data) die("out of memory for a checkpoint part");
  if (read_full(req_fd, path, pathlen) != 0 || (kind == 'W' && read_full(req_fd, data, nbytes) != 0)) {
    free(path), free(data);
    return -1;
  }
  path[pathlen] = '\0';
  if (loc >= n) snprintf(op_err, sizeof op_err, "STAND-IN: no locale %llu in a job of %u", loc, (unsigned)n);
  else if (pathlen >= sizeof part_path) snprintf(op_err, sizeof op_err, "STAND-IN: path too long: %s", path);
  else if (kind == 'W') part_write_on((gex_Rank_t)loc, path, pathlen, data, nbytes);
  else part_read_on((gex_Rank_t)loc, path, pathlen, a, data, nbytes);
  int rc = op_err[0] ? answer("ERR", op_err, strlen(op_err)) : answer("OK", data, kind == 'R' ? nbytes : 0);
  free(path), free(data);
  return rc;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
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
  int req[2], rep[2];
  if (pipe2(req, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) die("pipe failed");
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
    /* dup() drops O_CLOEXEC: the server inherits its ends of the part-file pipes, and only those. */
    char fds[32];
    snprintf(fds, sizeof fds, "%d,%d", dup(req[1]), dup(rep[0]));
    setenv("ARKOUDA_STANDIN_PARTS_FDS", fds, 1);
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
  close(req[1]);
  close(rep[0]);
  req_fd = req[0];
  rep_fd = rep[1];
  return pid;
}

static void nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000}; /* 20 ms: serve GASNet without spinning a core */
  nanosleep(&ts, NULL);
}

/* The launch's waits. GASNET_BLOCKUNTIL and gex_Event_Wait spin (poll + sched_yield) in the udp conduit, also
   in GASNET_WAIT_BLOCK mode, so N locales sharing a node's cores burn them all while one waits for a late peer.
   Poll, and after a poll that handled nothing nap 1 ms: a message waits at most that long for its poll. The
   checkpoint transfers keep GASNET_BLOCKUNTIL: they wait for a stream of replies, where a nap per poll costs. */
static void polite_nap(void) {
  struct timespec ts = {0, 1000 * 1000};
  nanosleep(&ts, NULL);
}
#define POLITE_UNTIL(cond)                                     \
  do {                                                         \
    for (;;) {                                                 \
      unsigned long seen_ = launch_activity;                   \
      gasnet_AMPoll();                                         \
      if (cond) break;                                         \
      if (launch_activity == seen_) polite_nap();              \
    }                                                          \
  } while (0)

static void polite_wait(gex_Event_t ev) {
  while (gex_Event_Test(ev) != GASNET_OK) {
    gasnet_AMPoll();
    if (gex_Event_Test(ev) == GASNET_OK) break;
    polite_nap();
  }
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
  /* Polite waits for send resources (AMUDP_PoliteSync); the launch's own waits are polite_wait/POLITE_UNTIL. */
  gasnet_set_waitmode(GASNET_WAIT_BLOCK);

  const gex_Rank_t me = gex_TM_QueryRank(tm), n = gex_TM_QuerySize(tm);
  the_tm = tm;
  my_rank = me;
  {
    size_t req_max = gex_AM_LUBRequestMedium(), rep_max = gex_AM_LUBReplyMedium();
    chunk_max = req_max < rep_max ? req_max : rep_max;
    pread_buf = malloc(chunk_max);
    if (!pread_buf) die("out of memory");
  }
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
  polite_wait(gex_Coll_BarrierNB(tm, 0));
  /* Every locale sends its description to every other locale as an active message, each one acknowledged. */
  for (gex_Rank_t r = 0; r < n; r++) {
    if (r == me) continue;
    gex_AM_RequestMedium0(tm, r, HIDX_INFO, &table[me], sizeof(locale_info_t), GEX_EVENT_NOW, 0);
  }
  POLITE_UNTIL(infos_received == n - 1 && acks_received == n - 1);

  polite_wait(gex_Coll_BarrierNB(tm, 0));
  printf(PREFIX "locale %u of %u passed the GASNet barrier after exchanging active messages with %u locale(s): "
         "host=%s pid=%d uid=%d ssh=%s\n",
         (unsigned)me, (unsigned)n, (unsigned)(n - 1), table[me].host, (int)table[me].pid, (int)table[me].uid,
         table[me].address[0] ? table[me].address : "none");
  fflush(stdout);

  if (me != 0) {
    /* Serve GASNet until the job ends (the master's exit signal ends this process). While checkpoint parts
       flow, poll without napping (a nap per message would cap a part at a few MB/s). */
    double last_active = 0;
    for (;;) {
      unsigned long seen = am_activity;
      gasnet_AMPoll();
      if (am_activity != seen) last_active = now_seconds();
      else if (now_seconds() - last_active > 0.5) nap();
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
  signal(SIGPIPE, SIG_IGN); /* a server that died while we answer: the write fails, we go on */
  child_pid = start_server(args, n);

  int status = 0, code;
  for (;;) {
    gasnet_AMPoll();
    pid_t got = waitpid(child_pid, &status, WNOHANG);
    if (got == child_pid) break;
    if (got < 0 && errno != EINTR) die("waitpid failed");
    struct pollfd pfd = {req_fd, POLLIN, 0};
    if (req_fd >= 0 && poll(&pfd, 1, 20) > 0) { /* the 20 ms wait doubles as the nap */
      if (serve_part_request(n) != 0) {
        close(req_fd);
        req_fd = -1;
      }
      continue;
    }
    if (req_fd < 0) nap();
  }
  child_pid = 0;
  code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
  printf(PREFIX "locale 0: the server exited with status %d; ending the GASNet job with it\n", code);
  fflush(stdout);
  gasnet_exit(code);
  return code;
}
