// Egress end to end (issue 12, docs/adr/0005-egress-proxy.md): real clients (curl, Python's
// urllib, Node's fetch with undici's EnvHttpProxyAgent, git) run confined by the real binary
// (`cordon exec --network proxy`), through the real proxy, to local servers on 127.0.0.1 that
// this test starts. Names look real through `--resolve api.example.test=127.0.0.1`; TLS uses a CA
// made here with openssl and handed in with --env. Every test checks what the client saw and
// the `network` record in the session's audit log.
//
// Nothing leaves 127.0.0.1: the servers bind it, the proxy connects only to addresses a resolve
// entry pins (or, for the rebinding test, "localhost" from /etc/hosts, which it then refuses),
// and the one non-loopback connect (AProcessThatIgnoresTheProxyGetsNothing) happens inside the
// sandbox's own network namespace, which has no route out of itself.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "core/text.h"
#include "runner/host_probe.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using namespace std::chrono_literals;
using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kHost = "api.example.test";

// A local HTTP(S) file server (Python's http.server, threaded) on 127.0.0.1 with an ephemeral
// port. It serves `root` (static files and a bare git repository for dumb HTTP) and appends one
// line per request to `log` ("GET /path Host=..."), so a test can tell that a refused
// connection never reached it.
constexpr const char* kServerScript = R"(import functools, http.server, os, ssl, sys
root, port_file, log = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        with open(log, "a") as f:
            f.write("%s %s Host=%s\n" % (self.command, self.path, self.headers.get("Host")))
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(H, directory=root))
s.daemon_threads = True
if len(sys.argv) > 5:
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(sys.argv[4], sys.argv[5])
    s.socket = c.wrap_socket(s.socket, server_side=True)
open(port_file + ".tmp", "w").write(str(s.server_address[1]))
os.rename(port_file + ".tmp", port_file)
s.serve_forever()
)";

class LocalServer {
 public:
  // `cert`/`key` empty: plain HTTP.
  LocalServer(const std::string& dir, const std::string& root, const std::string& cert = {},
              const std::string& key = {}) {
    std::filesystem::create_directories(dir);
    log_ = dir + "/requests.log";
    WriteFile(log_, "");
    const std::string port_file = dir + "/port";
    std::vector<std::string> argv = {"/usr/bin/python3", "-c", kServerScript, root,
                                     port_file,          log_};
    if (!cert.empty()) argv.insert(argv.end(), {cert, key});
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    if (::posix_spawn(&pid_, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0) pid_ = -1;
    // Generous: a loaded 2-core machine may take seconds to start Python.
    for (int i = 0; i < 600 && pid_ > 0 && !Exists(port_file); ++i) {
      std::this_thread::sleep_for(50ms);
    }
    if (Exists(port_file)) port_ = std::stoi(ReadFile(port_file));
  }
  ~LocalServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  int port() const { return port_; }
  std::string port_text() const { return std::to_string(port_); }
  std::string requests() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// A test CA and a server certificate for api.example.test signed by it (EC keys: fast to make).
// Empty paths when openssl failed.
struct TestPki {
  std::string ca, cert, key, error;
};

TestPki MakePki(const std::string& dir) {
  TestPki p;
  std::filesystem::create_directories(dir);
  auto run = [&](std::vector<std::string> argv) {
    if (!p.error.empty()) return;
    argv.insert(argv.begin(), "/usr/bin/openssl");
    auto r = testing::Run(argv);
    if (r.exit_code != 0) p.error = argv[1] + ": " + r.err;
  };
  const std::string ec = "ec", curve = "ec_paramgen_curve:prime256v1";
  run({"req", "-x509", "-newkey", ec, "-pkeyopt", curve, "-nodes", "-keyout", dir + "/ca.key",
       "-out", dir + "/ca.pem", "-days", "2", "-subj", "/CN=cordon egress test CA", "-addext",
       "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
  run({"req", "-newkey", ec, "-pkeyopt", curve, "-nodes", "-keyout", dir + "/server.key", "-out",
       dir + "/server.csr", "-subj", std::string("/CN=") + kHost});
  WriteFile(dir + "/ext.cnf", std::string("subjectAltName=DNS:") + kHost +
                                  "\nbasicConstraints=critical,CA:FALSE\n"
                                  "keyUsage=critical,digitalSignature\n"
                                  "extendedKeyUsage=serverAuth\n"
                                  "subjectKeyIdentifier=hash\n"
                                  "authorityKeyIdentifier=keyid,issuer\n");
  run({"x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey",
       dir + "/ca.key", "-CAcreateserial", "-out", dir + "/server.pem", "-days", "2", "-extfile",
       dir + "/ext.cnf"});
  if (p.error.empty()) {
    p.ca = dir + "/ca.pem";
    p.cert = dir + "/server.pem";
    p.key = dir + "/server.key";
  }
  return p;
}

class EgressE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) {
      SECURITY_SKIP(
          "(egress) bwrap is not installed, so cordon fails closed; "
          "install bubblewrap to run the egress end-to-end tests");
    }
    if (!testing::UserNamespacesEnabled()) {
      SECURITY_SKIP(
          "(egress) user namespaces are disabled (user.max_user_namespaces=0), so no "
          "sandbox gets its own network namespace");
    }
    if (!Exists("/usr/bin/python3")) {
      GTEST_SKIP() << "SKIPPED EGRESS TEST: /usr/bin/python3 is missing (the local test servers "
                      "and the urllib client are Python)";
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    std::filesystem::create_directories(dir_ / "home");
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state"),
            "HOME=" + (dir_ / "home")};
    WriteFile(dir_ / "srv/hello.txt", kHello);
  }

  // `cordon exec --network proxy OPTS -- CMD` in the workspace, logging to dir_/audit.jsonl.
  testing::RunResult Exec(const std::vector<std::string>& cmd,
                          const std::vector<std::string>& opts = {}, const std::string& log = {}) {
    std::vector<std::string> argv = {
        testing::CordonBin(),      "exec",      "--workspace", ws_,         "--audit-log",
        log.empty() ? Log() : log, "--network", "proxy",       "--timeout", "120"};
    argv.insert(argv.end(), opts.begin(), opts.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return testing::Run(argv, env_);
  }
  std::string Log() const { return dir_ / "audit.jsonl"; }

  // The flags that map api.example.test to 127.0.0.1 and allow it on `port` only.
  static std::vector<std::string> AllowApi(int port) {
    return {"--resolve", std::string(kHost) + "=127.0.0.1", "--allow-domain",
            std::string(kHost) + ":" + std::to_string(port)};
  }
  static std::string Url(const std::string& scheme, int port, const std::string& path) {
    return scheme + "://" + kHost + ":" + std::to_string(port) + path;
  }

  // Every record of `type` in the audit log.
  static std::vector<Json> Records(const std::string& log, const std::string& type = "network") {
    std::vector<Json> out;
    std::istringstream in(ReadFile(log));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == type) out.push_back(std::move(j));
    }
    return out;
  }
  std::vector<Json> NetworkRecords() const { return Records(Log()); }

