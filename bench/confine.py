#!/usr/bin/env python3
"""Confinement overhead, each figure beside its baselines from the same run.

1. `cordon exec -- true`, in rounds that interleave it with its baselines (each round runs every
   command once, in a rotated order): bare `true`; `bwrap` alone with the same namespaces and
   the usual system mounts; `bwrap` with exactly the argv `cordon exec --plan` prints (its
   environment passed through an --args memfd, as cordon passes it), running `true` in place of
   the shim; and the same after the overlay mount that cordon's launch child makes before it
   execs bwrap in the staged mode (a fresh upper and work directory per run, mounted in a mount
   namespace of the run's own, made with unshare as cordon makes it: bench/stage_exec.c). The last is the fair
   floor for a staged `exec`: bwrap alone does not stage the workspace. Ratios are the median of
   the per-round ratios, then min/min.
2. confined `search_text` (cordon call)  vs  bare `rg --json` over a copy of /usr/include.

Usage: bench/confine.py [BUILD_DIR] [--rounds N] [--before OTHER_BUILD_DIR] [--no-search]
(default: build, 60 rounds). --before adds that build's `cordon exec -- true` to the same
rounds (a before/after comparison in one process). Run it as an ordinary user too
(`runuser -u USER -- python3 bench/confine.py build`): root on this host pays for cgroup v1
moves that most users never make."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

args = sys.argv[1:]
def option(name, default=None):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default
rounds = int(option("--rounds", "60"))
before = option("--before")
search = "--no-search" not in args
args = [a for a in args if a != "--no-search"]
build = args[0] if args else "build"
cordon = os.path.abspath(os.path.join(build, "cordon"))
bwrap = shutil.which("bwrap")
rg = shutil.which("rg")
work = tempfile.mkdtemp(prefix="cordon-bench-")
os.chmod(work, 0o755)
ws = os.path.join(work, "ws")
tree = os.path.join(ws, "include")
os.makedirs(ws)
if search:
    shutil.copytree("/usr/include", tree, symlinks=True)
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tree) for f in fs
           if not os.path.islink(os.path.join(d, f)))
# cordon's state (its staged upper layers, its caches) on the same file system as the baseline's.
env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
           XDG_STATE_HOME=os.path.join(work, "state"))
log = os.path.join(work, "audit.jsonl")
# exec runs in a small workspace of its own (10 files), as the figure says; the
# baselines bind one like it.
ws_exec = os.path.join(work, "ws-exec")
ws_plan = os.path.join(work, "ws-plan")
for d in (ws_exec, ws_plan):
    os.makedirs(d)
    for n in range(10):
        open(os.path.join(d, f"f{n}.txt"), "w").write(f"file {n}\n")

def timed(argv, runs, cwd=ws, capture=False):
    # warm-up, then the median wall time in ms. With capture, stdout goes to a pipe that is read,
    # as search_text reads rg's output (1.8 MB here): writing it to /dev/null costs rg less.
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        samples.append((time.perf_counter() - t) * 1000)
        if r.returncode not in (0, 1):  # rg: 1 is "no match"
            sys.exit(f"{argv[:3]} failed with {r.returncode}")
    return statistics.median(samples)

# The staged mode's overlay mount, as cordon's launch child makes it, in a small C program (a
# Python preexec_fn would add a fork of the interpreter to the baseline).
stage_exec = os.path.join(work, "stage_exec")
subprocess.run(["cc", "-O2", "-o", stage_exec, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "stage_exec.c")], check=True)

# bwrap with exactly the mounts cordon asks for, in a workspace of its own (bwrap leaves the
# protected stubs it creates; cordon removes them after each call).
plan = json.loads(subprocess.run([cordon, "exec", "--plan", "--workspace", ws_plan, "--audit-log", log, "--", "true"],
                                 env=env, capture_output=True, text=True, check=True).stdout)
argv = plan["bwrap"]
i = argv.index("--json-status-fd")
del argv[i:i + 2]
args_fd = int(argv[argv.index("--args") + 1])
env_args = b"".join(a.encode() + b"\0" for a in plan["bwrap_args_fd"])
bwrap_same = argv[:argv.index("--") + 1] + ["/usr/bin/true"]
staged = bool(plan.get("staged"))
stage_base = os.path.join(work, "stage")
os.makedirs(stage_base)

# The same namespaces and mounts cordon asks bwrap for, without cordon or its shim.
bwrap_alone = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--unshare-net", "--die-with-parent", "--new-session",
               "--clearenv", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
               "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
               "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
               "--bind", ws_exec, ws_exec, "--chdir", ws_exec, "--", "/usr/bin/true"]

def run_plain(argv, cwd=ws_exec, extra_env=None):
    def go():
        r = subprocess.run(argv, cwd=cwd, env=extra_env or env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        return r.returncode
    return go

def run_bwrap_plan(overlay):
    def go():
        # The environment through a memfd at the fd number the plan names, as cordon passes it.
        mfd = os.memfd_create("bench-env", 0)
        os.write(mfd, env_args)
        os.lseek(mfd, 0, os.SEEK_SET)
        fd = os.dup2(mfd, args_fd, inheritable=True) if mfd != args_fd else mfd
        argv, stage = bwrap_same, None
        if overlay:
            stage = tempfile.mkdtemp(dir=stage_base)
            os.mkdir(stage + "/u")
            os.mkdir(stage + "/w")
            argv = [stage_exec, ws_plan, stage + "/u", stage + "/w"] + bwrap_same
        try:
            r = subprocess.run(argv, cwd=ws_plan, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, pass_fds=(args_fd,))
        finally:
            os.close(mfd)
            if fd != mfd:
                os.close(fd)
            if stage:
                if os.path.isdir(stage + "/w/work"):  # overlayfs leaves it mode 000
                    os.chmod(stage + "/w/work", 0o700)
                shutil.rmtree(stage)
        return r.returncode
    return go

nofsync = os.path.join(work, "nofsync.toml")
open(nofsync, "w").write('[audit]\nfsync = "never"\n')
exec_argv = lambda b, *extra: [os.path.join(os.path.abspath(b), "cordon"), "exec", "--workspace", ws_exec,
                               "--audit-log", log, *extra, "--", "true"]
commands = [
    ("bare", "bare `true`", run_plain(["/usr/bin/true"])),
    ("bwrap", "`bwrap` alone, same namespaces and the usual mounts", run_plain(bwrap_alone)),
    ("plan", "`bwrap` with the argv of `cordon exec --plan`, running `true`", run_bwrap_plan(False)),
]
if staged:
    commands.append(("plan+overlay", "the same after the staged overlay mount (unshare + mount, fresh upper)",
                     run_bwrap_plan(True)))
commands += [
    ("exec", "`cordon exec -- true` (audit fsync per call)", run_plain(exec_argv(build))),
    ("exec-nofsync", "`cordon exec -- true` (audit fsync never)",
     run_plain(exec_argv(build, "--policy", nofsync))),
]
if before:
    commands.append(("before", f"`cordon exec -- true`, build {before}", run_plain(exec_argv(before))))

for _, _, go in commands:  # warm-up (and each must succeed)
    for _ in range(2):
        rc = go()
        if rc != 0:
            sys.exit(f"a baseline or exec failed with {rc}")
samples = {k: [] for k, _, _ in commands}
for r in range(rounds):
    order = commands[r % len(commands):] + commands[:r % len(commands)]
    for key, _, go in order:
        t = time.perf_counter()
        rc = go()
        samples[key].append((time.perf_counter() - t) * 1000)
        if rc != 0:
            sys.exit(f"{key} failed with {rc}")

def ratio(a, b):
    paired = statistics.median(x / y for x, y in zip(samples[a], samples[b]))
    return f"{paired:.2f}x / {min(samples[a]) / min(samples[b]):.2f}x"

floor = "plan+overlay" if staged else "plan"
print("| figure | median (min) | ÷ bwrap with the plan's argv | ÷ the same + staged overlay |")
print("|---|---|---|---|")
for key, label, _ in commands:
    cells = [ratio(key, "plan")]
    cells.append(ratio(key, "plan+overlay") if staged else "")
    print(f"| {label} | {statistics.median(samples[key]):.2f} ms ({min(samples[key]):.2f}) | {' | '.join(cells)} |")
if before:
    print(f"\nthis build ÷ {before}: {ratio('exec', 'before')} (paired median / min÷min)")
print(f"\n{rounds} interleaved rounds; ratios: median of per-round ratios / min÷min; "
      f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; uid {os.getuid()}, cgroup "
      f"{plan['confinement']['cgroup']}, workspace {plan['confinement'].get('workspace_mode', '?')}; "
      f"{time.strftime('%Y-%m-%d')}")
if not search:
    shutil.rmtree(work)
    sys.exit(0)

pattern = "define.*MAX"
S = 15
t_rg = timed([rg, "--json", "--no-config", "-e", pattern, "--", "."], S, capture=True)
t_search = timed([cordon, "call", "search_text", "--workspace", ws, "--audit-log", log,
                  "--json", '{"pattern":"%s"}' % pattern], S, capture=True)
t_search_nf = timed([cordon, "call", "search_text", "--workspace", ws, "--audit-log", log, "--policy", nofsync,
                     "--json", '{"pattern":"%s"}' % pattern], S, capture=True)

print(f"\n| figure | time (median) | ratio |")
print(f"|---|---|---|")
print(f"| bare `rg --json` over {size / 1e6:.0f} MB (/usr/include copy), output read from a pipe | {t_rg:.1f} ms | |")
print(f"| confined `search_text` (cordon call, fsync per call) | {t_search:.1f} ms | **{t_search / t_rg:.2f}x bare rg** |")
print(f"| confined `search_text` (fsync never) | {t_search_nf:.1f} ms | {t_search_nf / t_rg:.2f}x bare rg |")
print(f"\n{S} runs each for search")
shutil.rmtree(work)
