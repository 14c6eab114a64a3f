#!/usr/bin/env python3
"""Loads HTML files in headless Chromium over the DevTools protocol and prints what happened.

Usage: report_browser.py CHROMIUM EXPR [--screenshot PNG] FILE...

Chromium runs with --remote-debugging-pipe (the protocol on fds 3 and 4: no port, no socket),
--no-sandbox (the tests run as root), a temporary profile, and every host name mapped to nothing.
For each FILE, in a fresh tab: the console messages, log entries (CSP violations among them),
uncaught exceptions and requested URLs, whether the page set data-rendered="1" on <html>, and
EXPR evaluated in the page (returned by value). The first FILE is captured as a PNG with
--screenshot. Prints one JSON object: {"pages": [...]}. The standard library only.
"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 30


class Cdp:
    def __init__(self, chromium, profile):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        args = [
            chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update",
            "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
            "--disable-dev-shm-usage",
            "--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + profile,
            "--remote-debugging-pipe", "about:blank",
        ]
        # Chromium reads the protocol from fd 3 and writes it to fd 4. Its stderr goes to a file
        # (a pipe nobody reads could fill and stall it), read back only to explain a failure.
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", 'exec "$0" "$@" 3<&%d 4>&%d' % (to_r, from_w)] + args,
            pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.stderr)
        os.close(to_r)
        os.close(from_w)
        self.out, self.inp = to_w, from_r
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.inp], [], [], left)
            if ready:
                chunk = os.read(self.inp, 1 << 20)
                if not chunk:
                    self.stderr.seek(0)
                    err = self.stderr.read().decode(errors="replace")[-2000:]
                    raise RuntimeError("chromium closed the protocol pipe: " + err)
                self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.out, data):]
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.out)
        os.close(self.inp)
        self.stderr.close()


def load(cdp, path, expr, screenshot):
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Page", "Network"):
        cdp.send(domain + ".enable", session=session)
    cdp.send("Emulation.setDeviceMetricsOverride",
             {"width": 1100, "height": 900, "deviceScaleFactor": 1, "mobile": False},
             session=session)
    url = "file://" + os.path.abspath(path)
    cdp.send("Page.navigate", {"url": url}, session=session)
    cdp.wait_event("Page.loadEventFired", session)
    # The page's script is inline and synchronous: it has run by the load event; the wait is
    # slack for a slow machine.
    rendered = False
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        r = cdp.send("Runtime.evaluate", {"expression": "document.documentElement.dataset.rendered",
                                          "returnByValue": True}, session=session)
        if r.get("result", {}).get("value") == "1":
            rendered = True
            break
        time.sleep(0.05)
    value = cdp.send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                     session=session)
    page = {"file": path, "rendered": rendered, "console": [], "exceptions": [], "requests": [],
            "result": value.get("result", {}).get("value"),
            "eval_exception": value.get("exceptionDetails")}
    if screenshot:
        # The top of the page, at most 1400 px high, as the docs show it.
        height = cdp.send("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight",
                                               "returnByValue": True}, session=session)
        h = min(int(height.get("result", {}).get("value") or 900), 1400)
        shot = cdp.send("Page.captureScreenshot",
                        {"format": "png", "captureBeyondViewport": True,
                         "clip": {"x": 0, "y": 0, "width": 1100, "height": h, "scale": 1}},
                        session=session)
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    cdp.send("Target.closeTarget", {"targetId": target})
    for e in cdp.events:
        if e.get("sessionId") != session:
            continue
        p = e.get("params", {})
        m = e.get("method")
        if m == "Runtime.consoleAPICalled":
            page["console"].append({"level": p.get("type"), "text": " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", []))})
        elif m == "Log.entryAdded":
            entry = p.get("entry", {})
            page["console"].append({"level": entry.get("level"), "source": entry.get("source"),
                                    "text": entry.get("text")})
        elif m == "Runtime.exceptionThrown":
            page["exceptions"].append(p.get("exceptionDetails", {}))
        elif m == "Network.requestWillBeSent":
            page["requests"].append(p.get("request", {}).get("url"))
    cdp.events = [e for e in cdp.events if e.get("sessionId") != session]
    return page


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    chromium, expr, rest = argv[1], argv[2], argv[3:]
    screenshot = None
    if rest[0] == "--screenshot":
        screenshot, rest = rest[1], rest[2:]
    profile = tempfile.mkdtemp(prefix="cordon-chromium-")
    cdp = Cdp(chromium, profile)
    try:
        pages = []
        for i, path in enumerate(rest):
            pages.append(load(cdp, path, expr, screenshot if i == 0 else None))
        print(json.dumps({"pages": pages}))
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