  // The one network record; a failure names what the log held.
  static Json Only(const std::vector<Json>& recs) {
    EXPECT_EQ(recs.size(), 1u) << Dump(recs);
    return recs.empty() ? Json::object() : recs.front();
  }
  static std::string Dump(const std::vector<Json>& recs) {
    std::string s;
    for (const auto& r : recs) s += r.dump() + "\n";
    return s.empty() ? "(no network records)" : s;
  }

  // An allowed connection's record: who, where, which rule, how many bytes.
  void ExpectAllowed(const Json& r, const std::string& protocol, int port, std::uint64_t min_down) {
    EXPECT_EQ(r.value("identity", ""), "tool exec") << r.dump();
    EXPECT_EQ(r.value("protocol", ""), protocol) << r.dump();
    EXPECT_EQ(r.value("host", ""), kHost) << r.dump();
    EXPECT_EQ(r.value("port", 0), port) << r.dump();
    EXPECT_EQ(r.value("address", ""), "127.0.0.1") << r.dump();
    EXPECT_EQ(r.value("decision", ""), "allowed") << r.dump();
    EXPECT_EQ(r.value("rule", ""), std::string(kHost) + ":" + std::to_string(port)) << r.dump();
    EXPECT_EQ(r.value("rule_source", ""), "--allow-domain") << r.dump();
    // A tunnel's end may be recorded as an error when the server resets it after its last
    // bytes (Python's ssl server closing with the client's close_notify unread: seen once in
    // ~60 unprivileged runs); the bytes that came down are what the client got, so they are
    // checked instead. A plain request never ends that way.
    if (protocol != "connect") {
      EXPECT_FALSE(r.contains("error")) << r.dump();
    }
    EXPECT_GE(r.value("bytes_down", std::uint64_t{0}), min_down) << r.dump();
    // Plain HTTP counts the body after the request head (none for a GET); a tunnel counts
    // everything, the TLS handshake included.
    if (protocol == "connect") {
      EXPECT_GT(r.value("bytes_up", std::uint64_t{0}), 0u) << r.dump();
    }
  }
  // A refused connection's record: denied, with the reason the client was told, nothing sent.
  static void ExpectDenied(const Json& r, const std::string& host, int port,
                           const std::string& reason_part) {
    EXPECT_EQ(r.value("identity", ""), "tool exec") << r.dump();
    EXPECT_EQ(r.value("host", ""), host) << r.dump();
    EXPECT_EQ(r.value("port", 0), port) << r.dump();
    EXPECT_EQ(r.value("decision", ""), "denied") << r.dump();
    EXPECT_NE(r.value("reason", "").find(reason_part), std::string::npos) << r.dump();
    EXPECT_FALSE(r.contains("address")) << "a refused connection connects nowhere: " << r.dump();
    EXPECT_EQ(r.value("bytes_up", std::uint64_t{1}), 0u) << r.dump();
  }

  void NeedPki() {
    if (!Exists("/usr/bin/openssl"))
      GTEST_SKIP() << "SKIPPED EGRESS TLS TEST: the openssl command is missing (Debian: openssl)";
    pki_ = MakePki(dir_ / "pki");
    ASSERT_TRUE(pki_.error.empty()) << "openssl could not make the test CA: " << pki_.error;
    // The sandbox reads the CA from the workspace.
    std::filesystem::copy_file(pki_.ca, ws_ + "/ca.pem");
  }

  // curl inside the sandbox, with the proxy variables cordon set.
  static std::vector<std::string> Curl(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"/usr/bin/curl", "-sS", "--max-time", "60", "-w", "\nHTTP_CODE=%{http_code}\n"});
    return args;
  }

  static constexpr const char* kHello = "hello from the local server\n";
  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
  TestPki pki_;
};

// ------------------------------------------------------------------ allowed names, real clients

