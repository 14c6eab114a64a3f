// The leak matrix (issue 19, "Done when"): every secret shape in tests/data/secret_shapes.json is
// planted in a workspace and sent through every channel an agent or an auditor sees, against the
// real binary (`cordon serve` on stdio, one session for all calls), a real configured MCP server
// (server-filesystem), a real wrapped one (server-everything, whose launcher also prints the
// shapes on its stderr) and a 127.0.0.1 HTTP server behind read_url. No secret may appear in any
// result or in any audit log; every string of tests/data/ordinary_strings.json must reach the
// agent unchanged, unless the file says it may be hidden ("may_hide", with why). A shape marked
// "limit" is a documented limit: its leaks are shown (L) but do not fail the test. On failure the
// test prints the shape x channel matrix, so what remains is visible at a glance.
//
// Channels: a shape is planted as one file (s_<id>.txt, or the name its entry gives: id_rsa,
// server.pem, .env, docker/config.json) holding its text and a newline.
//   log       every audit log of the test (serve's and each wrap's), as JSON strings and raw
//   read      read_file_range, the whole file
//   read3     read_file_range from line 3 (shapes of 3+ lines: a key's BEGIN line is cut off)
//   cat, grepv, sed, catn, grepn, diff   run_shell: cat F; grep -v PRIVATE F; sed -n 3,5p F
//             (3+ lines); cat -n F; grep -n '' F; diff -u /dev/null F (every line after a '+', as
//             git diff shows a new file)
//   search    search_text '.+' on the file (hidden files included)
//   argv      run_shell printf '%s\n' TEXT: the secret as an argument (its result and its record)
//   patherr   read_file_range of a missing file whose path holds the text (single-line shapes) or
//             the line holding a secret (a block's middle body line): the error message. A URL's
//             `//` stays in the path.
//   fcreate, ffind, fls   a file named with the line that holds the secret (or the entry's
//             "name"; not tried when it has a '/'): create_file of created/NAME (its result,
//             success or refusal), then, for the same names planted in names/, find_files and
//             list_searchable_files, and `ls names`
//   mcpfs     a configured server-filesystem's read_text_file on the planted file
//   wecho     server-everything's echo of the text, through `cordon wrap`
//   wstderr   the wrapped server's stderr (its launcher prints the texts before it execs the
//             server): what cordon wrap writes on its own stderr
//   cstderr   configured servers (sh, in serve) that print the texts on stderr and exit: the error
//             a call to one of their tools returns, which ends with their stderr
//   serr      what `cordon serve` itself writes on its stderr (an MCP client keeps it in its logs)
//   url       read_url of http://docs.example.test:PORT/s/<id> (resolved to 127.0.0.1)
//   procout   process_output of a background job that prints the text minus its last character,
//             waits, then prints the rest: polled while it waits (the secret minus its last
//             character must not be shown) and after it ends
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "core/unique_fd.h"
#include "runner/host_probe.h"
#include "tests/redact_corpus.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using namespace std::chrono_literals;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

struct Shape {
  std::string id, text, file, name;
  std::vector<std::string> secrets;  // each must never be seen
  bool limit = false;
  std::string why;
  int lines = 1;
};

struct Ordinary {
  std::string text, why, may_hide;
};

enum Channel {
  kLog,
  kRead,
  kRead3,
  kCat,
  kGrepV,
  kSed,
  kCatN,
  kGrepN,
  kDiff,
  kSearch,
  kArgv,
  kPathError,
  kNameCreate,
  kNameFind,
  kNameLs,
  kMcpFs,
  kWrapEcho,
  kWrapStderr,
  kConfiguredStderr,
  kServeStderr,
  kReadUrl,
  kProcessOutput,
  kChannels
};
constexpr std::array<const char*, kChannels> kChannelNames = {
    "log",   "read",    "read3",   "cat",     "grepv",   "sed",    "catn", "grepn",
    "diff",  "search",  "argv",    "patherr", "fcreate", "ffind",  "fls",  "mcpfs",
    "wecho", "wstderr", "cstderr", "serr",    "url",     "procout"};

// The data files; CORDON_TEST_DATA_DIR points a copy of the test elsewhere.
std::string DataDir() {
  return testing::FromEnv("CORDON_TEST_DATA_DIR", CORDON_SOURCE_DIR "/tests/data");
}

std::vector<Shape> LoadShapes() {
  std::vector<Shape> out;
  Json j = Json::parse(ReadFile(DataDir() + "/secret_shapes.json"));
  for (const Json& e : j) {
    Shape s;
    s.id = e["id"].get<std::string>();
    s.text = e["text"].get<std::string>();
    s.file = e.value("file", "s_" + s.id + ".txt");
    if (e["secret"].is_array()) {
      for (const Json& x : e["secret"]) s.secrets.push_back(x.get<std::string>());
    } else {
      s.secrets.push_back(e["secret"].get<std::string>());
    }
    s.name = e.value("name", "");
    s.limit = e.value("limit", false);
    s.why = e.value("why", "");
    s.lines = 1 + static_cast<int>(std::count(s.text.begin(), s.text.end(), '\n'));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Ordinary> LoadOrdinary() {
  std::vector<Ordinary> out;
  Json j = Json::parse(ReadFile(DataDir() + "/ordinary_strings.json"));
  for (const Json& e : j)
    out.push_back(
        {e["text"].get<std::string>(), e["why"].get<std::string>(), e.value("may_hide", "")});
  return out;
}

// Every string in `j`, and, for a string that is itself JSON (a tool result's text is the JSON of
// its structured content), the strings in it: what a reader of the value can see, unescaped.
void Strings(const Json& j, std::string& out, int depth = 0) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    out += s;
    out += '\n';
    if (depth < 4 && !s.empty() && (s[0] == '{' || s[0] == '[')) {
      Json inner = Json::parse(s, nullptr, false);
      if (!inner.is_discarded()) Strings(inner, out, depth + 1);
    }
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out += k;
      out += '\n';
      Strings(v, out, depth);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) Strings(v, out, depth);
  }
}

