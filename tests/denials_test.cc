// Landlock denials in the audit log (issue 10): the kernel's Landlock audit records parsed and
// bounded (table-driven), the restrict-self flag as data, and, against the real binary, kernel
// and bwrap, an `access_denied` record for a write Landlock (not bwrap's read-only mounts)
// refused. Reading the kernel's records needs CAP_AUDIT_READ: those tests skip loudly otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "core/text.h"
#include "runner/host_probe.h"
#include "runner/kernel_audit.h"
#include "runner/landlock.h"
#include "tests/test_util.h"

namespace cordon {
namespace {

using testing::ReadFile;
using testing::TempDir;
using Kind = LandlockAuditEvent::Kind;

// --- The kernel's record text, parsed -------------------------------------------------------

TEST(LandlockAuditParse, Records) {
  struct Case {
    std::uint16_t type;
    std::string text;
    std::optional<LandlockAuditEvent> want;
  };
  auto access = [](std::uint64_t domain, std::string blockers, std::string path,
                   std::string address, std::string object) {
    LandlockAuditEvent e;
    e.kind = Kind::kAccess;
    e.domain = domain;
    e.blockers = std::move(blockers);
    e.path = std::move(path);
    e.address = std::move(address);
    e.object = std::move(object);
    return e;
  };
  LandlockAuditEvent allocated;
  allocated.kind = Kind::kAllocated;
  allocated.domain = 0x1a6fdc66f;
  allocated.pid = 286;
  allocated.exe = "/root/sandboxer";
  LandlockAuditEvent released;
  released.kind = Kind::kDeallocated;
  released.domain = 0x1a6fdc66f;
  released.denials = 3;
  const Case cases[] = {
      {1423,
       "audit(1729738800.221:33): domain=1a6fdc679 blockers=fs.write_file path=\"/dev/tty\" "
       "dev=\"devtmpfs\" ino=9",
       access(0x1a6fdc679, "fs.write_file", "/dev/tty", "", "")},
      // A path with a space comes hex-encoded, unquoted.
      {1423, "domain=a blockers=fs.make_reg,fs.refer path=2F746D702F6120622063 dev=\"vda2\" ino=1",
       access(0xa, "fs.make_reg,fs.refer", "/tmp/a b c", "", "")},
      {1423, "audit(1.2:3): domain=b blockers=net.connect_tcp daddr=127.0.0.1 dest=8080",
       access(0xb, "net.connect_tcp", "", "127.0.0.1:8080", "")},
      {1423, "domain=b blockers=net.bind_tcp src=8080",
       access(0xb, "net.bind_tcp", "", ":8080", "")},
      {1423, "domain=b blockers=net.connect_tcp daddr=::1 dest=22",
       access(0xb, "net.connect_tcp", "", "[::1]:22", "")},
      {1423, "domain=1a6fdc66f blockers=scope.signal opid=1 ocomm=\"systemd\"",
       access(0x1a6fdc66f, "scope.signal", "", "", "opid=1 ocomm=systemd")},
      {1424,
       "audit(1729738800.268:30): domain=1a6fdc66f status=allocated mode=enforcing pid=286 uid=0 "
       "exe=\"/root/sandboxer\" comm=\"sandboxer\"",
       allocated},
      {1424, "domain=1a6fdc66f status=deallocated denials=3\n", released},
      // Not Landlock's, or not well formed: nothing.
      {1300, "domain=1 blockers=fs.read_file path=\"/x\"", std::nullopt},
      {1423, "blockers=fs.read_file path=\"/x\"", std::nullopt},
      {1423, "domain=zz blockers=fs.read_file", std::nullopt},
      {1423, "domain=1 path=\"/x\"", std::nullopt},
      {1424, "domain=1 status=allocated mode=enforcing pid=0 uid=0", std::nullopt},
      {1424, "domain=1 status=deallocated", std::nullopt},
      {1424, "domain=1 status=allocated pid=\"unterminated", std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ParseLandlockAuditRecord(c.type, c.text), c.want) << c.text;
  }
}

TEST(LandlockAuditParse, SummaryKeepsItsBounds) {
  DenialSummary s;
  LandlockAuditEvent e;
  e.blockers = "fs.make_reg";
  for (int i = 0; i < 40; ++i) {
    e.path = "/dir" + std::to_string(i);
    AddDenial(s, e);
    AddDenial(s, e);  // each twice: one entry, count 2
  }
  ASSERT_EQ(s.listed.size(), DenialSummary::kMaxListed);
  EXPECT_EQ(s.listed[0].count, 2u);
  EXPECT_EQ(s.listed[31].path, "/dir31");
  EXPECT_EQ(s.omitted, 2u * (40 - DenialSummary::kMaxListed));
  EXPECT_EQ(s.received, 80u);
  // Merging another summary's entry into a full list counts it as omitted, with its count.
  MergeEntry(s, {"fs.read_file", "/elsewhere", "", "", 5});
  EXPECT_EQ(s.omitted, 2u * 8 + 5);
  MergeEntry(s, {"fs.make_reg", "/dir0", "", "", 3});
  EXPECT_EQ(s.listed[0].count, 5u);
  const Json j = s.ToJson();
  EXPECT_EQ(j["denials"].size(), DenialSummary::kMaxListed);
  EXPECT_EQ(j["denials"][0]["path"], "/dir0");
  EXPECT_FALSE(j["denials"][0].contains("address"));
}

// --- The shim asks the kernel to log what the command is refused after its execve -----------

TEST(LandlockLogFlags, NewExecLoggingFromAbi7) {
  LandlockInput in;
  in.read = {"/usr"};
  EXPECT_EQ(BuildLandlockRules(in, 7).restrict_flags, landlock::kLogNewExecOn);
  EXPECT_EQ(BuildLandlockRules(in, 8).restrict_flags, landlock::kLogNewExecOn);
  // Before ABI 7 the syscall refuses any flag: none is set.
  EXPECT_EQ(BuildLandlockRules(in, 6).restrict_flags, 0u);
  const LandlockSpec spec = BuildLandlockRules(in, 7);
  auto back = LandlockSpecFromJson(LandlockSpecJson(spec));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->restrict_flags, landlock::kLogNewExecOn);
  EXPECT_EQ(LandlockSpecJson(*back), LandlockSpecJson(spec));
  // A spec written before the flag existed still parses, without it.
  Json old = LandlockSpecJson(BuildLandlockRules(in, 6));
  old.erase("restrict_flags");
  auto parsed = LandlockSpecFromJson(old);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->restrict_flags, 0u);
}

