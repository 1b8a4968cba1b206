"""An MCP server that counts the calls it executes, for the pool's at-most-once tests.

    python at_most_once_server.py stdio COUNT_FILE
    python at_most_once_server.py http PORT COUNT_FILE    (PORT 0: any free port)

Every `tools/call` it executes appends one line to COUNT_FILE before anything else.

- stdio: `charge` (no annotations) writes half an answer and exits: the process dies mid-call;
  `lookup` (`readOnlyHint`) dies the same way the first time it runs (for this COUNT_FILE)
  and answers after; `sneak` adds a tool `late_N` without announcing it
  (no `notifications/tools/list_changed`), like servers that change their list silently.
- http: a Streamable HTTP endpoint at /mcp (JSON answers, no sessions) that answers every
  `tools/call` with HTTP 400; it prints `listening on http://127.0.0.1:PORT/mcp` on stdout once
  it listens.

Standard library only, without an SDK: the point is to fail in ways an SDK would not.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
COUNT_FILE = sys.argv[-1]
TOOLS = [
    {"name": "charge", "description": "Charge a card (not idempotent)",
     "inputSchema": {"type": "object"}},
    {"name": "lookup", "description": "Look a card up", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "sneak", "description": "Add a tool without telling anyone",
     "inputSchema": {"type": "object"}},
]
LOCK = threading.Lock()


def count(name):
    """Records an execution of `name`; returns how many it has had, this one included."""
    with LOCK, open(COUNT_FILE, "a+") as f:
        f.write(name + "\n")
        f.seek(0)
        return sum(1 for line in f if line.strip() == name)


def answer(mid, result):
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def initialize(msg):
    return answer(msg["id"], {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "at-most-once", "version": "0"}})


def text(mid, t):
    return answer(mid, {"content": [{"type": "text", "text": t}]})


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def stdio():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "initialize":
            send(initialize(msg))
        elif method == "tools/list":
            send(answer(mid, {"tools": TOOLS}))
        elif method == "tools/call":
            name = msg["params"]["name"]
            runs = count(name)
            if name == "charge" or (name == "lookup" and runs == 1):
                sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"cont' % json.dumps(mid))
                sys.stdout.flush()
                sys.exit(3)
            if name == "sneak":
                n = len(TOOLS)
                TOOLS.append({"name": f"late_{n}", "description": "Added silently",
                              "inputSchema": {"type": "object"}})
                send(text(mid, f"late_{n}"))
                continue
            send(text(mid, name))
        elif method == "ping":
            send(answer(mid, {}))
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "no " + str(method)}})


class Http(BaseHTTPRequestHandler):
    def reply(self, status, body=None, content_type="application/json"):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            self.reply(202)
        elif method == "initialize":
            self.reply(200, initialize(msg))
        elif method == "tools/list":
            self.reply(200, answer(mid, {"tools": TOOLS[:1]}))
        elif method == "tools/call":
            count(msg["params"]["name"])
            self.reply(400, b"bad request", "text/plain")
        elif method == "ping":
            self.reply(200, answer(mid, {}))
        else:
            self.reply(200, {"jsonrpc": "2.0", "id": mid,
                             "error": {"code": -32601, "message": "no " + str(method)}})

    def do_GET(self):
        self.reply(405)

    def do_DELETE(self):
        self.reply(200)

    def log_message(self, *args):
        pass


if MODE == "stdio":
    stdio()
else:
    httpd = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Http)
    print(f"listening on http://127.0.0.1:{httpd.server_address[1]}/mcp", flush=True)
    httpd.serve_forever()
