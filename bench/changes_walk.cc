// Times the change record's parts on a real tree, warm (docs/adr/0004-change-records.md): the
// launch scan and the sweep walk without and with the metadata snapshot, the diff of an
// unchanged tree, and the diff plus hashing after a command touched N files.
// Usage: changes_walk ROOT [REPEATS] [TOUCH]; bench/changes.sh makes the trees and runs it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

#include "workspace/changes.h"
#include "workspace/guard.h"

namespace {

cordon::TreeSnapshot Snap(const std::string& root, bool sweep) {
  cordon::GuardOptions opts;
  opts.snapshot = true;
  if (sweep) {
    auto w = cordon::WalkWritableRoot(root, opts, true, true);
    if (!w) std::exit(1);
    return cordon::TreeSnapshot{{{root, std::move(w->snapshot)}}};
  }
  auto scan = cordon::ScanProtectedPaths(root, opts);
  if (!scan || !scan->snapshot) std::exit(1);
  cordon::FillDeferred(*scan->snapshot, std::nullopt);  // what the pass beside the process does
  return *scan->snapshot;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ROOT [REPEATS] [TOUCH]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  const int touch = argc > 3 ? std::atoi(argv[3]) : 1000;
  // Wall time, and CPU time (user + system of this process): on a loaded host the CPU figure is
  // the one that does not depend on who else runs.
  auto cpu_ms = [] {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
  };
  auto time = [&](const char* what, auto&& fn) {
    fn();  // warm the dentry and inode caches
    double best = 1e18, total = 0, cpu_best = 1e18;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_ms();
      fn();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      cpu_best = std::min(cpu_best, cpu_ms() - c0);
      best = std::min(best, ms);
      total += ms;
    }
    std::printf("%-46s wall best %8.2f ms mean %8.2f ms  cpu best %8.2f ms  (%d runs)\n", what,
                best, total / repeats, cpu_best, repeats);
  };
  cordon::GuardOptions plain;
  time("launch scan, no snapshot", [&] {
    if (!cordon::ScanProtectedPaths(root, plain)) std::exit(1);
  });
  cordon::GuardOptions snap_opts;
  snap_opts.snapshot = true;
  time("launch scan + snapshot, launch path", [&] {
    if (!cordon::ScanProtectedPaths(root, snap_opts)) std::exit(1);
  });
  time("launch scan + snapshot + statx pass", [&] { Snap(root, false); });
  time("sweep walk, no snapshot", [&] {
    if (!cordon::WalkWritableRoot(root, plain, true)) std::exit(1);
  });
  time("sweep walk + snapshot", [&] { Snap(root, true); });
  const cordon::TreeSnapshot before = Snap(root, false);
  const cordon::TreeSnapshot same = Snap(root, true);
  time("diff + record, nothing changed", [&] {
    cordon::ChangeRecorder rec;
    (void)rec.Record(before, same, false);
  });
  // TOUCH files rewritten, spread evenly over the tree (as a build's outputs are, so the diff's
  // identical head and tail are short), then diffed and hashed.
  std::size_t files = 0;
  for (const auto& e : before.roots[0].entries) files += (e.mode & 0170000) == 0100000 && !e.git;
  const std::size_t stride = touch > 0 ? std::max<std::size_t>(1, files / touch) : 1;
  int n = 0;
  std::size_t seen = 0;
  for (const auto& e : before.roots[0].entries) {
    if (n >= touch) break;
    if ((e.mode & 0170000) != 0100000 || e.git) continue;
    if (seen++ % stride != 0) continue;
    const std::string p = root + "/" + e.path;
    int fd = ::open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, "x", 1);
      ::close(fd);
      ++n;
    }
  }
  const cordon::TreeSnapshot after = Snap(root, true);
  std::size_t listed = 0;
  time("diff + record (hash <=200 listed), N touched", [&] {
    cordon::ChangeRecorder rec;
    listed = rec.Record(before, after, false)["entries"].size();
  });
  std::printf("%s: %zu entries, %d files touched, %zu listed\n", root.c_str(),
              before.roots[0].entries.size(), n, listed);
  return 0;
}
