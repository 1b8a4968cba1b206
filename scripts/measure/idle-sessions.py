#!/usr/bin/env python3
"""Anonymous resident memory (RssAnon: heap and stacks, not the binary's shared, clean text
pages) of `toolforge serve` before and after opening N idle /mcp sessions, and per session.

Usage: scripts/measure/idle-sessions.py [N] [path/to/toolforge] [ROUNDS]
(N defaults to 5000, ROUNDS to 2)

Starts the server on a loopback port with no MCP servers and --max-sessions N, opens N sessions
(initialize + notifications/initialized, nothing else), waits for the RSS to settle, and prints
the figures. Then sends 4,000 `resources/unsubscribe` of unknown 10 KB URIs on one session and
prints the RSS again. Then waits for the sessions to idle out (--session-idle-timeout, $IDLE_SECONDS or 60),
opens N fresh sessions and prints the RSS once more: memory given back is reused, so it
stays near the first figure instead of doubling. Loopback only; stops the server at the end.
"""

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
EXE = sys.argv[2] if len(sys.argv) > 2 else "target/debug/toolforge"
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
IDLE = int(os.environ.get("IDLE_SECONDS", "60"))
INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "measure", "version": "1"}}})
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2025-06-18"}


def rss_kib(pid):
    """RssAnon of `pid` in KiB."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"RssAnon:\s+(\d+)", f.read()).group(1))


def post(conn, body, session=None):
    headers = dict(HEADERS)
    if session:
        headers["mcp-session-id"] = session
    conn.request("POST", "/mcp", body, headers)
    res = conn.getresponse()
    res.read()
    return res


def open_sessions(conn):
    sessions = []
    for _ in range(N):
        res = post(conn, INIT)
        assert res.status == 200, res.status
        session = res.getheader("mcp-session-id")
        post(conn, INITIALIZED, session)
        sessions.append(session)
    return sessions


def settle(pid):
    time.sleep(2)
    return rss_kib(pid)


def main():
    config = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    config.write('{"mcpServers": {}}')
    config.close()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    server = subprocess.Popen(
        [EXE, "serve", "--config", config.name, "--port", "0", "--max-sessions", str(N + 1),
         "--session-idle-timeout", str(IDLE)],
        stderr=log, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            with open(log.name) as f:
                m = re.search(r"serving http://127\.0\.0\.1:(\d+)", f.read())
            port = int(m.group(1)) if m else time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        post(conn, INIT)  # warm up: the first session's one-off allocations
        before = settle(server.pid)
        sessions = open_sessions(conn)
        after = settle(server.pid)
        per = (after - before) * 1024 / N
        print(f"sessions: {N}")
        print(f"RssAnon before: {before / 1024:.1f} MiB, after: {after / 1024:.1f} MiB")
        print(f"RssAnon per idle session: {per / 1024:.1f} KiB")
        uri = "mem://" + "x" * 10_000
        for i in range(4000):
            body = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "resources/unsubscribe",
                               "params": {"uri": f"{uri}/{i}"}})
            post(conn, body, sessions[0])
        unsub = settle(server.pid)
        print(f"RssAnon after 4,000 unknown 10 KB unsubscribes: {unsub / 1024:.1f} MiB "
              f"(+{(unsub - after) / 1024:.1f} MiB)")
        for round in range(2, ROUNDS + 1):
            time.sleep(IDLE + 5)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            sessions = open_sessions(conn)
            again = settle(server.pid)
            print(f"round {round}: RssAnon after the previous sessions expired and {N} new ones "
                  f"opened: {again / 1024:.1f} MiB")
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.unlink(config.name)
        print(f"server log: {log.name}")


if __name__ == "__main__":
    main()