TEST_F(EgressE2eTest, CurlOverPlainHttpReachesAnAllowedNameAndIsRecorded) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0) << "could not start the local HTTP server";
  auto r = Exec(Curl({Url("http", srv.port(), "/hello.txt")}), AllowApi(srv.port()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(kHello), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HTTP_CODE=200"), std::string::npos) << r.out;
  // The server saw the request with the name the client used, through the proxy.
  EXPECT_NE(srv.requests().find(std::string("GET /hello.txt Host=") + kHost), std::string::npos)
      << srv.requests();
  const Json rec = Only(NetworkRecords());
  ExpectAllowed(rec, "http", srv.port(), std::string(kHello).size());
  EXPECT_EQ(rec.value("method", ""), "GET") << rec.dump();
  EXPECT_EQ(rec.value("http_status", 0), 200) << rec.dump();
}

TEST_F(EgressE2eTest, CurlOverHttpsWithATestCaPassedInWithEnv) {
  NeedPki();
  LocalServer srv(dir_ / "s", dir_ / "srv", pki_.cert, pki_.key);
  ASSERT_GT(srv.port(), 0) << "could not start the local TLS server";
  auto opts = AllowApi(srv.port());
  opts.insert(opts.end(), {"--env", "CURL_CA_BUNDLE=" + ws_ + "/ca.pem"});
  auto r = Exec(Curl({Url("https", srv.port(), "/hello.txt")}), opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(kHello), std::string::npos) << r.out;
  EXPECT_NE(srv.requests().find("GET /hello.txt"), std::string::npos) << srv.requests();
  // A tunnel: the certificate and the encrypted response came down through it.
  ExpectAllowed(Only(NetworkRecords()), "connect", srv.port(), 500);
  // Without the CA the same tunnel opens, and curl refuses the certificate itself: the proxy
  // does not touch TLS.
  r = Exec(Curl({Url("https", srv.port(), "/hello.txt")}), AllowApi(srv.port()));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << r.err;
}

TEST_F(EgressE2eTest, PythonUrllibOverHttpAndHttps) {
  NeedPki();
  LocalServer plain(dir_ / "s1", dir_ / "srv");
  LocalServer tls(dir_ / "s2", dir_ / "srv", pki_.cert, pki_.key);
  ASSERT_GT(plain.port(), 0);
  ASSERT_GT(tls.port(), 0);
  // urllib reads http_proxy/https_proxy itself (urllib.request.getproxies); the CA comes from
  // SSL_CERT_FILE, which OpenSSL's default verify paths honour.
  const std::string script =
      "import sys, urllib.request\n"
      "for u in sys.argv[1:]:\n"
      "    print(urllib.request.urlopen(u, timeout=60).read().decode(), end='')\n";
  std::vector<std::string> opts = {"--resolve",      std::string(kHost) + "=127.0.0.1",
                                   "--allow-domain", std::string(kHost) + ":" + plain.port_text(),
                                   "--allow-domain", std::string(kHost) + ":" + tls.port_text(),
                                   "--env",          "SSL_CERT_FILE=" + ws_ + "/ca.pem"};
  auto r = Exec({"/usr/bin/python3", "-c", script, Url("http", plain.port(), "/hello.txt"),
                 Url("https", tls.port(), "/hello.txt")},
                opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, std::string(kHello) + kHello);
  auto recs = NetworkRecords();
  ASSERT_EQ(recs.size(), 2u) << Dump(recs);
  ExpectAllowed(recs[0], "http", plain.port(), std::string(kHello).size());
  ExpectAllowed(recs[1], "connect", tls.port(), 500);
}

// The pinned undici (scripts/install-egress-clients.sh), or empty.
std::string UndiciDir() {
  const std::string dir =
      testing::FromEnv("CORDON_EGRESS_CLIENTS_DIR", "/tmp/cordon-egress-clients") +
      "/node_modules/undici";
  return Exists(dir + "/package.json") ? dir : std::string();
}

TEST_F(EgressE2eTest, NodeFetchWithUndicisEnvHttpProxyAgentPasses) {
  if (!Exists("/usr/bin/node")) GTEST_SKIP() << "SKIPPED EGRESS NODE TEST: /usr/bin/node missing";
  const std::string undici = UndiciDir();
  if (undici.empty()) {
    GTEST_SKIP() << "SKIPPED EGRESS NODE TEST: undici is not installed; run "
                    "scripts/install-egress-clients.sh (npm install undici@7.30.2 into "
                    "$CORDON_EGRESS_CLIENTS_DIR, default /tmp/cordon-egress-clients)";
  }
  NeedPki();
  // A copy in the workspace: undici has no dependencies, and the sandbox reads the workspace.
  std::filesystem::create_directories(ws_ + "/node_modules");
  std::filesystem::copy(undici, ws_ + "/node_modules/undici",
                        std::filesystem::copy_options::recursive);
  LocalServer plain(dir_ / "s1", dir_ / "srv");
  LocalServer tls(dir_ / "s2", dir_ / "srv", pki_.cert, pki_.key);
  ASSERT_GT(plain.port(), 0);
  ASSERT_GT(tls.port(), 0);
  WriteFile(ws_ + "/fetch.mjs",
            "import { EnvHttpProxyAgent, fetch } from 'undici';\n"
            "const dispatcher = new EnvHttpProxyAgent();\n"
            "for (const u of process.argv.slice(2)) {\n"
            "  const r = await fetch(u, { dispatcher });\n"
            "  process.stdout.write(r.status + ' ' + await r.text());\n"
            "}\n");
  std::vector<std::string> opts = {"--resolve",      std::string(kHost) + "=127.0.0.1",
                                   "--allow-domain", std::string(kHost) + ":" + plain.port_text(),
                                   "--allow-domain", std::string(kHost) + ":" + tls.port_text(),
                                   "--env",          "NODE_EXTRA_CA_CERTS=" + ws_ + "/ca.pem"};
  auto r = Exec({"/usr/bin/node", ws_ + "/fetch.mjs", Url("http", plain.port(), "/hello.txt"),
                 Url("https", tls.port(), "/hello.txt")},
                opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, std::string("200 ") + kHello + "200 " + kHello);
  auto recs = NetworkRecords();
  ASSERT_GE(recs.size(), 2u) << Dump(recs);
  // undici's ProxyAgent tunnels plain HTTP too (CONNECT for both schemes).
  for (const auto& rec : recs) {
    const int port = rec.value("port", 0);
    EXPECT_TRUE(port == plain.port() || port == tls.port()) << rec.dump();
    ExpectAllowed(rec, rec.value("protocol", ""), port, 1);
  }
  // ... and a name not allowed is the proxy's 403, not a DNS failure inside.
  WriteFile(ws_ + "/denied.mjs",
            "import { EnvHttpProxyAgent, fetch } from 'undici';\n"
            "try { const r = await fetch(process.argv[2], { dispatcher: new EnvHttpProxyAgent() });"
            " console.log('status ' + r.status); }\n"
            "catch (e) { let m = 'failed'; for (let c = e; c; c = c.cause) m += ' / ' + c.message;"
            " console.log(m); }\n");
  r = Exec({"/usr/bin/node", ws_ + "/denied.mjs",
            "https://secret.attacker.example:" + tls.port_text() + "/"},
           opts);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // undici: "Proxy response (403) !== 200 when HTTP Tunneling", under fetch's "fetch failed".
  EXPECT_NE(r.out.find("Proxy response (403)"), std::string::npos) << r.out << r.err;
  recs = NetworkRecords();
  ASSERT_FALSE(recs.empty());
  ExpectDenied(recs.back(), "secret.attacker.example", tls.port(), "allow_domains");
}

// Node 20's built-in fetch ignores HTTP(S)_PROXY (and NODE_USE_ENV_PROXY, which only Node
// >= 22.21 reads): it asks a resolver the sandbox does not have, and gets nothing. Nothing
// reaches the proxy, so the log has no network record; nothing reaches the server.
TEST_F(EgressE2eTest, NodePlainFetchIgnoresTheProxyVariablesAndReachesNothing) {
  if (!Exists("/usr/bin/node")) GTEST_SKIP() << "SKIPPED EGRESS NODE TEST: /usr/bin/node missing";
  auto v = testing::Run({"/usr/bin/node", "-p", "process.versions.node.split('.')[0]"});
  if (std::atoi(v.out.c_str()) >= 22) {
    GTEST_SKIP() << "SKIPPED: node " << v.out
                 << " may honour NODE_USE_ENV_PROXY (>= 22.21); this test is about Node 18/20";
  }
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  WriteFile(ws_ + "/fetch.mjs",
            "for (const u of process.argv.slice(2)) {\n"
            "  try { const r = await fetch(u); console.log('status ' + r.status); }\n"
            "  catch (e) { console.log('failed ' + (e.cause?.code ?? e.message)); }\n"
            "}\n");
  auto r = Exec({"/usr/bin/node", ws_ + "/fetch.mjs", Url("http", srv.port(), "/hello.txt"),
                 "http://127.0.0.1:" + srv.port_text() + "/hello.txt"},
                {});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The name: no resolver inside (ENOTFOUND or EAI_AGAIN). The host's loopback address: the
  // sandbox has its own loopback, where nothing listens on that port.
  EXPECT_NE(r.out.find("failed E"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("failed ECONNREFUSED"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("status"), std::string::npos) << r.out;
  EXPECT_EQ(srv.requests(), "");
  EXPECT_TRUE(NetworkRecords().empty()) << Dump(NetworkRecords());
}

// A bare repository served by a plain file server (git's dumb HTTP protocol).
std::string MakeBareRepo(const TempDir& dir, const std::string& root) {
  const std::vector<std::string> env = {
      "HOME=" + (dir / "home"), "GIT_CONFIG_NOSYSTEM=1",
      "GIT_AUTHOR_NAME=t",      "GIT_AUTHOR_EMAIL=t@example.test",
      "GIT_COMMITTER_NAME=t",   "GIT_COMMITTER_EMAIL=t@example.test"};
  const std::string src = dir / "src";
  WriteFile(src + "/README", "cloned through cordon's proxy\n");
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"init", "-q", "-b", "main", src},
                                             {"-C", src, "add", "README"},
                                             {"-C", src, "commit", "-q", "-m", "first"},
                                             {"clone", "-q", "--bare", src, root + "/repo.git"},
                                             {"-C", root + "/repo.git", "update-server-info"}}) {
    std::vector<std::string> argv = {"/usr/bin/git"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = testing::Run(argv, env);
    if (r.exit_code != 0) return "git " + args[0] + ": " + r.err;
  }
  return {};
}

TEST_F(EgressE2eTest, GitCloneOverDumbHttpAndHttps) {
  if (!Exists("/usr/bin/git")) GTEST_SKIP() << "SKIPPED EGRESS GIT TEST: /usr/bin/git missing";
  NeedPki();
  ASSERT_EQ(MakeBareRepo(dir_, dir_ / "srv"), "");
  LocalServer plain(dir_ / "s1", dir_ / "srv");
  LocalServer tls(dir_ / "s2", dir_ / "srv", pki_.cert, pki_.key);
  ASSERT_GT(plain.port(), 0);
  ASSERT_GT(tls.port(), 0);
  auto r = Exec({"/usr/bin/git", "clone", "-q", Url("http", plain.port(), "/repo.git"), "plain"},
                AllowApi(plain.port()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/plain/README"), "cloned through cordon's proxy\n");
  // Dumb HTTP is one plain request per object or ref file: each one decided and recorded.
  auto recs = NetworkRecords();
  ASSERT_GE(recs.size(), 3u) << Dump(recs);
  for (const auto& rec : recs) ExpectAllowed(rec, "http", plain.port(), 1);
  EXPECT_NE(plain.requests().find("GET /repo.git/info/refs"), std::string::npos)
      << plain.requests();

  auto opts = AllowApi(tls.port());
  opts.insert(opts.end(), {"--env", "GIT_SSL_CAINFO=" + ws_ + "/ca.pem"});
  const std::size_t before = recs.size();
  r = Exec({"/usr/bin/git", "clone", "-q", Url("https", tls.port(), "/repo.git"), "tls"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(ws_ + "/tls/README"), "cloned through cordon's proxy\n");
  recs = NetworkRecords();
  ASSERT_GT(recs.size(), before) << Dump(recs);
  for (std::size_t i = before; i < recs.size(); ++i) {
    ExpectAllowed(recs[i], "connect", tls.port(), 500);
  }
  EXPECT_NE(tls.requests().find("GET /repo.git/info/refs"), std::string::npos) << tls.requests();
}

// ------------------------------------------------------------------ refusals

// curl told the proxy's 403 on a CONNECT: curl exits 56 ("CONNECT tunnel failed, response 403")
// and writes the proxy's reason line into the body it shows with -w (not for CONNECT); a plain
// request shows the 403 and the reason as the body.
TEST_F(EgressE2eTest, ANameNotAllowedIsRefusedWith403AndRecorded) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  // Mapped, so that only the allowlist stands between the client and the server.
  auto opts = AllowApi(srv.port());
  opts.insert(opts.end(), {"--resolve", "secret.attacker.example=127.0.0.1"});
  auto r = Exec(Curl({"http://secret.attacker.example:" + srv.port_text() + "/hello.txt"}), opts);
  EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("allow_domains"), std::string::npos) << "the reason line: " << r.out;
  EXPECT_EQ(srv.requests(), "");
  const Json rec = Only(NetworkRecords());
  ExpectDenied(rec, "secret.attacker.example", srv.port(), "allow_domains");
  EXPECT_EQ(rec.value("http_status", 0), 403) << rec.dump();
  // The same over CONNECT (https): the tunnel is refused before anything is resolved.
  r = Exec(Curl({"https://secret.attacker.example:" + srv.port_text() + "/"}), opts);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.err;
  auto recs = NetworkRecords();
  ASSERT_EQ(recs.size(), 2u) << Dump(recs);
  ExpectDenied(recs[1], "secret.attacker.example", srv.port(), "allow_domains");
  EXPECT_EQ(recs[1].value("protocol", ""), "connect");
  // The auditor's timeline names who asked for what, and what was decided.
  auto shown = testing::Run({testing::CordonBin(), "audit", "show", Log()}, env_);
  EXPECT_NE(shown.out.find("identity=\"tool exec\"  to=\"secret.attacker.example:" +
                           std::to_string(srv.port()) + "\"  decision=\"denied\""),
            std::string::npos)
      << shown.out << shown.err;
}

TEST_F(EgressE2eTest, AnIpLiteralIsRefusedEvenWhenTheNameForItIsAllowed) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  // NO_PROXY lists 127.0.0.1, so curl would go direct (to the sandbox's own loopback); -x and
  // --noproxy '' send it to the proxy, as a client that ignores NO_PROXY would.
  for (const std::string host : {"127.0.0.1", "2130706433", "[::ffff:127.0.0.1]"}) {
    auto r = Exec(Curl({"-x", "http://127.0.0.1:3128", "--noproxy", "",
                        "http://" + host + ":" + srv.port_text() + "/hello.txt"}),
                  AllowApi(srv.port()));
    EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << host << ": " << r.out << r.err;
  }
  EXPECT_EQ(srv.requests(), "");
  auto recs = NetworkRecords();
  ASSERT_EQ(recs.size(), 3u) << Dump(recs);
  for (const auto& rec : recs) {
    // Every spelling is the one address, and no rule names it.
    ExpectDenied(rec, "127.0.0.1", srv.port(), "not named by any allow_domains rule");
  }
}

// A name the policy allows that resolves (here through /etc/hosts, in cordon) to a loopback
// address: the DNS-rebinding route into the host's own services. Refused after resolution.
TEST_F(EgressE2eTest, ARebindingNameResolvingToLoopbackIsRefused) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  auto r = Exec(Curl({"-x", "http://127.0.0.1:3128", "--noproxy", "",
                      "http://localhost:" + srv.port_text() + "/hello.txt"}),
                {"--allow-domain", "localhost:" + srv.port_text()});
  EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("127.0.0.1 (loopback)"), std::string::npos) << r.out;
  EXPECT_EQ(srv.requests(), "");
  const Json rec = Only(NetworkRecords());
  ExpectDenied(rec, "localhost", srv.port(), "a name may not lead into this host");
}

