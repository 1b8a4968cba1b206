"""An MCP server (stdio) that leaks a secret everywhere a backend can put text, for the
secrets guard's tests: a JSON-RPC error's message and data (`fail`), a token split over two
text blocks (`split`), a resource link (`link`), a result's `_meta` (`meta`), a text resource
(`secret://env`), a prompt (`deploy`) and completions.

    python leaky_server.py

Standard library only: it answers exactly the wire shapes the tests need.
"""

import json
import sys

# A GitHub token in its documented format; not a live credential.
KEY = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"

TOOLS = [
    {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}}
    for name, description in [
        ("fail", "Fails with an error."),
        ("split", "Answers in two text blocks."),
        ("link", "Answers with a resource link."),
        ("meta", "Answers with result metadata."),
    ]
]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(mid, result):
    send({"jsonrpc": "2.0", "id": mid, "result": result})


def call(mid, name):
    if name == "fail":
        send({"jsonrpc": "2.0", "id": mid, "error": {
            "code": -32000, "message": f"upstream refused the token {KEY}",
            "data": {"detail": f"Authorization: Bearer {KEY}"}}})
    elif name == "split":
        answer(mid, {"content": [{"type": "text", "text": f"key {KEY[:18]}"},
                                 {"type": "text", "text": f"{KEY[18:]} end"}]})
    elif name == "link":
        answer(mid, {"content": [{"type": "resource_link", "name": f"report {KEY}",
                                  "uri": f"https://api.example/report?token={KEY}",
                                  "description": f"signed with {KEY}"}]})
    elif name == "meta":
        answer(mid, {"content": [{"type": "text", "text": "ok"}],
                     "_meta": {"debug": {"auth": KEY}}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "no such tool"}})


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, mid = msg.get("method"), msg.get("id")
    params = msg.get("params") or {}
    if mid is None:
        continue
    if method == "initialize":
        answer(mid, {"protocolVersion": "2025-06-18",
                     "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "completions": {}},
                     "serverInfo": {"name": "leaky", "version": "0"}})
    elif method == "tools/list":
        answer(mid, {"tools": TOOLS})
    elif method == "tools/call":
        call(mid, params.get("name"))
    elif method == "resources/list":
        answer(mid, {"resources": [{"uri": "secret://env", "name": "env"}]})
    elif method == "resources/templates/list":
        answer(mid, {"resourceTemplates": []})
    elif method == "resources/read":
        answer(mid, {"contents": [{"uri": "secret://env", "mimeType": "text/plain",
                                   "text": f"GITHUB_TOKEN={KEY}"}]})
    elif method == "prompts/list":
        answer(mid, {"prompts": [{"name": "deploy", "description": "Deploy the service."}]})
    elif method == "prompts/get":
        answer(mid, {"description": f"deploys with {KEY}", "messages": [
            {"role": "user", "content": {"type": "text", "text": f"Deploy with {KEY}"}}]})
    elif method == "completion/complete":
        answer(mid, {"completion": {"values": [KEY], "hasMore": False}})
    elif method == "ping":
        answer(mid, {})
    else:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "no " + str(method)}})
