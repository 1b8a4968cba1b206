"""Drives the web console at /ui in headless Chromium over the DevTools protocol, for
tests/it/console.rs. Standard library only: the protocol runs over a pipe
(--remote-debugging-pipe: the browser reads commands from fd 3 and writes answers to fd 4,
each message JSON ended by a NUL byte).

Usage: drive.py --base http://127.0.0.1:PORT --chromium /usr/bin/chromium [--screenshots DIR]

Loads every page of the console in turn (a fresh load each), collects what the page shows and
every console error, uncaught exception and failed load, makes one POST /chat before the live
trace page opens and one while it is open, and prints one JSON object: {"pages": {name: {...}}}.
"""

import argparse
import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
    "--window-size=1280,900",
]

TASK = "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500."


class Browser:
    """One Chromium process and one page, over the DevTools pipe."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="toolforge-console-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire():
            # fd 3: commands in, fd 4: answers out (via high numbers, so neither clobbers the other)
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.next_id = 0
        self.answers = {}
        self.events = queue.Queue()
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.session = None

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                with self.lock:
                    self.answers["closed"] = True
                    self.lock.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self.lock:
                        self.answers[msg["id"]] = msg
                        self.lock.notify_all()
                else:
                    self.events.put(msg)

    def send(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self.lock:
            while mid not in self.answers:
                if self.answers.get("closed"):
                    raise RuntimeError("the browser closed its pipe")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no answer to {method} within {timeout} s")
                self.lock.wait(left)
            answer = self.answers.pop(mid)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, session=False
        )
        self.session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )

    def problems(self):
        """Console errors, uncaught exceptions and failed loads reported since the last call."""
        found = []
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return found
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                found.append("console." + p["type"] + ": " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                found.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                found.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".strip())
            elif method == "Network.loadingFailed" and not p.get("canceled"):
                found.append(f"load failed: {p.get('errorText')} ({p.get('type')})")

    def eval(self, expression, timeout=30):
        r = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {expression}")
            time.sleep(0.1)

    def load(self, url):
        self.send("Page.navigate", {"url": "about:blank"})
        self.wait_for("document.readyState === 'complete' && location.href === 'about:blank'")
        self.problems()  # what about:blank reported is not the console's
        self.send("Page.navigate", {"url": url})
        return self.wait_for(
            "(() => { const m = document.getElementById('main');"
            " return m && m.dataset.ready !== 'false' ? m.dataset.ready : null; })()"
        )

    def screenshot(self, path):
        height = self.eval("Math.min(document.documentElement.scrollHeight, 2400)")
        shot = self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1},
            },
        )
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:  # noqa: BLE001 - the process is killed below anyway
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def texts(selector):
    return f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)"


def attrs(selector, name):
    return f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.getAttribute({json.dumps(name)}))"


def chat(base, session):
    body = json.dumps({"message": TASK, "session_id": session}).encode()
    req = urllib.request.Request(
        f"{base}/chat", data=body, headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--chromium", default="chromium")
    ap.add_argument("--screenshots")
    args = ap.parse_args()
    base = args.base.rstrip("/")
    browser = Browser(args.chromium)
    pages = {}
    try:
        browser.open_page()

        def visit(name, fragment, collect, during=None):
            ready = browser.load(f"{base}/ui/#{fragment}")
            page = {"ready": ready}
            if during:
                page.update(during())
            page.update({k: browser.eval(v) for k, v in collect.items()})
            page["title"] = browser.eval("document.title")
            if args.screenshots:
                browser.screenshot(os.path.join(args.screenshots, f"{name}.png"))
            page["errors"] = browser.problems()
            pages[name] = page

        visit("catalog", "catalog", {
            "tools": attrs("#catalog-tools [data-tool]", "data-tool"),
            "servers": attrs("#catalog-servers tr[data-server]", "data-server"),
        })
        visit("visibility", "visibility?tools=sql_query", {
            "visible": texts('#visibility-tools tr[data-visible="true"] td:nth-child(2)'),
            "hidden": texts('#visibility-tools tr[data-visible="false"] td:nth-child(2)'),
            "summary": "document.getElementById('visibility-summary').textContent",
        })
        visit("routing", "routing", {
            "decision": "document.getElementById('routing-decision')?.textContent ?? null",
            "rules": attrs("#routing-trace tr[data-rule]", "data-rule"),
            "offered": texts("#routing-offer tbody tr td:first-child"),
        })

        session = f"console-it-{os.getpid()}-{int(time.time())}"
        # A run made before the page opens: the live trace starts with the records it left.
        earlier = f"{session}-earlier"
        chat(base, earlier)

        def live_chat():
            browser.wait_for("document.getElementById('trace-status')?.dataset.state === 'live'")
            # Records kept from before come ahead of `ready`: drawn already.
            earlier_seen = browser.eval(
                f"document.querySelector('#trace-session-table tr[data-session=\"{earlier}\"]') !== null"
            )
            answer = chat(base, session)
            seen = browser.wait_for(
                f"document.querySelector('#trace-session-table tr[data-session=\"{session}\"]') !== null",
                timeout=60,
            )
            # let the page draw every record of the run before the screenshot
            time.sleep(0.5)
            return {"session": session, "chat_session": answer.get("session_id"), "seen": seen,
                    "earlier_seen": earlier_seen}

        visit("trace", "trace", {
            "steps": texts("#trace-step-table tbody tr td:nth-child(2)"),
            "status": "document.getElementById('trace-status').dataset.state",
        }, during=live_chat)
        visit("spend", "spend", {
            "total": "document.getElementById('spend-total')?.textContent ?? null",
            "chart": "document.querySelectorAll('#spend-chart rect.bar').length",
            "cache": "document.querySelectorAll('#cache-servers tbody tr').length",
        })
        visit("governance", "governance", {
            "text": "document.querySelector('main .page').textContent",
        })
        csp = urllib.request.urlopen(f"{base}/ui/").headers.get("content-security-policy")
        print(json.dumps({"pages": pages, "csp": csp}))
    except Exception as e:  # noqa: BLE001 - reported to the test as JSON
        print(json.dumps({"pages": pages, "failure": str(e)}))
    finally:
        browser.close()


if __name__ == "__main__":
    sys.exit(main())
