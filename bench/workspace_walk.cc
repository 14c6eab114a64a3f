// Times the workspace guard's full walk (workspace/guard.h) on a real tree, warm:
// the launch's scan (getdents64 only) and the sweep's walk (which also stats every regular file
// for set-user-ID bits). Usage: workspace_walk ROOT [REPEATS]; bench/workspace_walk.sh makes
// the trees and runs it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "workspace/guard.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ROOT [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  cordon::GuardOptions opts;
  auto time = [&](const char* what, auto&& fn) {
    fn();  // warm the dentry and inode caches
    double best = 1e18, total = 0;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, ms);
      total += ms;
    }
    std::printf("%-44s best %8.1f ms  mean %8.1f ms  (%d runs)\n", what, best, total / repeats,
                repeats);
  };
  std::size_t entries = 0, git_dirs = 0;
  time("launch scan (ScanProtectedPaths)", [&] {
    auto scan = cordon::ScanProtectedPaths(root, opts);
    if (!scan) {
      std::fprintf(stderr, "scan: %s\n", scan.error().message.c_str());
      std::exit(1);
    }
    entries = scan->scanned;
    git_dirs = scan->git_dirs.size();
  });
  time("sweep walk (WalkWritableRoot, modes read)", [&] {
    auto walk = cordon::WalkWritableRoot(root, opts, true);
    if (!walk) std::exit(1);
  });
  std::printf("%s: %zu entries, %zu git dirs\n", root.c_str(), entries, git_dirs);
  return 0;
}
