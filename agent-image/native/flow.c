/*
 * flow: the in-script client, native fast path.
 *
 * A script run by flowsvc calls `flow step build -- make` many times, and replay re-runs every
 * call, so this binary does the least it can: a replayed step is one connect, one write, one
 * read and an exit. It speaks socket protocol v2 (docs/internals.md, "In-script socket
 * protocol") to the agent at $FLOW_AGENT_SOCKET. Commands that are not in-script are handed to
 * the user CLI found on PATH or in $FLOW_USER_CLI (run_user_cli); no path is baked in.
 *
 * The Node fallback (agent-image/src/client/) must behave byte for byte the same: the same
 * requests on the wire, the same messages and exit codes. Change both together; the tests in
 * agent-image/src/client/client.test.ts drive both with the same cases.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire.h"


#define STEP_OUTPUT_LIMIT ((size_t)2 * 1024 * 1024)

extern char **environ;

/* ---- output ---------------------------------------------------------------------------- */

/* Writes all of p; -1 when the reader is gone (EPIPE) or fd is unusable. */
static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      struct pollfd room = {fd, POLLOUT, 0};
      if (errno == EINTR) continue;
      if (errno == EAGAIN && poll(&room, 1, -1) >= 0) continue; /* someone made fd non-blocking */
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes the NULL-terminated list of strings as one line on fd. */
static void say(int fd, const char *first, ...) __attribute__((sentinel));
static void say(int fd, const char *first, ...) {
  char stack[1024];
  buf b;
  buf_init(&b, stack, sizeof stack);
  va_list ap;
  va_start(ap, first);
  for (const char *s = first; s; s = va_arg(ap, const char *)) buf_puts(&b, s);
  va_end(ap);
  buf_put(&b, "\n", 1);
  (void)write_all(fd, b.p, b.len);
}

static void die_oom(void) {
  say(2, "error: out of memory", NULL);
  _exit(1);
}

static int malformed(const char *why) {
  say(2, "error: malformed response from the agent: ", why, NULL);
  return 1;
}

/* ---- the command table ----------------------------------------------------------------- */

typedef struct {
  const char *name;
  const char *usage;
  const char *summary;
  const char *example;
  int (*run)(int argc, char **argv); /* argv[0] is the command name */
} command;

static int cmd_step(int argc, char **argv);
static int cmd_output(int argc, char **argv);
static int cmd_annotate(int argc, char **argv);
static int cmd_sleep(int argc, char **argv);
static int cmd_wait_signal(int argc, char **argv);
static int cmd_lock(int argc, char **argv);
static int cmd_activity(int argc, char **argv);
static int cmd_activity_collect(int argc, char **argv);
static int cmd_activity_wait_all(int argc, char **argv);
static int cmd_spawn(int argc, char **argv);
static int cmd_call(int argc, char **argv);
static int cmd_state(int argc, char **argv);
static int cmd_emit(int argc, char **argv);
static int cmd_wait_event(int argc, char **argv);

static const command COMMANDS[] = {
  {"step", "flow step <name> [--label <text>] -- <cmd...>",
   "Runs <cmd> once, records its stdout and exit code, and returns the record on replay.",
   "flow step build --label \"Build the site\" -- make all", cmd_step},
  {"output", "flow output set <key>=<value>...",
   "Stages keys for the run's output, committed when the script exits 0.",
   "flow output set version=1.4.2 url=https://example.test", cmd_output},
  {"annotate", "flow annotate <markdown|->",
   "Attaches a markdown note to the run; - reads it from stdin.",
   "flow annotate \"Deployed **1.4.2** to staging\"", cmd_annotate},
  {"sleep", "flow sleep <duration>",
   "Parks the run for <duration> (5s, 1m, 2h, 30d) and frees the agent; the script replays from the top on wake.",
   "flow sleep 10m", cmd_sleep},
  {"wait-signal", "flow wait-signal <name> [--timeout <duration>]",
   "Waits for the next signal <name> and prints its payload JSON; a --timeout that elapses exits 124.",
   "flow wait-signal approve --timeout 2h", cmd_wait_signal},
  {"lock", "flow lock <group> [-- <cmd...>]",
   "Takes the project-wide lease <group>: bare, held until the run ends; with a command, released when it ends.",
   "flow lock deploy-prod -- ./deploy.sh", cmd_lock},
  {"activity", "flow activity <name> [--requires <capability>]... -- <cmd...>",
   "Runs <cmd> on an agent with those capabilities, prints its stdout and exits with its code.",
   "flow activity render --requires gpu -- ./render.sh scene.blend", cmd_activity},
  {"activity-submit", "flow activity-submit <name> [--requires <capability>]... -- <cmd...>",
   "Starts <cmd> on an agent with those capabilities and returns; flow activity-collect <name> waits for it.",
   "flow activity-submit shard-1 -- ./process.sh 1", cmd_activity},
  {"activity-collect", "flow activity-collect <name>",
   "Waits for a submitted activity, prints its stdout and exits with its code.",
   "flow activity-collect shard-1", cmd_activity_collect},
  {"activity-wait-all", "flow activity-wait-all",
   "Waits for this script's uncollected activities and prints how many failed; exits 0.",
   "failed=$(flow activity-wait-all)", cmd_activity_wait_all},
  {"spawn", "flow spawn <file|-> [--as pipeline|script] [--tag <tag>]...",
   "Submits <file> (- reads stdin) as an independent run and prints its id.",
   "child=$(flow spawn nightly.sh --tag nightly)", cmd_spawn},
  {"call", "flow call node <kind> [--config <json>] | flow call graph <name> [--input <json>] | flow call graph --definition <file|-> [--input <json>]",
   "Runs a child graph (one node, a stored graph, or a document), waits for it and prints its output as JSON.",
   "flow call node emit --config '{\"type\":\"built\"}'", cmd_call},
  {"state", "flow state get <key> | set <key> <value|-> | delete <key> | list [--entity <name>]",
   "Reads and writes state, run-private or project-wide with --entity; set takes JSON or a bare string, - reads stdin.",
   "flow state set version 1.4.2 --entity prod", cmd_state},
  {"emit", "flow emit <type> [--key <subject>] [--payload <json>]",
   "Publishes an event on the project's bus and prints its id; a replay prints the same id.",
   "flow emit deploy.done --key acme/web --payload '{\"version\":\"1.4.2\"}'", cmd_emit},
  {"wait-event", "flow wait-event <type> [--timeout <duration>]",
   "Waits for the next event <type> after the wait began and prints its envelope JSON; a --timeout that elapses exits 124.",
   "flow wait-event deploy.done --timeout 1h", cmd_wait_event},
};

