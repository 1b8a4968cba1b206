"""Drives `toolforge server evals --stdio` with the official Python MCP SDK, against a fake
OpenAI-compatible server started here on loopback (`/v1/models`, streamed
`/v1/chat/completions` with tool calls, `/v1/embeddings`).

    python evals_stdio.py /path/to/toolforge

Prints one JSON object: {"server", "tools": [names], "calls": [{name, is_error, text,
structured}], "requests": [chat request bodies the fake saw]}.
"""

import asyncio
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

MODELS = ["fake-model", "judge-model", "fake-embed"]
REQUESTS = []


def sse_chunks(text, calls):
    def chunk(delta, finish=None):
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    for i in range(0, len(text), 5):
        out.append(chunk({"content": text[i : i + 5]}))
    for i, (name, args) in enumerate(calls):
        raw = json.dumps(args)
        out.append(chunk({"tool_calls": [{"index": i, "id": f"x{i}", "type": "function",
                                          "function": {"name": name, "arguments": raw[:4]}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[4:]}}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    return out


def answer(body):
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    if body.get("model") == "judge-model":
        return '<think>checking</think>{"pass": true, "reason": "ok", "score": 7}', []
    if messages and str(messages[0].get("content", "")).startswith("You rewrite instructions"):
        return '{"passive": "A bug should be filed first."}', []
    if body.get("tools"):
        if last.get("role") == "tool":
            return "Done now.", [("DONE", {"status": "COMPLETED", "response": "finished"})]
        return "Reading the file.", [("read_file", {"path": "./1.txt"})]
    return "echo: " + str(last.get("content", "")), []


def embed(text):
    v = [0.0] * 26
    for c in text.lower():
        if "a" <= c <= "z":
            v[ord(c) - 97] += 1.0
    return v


class Fake(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send_json({"object": "list", "data": [{"id": m} for m in MODELS]})
        else:
            self.send_json({"error": {"message": "not found"}}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/embeddings":
            data = [{"index": i, "embedding": embed(t)} for i, t in enumerate(body["input"])]
            self.send_json({"data": data})
            return
        REQUESTS.append(body)
        text, calls = answer(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for c in sse_chunks(text, calls):
            self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


CALLS = [
    ("list_models", {}),
    ("complete", {"model_id": "fake-model", "messages": [{"role": "user", "content": "Respond with only 'pong'"}],
                  "max_tokens": 8, "seed": 3}),
    ("react_step", {"model_id": "fake-model", "system_prompt": "sort files", "initial_message": "go",
                    "trace": [], "mock_tools": {"read_file": {"./1.txt": "zebra"}},
                    "tools": [{"type": "function", "function": {"name": "read_file"}}]}),
    ("react_step", {"model_id": "fake-model", "system_prompt": "sort files", "initial_message": "go",
                    "trace": [{"iteration": 1, "tool_call": {"id": "call_1", "name": "read_file",
                               "args": {"path": "./1.txt"}}, "observation": "zebra", "success": True,
                               "thought": None}],
                    "mock_tools": None, "tools": [{"type": "function", "function": {"name": "read_file"}}],
                    "call_counter": 1}),
    ("judge", {"response": "pong", "criteria": "says pong", "judge_model": "judge-model"}),
    ("calculate_drift", {"text_a": "abc", "text_b": "abc"}),
    ("generate_variants", {"baseline": "File a bug first", "model_id": "fake-model", "dimensions": ["voice"]}),
    ("analyze_variants", {"variants": {"imperative": "File a bug first", "passive": "A bug should be filed first."}}),
    ("analyze_trajectory", {"text": "The cat sat. The cat sat down. Then it flew to Mars."}),
    ("complete", {"model_id": "missing-model", "messages": [{"role": "user", "content": "x"}]}),
]


async def main():
    binary = sys.argv[1]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "LM_STUDIO_SERVERS": url, "EMBEDDING_MODEL": "fake-embed", "RUST_LOG": "warn"}
    params = StdioServerParameters(command=binary, args=["server", "evals", "--stdio"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            out = {"server": init.server_info.name, "tools": [t.name for t in tools.tools], "calls": []}
            for name, args in CALLS:
                r = await session.call_tool(name, args)
                text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                out["calls"].append({"name": name, "is_error": bool(r.is_error), "text": text,
                                     "structured": r.structured_content})
    out["server_url"] = url
    out["requests"] = REQUESTS
    httpd.shutdown()
    print(json.dumps(out))


asyncio.run(main())
