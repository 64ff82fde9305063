/*
 * flow-spawner: starts a worker agent's scripts, so that the agent (a Node process of ~100 MB)
 * never forks itself: a fork copies the forker's page tables and the child's exec tears the copy
 * down again, ~2.5 ms of CPU in the agent and ~2 ms in the child per script on a loaded host,
 * against ~0.05 ms from this small process (agent-image/src/script-spawner.ts; docs/internals.md,
 * "Local agents").
 *
 * One per worker agent, started by it, as its user. stdin: requests; stdout: answers. EOF on stdin
 * (the agent is gone): exit; the scripts already started run on (the launcher ends their groups).
 *
 * Request: a 4-byte little-endian length, then that many bytes of NUL-terminated fields:
 *   id, cwd, stdout path, stderr path, argc, argv[0..argc), envc, env[0..envc) ("NAME=value").
 * argv[0] is the command, looked up on the PATH of env as execvp would (a name with a `/` as is).
 * The script gets stdin /dev/null, stdout and stderr opened from the two paths (write-only; FIFOs
 * the agent holds open for reading, through /proc/<agent>/fd/<n>), its own process group (pgid =
 * its pid), default signal dispositions and an empty signal mask, and no other descriptor.
 * Answers, one line each:
 *   "P <id> <pid>"     started (the exec succeeded)
 *   "E <id> <errno>"   could not start (chdir or exec failed with errno); nothing runs
 *   "F <id> <errno>"   the output paths could not be opened (no /proc access?): the agent starts
 *                      its scripts itself from then on
 *   "X <pid> <status>" a started script ended: its raw wait status (or a process it left behind
 *                      did: the agent knows the pids it started and ignores the others)
 *
 * It is its scripts' subreaper (PR_SET_CHILD_SUBREAPER): a process a script leaves running when it
 * exits (`cmd &`, a double fork) is re-parented here, not to pid 1, and reaped here when it ends. A
 * `flow server` that is pid 1 itself (a container started without an init) would never reap them,
 * and each would stay a zombie.
 */
#define _GNU_SOURCE
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
#include <unistd.h>

#define MAX_REQUEST (64 * 1024 * 1024)

static int chld_pipe[2];

static void on_chld(int sig) {
  (void)sig;
  int saved = errno;
  if (write(chld_pipe[1], "c", 1) < 0) { /* full: a wake-up is pending anyway */ }
  errno = saved;
}

static int read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static void answer(const char *line) {
  size_t n = strlen(line);
  const char *p = line;
  while (n > 0) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) exit(0); /* the agent is gone */
    p += w;
    n -= (size_t)w;
  }
}

/* execve `file` with `argv` and `envp`, searching the PATH of envp when `file` has no slash. */
static int exec_on_path(const char *file, char **argv, char **envp) {
  if (strchr(file, '/')) {
    execve(file, argv, envp);
    return errno;
  }
  const char *path = NULL;
  for (char **e = envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  int err = ENOENT, seen_eacces = 0;
  size_t flen = strlen(file);
  char buf[4096];
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t dlen = end ? (size_t)(end - p) : strlen(p);
    if (dlen + flen + 2 <= sizeof buf) {
      if (dlen == 0) {
        memcpy(buf, file, flen + 1);
      } else {
        memcpy(buf, p, dlen);
        buf[dlen] = '/';
        memcpy(buf + dlen + 1, file, flen + 1);
      }
      execve(buf, argv, envp);
      err = errno;
      if (err == EACCES) seen_eacces = 1;
      else if (err != ENOENT && err != ENOTDIR && err != ELOOP && err != ENAMETOOLONG) return err;
    }
    if (!end) break;
    p = end;
  }
  return seen_eacces ? EACCES : err;
}

/* In the child: set up and exec; on any failure write errno to `report` and exit 127. */
static void child(int report, int out, int err_fd, const char *cwd, char **argv, char **envp) {
  sigset_t none;
  sigemptyset(&none);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setpgid(0, 0);
  int e = 0;
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC); /* its copy at 0 stays open over the exec */
  if (in < 0) e = errno;
  if (!e && (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err_fd, 2) < 0)) e = errno;
  if (!e && chdir(cwd) < 0) e = errno;
  /* Every other descriptor of this process is close-on-exec (the agent's spawn left it only 0-2,
   * and each one opened here is O_CLOEXEC): nothing else reaches the script. */
  if (!e) e = exec_on_path(argv[0], argv, envp);
  if (write(report, &e, sizeof e) < 0) { /* the parent sees a short read: a failure anyway */ }
  _exit(127);
}