std::string Visible(const Json& j) {
  std::string out = j.dump();
  out += '\n';
  Strings(j, out);
  return out;
}

// An MCP peer (cordon serve or cordon wrap) over pipes, one JSON-RPC message a line; stderr goes
// to a file. Requests may be pipelined: answers are matched by id.
class Peer {
 public:
  Peer(const std::vector<std::string>& argv, const std::vector<std::string>& env,
       const std::string& err_path) {
    // A peer that ended early is a failure this test names (Send), never a SIGPIPE that ends
    // the test without a word (it did once on CI's second run here).
    ::signal(SIGPIPE, SIG_IGN);
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) std::abort();
    std::vector<std::string> envs = env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      bool overridden = false;
      for (const auto& x : env)
        overridden |= entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1);
      if (!overridden) envs.push_back(entry);
    }
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (err >= 0) ::dup2(err, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Peer() {
    if (pid_ > 0) Finish();
    if (from_ >= 0) ::close(from_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  void Send(const Json& msg) {
    const std::string line = msg.dump() + "\n";
    std::string_view rest = line;
    while (!rest.empty()) {
      const ssize_t n = ::write(to_, rest.data(), rest.size());
      if (n <= 0) {
        ADD_FAILURE() << "write to the peer failed";
        return;
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Reads messages until every id in `want` has its answer, or `timeout` passes; answers are kept
  // in answers_ (notifications are dropped).
  void Await(const std::set<int>& want, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto missing = [&] {
      for (int id : want)
        if (answers_.count(id) == 0) return true;
      return false;
    };
    while (missing()) {
      if (auto nl = buf_.find('\n'); nl != std::string::npos) {
        Json j = Json::parse(buf_.substr(0, nl), nullptr, false);
        buf_.erase(0, nl + 1);
        if (j.is_object() && j.contains("id") && j["id"].is_number_integer() &&
            (j.contains("result") || j.contains("error"))) {
          const int id = j["id"].get<int>();
          answers_[id] = std::move(j);
        }
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return;
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return;
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  Json Initialize() {
    const int id = next_id_++;
    Send({{"jsonrpc", "2.0"},
          {"id", id},
          {"method", "initialize"},
          {"params",
           {{"protocolVersion", "2025-06-18"},
            {"capabilities", Json::object()},
            {"clientInfo", {{"name", "leak_test"}, {"version", "1"}}}}}});
    Await({id}, 120s);
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return Take(id);
  }
  // Each call's answer (its result, or the JSON-RPC message when there is none), in order; at
  // most `window` requests are in flight.
  std::vector<Json> CallMany(const std::vector<std::pair<std::string, Json>>& calls,
                             std::size_t window = 16) {
    std::vector<int> ids;
    std::set<int> in_flight;
    for (const auto& [tool, args] : calls) {
      if (in_flight.size() >= window) {
        Await({*in_flight.begin()}, 180s);
        in_flight.erase(in_flight.begin());
      }
      const int id = next_id_++;
      ids.push_back(id);
      in_flight.insert(id);
      Send({{"jsonrpc", "2.0"},
            {"id", id},
            {"method", "tools/call"},
            {"params", {{"name", tool}, {"arguments", args}}}});
    }
    Await(in_flight, 180s);
    std::vector<Json> out;
    for (int id : ids) out.push_back(Take(id));
    return out;
  }
  Json Call(const std::string& tool, const Json& args) { return CallMany({{tool, args}})[0]; }
  void CloseInput() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  // Closes stdin and waits (bounded; a peer that does not end is killed, by its pid): its exit
  // code, or 128 + its signal.
  int Finish() {
    CloseInput();
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 600 && (got = ::waitpid(pid_, &status, WNOHANG)) == 0; ++i)
      std::this_thread::sleep_for(100ms);
    if (got == 0) {
      ADD_FAILURE() << "the peer did not end within 60 s of its input's end";
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  Json Take(int id) {
    auto it = answers_.find(id);
    if (it == answers_.end()) return Json{{"no_answer", id}};
    Json j = std::move(it->second);
    answers_.erase(it);
    return j.contains("result") ? j["result"] : j;
  }
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int next_id_ = 1;
  std::string buf_;
  std::map<int, Json> answers_;
};

// A plain HTTP/1.0 server on 127.0.0.1 serving fixed bodies (text/plain) by path, one connection
// at a time.
class TextServer {
 public:
  explicit TextServer(std::map<std::string, std::string> bodies) : bodies_(std::move(bodies)) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_.get(), 128) != 0 ||
        ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TextServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (c.valid()) Serve(c.get());
    }
  }
  void Serve(int fd) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<std::size_t>(n));
    }
    const std::size_t sp = req.find(' ');
    const std::string path = req.substr(sp + 1, req.find(' ', sp + 1) - sp - 1);
    auto it = bodies_.find(path);
    const std::string body = it == bodies_.end() ? "not here" : it->second;
    std::string out =
        std::string(it == bodies_.end() ? "HTTP/1.0 404 Not Found" : "HTTP/1.0 200 OK") +
        "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    std::string_view rest = out;
    while (!rest.empty()) {
      const ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  std::map<std::string, std::string> bodies_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Typed reads that tolerate a missing or differently typed field (an error result has neither).
std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
long Int(const Json& j, const char* key, long fallback) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<long>()
                                                                        : fallback;
}
bool IsError(const Json& r) {
  return !r.is_object() || !r.contains("isError") || !r["isError"].is_boolean() ||
         r["isError"].get<bool>();
}
const Json& Sc(const Json& r) {
  static const Json empty = Json::object();
  return r.is_object() && r.contains("structuredContent") ? r["structuredContent"] : empty;
}

// The line of the shape's text that holds `secret`, without its indentation: what a secret looks
// like out of its file (in a path, a file name), with the context a rule needs.
std::string LineWith(const Shape& s, const std::string& secret) {
  std::istringstream in(s.text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(secret) == std::string::npos) continue;
    const std::size_t first = line.find_first_not_of(" \t");
    return line.substr(first == std::string::npos ? 0 : first);
  }
  return secret;
}

// The file name a shape is planted under as a name: its entry's "name", else the line that holds
// its (first) secret; "" when that cannot be a file name (a '/' in it: a URL, a path).
std::string NameFor(const Shape& s) {
  const std::string n = !s.name.empty() ? s.name : LineWith(s, s.secrets[0]);
  const bool ok = !n.empty() && n.size() <= 200 && n.find('/') == std::string::npos &&
                  n.find('\n') == std::string::npos && n != "." && n != "..";
  return ok ? n : "";
}

// Shapes in rounds whose texts, one a line, fit in `cap` bytes (a shape larger than that gets a
// round of its own): each round's stderr must fit the tail cordon shows.
std::vector<std::vector<std::size_t>> Rounds(const std::vector<Shape>& shapes, std::size_t cap) {
  std::vector<std::vector<std::size_t>> rounds(1);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::size_t size = shapes[i].text.size() + 1;
    if (bytes + size > cap && !rounds.back().empty()) {
      rounds.emplace_back();
      bytes = 0;
    }
    rounds.back().push_back(i);
    bytes += size;
  }
  return rounds;
}

// A file that starts with a marker line and holds the texts of a round, one a line.
std::string RoundText(const std::vector<Shape>& shapes, const std::vector<std::size_t>& round,
                      const std::string& marker) {
  std::string text = marker + "\n";
  for (std::size_t i : round) text += shapes[i].text + "\n";
  return text;
}

// What a channel's call did wrong for the matrix, or "" (the call carried the shape).
std::string Fault(Channel c, const Json& r) {
  switch (c) {
    case kCat:
    case kGrepV:
    case kSed:
    case kCatN:
    case kGrepN:
    case kArgv:
      return IsError(r) || Int(Sc(r), "exit_code", -1) != 0 ? "did not exit 0" : "";
    case kDiff:  // 1: the files differ
      return IsError(r) || Int(Sc(r), "exit_code", -1) != 1 ? "did not exit 1" : "";
    case kSearch:
      return IsError(r) || Int(Sc(r), "total_matches", 0) < 1 ? "no match" : "";
    case kPathError:
      return !IsError(r) ? "a missing file was read" : "";
    case kReadUrl:
      return IsError(r) || Int(Sc(r), "status", 0) != 200 ? "not fetched" : "";
    case kNameCreate:
      return "";  // created or refused: either way its result is what the agent reads
    default:
      return IsError(r) ? "refused" : "";
  }
}

// A result's own words first (a process's exit, signal and stderr; a search's errors), then the
// rest, bounded.
std::string Diagnosis(const Json& r) {
  std::string why;
  const Json& sc = Sc(r);
  for (const char* k :
       {"exit_code", "signal_name", "status", "stderr", "stdout", "errors", "launch"}) {
    if (sc.is_object() && sc.contains(k)) why += std::string(k) + "=" + sc[k].dump() + " ";
  }
  return why.substr(0, 1500) + r.dump().substr(0, 1500);
}

class LeakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) SECURITY_SKIP("bwrap is not installed");
    if (!testing::UserNamespacesEnabled()) SECURITY_SKIP("user namespaces are disabled");
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
    peers_ = testing::FromEnv("MCP_PEERS_DIR", "/tmp/mcp-peers");
    node_ = FindOnPath("node");
    peers_ok_ = !node_.empty() &&
                testing::Exists(peers_ + "/node_modules/@modelcontextprotocol/server-everything") &&
                testing::Exists(peers_ + "/node_modules/@modelcontextprotocol/server-filesystem");
  }

  // What one channel showed: every text an agent (or, for kLog, an auditor) received.
  void Saw(Channel c, const std::string& text) { seen_[c].push_back(text); }
  void SawResult(Channel c, const Json& r) { Saw(c, Visible(r)); }
  // A channel that did not do what the test needs (a call refused, a server that did not
  // answer): the matrix would be empty there for the wrong reason.
  void Broken(Channel c, const std::string& what, const Json& r) {
    broken_.push_back(std::string(kChannelNames[c]) + ": " + what + ": " + Diagnosis(r));
  }

  // dir_/net.toml: read_url may reach docs.example.test:PORT, resolved to 127.0.0.1 (the test's
  // server). Returns that host:port.
  std::string ReadUrlPolicy(int port) {
    const std::string host = "docs.example.test:" + std::to_string(port);
    WriteFile(dir_ / "net.toml",
              "[scopes]\ngrant = [\"net:read\"]\n[tools.read_url]\nnetwork = "
              "\"proxy\"\nallow_domains = [\"" +
                  host + "\"]\n[network]\nresolve = [\"docs.example.test=127.0.0.1\"]\n");
    return host;
  }

  std::string ws_;
  TempDir dir_;
  std::vector<std::string> env_;
  std::string peers_, node_;
  bool peers_ok_ = false;
  std::array<std::vector<std::string>, kChannels> seen_;
  std::vector<std::string> broken_;
};

