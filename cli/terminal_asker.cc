#include "cli/terminal_asker.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/text.h"
#include "core/unique_fd.h"

namespace cordon::cli {
namespace {

bool WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// One line from the terminal, within `timeout`; nullopt at end of input or an error, "\x04"
// (never a real answer) when the time is up.
std::optional<std::string> ReadLine(int fd, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (line.size() < 256) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::string("\x04");
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return std::nullopt;
    if (r == 0) continue;
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional(line);
    if (c == '\n' || c == '\r') return line;
    if (c == 0x04) return line.empty() ? std::nullopt : std::optional(line);  // ^D in raw mode
    line += c;
  }
  return line;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  s.erase(0, i);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ApprovalReply TerminalAsker::Ask(const ApprovalQuestion& q) {
  UniqueFd tty(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!tty.valid()) {
    return {.answer = ApprovalAnswer::kNoClient,
            .via = AskedVia::kNone,
            .why_no_one =
                std::string("no terminal to ask on (/dev/tty: ") + std::strerror(errno) + ")"};
  }
  // Every name the agent chose is made safe for the screen: an escape sequence in an argument
  // must not draw a different question.
  std::string text = "\ncordon: approval needed: " + TerminalSafe(q.reason, true) + "\n";
  if (q.kind == "launch") {
    text += "  " + TerminalSafe(q.tool, true) + " would run: " + TerminalSafe(q.subject, true);
  } else if (q.kind == "write") {
    text += "  " + TerminalSafe(q.tool, true) + " would " + TerminalSafe(q.subject, true);
  } else if (q.kind == "commit") {
    // Every diff line is indented: no line the process wrote can pass for cordon's own.
    text += "  " + TerminalSafe(q.tool, true) + " would " + TerminalSafe(q.subject, true) + "\n";
    std::string_view d = q.detail;
    while (!d.empty()) {
      const std::size_t nl = d.find('\n');
      text += "    | " + TerminalSafe(d.substr(0, nl), true) + "\n";
      d = nl == std::string_view::npos ? std::string_view() : d.substr(nl + 1);
    }
  } else {
    text += "  " + TerminalSafe(q.subject, true);
  }
  text += "\nAllow it? [y] once, [s] for this session, [N] no: ";
  if (!WriteAll(tty.get(), text)) {
    return {.answer = ApprovalAnswer::kNoClient,
            .via = AskedVia::kNone,
            .why_no_one = "the terminal could not be written to"};
  }
  const auto line = ReadLine(tty.get(), std::chrono::seconds(q.timeout_secs));
  ApprovalReply r{.via = AskedVia::kTerminal, .client = "terminal"};
  if (!line) {
    r.answer = ApprovalAnswer::kDeny;  // end of input: no one said yes
    (void)WriteAll(tty.get(), "\ncordon: no answer (end of input): denied\n");
  } else if (*line == "\x04") {
    r.answer = ApprovalAnswer::kTimeout;
    (void)WriteAll(tty.get(), "\ncordon: no answer in time: not allowed\n");
  } else {
    const std::string a = Trimmed(*line);
    r.answer = a == "y" || a == "yes"       ? ApprovalAnswer::kOnce
               : a == "s" || a == "session" ? ApprovalAnswer::kSession
                                            : ApprovalAnswer::kDeny;
  }
  return r;
}

std::string NoOneToAsk(bool non_interactive) {
  if (non_interactive) return "--non-interactive";
  if (const char* ci = std::getenv("CI"); ci != nullptr) {
    const std::string v = ci;
    if (!v.empty() && v != "0" && v != "false")
      return "CI=" + TerminalSafe(v.substr(0, 16), true) + " in cordon's environment";
  }
  return "";
}

std::shared_ptr<Asker> AskerFor(const std::string& command, bool non_interactive) {
  if (const std::string why = NoOneToAsk(non_interactive); !why.empty())
    return std::make_shared<NobodyAsker>(why);
  if (command == "exec" || command == "cli" || command == "mcp-cli") {
    return std::make_shared<TerminalAsker>();
  }
  if (command == "serve") {
    return std::make_shared<NobodyAsker>(
        "cordon serve asks through its MCP client's elicitation, and no client that declared "
        "the elicitation capability has initialized (serve --http does not ask yet)");
  }
  return std::make_shared<NobodyAsker>(
      "cordon " + command +
      " does not ask its MCP client yet (issue 34, part c: wrap's elicitation is not built)");
}

}  // namespace cordon::cli