TEST_F(EgressE2eTest, APortTheRuleDoesNotAllowIsRefused) {
  LocalServer allowed(dir_ / "s1", dir_ / "srv");
  LocalServer other(dir_ / "s2", dir_ / "srv");
  ASSERT_GT(allowed.port(), 0);
  ASSERT_GT(other.port(), 0);
  auto r = Exec(Curl({Url("http", other.port(), "/hello.txt")}), AllowApi(allowed.port()));
  EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(other.requests(), "");
  const Json rec = Only(NetworkRecords());
  ExpectDenied(rec, kHost, other.port(), "port " + other.port_text());
}

TEST_F(EgressE2eTest, ADenyRuleBeatsAnAllowRule) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  auto opts = AllowApi(srv.port());
  opts.insert(opts.end(),
              {"--allow-domain", "*.example.test:" + srv.port_text(), "--resolve",
               "secret.example.test=127.0.0.1", "--deny-domain", "secret.example.test"});
  auto r = Exec(Curl({"http://secret.example.test:" + srv.port_text() + "/hello.txt"}), opts);
  EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(srv.requests(), "");
  const Json rec = Only(NetworkRecords());
  ExpectDenied(rec, "secret.example.test", srv.port(), "deny_domains");
  EXPECT_EQ(rec.value("rule", ""), "secret.example.test") << rec.dump();
  EXPECT_EQ(rec.value("rule_source", ""), "--deny-domain") << rec.dump();
  // The wildcard still lets the sibling through: the deny is the only thing that refused.
  r = Exec(Curl({Url("http", srv.port(), "/hello.txt")}), opts);
  EXPECT_NE(r.out.find("HTTP_CODE=200"), std::string::npos) << r.out << r.err;
}

