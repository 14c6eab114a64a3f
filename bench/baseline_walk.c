// Baseline for bench/workspace_walk: a bare getdents64 walk that counts entries and .git
// names and stats nothing. Build and run: cc -O2 bench/baseline_walk.c -o /tmp/walk && /tmp/walk
// TREE
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static long n = 0, gits = 0;
struct linux_dirent64 {
  unsigned long d_ino;
  long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};
static void walk(int dfd) {
  char buf[65536];
  for (;;) {
    long r = syscall(SYS_getdents64, dfd, buf, sizeof buf);
    if (r <= 0) break;
    for (long o = 0; o < r;) {
      struct linux_dirent64* e = (void*)(buf + o);
      o += e->d_reclen;
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      n++;
      if (!strcmp(e->d_name, ".git")) gits++;
      if (e->d_type == DT_DIR) {
        int c = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (c >= 0) {
          walk(c);
          close(c);
        }
      }
    }
  }
}
int main(int c, char** v) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  int d = open(v[1], O_RDONLY | O_DIRECTORY);
  walk(d);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%ld entries, %ld .git, %.2f ms\n", n, gits,
         (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
}
