// The cost of a rename through seccomp user notification against a plain rename (ADR 0013).
// Build and run: gcc -O2 -o /tmp/rename_notify bench/rename_notify.c && mkdir -p /tmp/rn && cd
// /tmp/rn &&
//   for m in 0 1 2; do /tmp/rename_notify $m 20000; done
// mode 0: no filter; 1: notify, supervisor answers CONTINUE; 2: notify, supervisor reads the
// paths from /proc/PID/mem and does renameat2 itself in the child's cwd (an emulation's path).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static int send_fd(int s, int fd) {
  char b = 0;
  struct iovec io = {&b, 1};
  char c[CMSG_SPACE(sizeof(int))];
  struct msghdr m = {0};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = c;
  m.msg_controllen = sizeof c;
  struct cmsghdr* h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof fd);
  return sendmsg(s, &m, 0);
}
static int recv_fd(int s) {
  char b;
  struct iovec io = {&b, 1};
  char c[CMSG_SPACE(sizeof(int))];
  struct msghdr m = {0};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = c;
  m.msg_controllen = sizeof c;
  if (recvmsg(s, &m, 0) < 0) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}
static double now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(int argc, char** argv) {
  int mode = atoi(argv[1]), n = atoi(argv[2]);
  int sp[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
  pid_t pid = fork();
  if (pid == 0) {
    if (mode > 0) {
      struct sock_filter f[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rename, 2, 0),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_renameat2, 1, 0),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF)};
      struct sock_fprog p = {sizeof f / sizeof f[0], f};
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      int l = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p);
      if (l < 0) {
        perror("seccomp");
        _exit(1);
      }
      send_fd(sp[0], l);
      close(l);
    }
    close(open("a", O_CREAT | O_WRONLY, 0600));
    double t0 = now();
    for (int i = 0; i < n; i++) {
      if (rename(i % 2 ? "b" : "a", i % 2 ? "a" : "b") != 0) {
        perror("rename");
        _exit(1);
      }
    }
    printf("mode %d: %d renames, %.2f us each\n", mode, n, (now() - t0) * 1000 / n);
    unlink("a");
    unlink("b");
    fflush(stdout);
    _exit(0);
  }
  if (mode > 0) {
    int l = recv_fd(sp[1]);
    struct seccomp_notif_sizes sz;
    syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz);
    struct seccomp_notif* req = calloc(1, sz.seccomp_notif);
    struct seccomp_notif_resp* resp = calloc(1, sz.seccomp_notif_resp);
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", pid);
    int memfd = open(mem, O_RDONLY);
    char cwd[64];
    snprintf(cwd, sizeof cwd, "/proc/%d/cwd", pid);
    int cwdfd = open(cwd, O_RDONLY | O_DIRECTORY);
    for (;;) {
      memset(req, 0, sz.seccomp_notif);
      if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) break;
      memset(resp, 0, sz.seccomp_notif_resp);
      resp->id = req->id;
      if (mode == 1) {
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      } else {
        char a[4096], b[4096];
        pread(memfd, a, sizeof a, req->data.args[0]);
        pread(memfd, b, sizeof b, req->data.args[1]);
        a[4095] = b[4095] = 0;
        if (ioctl(l, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) != 0) continue;
        resp->val = renameat2(cwdfd, a, cwdfd, b, 0) == 0 ? 0 : -1;
        resp->error = resp->val ? -errno : 0;
      }
      ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, resp);
    }
  }
  int st;
  waitpid(pid, &st, 0);
  return 0;
}
