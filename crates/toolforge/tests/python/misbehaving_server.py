"""A tiny stdio MCP server that misbehaves on request, for the pool's fault tests.

    python misbehaving_server.py [garbage]

Tools: `echo {text}`, `crash` (exits mid-call), `hang` (never answers). With `garbage`, it
prints non-JSON lines on stdout before every answer. Written without an SDK on purpose: the
point is to break the protocol in ways an SDK would not.
"""

import json
import sys
import time

GARBAGE = len(sys.argv) > 1 and sys.argv[1] == "garbage"
TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object", "properties": p}}
    for n, d, p in [
        ("echo", "Echo the text back", {"text": {"type": "string"}}),
        ("crash", "Exit in the middle of the call", {}),
        ("hang", "Never answer", {}),
    ]
]


def send(obj):
    if GARBAGE:
        sys.stdout.write("this is not JSON-RPC\n")
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "misbehaving", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "crash":
            sys.exit(3)
        if name == "hang":
            time.sleep(3600)
        text = msg["params"].get("arguments", {}).get("text", "")
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}})