/* The next n NUL-terminated fields from *p on, as a NULL-ended array of pointers into the request. */
static char **take_fields(char **p, const char *end, long n) {
  char **list = calloc((size_t)n + 1, sizeof *list);
  if (!list) exit(2);
  for (long i = 0; i < n; i++) {
    if (*p >= end) exit(3);
    list[i] = *p;
    *p += strnlen(*p, (size_t)(end - *p)) + 1;
  }
  return list;
}

/* Starts one request's script; answers P or E. */
static void start(char *req, uint32_t len) {
  char *fields[8];
  char *p = req, *end = req + len;
  int nf = 0;
  while (nf < 5 && p < end) {
    fields[nf++] = p;
    p += strnlen(p, (size_t)(end - p)) + 1;
  }
  if (nf < 5) exit(3); /* a malformed request: an agent bug; the agent sees EOF */
  const char *id = fields[0], *cwd = fields[1];
  long argc = strtol(fields[4], NULL, 10);
  if (argc < 1 || argc > 1000000) exit(3);
  char **argv = take_fields(&p, end, argc);
  if (p >= end) exit(3);
  long envc = strtol(p, NULL, 10);
  p += strnlen(p, (size_t)(end - p)) + 1;
  if (envc < 0 || envc > 1000000) exit(3);
  char **envp = take_fields(&p, end, envc);
  char line[128];
  int out = open(fields[2], O_WRONLY | O_CLOEXEC);
  int e = out < 0 ? errno : 0;
  int err_fd = e ? -1 : open(fields[3], O_WRONLY | O_CLOEXEC);
  if (!e && err_fd < 0) e = errno;
  if (e) {
    if (out >= 0) close(out);
    snprintf(line, sizeof line, "F %.64s %d\n", id, e);
    answer(line);
    free(argv);
    free(envp);
    return;
  }
  int report[2] = {-1, -1};
  if (!e && pipe2(report, O_CLOEXEC) < 0) e = errno;
  pid_t pid = -1;
  if (!e) {
    pid = fork();
    if (pid == 0) child(report[1], out, err_fd, cwd, argv, envp);
    if (pid < 0) e = errno;
  }
  if (report[1] >= 0) close(report[1]);
  if (out >= 0) close(out);
  if (err_fd >= 0) close(err_fd);
  if (pid > 0) {
    int child_err = 0;
    ssize_t r;
    do r = read(report[0], &child_err, sizeof child_err);
    while (r < 0 && errno == EINTR);
    if (r == (ssize_t)sizeof child_err) {
      e = child_err ? child_err : EIO;
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }
  }
  if (report[0] >= 0) close(report[0]);
  if (e) snprintf(line, sizeof line, "E %.64s %d\n", id, e);
  else snprintf(line, sizeof line, "P %.64s %d\n", id, (int)pid);
  answer(line);
  free(argv);
  free(envp);
}

static void reap(void) {
  char drain[64];
  while (read(chld_pipe[0], drain, sizeof drain) > 0) {}
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    char line[64];
    snprintf(line, sizeof line, "X %d %d\n", (int)pid, status);
    answer(line);
  }
}

int main(void) {
  if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) < 0) return 2;
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  signal(SIGPIPE, SIG_IGN);
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1); /* best effort: without it, orphans go to pid 1 as before */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  char *req = NULL;
  size_t cap = 0;
  for (;;) {
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = chld_pipe[0], .events = POLLIN}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 2;
    }
    if (fds[1].revents) reap();
    if (fds[0].revents) {
      unsigned char hdr[4];
      if (read_full(0, hdr, 4) < 0) return 0;
      uint32_t len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
      if (len == 0 || len > MAX_REQUEST) return 3;
      if (len + 1 > cap) {
        cap = len + 1;
        req = realloc(req, cap);
        if (!req) return 2;
      }
      if (read_full(0, req, len) < 0) return 0;
      req[len] = '\0';
      start(req, len);
      reap(); /* a script may have ended while this one started */
    }
  }
}