// --- The real binary ------------------------------------------------------------------------

// AUDIT_SET for the test's own setup (what an administrator does with `auditctl -e`); cordon
// itself never calls it.
bool SetKernelAudit(int enabled, std::string* error) {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
  if (fd < 0) {
    *error = std::string("socket(NETLINK_AUDIT): ") + std::strerror(errno);
    return false;
  }
  struct {
    nlmsghdr h;
    audit_status s;
  } req{};
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = AUDIT_SET;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.s.mask = AUDIT_STATUS_ENABLED;
  req.s.enabled = static_cast<std::uint32_t>(enabled);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  bool ok = ::sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel),
                     sizeof kernel) == static_cast<ssize_t>(sizeof req);
  alignas(nlmsghdr) char buf[4096];
  ssize_t n = ok ? ::recv(fd, buf, sizeof buf, 0) : -1;
  ::close(fd);
  if (n < static_cast<ssize_t>(NLMSG_HDRLEN + sizeof(nlmsgerr))) {
    *error = std::string("AUDIT_SET: ") + std::strerror(errno);
    return false;
  }
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  if (h->nlmsg_type == NLMSG_ERROR) {
    const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
    if (e->error != 0) {
      *error = std::string("AUDIT_SET: ") + std::strerror(-e->error);
      return false;
    }
  }
  return true;
}

class DenialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("bwrap").empty()) {
      SECURITY_SKIP("bwrap is not installed, so cordon fails closed");
    }
    if (LandlockAbi() < 7) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: Landlock ABI " << LandlockAbi()
                   << " < 7: the kernel cannot log denials after execve "
                      "(LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, Linux 6.15)";
    }
    ws_ = dir_ / "ws";
    std::filesystem::create_directories(ws_);
    env_ = {"XDG_CONFIG_HOME=" + (dir_ / "config"), "XDG_STATE_HOME=" + (dir_ / "state")};
  }
  void TearDown() override {
    if (restore_ >= 0) {
      std::string error;
      EXPECT_TRUE(SetKernelAudit(restore_, &error)) << "could not restore audit: " << error;
    }
    if (lock_ >= 0) ::close(lock_);
  }
  // Root only: the kernel's audit switched to `enabled` for this test, restored after it. The
  // switch is host-wide, so the tests that touch it take turns (a lock file).
  void RequireRootWithAudit(int enabled) {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: Landlock denials are read from the kernel's audit "
                      "multicast, which needs CAP_AUDIT_READ (root); as uid "
                   << ::geteuid() << " cordon records none (OrdinaryUserIsToldWhy checks that)";
    }
    lock_ = ::open("/tmp/cordon-denials-test.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    ASSERT_GE(lock_, 0);
    ASSERT_EQ(::flock(lock_, LOCK_EX), 0);
    auto now = KernelAuditEnabled();
    if (!now) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: the audit netlink is unavailable: "
                   << now.error().ToString();
    }
    if (*now == 2 && enabled == 0) GTEST_SKIP() << "the kernel's audit is locked on";
    if ((*now != 0) == (enabled != 0)) return;
    std::string error;
    if (!SetKernelAudit(enabled, &error)) {
      GTEST_SKIP() << "SKIPPED SECURITY TEST: cannot switch the kernel's audit for the test: "
                   << error;
    }
    restore_ = *now;
  }
  testing::RunResult Exec(const std::string& script) {
    return testing::Run({testing::CordonBin(), "exec", "--workspace", ws_, "--audit-log", log(),
                         "--", "sh", "-c", script},
                        env_);
  }
  std::string log() const { return dir_ / "audit.jsonl"; }
  std::vector<Json> Records() const {
    std::vector<Json> out;
    std::ifstream in(log());
    for (std::string line; std::getline(in, line);) {
      Json rec = Json::parse(line);
      if (rec["type"] == "log_started") continue;  // the file's first line, not the session's
      out.push_back(std::move(rec));
    }
    return out;
  }
  // The access_denied record, which must directly follow the process record.
  std::optional<Json> Denied() const {
    const auto recs = Records();
    for (std::size_t i = 0; i < recs.size(); ++i) {
      if (recs[i]["type"] != "access_denied") continue;
      EXPECT_GT(i, 0u);
      if (i > 0) {
        EXPECT_EQ(recs[i - 1]["type"], "process");
      }
      return recs[i];
    }
    return std::nullopt;
  }
  std::string Dump() const { return ReadFile(log()); }

  TempDir dir_;
  std::string ws_;
  std::vector<std::string> env_;
  int restore_ = -1;
  int lock_ = -1;
};

