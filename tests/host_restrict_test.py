#!/usr/bin/env python3
"""Checks that cordon-test-restrict builds each restricted host it promises, as whoever runs it
(ctest runs it as root and as an ordinary user): what a program inside is refused, and how.

usage: host_restrict_test.py HELPER SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys

HELPER, SOURCE = sys.argv[1], sys.argv[2]
MOBY = os.path.join(SOURCE, "tests/data/moby-seccomp-default.json")
CORDON = os.path.join(SOURCE, "packaging/seccomp/cordon-seccomp.json")

# Prints "NAME ERRNO-NAME" (or "NAME ok") for each raw system call tried.
SYSCALLS = r"""
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
calls = {"clone3": (435, 0, 0), "keyctl": (250, 0), "nr1000": (1000,),
         "landlock_abi": (444, 0, 0, 1)}
for name in sys.argv[1:]:
    r = libc.syscall(*calls[name])
    print(name, "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
"""

failures = []


def run(flags, argv):
    return subprocess.run([HELPER, *flags, "--", *argv], capture_output=True, text=True,
                          timeout=60)


def expect(what, cond, detail=""):
    print(("ok    " if cond else "FAIL  ") + what + (f": {detail}" if detail and not cond else ""))
    if not cond:
        failures.append(what)


def syscalls(flags, *names):
    r = run(flags, [sys.executable, "-c", SYSCALLS, *names])
    return dict(line.split() for line in r.stdout.splitlines()), r


def userns_works():
    return subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode == 0


who = "root" if os.geteuid() == 0 else "an ordinary user"
print(f"== as {who}")
host_max = open("/proc/sys/user/max_user_namespaces").read()

# Moby's profile, as Docker installs it without CAP_SYS_ADMIN.
r = run(["--seccomp-profile", MOBY], ["unshare", "-U", "true"])
expect("moby: unshare(CLONE_NEWUSER) is refused with EPERM",
       r.returncode != 0 and "Operation not permitted" in r.stderr, r.stderr)
got, r = syscalls(["--seccomp-profile", MOBY], "clone3", "keyctl", "nr1000", "landlock_abi")
expect("moby: clone3 answers ENOSYS", got.get("clone3") == "ENOSYS", r.stdout + r.stderr)
expect("moby: keyctl answers EPERM (the default action)", got.get("keyctl") == "EPERM", str(got))
expect("moby: a call above the profile's largest answers ENOSYS (runc's stub)",
       got.get("nr1000") == "ENOSYS", str(got))
r = run(["--seccomp-profile", MOBY], ["grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status"])
expect("moby: no_new_privs and a filter are set",
       "NoNewPrivs:\t1" in r.stdout and "Seccomp:\t2" in r.stdout, r.stdout)

# cordon's profile: the namespace calls work where the host allows user namespaces.
if userns_works():
    r = run(["--seccomp-profile", CORDON], ["unshare", "-U", "true"])
    expect("cordon-seccomp.json: unshare(CLONE_NEWUSER) works", r.returncode == 0, r.stderr)
    got, r = syscalls(["--seccomp-profile", CORDON], "clone3")
    expect("cordon-seccomp.json: clone3 still answers ENOSYS", got.get("clone3") == "ENOSYS",
           str(got))
else:
    print("SKIP  cordon-seccomp.json: this host refuses user namespaces outside any filter")

# No user namespaces: ENOSPC, and the host's own limit untouched.
r = run(["--no-userns"], ["unshare", "-U", "true"])
expect("no-userns: unshare(CLONE_NEWUSER) answers ENOSPC",
       r.returncode != 0 and "No space left on device" in r.stderr, r.stdout + r.stderr)
expect("no-userns: the host's max_user_namespaces is unchanged",
       open("/proc/sys/user/max_user_namespaces").read() == host_max)

# clone3 refused, everything else allowed.
got, r = syscalls(["--clone3-enosys"], "clone3", "keyctl")
expect("clone3-enosys: clone3 answers ENOSYS", got.get("clone3") == "ENOSYS", r.stdout + r.stderr)
expect("clone3-enosys: other calls are allowed", got.get("keyctl") != "EPERM", str(got))

# A container's masked /proc: the namespace works, a new /proc does not.
bwrap = shutil.which("bwrap")
if bwrap and userns_works():
    r = run(["--masked-proc"], ["sh", "-c", "id -u; wc -c < /proc/keys"])
    expect("masked-proc: the program keeps its uid and /proc/keys reads empty",
           r.stdout.split() == [str(os.geteuid()), "0"], r.stdout + r.stderr)
    r = run(["--masked-proc"],
            [bwrap, "--unshare-user", "--unshare-pid", "--proc", "/proc", "--ro-bind", "/", "/",
             "--", "true"])
    expect("masked-proc: bwrap cannot mount a new /proc",
           r.returncode != 0 and "Can't mount proc" in r.stderr, r.stderr)
    r = run(["--masked-proc"], [bwrap, "--unshare-user", "--ro-bind", "/", "/", "--", "true"])
    expect("masked-proc: bwrap without a new /proc works", r.returncode == 0, r.stderr)
else:
    print("SKIP  masked-proc: no bwrap, or no user namespaces here")

# A restriction that cannot be made: 125 and which one.
r = run(["--seccomp-profile", "/nonexistent.json"], ["true"])
expect("a profile that cannot be read exits 125 naming --seccomp-profile",
       r.returncode == 125 and "--seccomp-profile" in r.stderr, r.stderr)

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
