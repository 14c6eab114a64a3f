#!/usr/bin/env python3
"""Every test SECURITY.md cites exists (issue 31): a promise whose test was renamed or removed
would otherwise go on naming a test that no longer guards it.

A citation is a backticked `Suite.TestName` (both parts CamelCase, as GoogleTest names are), or
`Suite.*` for a whole suite. The tests are the TEST/TEST_F/TEST_P definitions in tests/*.cc.
Usage: check-security-tests.py [ROOT]."""
import pathlib
import re
import sys

CITED = re.compile(r"`((?:[A-Z][A-Za-z0-9]*/)?[A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9_]*|\*)(?:/[0-9*]+)?`")
DEFINED = re.compile(r"^\s*TEST(?:_F|_P)?\(\s*([A-Za-z0-9_]+)\s*,\s*([A-Za-z0-9_]+)\s*\)", re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    defined = set()
    for path in sorted((root / "tests").glob("*.cc")):
        for suite, name in DEFINED.findall(path.read_text(errors="replace")):
            defined.add((suite, name))
    suites = {s for s, _ in defined}
    text = (root / "SECURITY.md").read_text()
    missing = []
    cited = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        for suite, name in CITED.findall(line):
            suite = suite.split("/")[-1]  # an instantiation prefix of a parameterized suite
            cited += 1
            ok = suite in suites if name == "*" else (suite, name) in defined
            if not ok:
                missing.append(f"SECURITY.md:{lineno}: `{suite}.{name}` is not a test in tests/")
    for m in missing:
        print(m)
    if missing:
        print(f"security citations: {len(missing)} of {cited} name no test")
        return 1
    print(f"security citations: all {cited} name tests that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
