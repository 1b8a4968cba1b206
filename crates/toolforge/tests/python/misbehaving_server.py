"""A tiny stdio MCP server that misbehaves on request, for the pool's fault tests.

    python misbehaving_server.py [garbage]

Tools: `echo {text}`, `crash` (exits mid-call), `hang` (never answers), `grow` (adds a tool
and sends `notifications/tools/list_changed`); `tools/list` is paginated, two per page. With `garbage`, it
prints non-JSON lines on stdout before every answer. With `CANCEL_LOG=FILE` in its
environment, it appends the params of every `notifications/cancelled` it receives to FILE.
Written without an SDK on purpose: the point is to break the protocol in ways an SDK would not.
"""

import json
import os
import sys
import threading
import time

GARBAGE = len(sys.argv) > 1 and sys.argv[1] == "garbage"
TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object", "properties": p}}
    for n, d, p in [
        ("echo", "Echo the text back", {"text": {"type": "string"}}),
        ("crash", "Exit in the middle of the call", {}),
        ("hang", "Never answer", {}),
        ("grow", "Add a tool named extra_N and announce the change", {}),
    ]
]
PAGE = 2  # tools/list is paginated two tools at a time


LOCK = threading.Lock()


def send(obj):
    with LOCK:
        if GARBAGE:
            sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


CANCEL_LOG = os.environ.get("CANCEL_LOG")


def handle(msg):
    method, mid = msg.get("method"), msg.get("id")
    if method == "notifications/cancelled" and CANCEL_LOG:
        with open(CANCEL_LOG, "a") as f:
            f.write(json.dumps(msg.get("params", {})) + "\n")
    if mid is None:
        return
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "misbehaving", "version": "0"}}})
    elif method == "tools/list":
        start = int((msg.get("params") or {}).get("cursor") or 0)
        page = {"tools": TOOLS[start : start + PAGE]}
        if start + PAGE < len(TOOLS):
            page["nextCursor"] = str(start + PAGE)
        send({"jsonrpc": "2.0", "id": mid, "result": page})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "crash":
            os._exit(3)
        if name == "hang":
            time.sleep(3600)
            return
        if name == "grow":
            n = len(TOOLS)
            TOOLS.append({"name": f"extra_{n}", "description": "Added at run time",
                          "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": f"extra_{n}"}]}})
            return
        text = msg["params"].get("arguments", {}).get("text", "")
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}})


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    # Calls run on threads so a hanging call does not block notifications (like a real server).
    threading.Thread(target=handle, args=(message,), daemon=True).start()
