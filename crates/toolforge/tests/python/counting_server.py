"""A stdio MCP server that records every call it executes, for the drain test and
scripts/cluster-test.

    python counting_server.py COUNT_FILE

Tools:
- `record` {"id": str}: appends the id to COUNT_FILE (one line a call) and answers "ran ID".
- `slow` {"id": str, "seconds": number}: waits, then does what `record` does.

Calls run on threads of their own, so a slow call does not hold the others up. Standard
library only.
"""

import json
import sys
import threading
import time

COUNT_FILE = sys.argv[1]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"},
                                           "seconds": {"type": "number"}},
          "required": ["id"]}
TOOLS = [
    {"name": "record", "description": "Record that a call ran (counts executions)",
     "inputSchema": SCHEMA},
    {"name": "slow", "description": "Wait some seconds, then record that the call ran",
     "inputSchema": SCHEMA},
]
OUT = threading.Lock()
FILE = threading.Lock()


def send(obj):
    with OUT:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def answer(mid, result):
    send({"jsonrpc": "2.0", "id": mid, "result": result})


def call(mid, params):
    args = params.get("arguments") or {}
    ident = str(args.get("id", ""))
    if params.get("name") == "slow":
        time.sleep(min(float(args.get("seconds", 1)), 60))
    with FILE, open(COUNT_FILE, "a") as f:
        f.write(ident + "\n")
    answer(mid, {"content": [{"type": "text", "text": "ran " + ident}]})


def main():
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
                         "serverInfo": {"name": "counting", "version": "0"}})
        elif method == "tools/list":
            answer(mid, {"tools": TOOLS})
        elif method == "tools/call":
            threading.Thread(target=call, args=(mid, msg.get("params") or {}),
                             daemon=True).start()
        elif method == "ping":
            answer(mid, {})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "no " + str(method)}})


main()