/* Commands taken inside a script (IN_SCRIPT_COMMANDS in the Node client). */
static const char *const IN_SCRIPT[] = {
  "step", "sleep", "wait-signal", "wait-event", "lock", "activity", "activity-submit",
  "activity-collect", "activity-wait-all", "spawn", "state", "call", "output", "annotate", "emit", NULL,
};

/* In-script commands that outside a script are the user CLI's (SHARED_COMMANDS in the Node
 * client): `flow emit` over HTTP. */
static const char *const SHARED[] = {"emit", NULL};

static const command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (!strcmp(COMMANDS[i].name, name)) return &COMMANDS[i];
  return NULL;
}

static int listed(const char *const *list, const char *name) {
  for (const char *const *n = list; *n; n++)
    if (!strcmp(*n, name)) return 1;
  return 0;
}

/* Inside a script: FLOW_AGENT_SOCKET, or FLOW_IDEMPOTENCY_KEY in a step body, where a shared
 * command must fail with `FLOW_AGENT_SOCKET is not set` rather than reach the user API. */
static int inside_script(void) {
  const char *s = getenv("FLOW_AGENT_SOCKET"), *k = getenv("FLOW_IDEMPOTENCY_KEY");
  return (s && *s) || (k && *k);
}

/* Whether this client runs the command rather than the user CLI (runsInScript in the Node one). */
static int runs_in_script(const char *name) {
  return listed(IN_SCRIPT, name) && (!listed(SHARED, name) || inside_script());
}

static int usage_error(const command *c, const char *what, const char *arg) {
  say(2, "error: flow ", c->name, ": ", what, arg ? arg : "", NULL);
  say(2, "usage: ", c->usage, NULL);
  return 2;
}

/* An option of a command: --<name> <value> or --<name>=<value>. A single one keeps the last
 * value given; a repeatable one (list set) keeps every value in order (room for argc). */
typedef struct {
  const char *name;
  const char **value;
  const char **list;
  int *count;
} option;

/* Parses a command's words (argv[0] is its name), the same way for every command and client:
 * the options in opts (ended by a NULL name), up to max_pos positionals, and when cmd is given
 * the words after `--` (*cmd stays NULL without one); without cmd, `--` ends the options.
 * Returns 0, or 2 after printing a usage error. */
static int parse_args(const command *self, int argc, char **argv, const option *opts, const char **pos,
                      int max_pos, int *npos, char ***cmd) {
  int only_pos = 0;
  *npos = 0;
  if (cmd) *cmd = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!only_pos && !strcmp(a, "--")) {
      if (!cmd) {
        only_pos = 1;
        continue;
      }
      *cmd = argv + i + 1;
      return 0;
    }
    if (only_pos || a[0] != '-' || !a[1]) {
      if (*npos >= max_pos)
        return usage_error(self, cmd ? "unexpected argument (put the command after --): " : "unexpected argument ", a);
      pos[(*npos)++] = a;
      continue;
    }
    const option *o = opts;
    for (; o->name; o++) {
      size_t n = strlen(o->name);
      if (a[1] != '-' || strncmp(a + 2, o->name, n)) continue;
      if (a[2 + n] == '=') v = a + 3 + n;
      else if (a[2 + n]) continue;
      else if (i + 1 < argc) v = argv[++i];
      else {
        char stack[128];
        buf what;
        buf_init(&what, stack, sizeof stack);
        buf_puts(&what, "--");
        buf_puts(&what, o->name);
        buf_put(&what, " needs a value", 15);
        return usage_error(self, what.p, NULL);
      }
      break;
    }
    if (!o->name) return usage_error(self, "unknown option ", a);
    if (o->list) o->list[(*o->count)++] = v;
    else *o->value = v;
  }
  return 0;
}

static int wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) return 0;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  }
  return 0;
}

static const char *agent_socket(const char *cmd) {
  const char *s = getenv("FLOW_AGENT_SOCKET");
  if (s && *s) return s;
  say(2, "error: FLOW_AGENT_SOCKET is not set", NULL);
  say(2, "flow ", cmd, " works only inside a script run by flowsvc (flow submit / flow run)", NULL);
  return NULL;
}

/* ---- the connection --------------------------------------------------------------------- */

typedef struct {
  int fd;
  int protocol; /* the agent's, once a hello told it; 0 before */
  buf in;
  size_t consumed;
} conn;

typedef struct {
  int ok, has_ok, replay;
  long long v, exit, protocol;
  int has_exit, has_ino;
  unsigned long long capture_ino;
  jstr out;     /* stdout_b64, decoded */
  jstr err;     /* stderr */
  jstr message; /* error.message */
  jstr position, idem;
  int has_out, has_err, has_message, has_position, position_is_string, has_idem;
} response;

static int agent_connect(conn *c, const char *path, char *stack, size_t cap) {
  struct sockaddr_un a;
  size_t n = strlen(path);
  c->fd = -1;
  c->protocol = 0;
  c->consumed = 0;
  buf_init(&c->in, stack, cap);
  if (n >= sizeof a.sun_path) {
    say(2, "error: cannot connect to the agent at ", path, ": File name too long", NULL);
    return 1;
  }
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, path, n + 1);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
    say(2, "error: cannot connect to the agent at ", path, ": ", strerror(errno), NULL);
    return 1;
  }
  return 0;
}

static void req_begin(buf *b, int id, const char *op) {
  buf_puts(b, "{\"v\":2,\"id\":");
  buf_put_int(b, id);
  buf_puts(b, ",\"op\":\"");
  buf_puts(b, op);
  buf_puts(b, "\"");
}

/* Reads one line (the newline dropped); EOF after a partial line counts as its end. */
static int read_line(conn *c, char **line, size_t *n) {
  if (c->consumed) {
    memmove(c->in.p, c->in.p + c->consumed, c->in.len - c->consumed);
    c->in.len -= c->consumed;
    c->consumed = 0;
  }
  size_t scanned = 0;
  for (;;) {
    char *nl = memchr(c->in.p + scanned, '\n', c->in.len - scanned);
    if (nl) {
      *line = c->in.p;
      *n = (size_t)(nl - c->in.p);
      c->consumed = *n + 1;
      return 0;
    }
    scanned = c->in.len;
    if (c->in.cap - c->in.len < 4096) buf_reserve(&c->in, 65536);
    ssize_t r = read(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      say(2, "error: lost the connection to the agent: ", strerror(errno), NULL);
      return 1;
    }
    if (r == 0) {
      if (c->in.len == 0) {
        say(2, "error: the agent closed the connection without answering", NULL);
        return 1;
      }
      *line = c->in.p;
      *n = c->in.len;
      c->consumed = c->in.len;
      return 0;
    }
    c->in.len += (size_t)r;
  }
}

