// A minimal HTTP/1.1 server for bench/egress.py: answers `GET /N` (origin form or absolute
// form) with N bytes, at most RATE bytes per second per connection (0: as fast as the socket
// takes them), one request per connection, one forked child per connection.
//
// Pacing: the body goes out in 64 KiB writes, and before each write the child sleeps until the
// moment `start + sent / RATE` (absolute CLOCK_MONOTONIC), so the average rate is exact and a
// slow reader is never made up for with a burst larger than one chunk.
//
// Usage: paced_server PORT RATE   (binds 127.0.0.1 only; prints "ready PORT" when listening;
// PORT 0 picks a free port and prints it)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kChunk = 64 * 1024 };
static char body[kChunk];

static int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void Serve(int c, unsigned long long rate) {
  char req[8192];
  size_t have = 0;
  // Read the head (up to the blank line); the body of a GET is not expected.
  while (have < sizeof req - 1) {
    const ssize_t r = read(c, req + have, sizeof req - 1 - have);
    if (r <= 0) return;
    have += (size_t)r;
    req[have] = 0;
    if (strstr(req, "\r\n\r\n")) break;
  }
  // The target: "/N" or "http://host[:port]/N".
  const char* sp = strchr(req, ' ');
  if (!sp) return;
  const char* target = sp + 1;
  if (strncmp(target, "http://", 7) == 0) {
    target = strchr(target + 7, '/');
    if (!target) return;
  }
  const unsigned long long n = strtoull(target + 1, NULL, 10);
  char head[256];
  const int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nContent-Type: "
                          "application/octet-stream\r\nConnection: close\r\n\r\n",
                          n);
  if (WriteAll(c, head, (size_t)hl) != 0) return;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  unsigned long long sent = 0;
  while (sent < n) {
    if (rate > 0 && sent > 0) {
      // The moment by which `sent` bytes are due at `rate`.
      const unsigned long long ns = sent * 1000000000ull / rate;
      struct timespec due = {start.tv_sec + (time_t)(ns / 1000000000ull),
                             start.tv_nsec + (long)(ns % 1000000000ull)};
      if (due.tv_nsec >= 1000000000L) {
        due.tv_sec += 1;
        due.tv_nsec -= 1000000000L;
      }
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR) {
      }
    }
    const size_t k = (n - sent) < kChunk ? (size_t)(n - sent) : kChunk;
    if (WriteAll(c, body, k) != 0) return;
    sent += k;
  }
  shutdown(c, SHUT_WR);
  // Drain until the client closes, so that the close does not reset unread request bytes.
  char sink[4096];
  while (read(c, sink, sizeof sink) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PORT RATE_BYTES_PER_S\n", argv[0]);
    return 2;
  }
  const int port = atoi(argv[1]);
  const unsigned long long rate = strtoull(argv[2], NULL, 10);
  memset(body, 'x', sizeof body);
  signal(SIGCHLD, SIG_IGN);  // children are reaped by the kernel
  signal(SIGPIPE, SIG_IGN);
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, (struct sockaddr*)&a, sizeof a) != 0 || listen(s, 128) != 0) {
    perror("bind/listen");
    return 1;
  }
  socklen_t al = sizeof a;
  getsockname(s, (struct sockaddr*)&a, &al);
  printf("ready %d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (;;) {
    const int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR) continue;
      perror("accept");
      return 1;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const pid_t p = fork();
    if (p == 0) {
      close(s);
      Serve(c, rate);
      _exit(0);
    }
    close(c);
  }
}