// bwrap gives the sandbox a writable /dev (a tmpfs), where Landlock grants reading and writing
// device files only: creating a file or directory there is Landlock's refusal (EACCES), not a
// read-only mount's; likewise /proc is a read-write proc mount that Landlock keeps read-only. A
// write under /etc (bwrap's read-only bind) fails with EROFS before Landlock is asked, so it is not
// a Landlock denial and must not be reported as one.
TEST_F(DenialsTest, WriteLandlockRefusesIsRecorded) {
  RequireRootWithAudit(1);
  if (IsSkipped()) return;
  auto r = Exec(
      "echo x > /etc/cordon-denial-test; echo x > /dev/cordon-denial-test; "
      "mkdir /dev/cordon-denial-dir; echo x > /proc/self/comm; exit 3");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  auto d = Denied();
  ASSERT_TRUE(d) << "no access_denied record:\n" << Dump();
  EXPECT_EQ((*d)["layer"], "landlock");
  EXPECT_EQ((*d)["tool"], "exec") << d->dump();
  EXPECT_EQ((*d)["complete"], true) << d->dump();
  bool make_reg = false, make_dir = false, write_file = false;
  for (const auto& e : (*d)["denials"]) {
    const std::string blockers = e["blockers"];
    EXPECT_NE(e.value("path", ""), "/etc") << "EROFS is not Landlock's: " << d->dump();
    if (e.value("path", "") == "/dev" && blockers.find("fs.make_reg") != std::string::npos)
      make_reg = true;
    if (e.value("path", "") == "/dev" && blockers.find("fs.make_dir") != std::string::npos)
      make_dir = true;
    // A refused write to an existing file names the file (as the sandbox sees it).
    const std::string path = e.value("path", "");
    if (path.rfind("/proc/", 0) == 0 && path.size() > 5 &&
        path.compare(path.size() - 5, 5, "/comm") == 0 &&
        blockers.find("fs.write_file") != std::string::npos)
      write_file = true;
  }
  EXPECT_TRUE(write_file) << d->dump();
  EXPECT_TRUE(make_reg) << d->dump();
  EXPECT_TRUE(make_dir) << d->dump();
  // The kernel's own total equals what was listed (the shell's O_CREAT on the proc file is a
  // fourth refusal, fs.make_reg on its directory).
  std::uint64_t listed = 0;
  for (const auto& e : (*d)["denials"]) listed += e["count"].get<std::uint64_t>();
  EXPECT_EQ((*d)["total"], listed) << d->dump();
  EXPECT_GE(listed, 3u) << d->dump();
  EXPECT_EQ((*d)["omitted"], 0) << d->dump();
  // The session says denials are recorded.
  const auto recs = Records();
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0]["sandbox"]["landlock_denials"], "recorded") << recs[0].dump();
  // And the log still verifies.
  auto v = testing::Run({testing::CordonBin(), "audit", "verify", log()}, env_);
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// Repeated refusals of the same thing are one entry with their count; the kernel's own total
// (from the domain's release) matches what cordon received.
TEST_F(DenialsTest, RepeatedDenialsAreCounted) {
  RequireRootWithAudit(1);
  if (IsSkipped()) return;
  auto r = Exec("i=0; while [ $i -lt 40 ]; do mkdir /dev/d$i 2>/dev/null; i=$((i+1)); done; true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto d = Denied();
  ASSERT_TRUE(d) << Dump();
  ASSERT_EQ((*d)["denials"].size(), 1u) << d->dump();
  EXPECT_EQ((*d)["denials"][0]["count"], 40) << d->dump();
  EXPECT_EQ((*d)["total"], 40) << d->dump();
  EXPECT_EQ((*d)["complete"], true) << d->dump();
}

// A command Landlock refuses nothing gets no access_denied record.
TEST_F(DenialsTest, NothingRefusedNothingRecorded) {
  RequireRootWithAudit(1);
  if (IsSkipped()) return;
  auto r = Exec("echo ok");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Denied()) << Dump();
}

// With the host's audit off, cordon does not switch it on: the session says why nothing is
// recorded, and the switch is still off afterwards.
TEST_F(DenialsTest, AuditOffIsLeftOff) {
  RequireRootWithAudit(0);
  if (IsSkipped()) return;
  auto r = Exec("mkdir /dev/cordon-denial-dir; true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Denied()) << Dump();
  auto now = KernelAuditEnabled();
  ASSERT_TRUE(now);
  EXPECT_EQ(*now, 0) << "cordon switched the host's audit on";
  const auto recs = Records();
  ASSERT_FALSE(recs.empty());
  const std::string why = recs[0]["sandbox"].value("landlock_denials", "");
  EXPECT_NE(why.find("not recorded: the kernel's audit is disabled"), std::string::npos) << why;
}

// An ordinary user cannot read the kernel's audit stream: the session and doctor say so.
TEST_F(DenialsTest, OrdinaryUserIsToldWhy) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "runs as an ordinary user (root reads the denials: the tests above)";
  }
  auto r = Exec("mkdir /dev/cordon-denial-dir; true");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Denied()) << Dump();
  const auto recs = Records();
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0]["sandbox"].value("landlock_denials", ""),
            "not recorded: needs CAP_AUDIT_READ (root)")
      << recs[0].dump();
  auto doc = testing::Run({testing::CordonBin(), "doctor"}, env_);
  EXPECT_NE(doc.out.find("Landlock denials: not recorded: needs CAP_AUDIT_READ (root)"),
            std::string::npos)
      << doc.out << doc.err;
}

}  // namespace
}  // namespace cordon