static const char NOT_JSON[] = "not a JSON object";

/* The `error` object: 1 when fine, 0 when its message is not a string, -1 when not JSON. */
static int parse_error_object(jr *r, response *out) {
  int first = 1, m, fine = 1;
  jstr k, v;
  while ((m = jr_member(r, &first, &k)) == 1) {
    int t = jr_value(r, &v, 0);
    if (t == J_BAD) return -1;
    if (!strcmp(k.s, "message") && t != J_NULL) {
      if (t != J_STRING) fine = 0;
      out->message = v;
      out->has_message = 1;
    }
  }
  return m < 0 ? -1 : fine;
}

/* One response member, consumed whole; returns NULL, NOT_JSON, or the name of a field whose
 * value has the wrong type. */
static const char *parse_member(jr *r, const char *key, response *out) {
  jstr v;
  int t = jr_value(r, &v, !strcmp(key, "error"));
  if (t == J_BAD) return NOT_JSON;
  if (t == J_NULL) return NULL;
  if (!strcmp(key, "ok") || !strcmp(key, "replay")) {
    if (t != J_TRUE && t != J_FALSE) return key;
    *(key[0] == 'o' ? &out->ok : &out->replay) = t == J_TRUE;
    if (key[0] == 'o') out->has_ok = 1;
  } else if (!strcmp(key, "v") || !strcmp(key, "protocol")) {
    if (t != J_NUMBER || !jnum_int(&v, -2147483648LL, 2147483647LL, key[0] == 'v' ? &out->v : &out->protocol)) return key;
  } else if (!strcmp(key, "exit")) {
    if (t != J_NUMBER || !jnum_int(&v, -2147483648LL, 2147483647LL, &out->exit)) return key;
    out->has_exit = 1;
  } else if (!strcmp(key, "capture_ino")) {
    if (t != J_NUMBER || !jnum_u64(&v, &out->capture_ino)) return key;
    out->has_ino = 1;
  } else if (!strcmp(key, "stdout_b64")) {
    long n = t == J_STRING ? b64_decode(v.s, v.n) : -1;
    if (n < 0) return key;
    out->out.s = v.s;
    out->out.n = (size_t)n;
    out->has_out = 1;
  } else if (!strcmp(key, "stderr") || !strcmp(key, "idempotency_key")) {
    if (t != J_STRING) return key;
    *(key[0] == 's' ? &out->err : &out->idem) = v;
    *(key[0] == 's' ? &out->has_err : &out->has_idem) = 1;
  } else if (!strcmp(key, "position")) {
    if (t != J_STRING && t != J_NUMBER) return key;
    out->position = v;
    out->has_position = 1;
    out->position_is_string = t == J_STRING;
  } else if (!strcmp(key, "error")) {
    int e = t == J_OBJECT ? parse_error_object(r, out) : 0;
    if (e < 0) return NOT_JSON;
    if (e == 0) return key;
  }
  return NULL;
}

/* Validates like JSON.parse and then the Node client's field checks: any syntax error wins,
 * then the first field of the wrong type, then a missing ok. */
static const char *parse_response(char *line, size_t n, response *out) {
  jr r = {line, line + n};
  jstr k;
  int first = 1, m;
  const char *bad = NULL;
  memset(out, 0, sizeof *out);
  out->v = 1;
  jr_ws(&r);
  if (r.p >= r.end || *r.p != '{') return NOT_JSON;
  while ((m = jr_member(&r, &first, &k)) == 1) {
    const char *b = parse_member(&r, k.s, out);
    if (b == NOT_JSON) return NOT_JSON;
    if (b && !bad) bad = b;
  }
  jr_ws(&r);
  if (m < 0 || r.p != r.end) return NOT_JSON;
  if (bad) return bad;
  if (!out->has_ok) return "ok";
  return NULL;
}

/* The one place that refuses an agent too old for a call (bounded waits need protocol v2). */
static int check_protocol(long long agent, int min_protocol) {
  if (agent >= min_protocol) return 0;
  char have[24], want[24];
  buf h, w;
  buf_init(&h, have, sizeof have);
  buf_init(&w, want, sizeof want);
  buf_put_int(&h, agent);
  buf_put_int(&w, min_protocol);
  buf_put(&h, "", 1);
  buf_put(&w, "", 1);
  say(2, "error: the agent speaks socket protocol v", have, "; this call needs v", want, NULL);
  say(2, "upgrade the flowsvc agent, or drop --timeout", NULL);
  return 1;
}

static int send_request(conn *c, buf *req) {
  buf_puts(req, "}\n");
  if (write_all(c->fd, req->p, req->len) < 0) {
    say(2, "error: lost the connection to the agent: ", strerror(errno), NULL);
    return 1;
  }
  return 0;
}

/* Sends req (begun with req_begin) and reads the answer. min_protocol > 1 asks the agent's
 * version with a hello first, on the same connection, so an old agent is never sent a call it
 * would misread. Returns 0, or the exit status after printing why. */
static int agent_call(conn *c, buf *req, int min_protocol, response *out) {
  char *line;
  size_t n;
  const char *bad;
  if (min_protocol > 1 && !c->protocol) {
    char stack[64];
    buf hello;
    buf_init(&hello, stack, sizeof stack);
    req_begin(&hello, 0, "hello");
    if (send_request(c, &hello) || read_line(c, &line, &n)) return 1;
    if ((bad = parse_response(line, n, out))) return malformed(bad);
    c->protocol = out->protocol > out->v ? (int)out->protocol : (int)out->v;
    if (check_protocol(c->protocol, min_protocol)) return 1;
  }
  if (send_request(c, req) || read_line(c, &line, &n)) return 1;
  if ((bad = parse_response(line, n, out))) return malformed(bad);
  if (min_protocol > 1 && check_protocol(out->v, min_protocol)) return 1;
  return 0;
}

static int stdout_is_capture(const response *r) {
  struct stat st;
  return r->has_ino && fstat(1, &st) == 0 && S_ISFIFO(st.st_mode) && (unsigned long long)st.st_ino == r->capture_ino;
}

static void apply_output(const response *r) {
  if (r->has_out && !(r->replay && stdout_is_capture(r))) (void)write_all(1, r->out.s, r->out.n);
  if (r->has_err) (void)write_all(2, r->err.s, r->err.n);
}