TEST_F(LeakTest, NoSecretShapeReachesAnAgentOrTheLogThroughAnyChannel) {
  const std::vector<Shape> shapes = LoadShapes();
  const std::vector<Ordinary> ordinary = LoadOrdinary();
  ASSERT_GE(shapes.size(), 40u);
  ASSERT_GE(ordinary.size(), 30u);
  const std::size_t n = shapes.size();
  // applies[shape][channel]: the shape was sent that way.
  std::vector<std::array<bool, kChannels>> applies(n);
  for (auto& a : applies) a.fill(true);

  // --- The workspace: one file per shape, the ordinary strings in one file, and the server.
  std::map<std::string, std::string> bodies;
  std::string ordinary_text;
  for (const Ordinary& o : ordinary) ordinary_text += o.text + "\n";
  WriteFile(ws_ + "/ordinary.txt", ordinary_text);
  bodies["/ordinary"] = ordinary_text;
  for (const Shape& s : shapes) {
    WriteFile(ws_ + "/" + s.file, s.text + "\n");
    bodies["/s/" + s.id] = s.text + "\n";
  }
  std::filesystem::create_directories(ws_ + "/names");
  std::filesystem::create_directories(ws_ + "/created");
  TextServer http(bodies);
  const std::string host = ReadUrlPolicy(http.port());
  const std::string mcp = peers_ + "/node_modules/@modelcontextprotocol/";
  // (cstderr) Configured servers that print a round of texts on stderr and exit: cordon shows
  // the last 2000 bytes of their stderr, so a round holds at most 1900.
  std::filesystem::create_directories(dir_ / "stderr");
  const std::vector<std::vector<std::size_t>> noisy = Rounds(shapes, 1900);
  std::string servers;
  for (std::size_t k = 0; k < noisy.size(); ++k) {
    const std::string file = dir_ / ("stderr/configured" + std::to_string(k) + ".txt");
    WriteFile(file, RoundText(shapes, noisy[k], "configured-stderr-" + std::to_string(k)));
    servers += "[servers.noisy" + std::to_string(k) +
               "]\ncommand = \"sh\"\nargs = [\"-c\", 'cat \"$0\" >&2; exit 1', \"" + file +
               "\"]\n[servers.noisy" + std::to_string(k) + ".sandbox]\nread = [\"" +
               (dir_ / "stderr") + "\"]\n";
  }
  if (peers_ok_) {
    servers += "[servers.fs]\ncommand = \"" + node_ + "\"\nargs = [\"" + mcp +
               "server-filesystem/dist/index.js\", \"" + ws_ +
               "\"]\ntimeout_secs = 60\n[servers.fs.sandbox]\nread = [\"" + peers_ + "\"]\n";
  } else {
    const std::string why = "node or the MCP peers in " + peers_ +
                            " are missing (scripts/install-mcp-peers.sh): the mcpfs, wecho and "
                            "wstderr channels are not tried";
    if (testing::InCi()) ADD_FAILURE() << "LEAK CHANNELS CANNOT RUN under CI=true: " << why;
    std::cout << "SKIPPED LEAK CHANNELS: " << why << "\n";
  }

  WriteFile(dir_ / "home/.cordon/mcp.toml", servers);

  // --- One serve session for every built-in channel and the configured servers.
  Peer serve({testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log",
              dir_ / "serve.jsonl", "--policy", dir_ / "net.toml"},
             env_, dir_ / "serve.err");
  Json init = serve.Initialize();
  ASSERT_TRUE(init.contains("serverInfo")) << init.dump() << ReadFile(dir_ / "serve.err");

  // (procout) The background jobs start first: each prints a whole marker line, then its text
  // minus the last character, waits, then prints the rest; they are polled while they wait. (The
  // marker shows the job has written, even where the unfinished tail is rightly held back.)
  std::vector<std::pair<std::string, Json>> calls;
  for (const Shape& s : shapes) {
    calls.push_back(
        {"run_shell",
         {{"program", "sh"},
          {"args",
           {"-c", "echo job-started; head -c -2 \"$0\"; sleep 12; tail -c 2 \"$0\"", s.file}},
          {"background", true}}});
  }
  std::vector<Json> started = serve.CallMany(calls);
  std::vector<std::string> job(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (IsError(started[i]) || !Sc(started[i]).contains("id")) {
      Broken(kProcessOutput, "run_shell background did not start", started[i]);
      continue;
    }
    job[i] = Sc(started[i])["id"].get<std::string>();
  }
  // Polled until each shows its marker while still running (bounded), then once more, a moment
  // later, while each still waits in the middle of its last line.
  std::vector<bool> observed(n, false);
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until;) {
    std::vector<std::size_t> which;
    calls.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (job[i].empty() || observed[i]) continue;
      which.push_back(i);
      calls.push_back({"process_output", {{"id", job[i]}}});
    }
    if (which.empty()) break;
    std::vector<Json> polled = serve.CallMany(calls);
    for (std::size_t k = 0; k < which.size(); ++k) {
      SawResult(kProcessOutput, polled[k]);
      const Json& sc = Sc(polled[k]);
      if (Str(sc, "state") == "running" &&
          Str(sc, "output").find("job-started") != std::string::npos)
        observed[which[k]] = true;
    }
    std::this_thread::sleep_for(200ms);
  }
  std::this_thread::sleep_for(500ms);
  calls.clear();
  std::vector<std::size_t> again;
  for (std::size_t i = 0; i < n; ++i) {
    if (!observed[i]) continue;
    again.push_back(i);
    calls.push_back({"process_output", {{"id", job[i]}}});
  }
  std::vector<Json> mid = serve.CallMany(calls);
  for (std::size_t k = 0; k < again.size(); ++k) {
    SawResult(kProcessOutput, mid[k]);
    if (Str(Sc(mid[k]), "state") != "running") observed[again[k]] = false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!job[i].empty() && !observed[i])
      broken_.push_back("procout: " + shapes[i].id +
                        ": never seen (twice) with its marker while the job was running");
  }

  // (read, read3, cat, grepv, sed, catn, grepn, search, argv, patherr, fcreate, mcpfs, url)
  struct Sent {
    std::size_t shape;
    Channel channel;
  };
  std::vector<Sent> sent;
  calls.clear();
  auto add = [&](std::size_t i, Channel c, const std::string& tool, const Json& args) {
    sent.push_back({i, c});
    calls.push_back({tool, args});
  };
  auto sh = [](const std::string& program, std::vector<std::string> args) {
    return Json{{"program", program}, {"args", args}};
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Shape& s = shapes[i];
    add(i, kRead, "read_file_range", {{"path", s.file}, {"start_line", 1}});
    if (s.lines >= 3) {
      add(i, kRead3, "read_file_range", {{"path", s.file}, {"start_line", 3}});
      add(i, kSed, "run_shell", sh("sed", {"-n", "3,5p", s.file}));
    } else {
      applies[i][kRead3] = applies[i][kSed] = false;
    }
    add(i, kCat, "run_shell", sh("cat", {s.file}));
    add(i, kGrepV, "run_shell", sh("grep", {"-v", "PRIVATE", s.file}));
    add(i, kCatN, "run_shell", sh("cat", {"-n", s.file}));
    add(i, kGrepN, "run_shell", sh("grep", {"-n", "", s.file}));
    add(i, kDiff, "run_shell", sh("diff", {"-u", "/dev/null", s.file}));
    add(i, kSearch, "search_text", {{"pattern", ".+"}, {"glob", s.file}, {"include_hidden", true}});
    add(i, kArgv, "run_shell", sh("printf", {"%s\\n", s.text}));
    const std::string in_path =
        s.lines == 1 ? s.text : LineWith(s, s.secrets[s.secrets.size() / 2]);
    add(i, kPathError, "read_file_range", {{"path", "missing/" + in_path}, {"start_line", 1}});
    const std::string name = NameFor(s);
    if (!name.empty()) {
      WriteFile(ws_ + "/names/" + name, "x\n");
      add(i, kNameCreate, "create_file", {{"path", "created/" + name}, {"content", "x\n"}});
    } else {
      applies[i][kNameCreate] = applies[i][kNameFind] = applies[i][kNameLs] = false;
    }
    if (peers_ok_) {
      add(i, kMcpFs, "mcp__fs__read_text_file", {{"path", ws_ + "/" + s.file}});
    } else {
      applies[i][kMcpFs] = applies[i][kWrapEcho] = applies[i][kWrapStderr] = false;
    }
    add(i, kReadUrl, "read_url", {{"url", "http://" + host + "/s/" + s.id}});
  }
  std::vector<Json> results = serve.CallMany(calls);
  std::vector<std::size_t> again_k;
  for (std::size_t k = 0; k < sent.size(); ++k) {
    const Json& r = results[k];
    const Channel c = sent[k].channel;
    SawResult(c, r);
    if (!Fault(c, r).empty()) again_k.push_back(k);
  }
  // A call that did not do what the matrix needs in the batch of hundreds is sent again alone,
  // once: the matrix needs the channel to have carried the shape. Its first answer is printed
  // (it is a fault of its own, to be understood, though not a leak), and was checked for leaks
  // above like every other.
  if (!again_k.empty()) {
    std::vector<std::pair<std::string, Json>> retry;
    for (std::size_t k : again_k) retry.push_back(calls[k]);
    std::vector<Json> second = serve.CallMany(retry);
    for (std::size_t j = 0; j < again_k.size(); ++j) {
      const std::size_t k = again_k[j];
      const Channel c = sent[k].channel;
      const std::string& id = shapes[sent[k].shape].id;
      SawResult(c, second[j]);
      std::cerr << "leak_test: " << kChannelNames[c] << " " << id << " " << Fault(c, results[k])
                << " in the batch: " << Diagnosis(results[k]) << "\n";
      if (const std::string why = Fault(c, second[j]); !why.empty())
        Broken(c, id + ": " + why + " (also alone)", second[j]);
      else
        std::cerr << "leak_test:   ... and did what the matrix needs when sent alone\n";
    }
  }

  // (ffind, fls) The names, listed.
  std::vector<Json> listed = serve.CallMany({{"find_files", {{"pattern", "."}}},
                                             {"list_searchable_files", Json::object()},
                                             {"run_shell", sh("ls", {"-1", "names"})}});
  for (std::size_t k = 0; k < 2; ++k) {
    SawResult(kNameFind, listed[k]);
    if (IsError(listed[k]) || Sc(listed[k]).value("truncated", true))
      Broken(kNameFind, "listing failed or cut", listed[k]);
  }
  SawResult(kNameLs, listed[2]);
  if (IsError(listed[2])) Broken(kNameLs, "ls failed", listed[2]);

  // The ordinary strings, through the channels that return text as it is.
  std::map<std::string, std::set<std::string>> altered;  // string -> channels it did not pass
  {
    std::vector<std::pair<std::string, Json>> ocalls = {
        {"read_file_range", {{"path", "ordinary.txt"}, {"start_line", 1}}},
        {"run_shell", sh("cat", {"ordinary.txt"})},
        {"search_text", {{"pattern", ".+"}, {"glob", "ordinary.txt"}}},
        {"read_url", {{"url", "http://" + host + "/ordinary"}}}};
    for (const Ordinary& o : ordinary)
      ocalls.push_back({"run_shell", sh("printf", {"%s\\n", o.text})});
    if (peers_ok_) ocalls.push_back({"mcp__fs__read_text_file", {{"path", ws_ + "/ordinary.txt"}}});
    std::vector<Json> got = serve.CallMany(ocalls);
    const Json lines = Sc(got[0]).value("lines", Json::array());
    std::string search;
    for (const Json& m : Sc(got[2]).value("matches", Json::array()))
      search += Str(m, "text") + "\n";
    const std::string cat = Str(Sc(got[1]), "stdout");
    const std::string url = Str(Sc(got[3]), "text");
    std::string fs;
    if (peers_ok_) {
      for (const Json& c : got.back().value("content", Json::array())) fs += Str(c, "text");
    }
    for (std::size_t k = 0; k < ordinary.size(); ++k) {
      const std::string& t = ordinary[k].text;
      const std::string line = t + "\n";
      if (k >= lines.size() || lines[k] != t) altered[t].insert("read");
      if (cat.find(line) == std::string::npos) altered[t].insert("cat");
      if (search.find(line) == std::string::npos) altered[t].insert("search");
      if (url.find(line) == std::string::npos) altered[t].insert("url");
      if (Str(Sc(got[4 + k]), "stdout") != line) altered[t].insert("argv");
      if (peers_ok_ && fs.find(line) == std::string::npos) altered[t].insert("mcpfs");
    }
  }

  // (cstderr) A call to each noisy server: refused, with the tail of its stderr.
  {
    calls.clear();
    for (std::size_t k = 0; k < noisy.size(); ++k)
      calls.push_back({"mcp__noisy" + std::to_string(k) + "__any", Json::object()});
    std::vector<Json> told = serve.CallMany(calls);
    for (std::size_t k = 0; k < noisy.size(); ++k) {
      SawResult(kConfiguredStderr, told[k]);
      if (Visible(told[k]).find("configured-stderr-" + std::to_string(k)) == std::string::npos)
        Broken(kConfiguredStderr, "round " + std::to_string(k) + ": its stderr is not shown",
               told[k]);
    }
  }

  // (procout) The jobs' output once they ended.
  for (auto until = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < until;) {
    calls.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (!job[i].empty()) calls.push_back({"process_output", {{"id", job[i]}}});
    std::vector<Json> polled = serve.CallMany(calls);
    bool running = false;
    for (const Json& r : polled) running |= Str(Sc(r), "state") == "running";
    if (!running || std::chrono::steady_clock::now() + 1s >= until) {
      for (const Json& r : polled) SawResult(kProcessOutput, r);
      break;
    }
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_EQ(serve.Finish(), 0) << ReadFile(dir_ / "serve.err");
  Saw(kLog, ReadFile(dir_ / "serve.jsonl"));
  Saw(kServeStderr, ReadFile(dir_ / "serve.err"));

  // (wecho, wstderr) server-everything wrapped, in rounds whose stderr fits the tail cordon
  // shows (8 KiB): its launcher prints a marker and the round's texts on stderr first.
  if (peers_ok_) {
    const std::vector<std::vector<std::size_t>> rounds = Rounds(shapes, 5000);
    for (std::size_t k = 0; k < rounds.size(); ++k) {
      const std::string marker = "stderr-round-" + std::to_string(k);
      const std::string err_file = dir_ / ("stderr/round" + std::to_string(k) + ".txt");
      WriteFile(err_file, RoundText(shapes, rounds[k], marker));
      const std::string log = dir_ / ("wrap" + std::to_string(k) + ".jsonl");
      const std::string err = dir_ / ("wrap" + std::to_string(k) + ".err");
      Peer wrap({testing::CordonBin(), "wrap", "--workspace", ws_, "--audit-log", log, "--read",
                 peers_, "--read", dir_ / "stderr", "--", "/bin/sh", "-c",
                 "cat \"$0\" >&2; exec \"$1\" \"$2\" stdio", err_file, node_,
                 mcp + "server-everything/dist/index.js"},
                env_, err);
      Json winit = wrap.Initialize();
      if (!winit.contains("serverInfo")) Broken(kWrapEcho, "wrap did not initialize", winit);
      std::vector<std::pair<std::string, Json>> echoes;
      for (std::size_t i : rounds[k]) echoes.push_back({"echo", {{"message", shapes[i].text}}});
      std::vector<Json> echoed = wrap.CallMany(echoes, 8);
      for (std::size_t e = 0; e < echoed.size(); ++e) {
        SawResult(kWrapEcho, echoed[e]);
        if (Visible(echoed[e]).find("Echo: ") == std::string::npos)
          Broken(kWrapEcho, shapes[rounds[k][e]].id + ": no echo", echoed[e]);
      }
      wrap.Finish();
      const std::string err_seen = ReadFile(err);
      Saw(kWrapStderr, err_seen);
      if (err_seen.find(marker) == std::string::npos)
        broken_.push_back(
            "wstderr: round " + std::to_string(k) +
            ": the server's stderr is not in cordon wrap's: " + err_seen.substr(0, 300));
      Saw(kLog, ReadFile(log));
    }
  }

  // --- The matrix.
  std::vector<std::array<char, kChannels>> cell(n);
  std::array<int, kChannels> per_channel{};
  int leaks = 0, limit_leaks = 0, shapes_to_log = 0, shapes_to_agent = 0;
  // Each log as one text (raw, then its strings), and which records hold which shapes' secrets
  // (record type / tool, server or process kind), so the matrix's log column can be traced.
  std::vector<std::string> logs;
  std::map<std::string, std::set<std::string>> in_records;
  for (const std::string& t : seen_[kLog]) {
    std::string all = t;
    std::istringstream in(t);
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      std::string record = line + "\n";
      Strings(j, record);
      all += record;
      const std::string where = Str(j, "type") + "/" +
                                (!Str(j, "tool").empty()     ? Str(j, "tool")
                                 : !Str(j, "server").empty() ? Str(j, "server")
                                                             : Str(j, "kind"));
      for (const Shape& s : shapes) {
        for (const std::string& secret : s.secrets) {
          if (record.find(secret) != std::string::npos) in_records[where].insert(s.id);
        }
      }
    }
    logs.push_back(std::move(all));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Shape& s = shapes[i];
    bool to_agent = false;
    for (int c = 0; c < kChannels; ++c) {
      if (!applies[i][c]) {
        cell[i][c] = '-';
        continue;
      }
      const std::vector<std::string>& texts = c == kLog ? logs : seen_[c];
      bool leaked = false;
      for (const std::string& secret : s.secrets) {
        // A job's output polled mid-write must not show the secret minus its last character.
        const std::string needle =
            c == kProcessOutput ? secret.substr(0, secret.size() - 1) : secret;
        for (const std::string& t : texts) leaked |= t.find(needle) != std::string::npos;
      }
      cell[i][c] = leaked ? (s.limit ? 'L' : 'X') : '.';
      if (!leaked) continue;
      if (s.limit) {  // shown, not counted
        ++limit_leaks;
        continue;
      }
      ++per_channel[c];
      ++leaks;
      if (c == kLog)
        ++shapes_to_log;
      else
        to_agent = true;
    }
    shapes_to_agent += to_agent ? 1 : 0;
  }
  std::ostringstream m;
  m << "leak matrix: X = a secret of the shape reached it, L = the same for a documented limit, "
       ". = hidden, - = not sent that way\n";
  std::string letters;
  for (int c = 0; c < kChannels; ++c) {
    letters += static_cast<char>('a' + c);
    m << char('a' + c) << "=" << kChannelNames[c] << (c + 1 < kChannels ? " " : "\n");
  }
  m << std::left << std::setw(20) << "shape" << letters << "\n";
  for (std::size_t i = 0; i < n; ++i) {
    m << std::left << std::setw(20) << shapes[i].id << std::string(cell[i].begin(), cell[i].end())
      << "\n";
  }
  m << "leaks per channel (limits not counted):";
  for (int c = 0; c < kChannels; ++c) m << " " << kChannelNames[c] << "=" << per_channel[c];
  m << "\n"
    << leaks << " leaks (+" << limit_leaks << " of documented limits) in " << n << " shapes; "
    << shapes_to_log << " shapes reached the log, " << shapes_to_agent
    << " reached an agent's result in at least one channel (limits not counted)\n";
  if (!in_records.empty()) {
    m << "log records holding a secret (record type/tool, server or kind: shapes):";
    for (const auto& [where, ids] : in_records) m << " " << where << ": " << ids.size() << ";";
    m << "\n";
  }
  std::ostringstream fp;
  for (const Ordinary& o : ordinary) {
    auto it = altered.find(o.text);
    if (it == altered.end()) continue;
    fp << (o.may_hide.empty() ? "  ALTERED " : "  altered (may_hide) ") << o.text << " in";
    for (const std::string& c : it->second) fp << " " << c;
    fp << "\n";
  }
  std::cout << m.str() << fp.str();
  // CORDON_LEAK_TEST_KEEP=DIR keeps the evidence (the workspace, every log and stderr) there.
  if (const char* keep = std::getenv("CORDON_LEAK_TEST_KEEP"); keep != nullptr && *keep != '\0') {
    std::error_code ec;
    std::filesystem::copy(dir_.path(), keep,
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing,
                          ec);
    std::cout << "evidence kept in " << keep << (ec ? ": " + ec.message() : "") << "\n";
  }
  EXPECT_EQ(leaks, 0) << m.str();
  for (const Ordinary& o : ordinary) {
    if (o.may_hide.empty()) {
      EXPECT_EQ(altered.count(o.text), 0u)
          << "an ordinary string did not reach the agent as is (" << o.why << "):\n"
          << fp.str();
    }
  }
  // A channel that did not run is not a channel that kept the secret.
  std::ostringstream b;
  for (const std::string& x : broken_) b << "  " << x << "\n";
  EXPECT_TRUE(broken_.empty()) << broken_.size() << " calls did not do what the matrix needs:\n"
                               << b.str();
}

