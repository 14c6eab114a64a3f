#!/usr/bin/env python3
"""No function in the call pipeline's files is over 150 lines (issue 31).

The files are clang-formatted, so a function (or a member function defined out of its class)
opens on a line at column 0 that ends with `{` and closes at the next `}` at column 0; lambdas
and local classes inside it count as its lines. Usage: check-function-size.py [ROOT]."""
import pathlib
import re
import sys

LIMIT = 150
PATTERNS = ["session/*.cc", "session/*.h", "mcp/wrap.cc"]
# A definition's first line: not a namespace, class, struct, enum or extern block.
NOT_FUNCTION = re.compile(r"^(namespace|class|struct|enum|union|extern|template)\b")


def long_functions(path: pathlib.Path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or line[0].isspace() or line.startswith(("//", "#", "}")) or \
                NOT_FUNCTION.match(line) or line.rstrip().endswith(";"):
            i += 1
            continue
        # A declaration at column 0: its signature runs until a line ending with `{` (a
        # definition) or `;` (a declaration, or a variable).
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j >= len(lines) or lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        end = j + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        length = end - i + 1
        if length > LIMIT:
            yield i + 1, length, line.strip()
        i = end + 1


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = 0
    for pattern in PATTERNS:
        for path in sorted(root.glob(pattern)):
            for line, length, head in long_functions(path):
                print(f"{path.relative_to(root)}:{line}: {length} lines (limit {LIMIT}): {head}")
                bad += 1
    if bad:
        print(f"function size: {bad} function(s) over {LIMIT} lines")
        return 1
    print(f"function size: no function over {LIMIT} lines in {', '.join(PATTERNS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
