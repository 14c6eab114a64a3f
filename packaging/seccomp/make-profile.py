#!/usr/bin/env python3
"""Generates cordon-seccomp.json: moby's default seccomp profile plus only the calls cordon needs.

The input is moby's profile as committed (tests/data/moby-seccomp-default.json, pinned: see its
.source note); its rules are kept unchanged and in order, and ADDITIONS are appended, each rule
carrying its reason in the "comment" field moby's own rules use (Docker's profile loader reads
it). ADDITIONS.md says what fails without each one. `--check` fails when the committed file
differs from what this script makes.

usage: make-profile.py [--check] [--moby FILE] [--out FILE]
"""
import argparse
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MOBY = ROOT / "tests" / "data" / "moby-seccomp-default.json"
OUT = HERE / "cordon-seccomp.json"

# Each: the calls, and why cordon needs them (the rule's comment). Unconditional allows: for
# CAP_SYS_ADMIN holders moby allows the same calls in its CAP_SYS_ADMIN block; cordon needs them
# without that capability, because it makes its own user namespace and is root only there.
ADDITIONS = [
    {
        "names": ["unshare"],
        "comment": "cordon: bwrap and the staged workspace's overlay mount make a user and a "
                   "mount namespace (unshare(CLONE_NEWUSER|CLONE_NEWNS)) as an ordinary user",
    },
    {
        "names": ["clone"],
        "comment": "cordon: bwrap starts the sandbox with clone(CLONE_NEWUSER|CLONE_NEWPID|"
                   "CLONE_NEWNET|...); moby allows clone only without namespace flags",
    },
    {
        "names": ["mount", "umount2", "pivot_root"],
        "comment": "cordon: bwrap builds the sandbox's root (binds, /proc, /dev, tmpfs) and "
                   "pivots into it; cordon mounts the staged workspace's overlay; the warm "
                   "sandbox's shim mounts /tmp, /proc and the overlay per call",
    },
    {
        "names": ["sethostname"],
        "comment": "cordon: bwrap names the sandbox's own UTS namespace (--hostname cordon)",
    },
    {
        "names": ["open_tree", "move_mount"],
        "comment": "cordon: the warm sandbox's shim clones and moves bind mounts per call "
                   "(runner/shim/serve.cc)",
    },
]


def make(moby: dict) -> dict:
    out = dict(moby)
    out["syscalls"] = list(moby["syscalls"])
    for a in ADDITIONS:
        out["syscalls"].append({
            "names": a["names"],
            "action": "SCMP_ACT_ALLOW",
            "args": [],
            "comment": a["comment"],
            "includes": {},
            "excludes": {},
        })
    return out


def render(profile: dict) -> str:
    # moby's own layout: tab indents, a final newline.
    return json.dumps(profile, indent="\t", ensure_ascii=False) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="fail when the committed profile differs from the generated one")
    ap.add_argument("--moby", type=pathlib.Path, default=MOBY)
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args()
    text = render(make(json.loads(args.moby.read_text())))
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            print(f"{args.out} is not what make-profile.py generates: "
                  f"run packaging/seccomp/make-profile.py", file=sys.stderr)
            return 1
        print(f"{args.out}: as generated ({len(ADDITIONS)} additions to moby's profile)")
        return 0
    args.out.write_text(text)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
