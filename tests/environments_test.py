#!/usr/bin/env python3
"""docs/environments.md: every yaml and toml block parses, the Kubernetes manifest's fields are
where Kubernetes reads them, the container flags are the ones cordon's remedies print, and every
`cordon ...` command line of the recipes runs here against the real binary (parse-only for the
engines and clusters: no docker, podman or kubectl here).

usage: environments_test.py CORDON_BINARY SOURCE_DIR
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib

try:
    import yaml
except ImportError:
    print("SKIP: python3 with yaml (Debian: python3-yaml)")
    sys.exit(0)

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


cordon, src = os.path.abspath(sys.argv[1]), sys.argv[2]
text = open(os.path.join(src, "docs/environments.md"), encoding="utf-8").read()
blocks = re.findall(r"```(yaml|toml|sh)\n(.*?)```", text, re.S)

# The flags cordon's remedies print (runner/host_capabilities.cc, ContainerFlags).
code = open(os.path.join(src, "runner/host_capabilities.cc"), encoding="utf-8").read()


def literal_after(marker):
    at = code.index(marker)
    end = code.index(";", at)
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', code[at:end]))


docker_flags = literal_after('return "docker run').split("docker run ", 1)[1].split()
podman_flags = literal_after('return "podman run').split("podman run ", 1)[1].split()
k8s_remedy = literal_after("kKubernetesRemedy =")
for want in ("--security-opt", "seccomp=/usr/share/cordon/cordon-seccomp.json",
             "apparmor=unconfined", "systempaths=unconfined"):
    if want not in docker_flags:
        fail(f"cordon's Docker remedy lost {want}: {docker_flags}")


def has_flags(s, flags):
    words = s.split()
    return all(f in words for f in flags)


SHELL_KEYS = {"run", "script", "before_script", "after_script", "command", "args"}


def shell_strings(node, shell=False):
    """The strings a shell runs: under GitHub's run, GitLab's scripts, a container's command."""
    if isinstance(node, str):
        if shell:
            yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from shell_strings(v, shell or k in SHELL_KEYS)
    elif isinstance(node, list):
        for v in node:
            yield from shell_strings(v, shell)


def security_opt_values(flags):
    return [flags[i + 1] for i, f in enumerate(flags) if f == "--security-opt"]


command_re = re.compile(r"(?:^|(?<=[\s;&|(]))(cordon\s+[a-z][a-z-]*\b.*)$")


def cordon_commands(shell_texts):
    out = []
    for t in shell_texts:
        t = t.replace("\\\n", " ")
        for line in t.splitlines():
            m = command_re.search(line)
            if not m:
                continue
            for part in m.group(1).split(" && "):
                part = part.strip()
                if part.startswith("cordon "):
                    out.append(part)
    return out


commands = []
policy_files = {}
kinds = set()
for lang, body in blocks:
    if lang == "sh":
        commands += cordon_commands([body])
        continue
    try:
        docs = list(yaml.safe_load_all(body)) if lang == "yaml" else [tomllib.loads(body)]
    except Exception as e:  # noqa: BLE001 - any parse error fails the recipe
        fail(f"a {lang} block does not parse: {e}\n{body}")
        continue
    for doc in docs:
        if doc is None:
            fail(f"an empty {lang} block:\n{body}")
            continue
        commands += cordon_commands(shell_strings(doc))
        if lang == "toml":
            if "sandbox" in doc:
                first = body.splitlines()[0]
                path = first.lstrip("# ").strip()
                if not path.endswith(".toml"):
                    fail(f"a policy block must name its file on its first line: {first}")
                policy_files[path] = body
                kinds.add("policy")
            if "runners" in doc:
                kinds.add("gitlab-config")
                docker = doc["runners"][0]["docker"]
                opts = docker.get("security_opt", [])
                if opts != security_opt_values(docker_flags):
                    fail(f"GitLab security_opt {opts} differs from cordon's Docker remedy "
                         f"{security_opt_values(docker_flags)}")
            continue
        if isinstance(doc, dict) and doc.get("kind") == "Job":
            kinds.add("kubernetes")
            pod = doc["spec"]["template"]["spec"]
            if pod.get("hostUsers") is not False:
                fail("the Job's spec.template.spec.hostUsers is not false")
            for misplaced in ("procMount", "appArmorProfile", "allowPrivilegeEscalation"):
                if misplaced in pod or misplaced in pod.get("securityContext", {}):
                    fail(f"{misplaced} is in the pod spec; Kubernetes reads it per container")
            c = pod["containers"][0]
            sc = c.get("securityContext", {})
            want = {
                "seccompProfile": {"type": "Localhost", "localhostProfile": "cordon-seccomp.json"},
                "appArmorProfile": {"type": "Unconfined"},
                "procMount": "Unmasked",
                "allowPrivilegeEscalation": False,
            }
            for k, v in want.items():
                if sc.get(k) != v:
                    fail(f"containers[0].securityContext.{k} is {sc.get(k)!r}, want {v!r}")
            for word in ("hostUsers: false", "procMount: Unmasked", "localhostProfile: "
                         "cordon-seccomp.json", "appArmorProfile: {type: Unconfined}"):
                if word not in k8s_remedy:
                    fail(f"cordon's Kubernetes remedy no longer says {word!r}: the manifest "
                         "and the remedy must be checked together")
            if not any(e.get("name") == "POD_NAME" for e in c.get("env", [])):
                fail("the Job's --tag uses $POD_NAME, which its env does not set")
        if isinstance(doc, dict) and "jobs" in doc:
            kinds.add("github")
            for job in doc["jobs"].values():
                if "container" in job:
                    kinds.add("github-container")
                    if not has_flags(job["container"].get("options", ""), docker_flags):
                        fail(f"container options {job['container'].get('options')!r} lack "
                             f"cordon's Docker remedy {docker_flags}")
                for step in job.get("steps", []):
                    run = step.get("run", "")
                    if "docker run" in run and not all(
                            f in run for f in security_opt_values(docker_flags)):
                        fail(f"a docker run step lacks cordon's Docker remedy:\n{run}")
        if isinstance(doc, dict) and any(isinstance(j, dict) and "script" in j
                                         for j in doc.values()):
            kinds.add("gitlab-job")