// With the proxy and no allow rule at all, every name is refused (and recorded), so `--network
// proxy` alone opens nothing.
TEST_F(EgressE2eTest, AnEmptyAllowlistRefusesEveryName) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  auto r = Exec(Curl({"http://api.example.test:" + srv.port_text() + "/hello.txt"}));
  EXPECT_NE(r.out.find("HTTP_CODE=403"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("allowlist is empty"), std::string::npos) << r.out;
  EXPECT_EQ(srv.requests(), "");
  const Json rec = Only(NetworkRecords());
  ExpectDenied(rec, kHost, srv.port(), "allowlist is empty");
  EXPECT_EQ(rec.value("protocol", ""), "http") << rec.dump();
  EXPECT_EQ(rec.value("method", ""), "GET") << rec.dump();
}

// ------------------------------------------------------------------ no way around the proxy

// A process that ignores the proxy variables and opens sockets itself: the host's 127.0.0.1 is
// not the sandbox's (connection refused on the test server's port), no other address is
// routed (ENETUNREACH, in the sandbox's own namespace: nothing leaves it), and no name resolves
// (no resolver inside). The proxy hears of none of it: no network record.
TEST_F(EgressE2eTest, AProcessThatIgnoresTheProxyGetsNothing) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  const std::string script = R"(import errno, socket, sys
port = int(sys.argv[1])
def tcp(addr, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect(addr)
        return "CONNECTED"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"\x00" * 12, addr)
        return "SENT"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def name(n):
    try:
        return "RESOLVED " + socket.getaddrinfo(n, 80)[0][4][0]
    except socket.gaierror as e:
        return "gaierror"
