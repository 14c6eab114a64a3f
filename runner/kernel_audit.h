// Landlock denials from the kernel's audit stream. With LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
// (ABI 7, set by the shim's Landlock step) the kernel logs each access Landlock refuses a confined
// command as AUDIT_LANDLOCK_ACCESS records; KernelAudit reads them from the audit multicast group
// (NETLINK_AUDIT, AUDIT_NLGRP_READLOG: CAP_AUDIT_READ, so root only) and attributes them to a
// confined process through the AUDIT_LANDLOCK_DOMAIN record, which names the pid of the task
// that called landlock_restrict_self (the shim's child, whose host pid the shim's status socket
// carries as SCM_CREDENTIALS). Parsing and summarizing are pure; the reader is one thread per
// session with bounded memory. cordon never enables the kernel's audit: when it is off, nothing
// is read and the session says why.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace cordon {

// Record types from linux/audit.h (6.15+), spelled here so that older headers build.
inline constexpr std::uint16_t kAuditLandlockAccess = 1423;
inline constexpr std::uint16_t kAuditLandlockDomain = 1424;

// One Landlock audit record, parsed. The payload is "audit(TS:SERIAL): key=value ...".
struct LandlockAuditEvent {
  enum class Kind { kAccess, kAllocated, kDeallocated };
  Kind kind = Kind::kAccess;
  std::uint64_t domain = 0;
  // kAccess: the blockers ("fs.write_file,fs.truncate") and the object: a path (fs.*, and
  // scope.abstract_unix_socket), an address (net.*: "127.0.0.1:80", ":8080" for a bind), or the
  // other fields as text (scope.signal: "opid=1 ocomm=systemd").
  std::string blockers;
  std::string path;
  std::string address;
  std::string object;
  // kAllocated: the task that called landlock_restrict_self (host pid) and its exe.
  pid_t pid = 0;
  std::string exe;
  // kDeallocated: every denial of the domain, logged or not.
  std::uint64_t denials = 0;
  bool operator==(const LandlockAuditEvent&) const = default;
};

// Parses one record's text; nullopt for other types or malformed text. Untrusted values
// (path, exe, comm, ...) come quoted or, when they hold spaces, quotes or control bytes, as hex.
std::optional<LandlockAuditEvent> ParseLandlockAuditRecord(std::uint16_t type,
                                                           std::string_view text);

// What a confined process was refused, bounded: at most kMaxListed distinct (blockers, object)
// entries, each with its count; the rest only counted.
struct DenialSummary {
  static constexpr std::size_t kMaxListed = 32;
  struct Entry {
    std::string blockers;
    std::string path, address, object;  // one of them
    std::uint64_t count = 0;
    bool operator==(const Entry&) const = default;
  };
  std::vector<Entry> listed;
  std::uint64_t omitted = 0;   // denials in entries that were not listed
  std::uint64_t received = 0;  // access records cordon read for the process
  // Every denial of the process's domains as the kernel counted them (the domain's deallocated
  // record), logged or not; nullopt while a domain has not been released.
  std::optional<std::uint64_t> kernel_total;
  bool complete = true;
  std::string incomplete_reason;
  Json ToJson() const;
};

// Adds one access record (or an entry with its count) to a summary, keeping its bounds.
void AddDenial(DenialSummary& s, const LandlockAuditEvent& access);
void MergeEntry(DenialSummary& s, const DenialSummary::Entry& entry);

// Whether cordon can read Landlock denials here, and why not.
struct KernelAuditStatus {
  bool available = false;
  std::string reason;  // "recorded" or why not ("not recorded: needs CAP_AUDIT_READ (root)")
};
// Probes without starting anything: Landlock ABI >= 7, CAP_AUDIT_READ (the multicast bind),
// and the kernel's audit enabled (AUDIT_GET). Never changes the audit configuration.
KernelAuditStatus ProbeKernelAudit(int landlock_abi);

// The kernel's audit switch (AUDIT_GET `enabled`: 0 off, 1 on, 2 locked on), or the failure.
Result<int> KernelAuditEnabled();

class KernelAudit {
 public:
  // Binds the multicast group and starts the reader thread; fails when the probe above does.
  static Result<std::shared_ptr<KernelAudit>> Start(int landlock_abi);
  ~KernelAudit();
  KernelAudit(const KernelAudit&) = delete;
  KernelAudit& operator=(const KernelAudit&) = delete;

  // The process whose domain `creator` (host pid of the task that enforced it) will allocate:
  // its records are kept until Collect.
  void Watch(pid_t creator);
  // After the process ended: waits (bounded) until the kernel's queue has delivered what the
  // process caused and its domains are released, then returns and forgets its denials.
  DenialSummary Collect(pid_t creator);

 private:
  KernelAudit() = default;
  struct Domain {
    pid_t creator = 0;  // 0 until the allocated record
    bool released = false;
    std::uint64_t kernel_denials = 0;
    std::uint64_t received = 0;
    DenialSummary summary;
    std::uint64_t touched = 0;  // for eviction of domains nobody watches
  };
  void Loop();
  void Handle(const LandlockAuditEvent& e);
  void EvictUnwatched();
  bool WaitQueueEmpty(int ms);

  UniqueFd sock_;  // multicast reader
  UniqueFd wake_;  // eventfd: stop, or drain now
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Domain> domains_;
  std::map<pid_t, std::uint64_t> watched_;  // creator -> overflow count seen while watched
  std::uint64_t clock_ = 0;
  std::uint64_t overflows_ = 0;  // ENOBUFS: records the socket could not take
  std::uint64_t drain_requested_ = 0, drained_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cordon
