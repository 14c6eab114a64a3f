#!/usr/bin/env python3
"""Fails when a folder includes a folder above it (shared/DESIGN.md's layer order).

core <- policy <- workspace <- runner <- tools <- session <- mcp <- cli, and audit depends on core only.
A folder may include itself and the folders it depends on; tests/ and bench/ may include all.
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
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} upward include(s): see shared/DESIGN.md, 'Layout: folders in layer order'")
        return 1
    print(f"layering: {len(ALLOWED)} folders, no upward include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