for lang, body in blocks:
    if lang == "sh" and "podman run" in body:
        kinds.add("podman")
        for line in body.splitlines():
            if "podman run" in line and not has_flags(line, podman_flags):
                fail(f"a podman line lacks cordon's Podman remedy {podman_flags}: {line}")

for k in ("policy", "gitlab-config", "kubernetes", "github", "github-container", "gitlab-job",
          "podman"):
    if k not in kinds:
        fail(f"no {k} recipe found in docs/environments.md")
for sub in ("doctor", "exec"):
    if not any(c.startswith(f"cordon {sub} ") or c == f"cordon {sub}" for c in commands):
        fail(f"no `cordon {sub}` line in the recipes")

# Run each command in a workspace of its own: `cordon` on PATH is the binary under test, the
# agent a script that writes a file, the policy layers where the recipes name them.
env_vars = {"GITHUB_RUN_ID": "4242", "CI_PIPELINE_ID": "77", "RUN_ID": "r1", "POD_NAME": "agent-x"}
with tempfile.TemporaryDirectory() as tmp:
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "cordon"), "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(cordon)} \"$@\"\n")
    os.chmod(os.path.join(bindir, "cordon"), 0o755)
    env = dict(os.environ)
    env.update(env_vars)
    env["PATH"] = bindir + ":/usr/bin:/bin"
    env.setdefault("XDG_STATE_HOME", os.path.join(tmp, "state"))
    ran = 0
    for i, cmd in enumerate(dict.fromkeys(commands)):
        ws = os.path.join(tmp, f"ws{i}")
        os.makedirs(os.path.join(ws, "scripts"))
        agent = os.path.join(ws, "scripts/agent.sh")
        with open(agent, "w") as f:
            f.write("#!/bin/sh\necho ran > agent-output.txt\n")
        os.chmod(agent, 0o755)
        for path, body in policy_files.items():
            os.makedirs(os.path.dirname(os.path.join(ws, path)), exist_ok=True)
            with open(os.path.join(ws, path), "w") as f:
                f.write(body)
        r = subprocess.run(["/bin/bash", "-e", "-c", cmd], cwd=ws, env=env, capture_output=True,
                           text=True, timeout=300)
        ran += 1
        if r.returncode != 0:
            fail(f"`{cmd}` exited {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            continue
        if cmd.startswith("cordon exec "):
            out = os.path.join(ws, "agent-output.txt")
            if not os.path.exists(out) or open(out).read() != "ran\n":
                fail(f"`{cmd}` did not run the agent in its workspace")
            m = re.search(r'--tag "([^"]*)"', cmd)
            if m is None:
                fail(f"`{cmd}` has no --tag with the run's id")
        print(f"ok: {cmd}")
    # A policy layer of the recipes loads and says what it promises.
    for path, body in policy_files.items():
        p = os.path.join(tmp, "policy.toml")
        with open(p, "w") as f:
            f.write(body)
        r = subprocess.run([cordon, "policy", "show", "--policy", p], env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "sandbox.allow_weaker = true" not in r.stdout:
            fail(f"{path} does not load as a policy layer with allow_weaker = true:\n"
                 f"{r.stdout}{r.stderr}")

print(f"{ran} cordon command lines run, {len(blocks)} blocks read")
if failures:
    print(f"0 passed, {len(failures)} failed")
    sys.exit(1)
print("1 passed, 0 failed")
