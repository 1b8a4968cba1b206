#!/usr/bin/env python3
"""A stdio MCP server with a large, deterministic catalog (Python 3 stdlib only).

    python3 catalog_server.py [--tools 10000]

Speaks just enough MCP for the gateway to list and call its tools: `initialize`,
`notifications/initialized`, `tools/list` (one page), `tools/call` (a short text), `ping`.
Tool i is named `{verb}_{noun}_{i}`, has a one-sentence description, one to three string
parameters, and `_meta.tags` of its domain (one of 20, cycling) and `read-only` or `write`.
"""

import argparse
import json
import sys

DOMAINS = [
    "github", "gitlab", "jira", "slack", "notion", "postgres", "filesystem", "browser",
    "calendar", "email", "weather", "stripe", "kubernetes", "docker", "sentry", "grafana",
    "s3", "figma", "linear", "zendesk",
]
VERBS = [("list", "read-only"), ("get", "read-only"), ("search", "read-only"),
         ("create", "write"), ("update", "write"), ("delete", "write")]
NOUNS = ["issue", "repository", "message", "document", "event", "branch", "ticket", "file"]
WORDS = ["open", "recent", "for", "the", "current", "project", "matching", "a", "filter",
         "owner", "label", "status", "team", "workspace", "page", "results"]


def tool(i):
    verb, kind = VERBS[i % len(VERBS)]
    noun = NOUNS[(i // len(VERBS)) % len(NOUNS)]
    domain = DOMAINS[i % len(DOMAINS)]
    filler = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6))
    props = {f"{noun}_id": {"type": "string"}}
    for k in range(i % 3):
        props[WORDS[(i + k) % len(WORDS)]] = {"type": "string"}
    return {
        "name": f"{verb}_{noun}_{i}",
        "description": f"{verb.capitalize()} a {noun} in {domain}: {filler}.",
        "inputSchema": {"type": "object", "properties": props},
        "_meta": {"tags": [domain, kind]},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10000)
    args = parser.parse_args()
    tools = [tool(i) for i in range(args.tools)]
    out = sys.stdout
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "catalog", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            name = msg.get("params", {}).get("name", "")
            result = {"content": [{"type": "text", "text": f"called {name}"}]}
        elif method == "ping":
            result = {}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {
                "code": -32601, "message": f"method not found: {method}"}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