/* The generic handling of an answer: error, stdout_b64, stderr, exit (docs/internals.md). */
static int apply_response(const response *r, int default_exit) {
  if (!r->ok) {
    char stack[1024];
    buf b;
    buf_init(&b, stack, sizeof stack);
    buf_puts(&b, "error: ");
    if (r->has_message) buf_put(&b, r->message.s, r->message.n);
    else buf_puts(&b, "the agent refused the call");
    buf_put(&b, "\n", 1);
    (void)write_all(2, b.p, b.len);
    return r->has_exit ? (int)(r->exit & 255) : 1;
  }
  apply_output(r);
  return r->has_exit ? (int)(r->exit & 255) : default_exit;
}

/* One request on a fresh connection, the generic answer: output set, annotate, sleep, ... */
static int simple_call(const char *cmd, buf *req, int min_protocol) {
  char stack[4096];
  conn c;
  response r;
  const char *sock = agent_socket(cmd);
  if (!sock) return 1;
  if (agent_connect(&c, sock, stack, sizeof stack)) return 1;
  int rc = agent_call(&c, req, min_protocol, &r);
  return rc ? rc : apply_response(&r, 0);
}

/* ,"key":"value" */
static void put_str_field(buf *b, const char *key, const char *value) {
  buf_puts(b, ",\"");
  buf_puts(b, key);
  buf_puts(b, "\":");
  buf_put_json_cstr(b, value);
}

/* ,"key":["a","b"] */
static void put_list_field(buf *b, const char *key, const char *const *items, int n) {
  buf_puts(b, ",\"");
  buf_puts(b, key);
  buf_puts(b, "\":[");
  for (int i = 0; i < n; i++) {
    if (i) buf_put(b, ",", 1);
    buf_put_json_cstr(b, items[i]);
  }
  buf_put(b, "]", 1);
}

/* ---- flow step --------------------------------------------------------------------------- */

/* What a shell says when it cannot run a command (errno e): 127 when missing, 126 otherwise. */
static int exec_failure(const char *file, int e) {
  const char *why = e == ENOENT && !strchr(file, '/') ? "command not found" : strerror(e);
  say(2, "flow step: ", file, ": ", why, NULL);
  return e == ENOENT ? 127 : 126;
}

/* The file execvp would run for cmd: cmd itself when it names a path, else the first executable
 * file of that name on PATH (musl's default PATH when none is set). NULL: none. */
static char *path_of(const char *cmd) {
  if (strchr(cmd, '/')) return strdup(cmd);
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/bin:/usr/bin";
  size_t n = strlen(cmd);
  for (const char *p = path;; p++) {
    const char *end = strchrnul(p, ':');
    size_t d = (size_t)(end - p);
    char *file = malloc(d + n + 3);
    if (!file) return NULL;
    memcpy(file, d ? p : ".", d ? d : 1);
    file[d ? d : 1] = '/';
    memcpy(file + (d ? d : 1) + 1, cmd, n + 1);
    if (access(file, X_OK) == 0) return file;
    free(file);
    if (!*end) return NULL;
    p = end;
  }
}

/* A file without a #! line runs with /bin/sh, as execvp does in glibc and in POSIX shells (musl's
 * execvp leaves it at ENOEXEC, and the client may be built with musl). Returns only on failure. */
static void exec_with_sh(char **cmd) {
  size_t argc = 0;
  while (cmd[argc]) argc++;
  char *file = path_of(cmd[0]);
  char **argv = malloc((argc + 2) * sizeof *argv);
  if (!file || !argv) return;
  argv[0] = "sh";
  argv[1] = file;
  memcpy(argv + 2, cmd + 1, argc * sizeof *argv); /* cmd[1..argc-1] and its NULL */
  execv("/bin/sh", argv);
  errno = ENOEXEC;
}

/* Starts the body with fork and execvp, for what posix_spawnp does not do as execvp does: a file
 * without a #! line (ENOEXEC: execvp runs it with /bin/sh) and a pipe end that is fd 1 itself. */
static pid_t fork_body(char **cmd, char **env, int out) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (out == 1) (void)fcntl(1, F_SETFD, 0);
  else (void)dup2(out, 1);
  signal(SIGPIPE, SIG_DFL);
  environ = env;
  execvp(cmd[0], cmd);
  if (errno == ENOEXEC) exec_with_sh(cmd);
  _exit(exec_failure(cmd[0], errno));
}

/* Starts the body with its stdout on `out` and SIGPIPE back at its default (this client ignores
 * it). posix_spawnp is a vfork and exec: no copy of this process's page tables on every step.
 * Answers the pid, or 0 with *code set when the command cannot be run (said like a shell). */
static pid_t start_body(char **cmd, char **env, int out, int *code) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t dfl;
  pid_t pid = 0;
  if (out == 1) return fork_body(cmd, env, out);
  if (posix_spawn_file_actions_init(&fa)) die_oom();
  if (posix_spawnattr_init(&at)) die_oom();
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  int e = posix_spawn_file_actions_adddup2(&fa, out, 1);
  if (!e) e = posix_spawnattr_setsigdefault(&at, &dfl);
  if (!e) e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
  /* execvp takes PATH from the environment it runs in; posix_spawnp from ours: the same PATH,
   * since only FLOW_* variables are left out of the body's. */
  if (!e) e = posix_spawnp(&pid, cmd[0], &fa, &at, cmd, env);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  if (e == ENOEXEC) return fork_body(cmd, env, out);
  if (e) {
    *code = exec_failure(cmd[0], e);
    return 0;
  }
  return pid;
}

/* Runs the step body: the script's env minus FLOW_*, plus FLOW_IDEMPOTENCY_KEY; stdout copied
 * live to ours and kept up to the limit; stderr untouched. Returns its exit status. */
