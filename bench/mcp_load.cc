// mcp_load: drives an MCP server over stdio with a window of requests in flight and reports
// calls per second. A C++ client, so that on a small machine the figure is the server's, not
// the client's (a Python client spends as much CPU per call as the server does).
//
//   mcp_load N WINDOW REQUEST_JSON -- SERVER ARGV...
// REQUEST_JSON is a tools/call params object; a response with "isError":true or a JSON-RPC
// error counts as an error (exit 1).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(2);
}

void WriteAll(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) Die("write to server");
    off += static_cast<std::size_t>(n);
  }
}

// Reads whole lines from the server; returns the number of complete lines seen.
class Lines {
 public:
  explicit Lines(int fd) : fd_(fd) {}
  // Blocks for at least one more line; appends the complete ones to `out`.
  void ReadSome(std::vector<std::string>* out) {
    char chunk[1 << 16];
    while (true) {
      ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::fprintf(stderr, "mcp_load: the server closed its stdout\n");
        std::exit(2);
      }
      buf_.append(chunk, static_cast<std::size_t>(n));
      std::size_t start = 0, nl;
      bool any = false;
      while ((nl = buf_.find('\n', start)) != std::string::npos) {
        out->emplace_back(buf_, start, nl - start);
        start = nl + 1;
        any = true;
      }
      buf_.erase(0, start);
      if (any) return;
    }
  }

 private:
  int fd_;
  std::string buf_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[4], "--") != 0) {
    std::fprintf(stderr, "usage: mcp_load N WINDOW REQUEST_JSON -- SERVER ARGV...\n");
    return 2;
  }
  const long n = std::atol(argv[1]);
  const long window = std::atol(argv[2]);
  const std::string params = argv[3];
  int to_server[2], from_server[2];
  if (::pipe2(to_server, O_CLOEXEC) != 0 || ::pipe2(from_server, O_CLOEXEC) != 0) Die("pipe");
  ::signal(SIGPIPE, SIG_IGN);
  pid_t pid = ::fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    ::dup2(to_server[0], 0);
    ::dup2(from_server[1], 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 2);
    ::execvp(argv[5], argv + 5);
    _exit(127);
  }
  ::close(to_server[0]);
  ::close(from_server[1]);
  const int out = to_server[1];
  Lines lines(from_server[0]);
  std::vector<std::string> got;
  WriteAll(
      out,
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcp_load","version":"1"}}})"
      "\n");
  while (got.empty()) lines.ReadSome(&got);
  got.clear();
  WriteAll(out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");

  auto request = [&](long id) {
    return "{\"jsonrpc\":\"2.0\",\"id\":" + std::to_string(id) +
           ",\"method\":\"tools/call\",\"params\":" + params + "}\n";
  };
  // Warm-up: 200 calls one at a time.
  for (long i = 1; i <= 200; ++i) {
    WriteAll(out, request(i));
    while (got.empty()) lines.ReadSome(&got);
    got.clear();
  }
  long sent = 0, done = 0, errors = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (done < n) {
    std::string burst;
    while (sent < n && sent - done < window) burst += request(1000 + sent++);
    if (!burst.empty()) WriteAll(out, burst);
    lines.ReadSome(&got);
    for (const std::string& line : got) {
      if (line.find("\"isError\":true") != std::string::npos ||
          line.find("\"error\":{") != std::string::npos) {
        ++errors;
      }
      ++done;
    }
    got.clear();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::printf(
      "{\"calls\":%ld,\"window\":%ld,\"seconds\":%.4f,\"calls_per_second\":%.0f,\"errors\":%ld}\n",
      n, window, secs, static_cast<double>(n) / secs, errors);
  return errors == 0 ? 0 : 1;
}