print("host-loopback", tcp(("127.0.0.1", port)))
print("nameserver-tcp", tcp(("10.255.255.53", 53)))
print("nameserver-udp", udp(("10.255.255.53", 53)))
print("public", tcp(("203.0.113.80", 443)))
print("ipv6", tcp(("2001:db8::1", 443, 0, 0), socket.AF_INET6))
print("dns-api", name("api.example.test"))
print("dns-public", name("registry.npmjs.org"))
)";
  // api.example.test is allowed and mapped: only through the proxy, which this process skips.
  auto r = Exec({"/usr/bin/python3", "-c", script, srv.port_text()}, AllowApi(srv.port()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("host-loopback ECONNREFUSED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nameserver-tcp ENETUNREACH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nameserver-udp ENETUNREACH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("public ENETUNREACH"), std::string::npos) << r.out;
  // An IPv6 socket may not even be creatable; either way it gets nowhere.
  EXPECT_EQ(r.out.find("CONNECTED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SENT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dns-api gaierror"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dns-public gaierror"), std::string::npos) << r.out;
  EXPECT_EQ(srv.requests(), "");
  EXPECT_TRUE(NetworkRecords().empty()) << Dump(NetworkRecords());
}

// ------------------------------------------------------------------ one sandbox, one allowlist

// Two sandboxes at once with different allowlists: A may reach a.example.test, B may reach
// b.example.test (both mapped to 127.0.0.1). A asks for B's name and is refused, under A's own
// log; B's log has only B's own connection. Two `cordon exec` processes, each with its own
// session and proxy.
TEST_F(EgressE2eTest, OneSandboxsAllowlistDoesNotServeAnother) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  const std::string port = srv.port_text();
  auto flags = [&](const std::string& name) {
    return std::vector<std::string>{"--resolve",      "a.example.test=127.0.0.1",
                                    "--resolve",      "b.example.test=127.0.0.1",
                                    "--allow-domain", name + ":" + port};
  };
  // B holds its sandbox open while A runs: it blocks reading a FIFO in a directory it may only
  // read, until the host opens the FIFO for writing after A. (A file the host creates in the
  // workspace would not do: B sees the workspace through its own overlay, which does not show
  // names created on the host after B looked them up.)
  const std::string gate_dir = dir_ / "gate", gate = gate_dir + "/go";
  std::filesystem::create_directories(gate_dir);
  ASSERT_EQ(::mkfifo(gate.c_str(), 0644), 0);
  const std::string b_log = dir_ / "b.jsonl";
  testing::RunResult b;
  std::atomic<bool> b_ended{false};
  std::vector<std::string> b_flags = flags("b.example.test");
  b_flags.insert(b_flags.end(), {"--read", gate_dir});
  std::thread tb([&] {
    b = Exec({"/bin/sh", "-c",
              "curl -sS --max-time 60 -o /dev/null -w 'B %{http_code}\\n' "
              "http://b.example.test:" +
                  port + "/hello.txt; read -r x < " + gate},
             b_flags, b_log);
    b_ended = true;
  });
  // B is going once its request has reached the server.
  for (int i = 0;
       i < 2400 && !b_ended && srv.requests().find("Host=b.example.test") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(b_ended) << "sandbox B ended before A ran: " << b.out << b.err;
  auto a = Exec(Curl({"http://b.example.test:" + port + "/hello.txt"}), flags("a.example.test"));
  EXPECT_FALSE(b_ended) << "sandbox B ended while A ran: " << b.out << b.err;
  // Opening the FIFO for writing succeeds once B has it open for reading; closing it ends B.
  for (int i = 0; i < 1200 && !b_ended; ++i) {
    const int fd = ::open(gate.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  tb.join();
  EXPECT_NE(b.out.find("B 200"), std::string::npos) << b.out << b.err;
  EXPECT_NE(a.out.find("HTTP_CODE=403"), std::string::npos) << a.out << a.err;
  const Json ra = Only(NetworkRecords());
  ExpectDenied(ra, "b.example.test", srv.port(), "allow_domains");
  const Json rb = Only(Records(b_log));
  EXPECT_EQ(rb.value("host", ""), "b.example.test") << rb.dump();
  EXPECT_EQ(rb.value("decision", ""), "allowed") << rb.dump();
  EXPECT_EQ(rb.value("rule", ""), "b.example.test:" + port) << rb.dump();
}

// A real MCP server (Python, stdlib only) with one tool, `fetch {url}`, that uses urllib (so the
// proxy variables) and answers "status N BODY" or "failed WHY".
constexpr const char* kFetchServer = R"(import json, sys, urllib.error, urllib.request
def fetch(u):
    try:
        r = urllib.request.urlopen(u, timeout=60)
        return "status %d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "status %d %s" % (e.code, e.read().decode())
    except Exception as e:
        return "failed %s" % e
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fetch", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "fetch", "description": "Fetches a URL.", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}}}]}
    elif m["method"] == "tools/call":
        r = {"content": [{"type": "text", "text": fetch(m["params"]["arguments"]["url"])}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";

// An MCP client for `cordon serve` (Python): initialize, then each call in order, each answer's
// first text printed on its own line as "ID TEXT"; gives up after 180 s per answer.
constexpr const char* kServeDriver = R"(import json, select, subprocess, sys
calls = json.loads(sys.argv[1])
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m):
    p.stdin.write(json.dumps(m) + "\n"); p.stdin.flush()
def answer(i):
    while True:
        if not select.select([p.stdout], [], [], 180)[0]:
            sys.exit("no answer to %d" % i)
        line = p.stdout.readline()
        if not line:
            sys.exit("cordon serve closed its stdout")
        m = json.loads(line)
        if m.get("id") == i:
            return m
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for n, (tool, args) in enumerate(calls, start=2):
    send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}})
    m = answer(n)
    text = m.get("result", {}).get("content", [{}])[0].get("text", json.dumps(m))
    print(n, text.replace("\n", " "), flush=True)
p.stdin.close()
sys.exit(p.wait())
)";

// Two configured MCP servers in one `cordon serve` session, so on one proxy: `a` may reach
// a.example.test, `b` may reach b.example.test (both mapped to 127.0.0.1 by the user's policy).
// `a` asks for b's name and is refused, recorded under a's identity; `b` gets it. Each sandbox's
// listener carries its own rules: there is no header or credential a server could borrow.
TEST_F(EgressE2eTest, OneConfiguredServersAllowlistDoesNotServeAnother) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  const std::string port = srv.port_text();
  WriteFile(dir_ / "config/cordon/policies.d/50-egress.toml",
            "[network]\nresolve = [\"a.example.test=127.0.0.1\", \"b.example.test=127.0.0.1\"]\n");
  WriteFile(ws_ + "/fetch_server.py", kFetchServer);
  std::string toml;
  for (const std::string name : {"a", "b"}) {
    toml += "[servers." + name + "]\ncommand = \"/usr/bin/python3\"\nargs = [\"" + ws_ +
            "/fetch_server.py\"]\n[servers." + name + ".sandbox]\nnetwork = \"proxy\"\n" +
            "allow_domains = [\"" + name + ".example.test:" + port + "\"]\n";
  }
  WriteFile(dir_ / "home/.cordon/mcp.toml", toml);
  auto url = [&](const std::string& name) {
    return "http://" + name + ".example.test:" + port + "/hello.txt";
  };
  const Json calls = Json::array({Json::array({"mcp__a__fetch", {{"url", url("b")}}}),
                                  Json::array({"mcp__b__fetch", {{"url", url("b")}}}),
                                  Json::array({"mcp__a__fetch", {{"url", url("a")}}})});
  auto r = testing::Run({"/usr/bin/python3", "-c", kServeDriver, calls.dump(), testing::CordonBin(),
                         "serve", "--workspace", ws_, "--audit-log", Log()},
                        env_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 status 403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 status 200 hello from the local server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 status 200 hello from the local server"), std::string::npos) << r.out;
  // The server saw b's request and a's own, never a's request for b's name.
  const std::string seen = srv.requests();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), '\n'), 2) << seen;
  EXPECT_NE(seen.find("Host=b.example.test"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Host=a.example.test"), std::string::npos) << seen;
  auto recs = NetworkRecords();
  ASSERT_EQ(recs.size(), 3u) << Dump(recs);
  EXPECT_EQ(recs[0].value("identity", ""), "server a") << recs[0].dump();
  EXPECT_EQ(recs[0].value("host", ""), "b.example.test") << recs[0].dump();
  EXPECT_EQ(recs[0].value("decision", ""), "denied") << recs[0].dump();
  EXPECT_NE(recs[0].value("reason", "").find("allow_domains"), std::string::npos) << recs[0].dump();
  EXPECT_EQ(recs[1].value("identity", ""), "server b") << recs[1].dump();
  EXPECT_EQ(recs[1].value("host", ""), "b.example.test") << recs[1].dump();
  EXPECT_EQ(recs[1].value("decision", ""), "allowed") << recs[1].dump();
  EXPECT_EQ(recs[1].value("rule", ""), "b.example.test:" + port) << recs[1].dump();
  EXPECT_NE(recs[1].value("rule_source", "").find("servers.b.sandbox"), std::string::npos)
      << recs[1].dump();
  EXPECT_EQ(recs[2].value("identity", ""), "server a") << recs[2].dump();
  EXPECT_EQ(recs[2].value("host", ""), "a.example.test") << recs[2].dump();
  EXPECT_EQ(recs[2].value("decision", ""), "allowed") << recs[2].dump();
  EXPECT_EQ(recs[2].value("address", ""), "127.0.0.1") << recs[2].dump();
}

// `cordon wrap` in front of a server that fetches: the same proxy, rules from wrap's flags, and
// its records under the identity "tool wrap".
TEST_F(EgressE2eTest, AWrappedServerReachesItsAllowedNameOnly) {
  LocalServer srv(dir_ / "s", dir_ / "srv");
  ASSERT_GT(srv.port(), 0);
  WriteFile(ws_ + "/fetch_server.py", kFetchServer);
  const Json calls = Json::array(
      {Json::array({"fetch", {{"url", Url("http", srv.port(), "/hello.txt")}}}),
       Json::array(
           {"fetch",
            {{"url", "http://secret.attacker.example:" + srv.port_text() + "/hello.txt"}}})});
  std::vector<std::string> argv = {"/usr/bin/python3",   "-c",   kServeDriver,  calls.dump(),
                                   testing::CordonBin(), "wrap", "--workspace", ws_,
                                   "--audit-log",        Log()};
  for (const auto& f : AllowApi(srv.port())) argv.push_back(f);
  argv.insert(argv.end(), {"--", "/usr/bin/python3", ws_ + "/fetch_server.py"});
  auto r = testing::Run(argv, env_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 status 200 hello from the local server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 status 403"), std::string::npos) << r.out;
  auto recs = NetworkRecords();
  ASSERT_EQ(recs.size(), 2u) << Dump(recs);
  // The allowed connection's record is written when its relay ends, the refusal's at once: the
  // second call's refusal may come first in the log (seen in CI), so each is found by its host.
  const bool first_denied = recs[0].value("decision", "") == "denied";
  const Json& allowed = recs[first_denied ? 1 : 0];
  const Json& denied = recs[first_denied ? 0 : 1];
  EXPECT_EQ(allowed.value("identity", ""), "tool wrap") << allowed.dump();
  EXPECT_EQ(allowed.value("decision", ""), "allowed") << allowed.dump();
  EXPECT_EQ(allowed.value("host", ""), "api.example.test") << allowed.dump();
  EXPECT_EQ(allowed.value("rule_source", ""), "--allow-domain") << allowed.dump();
  EXPECT_EQ(denied.value("identity", ""), "tool wrap") << denied.dump();
  EXPECT_EQ(denied.value("host", ""), "secret.attacker.example") << denied.dump();
  EXPECT_EQ(denied.value("decision", ""), "denied") << denied.dump();
  EXPECT_EQ(srv.requests().find("secret"), std::string::npos) << srv.requests();
}

// ------------------------------------------------------------------ preset caches (issue 18)

// --allow-preset makes cordon's own cache for the preset writable, never the user's: a command
// inside that edits a package in ~/.npm/_npx (which the user's next `npx` on the host would
// run), ~/.cache/pip or ~/.cargo/registry, named by its host path, reaches nothing.
TEST_F(EgressE2eTest, APresetLeavesTheUsersOwnCachesUntouched) {
  const std::string home = dir_ / "home";
  const std::vector<std::string> planted = {home + "/.npm/_npx/0123abcd/node_modules/pkg/index.js",
                                            home + "/.cache/pip/http-v2/entry",
                                            home + "/.cargo/registry/src/crate/build.rs"};
  for (const auto& f : planted) {
    std::filesystem::create_directories(std::filesystem::path(f).parent_path());
    WriteFile(f, "the user's own\n");
  }
  // Each write is tried and reported; the command itself succeeds either way.
  const std::string script =
      "for f in \"$@\"; do\n"
      "  if (echo evil > \"$f\") 2>/dev/null; then echo \"WROTE $f\"; fi\n"
      "  d=$(dirname \"$f\")\n"
      "  if (echo evil > \"$d/new\") 2>/dev/null; then echo \"CREATED $d/new\"; fi\n"
      "done\n"
      "echo done\n";
  std::vector<std::string> cmd = {"/bin/sh", "-c", script, "sh"};
  cmd.insert(cmd.end(), planted.begin(), planted.end());
  env_.push_back("XDG_CACHE_HOME=");  // the cache under ~/.cache/cordon: next to ~/.cache/pip
  auto r =
      Exec(cmd, {"--allow-preset", "npm", "--allow-preset", "pypi", "--allow-preset", "crates"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("done"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WROTE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("CREATED"), std::string::npos) << r.out;
  for (const auto& f : planted) {
    EXPECT_EQ(ReadFile(f), "the user's own\n") << f;
    const std::string added = std::filesystem::path(f).parent_path().string() + "/new";
    EXPECT_FALSE(Exists(added)) << added;
  }
  // Nor were the user's cache directories made or opened up by the launch.
  EXPECT_EQ(std::filesystem::status(home + "/.cargo/git").type(),
            std::filesystem::file_type::not_found);
}

// Inside, each preset's client is pointed at cordon's cache for it (npm_config_cache,
// PIP_CACHE_DIR and UV_CACHE_DIR, CARGO_HOME), which cordon made 0700 outside the workspace and
// which keeps what one run wrote for the next. An explicit --env still wins.
TEST_F(EgressE2eTest, PresetCachesAreCordonsOwnAndKeptBetweenRuns) {
  const std::string cache = dir_ / "xdg-cache";
  env_.push_back("XDG_CACHE_HOME=" + cache);
  const std::vector<std::string> presets = {"--allow-preset", "npm",   "--allow-preset", "pypi",
                                            "--allow-preset", "crates"};
  const std::string root = cache + "/cordon/presets";
  auto r = Exec({"/bin/sh", "-c",
                 "echo \"npm=$npm_config_cache\"; echo \"pip=$PIP_CACHE_DIR\"; "
                 "echo \"uv=$UV_CACHE_DIR\"; echo \"cargo=$CARGO_HOME\"; "
                 "echo one > \"$npm_config_cache/marker\" && "
                 "mkdir -p \"$PIP_CACHE_DIR\" && echo two > \"$PIP_CACHE_DIR/marker\" && "
                 "echo three > \"$CARGO_HOME/marker\" && echo written"},
                presets);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("npm=" + root + "/npm\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pip=" + root + "/pypi/pip\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uv=" + root + "/pypi/uv\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cargo=" + root + "/crates\n"), std::string::npos) << r.out;
  ASSERT_NE(r.out.find("written"), std::string::npos) << r.out << r.err;
  for (const char* p : {"npm", "pypi", "crates"}) {
    struct stat st {};
    ASSERT_EQ(::stat((root + "/" + p).c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << p;
    EXPECT_EQ(st.st_uid, ::geteuid()) << p;
  }
  EXPECT_EQ(ReadFile(root + "/npm/marker"), "one\n");
  EXPECT_EQ(ReadFile(root + "/pypi/pip/marker"), "two\n");
  EXPECT_EQ(ReadFile(root + "/crates/marker"), "three\n");
  // A second sandbox of the same user finds what the first left.
  r = Exec({"/bin/sh", "-c",
            "cat \"$npm_config_cache/marker\" \"$PIP_CACHE_DIR/marker\" \"$CARGO_HOME/marker\""},
           presets);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "one\ntwo\nthree\n");
  // The caller's explicit --env decides over cordon's value.
  r = Exec({"/bin/sh", "-c", "echo \"npm=$npm_config_cache\""},
           {"--allow-preset", "npm", "--env", "npm_config_cache=" + ws_ + "/npm-cache"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "npm=" + ws_ + "/npm-cache\n");
  // Without a preset, no cache and no variable.
  r = Exec({"/bin/sh", "-c", "echo \"npm=${npm_config_cache-unset}\""},
           {"--allow-domain", "example.test"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "npm=unset\n");
}

}  // namespace
}  // namespace cordon