static int run_body(char **cmd, char *idem_kv, buf *kept, unsigned long long *total) {
  size_t n = 0, k = 0;
  for (char **e = environ; *e; e++) n++;
  char **env = malloc((n + 2) * sizeof *env);
  int p[2], failed = 0;
  if (!env) die_oom();
  for (char **e = environ; *e; e++)
    if (strncmp(*e, "FLOW_", 5) != 0) env[k++] = *e;
  env[k++] = idem_kv;
  env[k] = NULL;
  if (pipe2(p, O_CLOEXEC) < 0) {
    say(2, "error: flow step: cannot create a pipe: ", strerror(errno), NULL);
    return 1;
  }
  pid_t pid = start_body(cmd, env, p[1], &failed);
  if (pid < 0) {
    say(2, "error: flow step: cannot start a process: ", strerror(errno), NULL);
    return 1;
  }
  if (pid == 0) {
    free(env);
    close(p[0]);
    close(p[1]);
    return failed;
  }
  free(env);
  close(p[1]);
  static char chunk[65536];
  int stdout_ok = 1;
  for (;;) {
    ssize_t r = read(p[0], chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (stdout_ok && write_all(1, chunk, (size_t)r) < 0) stdout_ok = 0; /* reader gone: keep recording */
    if (kept->len < STEP_OUTPUT_LIMIT) {
      size_t room = STEP_OUTPUT_LIMIT - kept->len;
      buf_put(kept, chunk, (size_t)r < room ? (size_t)r : room);
    }
    *total += (unsigned long long)r;
  }
  close(p[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* A step on an open connection: `step` (request id), and for a new step the body and then
 * `step.complete` (id + 1). *ended is set once the step has a result (a replayed record, or a
 * command that ran and whose step.complete was answered), *next_id to the next free id.
 * Returns the exit status. */
static int run_step(conn *c, int id, const char *name, const char *label, char **cmd, int *ended, int *next_id) {
  char req_stack[1024];
  response r;
  buf req;
  *ended = 0;
  *next_id = id + 1;
  buf_init(&req, req_stack, sizeof req_stack);
  req_begin(&req, id, "step");
  put_str_field(&req, "name", name);
  if (label) put_str_field(&req, "label", label);
  int rc = agent_call(c, &req, 1, &r);
  if (rc) return rc;
  *ended = r.ok && r.replay;
  if (!r.ok || r.replay) return apply_response(&r, 0);
  if (!r.has_position) return malformed("position");
  if (!r.has_idem) return malformed("idempotency_key");
  apply_output(&r);

  /* The answer lives in c->in, which the next read reuses: keep what step.complete needs. */
  buf done, kv;
  char kv_stack[256];
  buf_init(&done, NULL, 0);
  buf_init(&kv, kv_stack, sizeof kv_stack);
  buf_puts(&kv, "FLOW_IDEMPOTENCY_KEY=");
  buf_put(&kv, r.idem.s, r.idem.n);
  buf_put(&kv, "", 1);
  req.len = 0;
  req_begin(&req, id + 1, "step.complete");
  buf_puts(&req, ",\"position\":");
  if (r.position_is_string) buf_put_json(&req, r.position.s, r.position.n);
  else buf_put(&req, r.position.s, r.position.n);

  unsigned long long total = 0;
  int code = run_body(cmd, kv.p, &done, &total);
  buf_puts(&req, ",\"stdout_b64\":\"");
  buf_put_b64(&req, (const unsigned char *)done.p, done.len);
  buf_puts(&req, "\",\"exit\":");
  buf_put_int(&req, code);
  if (total > STEP_OUTPUT_LIMIT) {
    buf_puts(&req, ",\"overflow_bytes\":");
    buf_put_u64(&req, total);
  }
  *next_id = id + 2;
  rc = agent_call(c, &req, 1, &r);
  if (rc) return rc;
  *ended = 1;
  return apply_response(&r, code);
}

static int cmd_step(int argc, char **argv) {
  const command *self = find_command("step");
  const char *name = NULL, *label = NULL;
  char **cmd = NULL;
  int i = 1;
  while (i < argc && !cmd) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) cmd = argv + i + 1;
    else if (!strcmp(a, "--label")) {
      if (i + 1 >= argc) return usage_error(self, "--label needs a value", NULL);
      label = argv[++i];
    } else if (!strncmp(a, "--label=", 8)) label = a + 8;
    else if (a[0] == '-' && a[1]) return usage_error(self, "unknown option ", a);
    else if (!name) name = a;
    else return usage_error(self, "unexpected argument (put the command after --): ", a);
    i++;
  }
  if (!name || !*name) return usage_error(self, "missing step name", NULL);
  if (!cmd) return usage_error(self, "missing -- before the command", NULL);
  if (!*cmd) return usage_error(self, "missing command after --", NULL);

  const char *sock = agent_socket("step");
  char in_stack[65536];
  conn c;
  int ended, next_id;
  if (!sock || agent_connect(&c, sock, in_stack, sizeof in_stack)) return 1;
  return run_step(&c, 1, name, label, cmd, &ended, &next_id);
}

/* ---- flow output set, flow annotate -------------------------------------------------------- */

static int same_key(const char *a, const char *b) {
  size_t n = (size_t)(strchr(a, '=') - a);
  return (size_t)(strchr(b, '=') - b) == n && !memcmp(a, b, n);
}

static int cmd_output(int argc, char **argv) {
  const command *self = find_command("output");
  if (argc < 2) return usage_error(self, "missing subcommand (set)", NULL);
  if (strcmp(argv[1], "set")) return usage_error(self, "unknown subcommand ", argv[1]);
  if (argc < 3) return usage_error(self, "missing <key>=<value>", NULL);
  for (int i = 2; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    if (!eq || eq == argv[i]) return usage_error(self, "expected <key>=<value>, got ", argv[i]);
  }
  char stack[4096];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "output.set");
  buf_puts(&req, ",\"values\":{");
  /* Like a JS object: a repeated key keeps its first place and takes its last value. */
  for (int i = 2, n = 0; i < argc; i++) {
    int seen = 0, last = i;
    for (int j = 2; j < i && !seen; j++) seen = same_key(argv[j], argv[i]);
    if (seen) continue;
    for (int j = i + 1; j < argc; j++)
      if (same_key(argv[j], argv[i])) last = j;
    const char *eq = strchr(argv[i], '='), *v = strchr(argv[last], '=') + 1;
    if (n++) buf_put(&req, ",", 1);
    buf_put_json(&req, argv[i], (size_t)(eq - argv[i]));
    buf_put(&req, ":", 1);
    buf_put_json_cstr(&req, v);
  }
  buf_puts(&req, "}");
  return simple_call("output", &req, 1);
}

/* Reads fd to its end into b; what names it in the error ("stdin", a path). */
static int read_all(int fd, buf *b, const char *what) {
  for (;;) {
    buf_reserve(b, 65536);
    ssize_t r = read(fd, b->p + b->len, b->cap - b->len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      say(2, "error: cannot read ", what, ": ", strerror(errno), NULL);
      return 1;
    }
    if (r == 0) return 0;
    b->len += (size_t)r;
  }
}

static int read_stdin(buf *b) { return read_all(0, b, "stdin"); }

static int cmd_annotate(int argc, char **argv) {
  const command *self = find_command("annotate");
  if (argc < 2) return usage_error(self, "missing markdown", NULL);
  if (argc > 2) return usage_error(self, "takes one argument (quote the markdown, or pass - to read stdin)", NULL);
  if (!agent_socket("annotate")) return 1;
  char stack[4096];
  buf req, md;
  buf_init(&md, NULL, 0);
  if (!strcmp(argv[1], "-")) {
    if (read_stdin(&md)) return 1;
  } else buf_puts(&md, argv[1]);
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "annotate");
  buf_puts(&req, ",\"markdown\":");
  buf_put_json(&req, md.p ? md.p : "", md.len);
  return simple_call("annotate", &req, 1);
}

