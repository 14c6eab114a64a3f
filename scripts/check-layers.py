#!/usr/bin/env python3
"""Fails when a folder includes a folder above it (shared/DESIGN.md's layer order).

core <- policy <- workspace <- runner <- tools <- session <- mcp <- cli, and audit depends on core only.
A folder may include itself and the folders it depends on; tests/ and bench/ may include all.

The shim is its own wing: cordon-shim (runner/shim/) and the appliers it runs before execve
(runner/contain, landlock, rename_supervisor, rlimits, seccomp) include core/ and each other only, never the
policy or the rest of runner/: the static shim stays small and its inputs are plain specs.
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": {"core"},
    "policy": {"core", "policy"},
    "audit": {"core", "audit"},
    "workspace": {"core", "policy", "workspace"},
    "runner": {"core", "policy", "workspace", "runner"},
    "tools": {"core", "policy", "workspace", "runner", "tools"},
    "session": {"core", "policy", "workspace", "runner", "tools", "audit", "session"},
    "mcp": {"core", "policy", "workspace", "runner", "tools", "audit", "session", "mcp"},
    "cli": {"core", "policy", "workspace", "runner", "tools", "audit", "session", "mcp", "cli"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)
WHOLE_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SHIM_APPLIERS = {
    "runner/contain", "runner/landlock", "runner/rename_supervisor", "runner/rlimits",
    "runner/seccomp"}


def shim_wing(rel: str) -> bool:
    return rel.startswith("runner/shim/") or rel.rsplit(".", 1)[0] in SHIM_APPLIERS


def shim_may_include(target: str) -> bool:
    return target.startswith("core/") or shim_wing(target)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    for folder, allowed in ALLOWED.items():
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cc", ".in"):
                continue
            for m in INCLUDE.finditer(path.read_text(encoding="utf-8")):
                if m.group(1) not in allowed:
                    line = path.read_text(encoding="utf-8")[: m.start()].count("\n") + 1
                    bad.append(f"{path.relative_to(root)}:{line}: {folder}/ includes {m.group(1)}/")
    shim_files = 0
    for path in sorted((root / "runner").rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".h", ".cc") or not shim_wing(rel):
            continue
        shim_files += 1
        text = path.read_text(encoding="utf-8")
        for m in WHOLE_INCLUDE.finditer(text):
            if not shim_may_include(m.group(1)):
                line = text[: m.start()].count("\n") + 1
                bad.append(f"{rel}:{line}: the shim's wing includes {m.group(1)}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} upward include(s): see shared/DESIGN.md, 'Layout: folders in layer order'")
        return 1
    print(f"layering: {len(ALLOWED)} folders and the shim's wing ({shim_files} files), "
          "no upward include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