// Learning takes only lines that look like a secret's: a .env the agent writes with prose or a
// rule of dashes as "values" must not black out a traceback, or the command the auditor reads
// (found by the adversarial pass of issue 32's learning).
TEST_F(LeakTest, WhatTheAgentWritesCannotBlackOutOrdinaryText) {
  Peer serve(
      {testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log", dir_ / "serve.jsonl"},
      env_, dir_ / "serve.err");
  ASSERT_TRUE(serve.Initialize().contains("serverInfo")) << ReadFile(dir_ / "serve.err");
  const Json made =
      serve.Call("create_file", {{"path", "app.env"},
                                 {"content",
                                  "API_TOKEN=Traceback (most\nPASSWORD=--------------\n"
                                  "SECRET_KEY=nc 127.0.0.1 4444\n"}});
  ASSERT_FALSE(IsError(made)) << Diagnosis(made);
  const std::string text =
      "Traceback (most recent call last):\n--------------\nnc 127.0.0.1 4444\n";
  const Json shown = serve.Call("run_shell", {{"program", "printf"}, {"args", {"%s", text}}});
  EXPECT_EQ(Str(Sc(shown), "stdout"), text) << Diagnosis(shown);
  EXPECT_EQ(serve.Finish(), 0);
  EXPECT_EQ(ReadFile(dir_ / "serve.jsonl").find("REDACTED:secret_file"), std::string::npos);
}

// The redaction corpus (tests/redact_corpus.h: 300+ shapes in every context syntax, encoding and
// shipped vendor format) through every channel that carries a whole file's text. The agent
// writes the files after the session started, so that the rules alone (not the secret-file
// scan, which knows the files planted before) must find each shape. Files of at most 20,000
// bytes, each ending in a marker line that every channel must show (a channel that cut the text
// kept nothing back for the right reason). Root here; an ordinary user in
// scripts/test-unprivileged.sh (the label `escape`).
TEST_F(LeakTest, NoShapeOfTheRedactionCorpusReachesAnyChannel) {
  const std::vector<corpus::Secret> secrets = corpus::SecretCorpus();
  ASSERT_GE(secrets.size(), 300u);
  std::vector<std::string> files;            // the corpus, cut into files
  std::vector<std::vector<std::size_t>> in;  // which secrets each file holds
  for (std::size_t i = 0; i < secrets.size(); ++i) {
    const std::string entry = secrets[i].text + "\n\n";
    if (files.empty() || files.back().size() + entry.size() > 20000) {
      files.emplace_back();
      in.emplace_back();
    }
    files.back() += entry;
    in.back().push_back(i);
  }
  std::map<std::string, std::string> bodies;
  for (std::size_t k = 0; k < files.size(); ++k) {
    files[k] += "corpus-end-" + std::to_string(k) + "\n";
    bodies["/corpus" + std::to_string(k)] = files[k];
  }
  TextServer http(bodies);
  const std::string host = ReadUrlPolicy(http.port());
  if (peers_ok_) {
    const std::string mcp = peers_ + "/node_modules/@modelcontextprotocol/";
    WriteFile(dir_ / "home/.cordon/mcp.toml",
              "[servers.fs]\ncommand = \"" + node_ + "\"\nargs = [\"" + mcp +
                  "server-filesystem/dist/index.js\", \"" + ws_ +
                  "\"]\ntimeout_secs = 60\n[servers.fs.sandbox]\nread = [\"" + peers_ + "\"]\n");
  } else {
    if (testing::InCi())
      ADD_FAILURE() << "LEAK CHANNELS CANNOT RUN under CI=true: node or the MCP peers in " << peers_
                    << " are missing";
    std::cout << "SKIPPED LEAK CHANNEL: mcpfs (node or the MCP peers are missing)\n";
  }
  Peer serve({testing::CordonBin(), "serve", "--workspace", ws_, "--audit-log",
              dir_ / "serve.jsonl", "--policy", dir_ / "net.toml"},
             env_, dir_ / "serve.err");
  Json init = serve.Initialize();
  ASSERT_TRUE(init.contains("serverInfo")) << init.dump() << ReadFile(dir_ / "serve.err");

  auto sh = [](const std::string& program, std::vector<std::string> args) {
    return Json{{"program", program}, {"args", args}};
  };
  // channel name -> what it showed, per file
  std::map<std::string, std::vector<std::string>> shown;
  std::vector<std::string> broken;
  for (std::size_t k = 0; k < files.size(); ++k) {
    const std::string name = "corpus" + std::to_string(k) + ".txt";
    const Json made = serve.Call("create_file", {{"path", name}, {"content", files[k]}});
    ASSERT_FALSE(IsError(made)) << Diagnosis(made);
    std::vector<std::string> texts;
    for (std::size_t i : in[k]) texts.push_back(secrets[i].text);
    texts.push_back("corpus-end-" + std::to_string(k));
    std::vector<std::string> printf_args = {"%s\\n"};
    printf_args.insert(printf_args.end(), texts.begin(), texts.end());
    std::vector<std::pair<std::string, std::pair<std::string, Json>>> calls = {
        {"read", {"read_file_range", {{"path", name}, {"start_line", 1}}}},
        {"cat", {"run_shell", sh("cat", {name})}},
        {"grepv", {"run_shell", sh("grep", {"-v", "PRIVATE", name})}},
        {"catn", {"run_shell", sh("cat", {"-n", name})}},
        {"grepn", {"run_shell", sh("grep", {"-n", "", name})}},
        {"diff", {"run_shell", sh("diff", {"-u", "/dev/null", name})}},
        {"search", {"search_text", {{"pattern", ".+"}, {"glob", name}, {"include_hidden", true}}}},
        {"argv", {"run_shell", sh("printf", printf_args)}},
        {"url", {"read_url", {{"url", "http://" + host + "/corpus" + std::to_string(k)}}}},
        {"job", {"run_shell", {{"program", "cat"}, {"args", {name}}, {"background", true}}}}};
    if (peers_ok_)
      calls.push_back({"mcpfs", {"mcp__fs__read_text_file", {{"path", ws_ + "/" + name}}}});
    std::vector<std::pair<std::string, Json>> sent;
    for (const auto& c : calls) sent.push_back(c.second);
    const std::vector<Json> got = serve.CallMany(sent);
    for (std::size_t c = 0; c < calls.size(); ++c) {
      const std::string& channel = calls[c].first;
      if (channel == "job") {
        // The job's output once it ended.
        const std::string id = Sc(got[c]).value("id", "");
        Json out;
        for (int tries = 0; tries < 100 && !id.empty(); ++tries) {
          out = serve.Call("process_output", {{"id", id}});
          if (Str(Sc(out), "state") != "running") break;
          std::this_thread::sleep_for(100ms);
        }
        shown["procout"].push_back(Visible(out));
        if (Visible(out).find(texts.back()) == std::string::npos)
          broken.push_back("procout: file " + std::to_string(k) + ": " + Diagnosis(out));
        continue;
      }
      shown[channel].push_back(Visible(got[c]));
      if (IsError(got[c]) || Visible(got[c]).find(texts.back()) == std::string::npos)
        broken.push_back(channel + ": file " + std::to_string(k) + ": " + Diagnosis(got[c]));
    }
  }
  EXPECT_EQ(serve.Finish(), 0) << ReadFile(dir_ / "serve.err");
  shown["log"].push_back(ReadFile(dir_ / "serve.jsonl"));
  shown["serr"].push_back(ReadFile(dir_ / "serve.err"));

  // Each secret part, in every channel's text.
  std::map<std::string, std::map<std::string, int>> leaks;  // channel -> class -> count
  std::ostringstream first;
  int total = 0;
  for (const auto& [channel, texts] : shown) {
    for (const corpus::Secret& s : secrets) {
      bool leaked = false;
      for (const std::string& t : texts)
        for (const std::string& part : s.parts) leaked = leaked || corpus::Survives(t, part);
      if (!leaked) continue;
      ++leaks[channel][s.cls];
      if (++total <= 20) first << "  [" << channel << ", " << s.cls << "] " << s.text << "\n";
    }
  }
  std::ostringstream m;
  m << "redaction corpus: " << secrets.size() << " shapes in " << files.size() << " files through "
    << shown.size() << " channels: " << total << " leaks";
  for (const auto& [channel, by] : leaks)
    for (const auto& [cls, n] : by) m << "; " << channel << "/" << cls << "=" << n;
  std::cout << m.str() << "\n";
  EXPECT_EQ(total, 0) << m.str() << "\n" << first.str();
  std::ostringstream b;
  for (const std::string& x : broken) b << "  " << x << "\n";
  EXPECT_TRUE(broken.empty()) << broken.size() << " calls did not carry their file whole:\n"
                              << b.str();
}

}  // namespace
}  // namespace cordon
