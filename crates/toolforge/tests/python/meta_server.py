"""An MCP server (stdio) whose one tool, `request_meta`, answers with the `_meta` object of the
`tools/call` request it received, as JSON text: what a backend sees of the caller's trace
context (`traceparent`, `tracestate`) and everything else in `_meta`.

    python meta_server.py

Standard library only, like the other fixtures that need to see the wire as it is.
"""

import json
import sys

TOOLS = [{
    "name": "request_meta",
    "description": "Report the request metadata this server received",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(mid, result):
    send({"jsonrpc": "2.0", "id": mid, "result": result})


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        answer(mid, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "meta", "version": "0"}})
    elif method == "tools/list":
        answer(mid, {"tools": TOOLS})
    elif method == "tools/call":
        meta = (msg.get("params") or {}).get("_meta") or {}
        answer(mid, {"content": [{"type": "text", "text": json.dumps(meta)}]})
    elif method == "ping":
        answer(mid, {})
    else:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "no " + str(method)}})