/* ---- flow sleep, flow wait-signal: calls that may park --------------------------------------
 * A call whose wait is not resolved gets no answer: the agent ends the script's process group.
 * So the read has no timeout, and a client killed while it waits prints nothing. */

static const option NO_OPTIONS[] = {{NULL, NULL, NULL, NULL}};

static int cmd_sleep(int argc, char **argv) {
  const command *self = find_command("sleep");
  const char *pos[1] = {NULL};
  int npos;
  if (parse_args(self, argc, argv, NO_OPTIONS, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing duration", NULL);
  char stack[1024];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "sleep");
  put_str_field(&req, "duration", pos[0]);
  return simple_call(self->name, &req, 1);
}

static int cmd_wait_signal(int argc, char **argv) {
  const command *self = find_command("wait-signal");
  const char *pos[1] = {NULL}, *timeout = NULL;
  const option opts[] = {{"timeout", &timeout, NULL, NULL}, {NULL, NULL, NULL, NULL}};
  int npos;
  if (parse_args(self, argc, argv, opts, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing signal name", NULL);
  if (!strncmp(pos[0], "event:", 6))
    return usage_error(self, "names starting with \"event:\" are reserved for event waits (flow wait-event): ", pos[0]);
  if (timeout && !*timeout) return usage_error(self, "--timeout needs a value", NULL);
  char stack[1024];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "wait-signal");
  put_str_field(&req, "name", pos[0]);
  if (timeout) put_str_field(&req, "timeout", timeout);
  /* A bounded wait needs protocol v2: agent_call asks with a hello first, check_protocol refuses. */
  return simple_call(self->name, &req, timeout ? 2 : 1);
}

/* ---- flow lock ------------------------------------------------------------------------------- */

/* Bare: one `lock` call. Bracketed: `lock`, a step named lock:<group> that runs the command, and
 * `unlock` once that step has a result (on replay too: all three return their records). Exits
 * with the command's code (docs/internals.md, "Bracketed lock"). */
static int cmd_lock(int argc, char **argv) {
  const command *self = find_command("lock");
  const char *pos[1] = {NULL};
  char **cmd;
  int npos;
  if (parse_args(self, argc, argv, NO_OPTIONS, pos, 1, &npos, &cmd)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing lock group", NULL);
  if (cmd && !*cmd) return usage_error(self, "missing command after --", NULL);

  const char *sock = agent_socket(self->name);
  char in_stack[65536], req_stack[1024], name_stack[256];
  conn c;
  response r;
  buf req, name;
  if (!sock || agent_connect(&c, sock, in_stack, sizeof in_stack)) return 1;
  buf_init(&req, req_stack, sizeof req_stack);
  req_begin(&req, 1, "lock");
  put_str_field(&req, "group", pos[0]);
  int rc = agent_call(&c, &req, 1, &r);
  if (rc) return rc;
  int code = apply_response(&r, 0);
  if (!cmd || !r.ok || code) return code;

  int ended, next_id;
  buf_init(&name, name_stack, sizeof name_stack);
  buf_puts(&name, "lock:");
  buf_puts(&name, pos[0]);
  buf_put(&name, "", 1);
  code = run_step(&c, 2, name.p, NULL, cmd, &ended, &next_id);
  if (!ended) return code;
  req.len = 0;
  req_begin(&req, next_id, "unlock");
  put_str_field(&req, "group", pos[0]);
  if ((rc = agent_call(&c, &req, 1, &r))) return rc;
  int released = apply_response(&r, code);
  return r.ok && released == 0 ? code : released; /* the command's code, unless the release failed */
}

/* ---- flow activity, activity-submit, activity-collect, activity-wait-all ---------------------- */

/* activity and activity-submit take the same words; the op is the command's name. */
static int cmd_activity(int argc, char **argv) {
  const command *self = find_command(argv[0]);
  const char *pos[1] = {NULL};
  const char **requires = malloc((size_t)argc * sizeof *requires);
  char **cmd;
  int nreq = 0, npos, ncmd = 0;
  if (!requires) die_oom();
  const option opts[] = {{"requires", NULL, requires, &nreq}, {NULL, NULL, NULL, NULL}};
  if (parse_args(self, argc, argv, opts, pos, 1, &npos, &cmd)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing activity name", NULL);
  if (!cmd) return usage_error(self, "missing -- before the command", NULL);
  if (!*cmd) return usage_error(self, "missing command after --", NULL);
  while (cmd[ncmd]) ncmd++;
  char stack[4096];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, self->name);
  put_str_field(&req, "name", pos[0]);
  put_list_field(&req, "argv", (const char *const *)cmd, ncmd);
  put_list_field(&req, "requires", requires, nreq);
  return simple_call(self->name, &req, 1);
}

static int cmd_activity_collect(int argc, char **argv) {
  const command *self = find_command("activity-collect");
  const char *pos[1] = {NULL};
  int npos;
  if (parse_args(self, argc, argv, NO_OPTIONS, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing activity name", NULL);
  char stack[1024];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, self->name);
  put_str_field(&req, "name", pos[0]);
  return simple_call(self->name, &req, 1);
}

static int cmd_activity_wait_all(int argc, char **argv) {
  const command *self = find_command("activity-wait-all");
  int npos;
  if (parse_args(self, argc, argv, NO_OPTIONS, NULL, 0, &npos, NULL)) return 2;
  char stack[128];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, self->name);
  return simple_call(self->name, &req, 1);
}

/* ---- flow spawn ---------------------------------------------------------------------------------- */

/* A document named on the command line (a path, or - for stdin) into `out`; 1 (said) when it cannot be read. */
static int read_source(const char *file, buf *out) {
  if (!strcmp(file, "-")) return read_stdin(out);
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    say(2, "error: cannot read ", file, ": ", strerror(errno), NULL);
    return 1;
  }
  int failed = read_all(fd, out, file);
  close(fd);
  return failed;
}

static int cmd_spawn(int argc, char **argv) {
  const command *self = find_command("spawn");
  const char *pos[1] = {NULL}, *as = NULL;
  const char **tags = malloc((size_t)argc * sizeof *tags);
  int ntags = 0, npos;
  if (!tags) die_oom();
  const option opts[] = {{"as", &as, NULL, NULL}, {"tag", NULL, tags, &ntags}, {NULL, NULL, NULL, NULL}};
  if (parse_args(self, argc, argv, opts, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing file (a path, or - for stdin)", NULL);
  if (as && strcmp(as, "pipeline") && strcmp(as, "script")) return usage_error(self, "--as takes pipeline or script, got ", as);
  if (!agent_socket(self->name)) return 1; /* before stdin is consumed */

  const char *file = pos[0], *slash = strrchr(file, '/');
  int from_stdin = !strcmp(file, "-");
  buf source, req;
  buf_init(&source, NULL, 0);
  if (read_source(file, &source)) return 1;
  buf_init(&req, NULL, 0);
  req_begin(&req, 1, self->name);
  buf_puts(&req, ",\"source_b64\":\"");
  buf_put_b64(&req, (const unsigned char *)source.p, source.len);
  buf_puts(&req, "\"");
  put_str_field(&req, "filename", from_stdin ? "stdin.sh" : slash ? slash + 1 : file);
  put_str_field(&req, "as", as ? as : "script");
  put_list_field(&req, "tags", tags, ntags);
  return simple_call(self->name, &req, 1);
}

/* ---- flow call ----------------------------------------------------------------------------------- */

/* A JSON flag, compacted, as `,"<field>":<json>`; 1 when it is not JSON. */
static int put_json_flag(buf *req, const char *field, const char *text) {
  if (!text) return 0;
  buf_puts(req, ",\"");
  buf_puts(req, field);
  buf_puts(req, "\":");
  return buf_put_json_compact(req, text, strlen(text));
}

/* The document of --definition <file|->, as definition_b64; 1 when it cannot be read. */
static int put_definition(buf *req, const char *file) {
  buf source;
  buf_init(&source, NULL, 0);
  if (read_source(file, &source)) return 1;
  buf_puts(req, ",\"definition_b64\":\"");
  buf_put_b64(req, (const unsigned char *)source.p, source.len);
  buf_puts(req, "\"");
  return 0;
}

/* Checkpointed by position on the agent's side: a replay prints the recorded output, no new child. */
static int cmd_call(int argc, char **argv) {
  const command *self = find_command("call");
  const char *pos[2] = {NULL, NULL}, *config = NULL, *input = NULL, *definition = NULL;
  const option opts[] = {
    {"config", &config, NULL, NULL}, {"input", &input, NULL, NULL}, {"definition", &definition, NULL, NULL}, {NULL, NULL, NULL, NULL}};
  int npos, node;
  if (parse_args(self, argc, argv, opts, pos, 2, &npos, NULL)) return 2;
  if (!pos[0]) return usage_error(self, "expected node or graph, got nothing", NULL);
  node = !strcmp(pos[0], "node");
  if (!node && strcmp(pos[0], "graph")) return usage_error(self, "expected node or graph, got ", pos[0]);
  if (node && (!pos[1] || !*pos[1])) return usage_error(self, "missing node kind", NULL);
  if (node && (input || definition)) return usage_error(self, "flow call node takes --config only", NULL);
  if (!node && config) return usage_error(self, "flow call graph takes --input, not --config", NULL);
  if (!node && (!pos[1]) == (!definition)) return usage_error(self, "give a stored graph's name or --definition <file|->", NULL);
  if (!agent_socket(self->name)) return 1; /* before stdin is consumed */
  buf req;
  buf_init(&req, NULL, 0);
  req_begin(&req, 1, self->name);
  if (pos[1]) put_str_field(&req, node ? "node" : "graph", pos[1]);
  if (put_json_flag(&req, "config", config)) return usage_error(self, "--config is not valid JSON", NULL);
  /* definition_b64 goes before input (the transcript's order); --input is checked before stdin is read. */
  buf in;
  buf_init(&in, NULL, 0);
  if (put_json_flag(&in, "input", input)) return usage_error(self, "--input is not valid JSON", NULL);
  if (definition && put_definition(&req, definition)) return 1;
  buf_put(&req, in.p, in.len);
  return simple_call(self->name, &req, 1);
}

/* ---- flow state ---------------------------------------------------------------------------------- */

static int cmd_state(int argc, char **argv) {
  const command *self = find_command("state");
  const char **pos = malloc((size_t)argc * sizeof *pos), *entity = NULL;
  int npos, want;
  if (!pos) die_oom();
  const option opts[] = {{"entity", &entity, NULL, NULL}, {NULL, NULL, NULL, NULL}};
  if (parse_args(self, argc, argv, opts, pos, argc, &npos, NULL)) return 2;
  if (npos < 1) return usage_error(self, "missing action (get, set, delete or list)", NULL);
  const char *action = pos[0];
  if (!strcmp(action, "list")) want = 1;
  else if (!strcmp(action, "get") || !strcmp(action, "delete")) want = 2;
  else if (!strcmp(action, "set")) want = 3;
  else return usage_error(self, "unknown action ", action);
  if (want > 1 && (npos < 2 || !*pos[1])) return usage_error(self, "missing key", NULL);
  if (want > 2 && npos < 3) return usage_error(self, "missing value (or - for stdin)", NULL);
  if (npos > want) return usage_error(self, "unexpected argument ", pos[want]);
  if (!agent_socket(self->name)) return 1; /* before stdin is consumed */

  buf value, req;
  buf_init(&value, NULL, 0);
  if (want > 2 && !strcmp(pos[2], "-")) {
    if (read_stdin(&value)) return 1;
    if (value.len && value.p[value.len - 1] == '\n') value.len--; /* one trailing newline */
  } else if (want > 2) buf_puts(&value, pos[2]);
  buf_init(&req, NULL, 0);
  req_begin(&req, 1, self->name);
  put_str_field(&req, "action", action);
  if (want > 1) put_str_field(&req, "key", pos[1]);
  if (entity) put_str_field(&req, "entity", entity);
  if (want > 2) {
    buf_puts(&req, ",\"value\":");
    buf_put_json(&req, value.p ? value.p : "", value.len);
  }
  return simple_call(self->name, &req, 1);
}

/* ---- flow emit, flow wait-event: the event bus -------------------------------------------------- */

/* 1-64 of [A-Za-z0-9._-] (core's EVENT_TYPE_PATTERN). */
static int is_event_type(const char *t) {
  size_t n = strlen(t);
  if (n < 1 || n > 64) return 0;
  for (const char *p = t; *p; p++) {
    char c = *p;
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return 0;
  }
  return 1;
}

static const char BAD_TYPE[] = "an event type is 1-64 characters from [A-Za-z0-9._-], got ";

/* Checkpointed by position on the agent's side: a replay prints the same id. --payload must be
 * JSON (default null: the agent's, when it is left out); it travels as JSON, compacted. */
static int cmd_emit(int argc, char **argv) {
  const command *self = find_command("emit");
  const char *pos[1] = {NULL}, *key = NULL, *payload = NULL;
  const option opts[] = {{"key", &key, NULL, NULL}, {"payload", &payload, NULL, NULL}, {NULL, NULL, NULL, NULL}};
  int npos;
  if (parse_args(self, argc, argv, opts, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing event type", NULL);
  if (!is_event_type(pos[0])) return usage_error(self, BAD_TYPE, pos[0]);
  if (key && !*key) return usage_error(self, "--key needs a value", NULL);
  char stack[4096];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "emit");
  put_str_field(&req, "type", pos[0]);
  if (key) put_str_field(&req, "key", key);
  if (payload) {
    buf_puts(&req, ",\"payload\":");
    if (buf_put_json_compact(&req, payload, strlen(payload)))
      return usage_error(self, "--payload is not valid JSON (a string needs its quotes: --payload '\"text\"')", NULL);
  }
  return simple_call(self->name, &req, 1);
}

static int cmd_wait_event(int argc, char **argv) {
  const command *self = find_command("wait-event");
  const char *pos[1] = {NULL}, *timeout = NULL;
  const option opts[] = {{"timeout", &timeout, NULL, NULL}, {NULL, NULL, NULL, NULL}};
  int npos;
  if (parse_args(self, argc, argv, opts, pos, 1, &npos, NULL)) return 2;
  if (!pos[0] || !*pos[0]) return usage_error(self, "missing event type", NULL);
  if (!is_event_type(pos[0])) return usage_error(self, BAD_TYPE, pos[0]);
  if (timeout && !*timeout) return usage_error(self, "--timeout needs a value", NULL);
  char stack[1024];
  buf req;
  buf_init(&req, stack, sizeof stack);
  req_begin(&req, 1, "wait-event");
  put_str_field(&req, "type", pos[0]);
  if (timeout) put_str_field(&req, "timeout", timeout);
  /* A bounded wait needs protocol v2: agent_call asks with a hello first, check_protocol refuses. */
  return simple_call(self->name, &req, timeout ? 2 : 1);
}

/* ---- everything else: the user CLI ----------------------------------------------------------- */

/* The agent does not ship the user CLI: it is $FLOW_USER_CLI when set, else the first `flow` on
 * PATH that is not an in-script client, i.e. whose real file is not in this agent's bin/ or
 * bin-node/ (this binary is <agent-image>/bin/flow). The same rule and messages as
 * agent-image/src/client/user-cli.ts. */

static int executable_file(const char *path) {
  struct stat st;
  return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether the real file of `path` lies in <root>/bin or <root>/bin-node; root is this binary's. */
static int in_script_client(const char *path, const char *root) {
  char real[PATH_MAX];
  if (!root || !realpath(path, real)) return 0;
  char *slash = strrchr(real, '/');
  if (!slash) return 0;
  *slash = '\0';
  size_t n = strlen(root);
  if (strncmp(real, root, n) != 0) return 0;
  return strcmp(real + n, "/bin") == 0 || strcmp(real + n, "/bin-node") == 0;
}

/* <agent-image>: two levels above this binary's real file, in buf; NULL when unknown. */
static const char *agent_root(char *buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0) return NULL;
  buf[n] = '\0';
  for (int up = 0; up < 2; up++) {
    char *slash = strrchr(buf, '/');
    if (!slash) return NULL;
    *slash = '\0';
  }
  return buf;
}

/* The user CLI's path in out (size PATH_MAX), or NULL when there is none. */
static const char *find_user_cli(char *out) {
  const char *given = getenv("FLOW_USER_CLI");
  if (given && *given) return given;
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  char rootbuf[PATH_MAX];
  const char *root = agent_root(rootbuf, sizeof rootbuf);
  for (const char *p = path; *p;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    /* an empty or relative entry would search the script's cwd */
    if (p[0] == '/' && len + sizeof "/flow" <= PATH_MAX) {
      memcpy(out, p, len);
      memcpy(out + len, "/flow", sizeof "/flow");
      if (executable_file(out) && !in_script_client(out, root)) return out;
    }
    p += len + (end ? 1 : 0);
  }
  return NULL;
}

static int run_user_cli(char **argv) {
  char found[PATH_MAX];
  const char *cli = find_user_cli(found);
  if (!cli) {
    say(2, "error: the flow user CLI is not installed here: no flow on PATH but the in-script client, and FLOW_USER_CLI is not set",
        NULL);
    say(2, "put the flow CLI on PATH or set FLOW_USER_CLI to its path; in-script commands (flow step, flow sleep, ...) work without it",
        NULL);
    return 1;
  }
  if (!executable_file(cli)) {
    say(2, "error: FLOW_USER_CLI=", cli, " is not an executable file", NULL);
    return 1;
  }
  argv[0] = (char *)cli;
  execv(cli, argv);
  say(2, "error: cannot run the flow user CLI (", cli, "): ", strerror(errno), NULL);
  return 1;
}

/*
 * A closed stdin, stdout or stderr is taken by /dev/null, as Node does for the fallback client:
 * otherwise the agent connection would get that number, and what the client writes to stdout
 * (a step's echo) would go into the connection.
 */
static void hold_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int null = open("/dev/null", O_RDWR);
    if (null >= 0 && null != fd) close(null); /* cannot happen: open takes the lowest free number */
  }
}

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "";
  if (!runs_in_script(name)) return run_user_cli(argv);
  hold_std_fds();
  const command *c = find_command(name);
  signal(SIGPIPE, SIG_IGN); /* a closed stdout or agent is an error to report, not a death */
  if (c && wants_help(argc - 1, argv + 1)) {
    say(1, "usage: ", c->usage, "\n", c->summary, "\nexample: ", c->example, NULL);
    return 0;
  }
  if (!c) {
    if (!agent_socket(name)) return 1;
    say(2, "error: flow ", name, " is not supported by this version of the in-script client", NULL);
    return 1;
  }
  return c->run(argc - 1, argv + 1);
}
