// What the cold shim and each call of the warm server (runner/shim/serve.cc) do alike: report
// on the status fd, and run one contained command to its end.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "runner/contain.h"

namespace cordon::shim {

// The status channel to cordon and the hash of the spec as read (added to every report).
struct StatusChannel {
  int fd = -1;
  std::string spec_sha256;
  void Report(Json j) const;
  [[noreturn]] void Die(const std::string& step, const Error& e) const;
};

// Counts from /proc/<pid>/io (Documentation/filesystems/proc.rst): rchar and wchar are what
// read(2)/write(2)-like calls moved; read_bytes and write_bytes what reached the storage layer.
struct IoCounts {
  std::uint64_t rchar = 0;
  std::uint64_t wchar = 0;
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;
};
// {read_bytes, write_bytes, rchar, wchar} from `before` to `after` (never below 0).
Json IoDelta(const IoCounts& before, const IoCounts& after);

struct RunOptions {
  // The command's environment (nullptr: this process's own) and whether to chdir to spec.cwd
  // (the cold shim's bwrap already did).
  char** envp = nullptr;
  bool chdir_to_cwd = false;
  // This process is the init of the call's pid namespace (the warm server's calls): it reaps
  // what the command orphans while it waits for the command.
  bool reap_orphans = false;
};

// Forks the command: its own session, the "confining" line on the status fd, Contain() in its
// fixed order, execve. Waits for it, kills what it left in its process group, reports its real
// status and resource use, and exits with its status. Never returns.
[[noreturn]] void RunCommand(ContainSpec& spec, const StatusChannel& status,
                             const RunOptions& opts);

}  // namespace cordon::shim
