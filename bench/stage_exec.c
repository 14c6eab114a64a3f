// Baseline for bench/confine.py: what cordon's launch child does in the staged mode before it
// execs bwrap (workspace/staging.cc MountStagesInChild), and nothing else: a mount namespace (and,
// when not root, a user namespace mapping the caller to itself), every mount private, an overlay
// of TARGET (lower) with UPPER and WORK mounted onto TARGET, then exec ARGV.
// Built by bench/confine.py: cc -O2 bench/stage_exec.c -o stage_exec
// Usage: stage_exec TARGET UPPER WORK ARGV...
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static int write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: stage_exec TARGET UPPER WORK ARGV...\n");
    return 2;
  }
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(uid == 0 ? CLONE_NEWNS : CLONE_NEWNS | CLONE_NEWUSER) != 0) return perror("unshare"), 120;
  if (uid != 0) {
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
    if (write_file("/proc/self/setgroups", "deny") != 0 || write_file("/proc/self/uid_map", map) != 0)
      return perror("uid_map"), 121;
    snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
    if (write_file("/proc/self/gid_map", map) != 0) return perror("gid_map"), 121;
  }
  char opts[4096];
  snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", argv[1], argv[2],
           argv[3]);
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return perror("make-rprivate"), 122;
  if (mount("overlay", argv[1], "overlay", 0, opts) != 0) return perror("mount overlay"), 123;
  execv(argv[4], argv + 4);
  perror("execv");
  return 127;
}
