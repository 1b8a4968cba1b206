"""The official Python SDK's high-level `mcp.Client` in its default mode (`auto`: it probes
`server/discover`, 2026-07-28, and falls back to `initialize`), as a new user runs it.

    python modern_client.py URL [--call NAME JSON]... [--read URI]... [--prompt NAME JSON]...
    python modern_client.py stdio COMMAND ARGS... -- [--call ...]

`MCP_CLIENT_MODE=legacy` pins the client to the older revision (the `initialize` handshake),
as `Client(mode="legacy")` does; otherwise it runs in its default mode.
Sampling requests are answered with "answered by the modern client"; elicitation requests are
accepted with {"name": "Ada"}.
Prints one JSON object: {"protocol": version, "tools": [names], "calls": [{name, is_error,
text, structured} | {name, error}], "reads": [{uri, text} | {uri, error}], "prompts": [{name,
texts} | {name, error}]}.
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters
from mcp.types import CreateMessageResult, ElicitResult, TextContent


async def sampling(context, params):
    """Answers a server's sampling request (relayed by the gateway) with a fixed text."""
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="answered by the modern client"), model="test")


async def elicitation(context, params):
    """Accepts a server's elicitation request (relayed by the gateway) with a fixed name."""
    return ElicitResult(action="accept", content={"name": "Ada"})


def parse(argv):
    if argv[0] == "stdio":
        end = argv.index("--") if "--" in argv else len(argv)
        target = StdioServerParameters(command=argv[1], args=argv[2:end])
        rest = argv[end + 1 :]
    else:
        target, rest = argv[0], argv[1:]
    calls, reads, prompts = [], [], []
    i = 0
    while i < len(rest):
        if rest[i] == "--call":
            calls.append((rest[i + 1], json.loads(rest[i + 2])))
            i += 3
        elif rest[i] == "--read":
            reads.append(rest[i + 1])
            i += 2
        elif rest[i] == "--prompt":
            prompts.append((rest[i + 1], json.loads(rest[i + 2])))
            i += 3
        else:
            raise SystemExit(f"unknown argument {rest[i]}")
    return target, calls, reads, prompts


def texts(blocks):
    return "\n".join(b.text for b in blocks if getattr(b, "type", "") == "text")


async def main():
    target, calls, reads, prompts = parse(sys.argv[1:])
    out = {"calls": [], "reads": [], "prompts": []}
    options = {"sampling_callback": sampling, "elicitation_callback": elicitation}
    if os.environ.get("MCP_CLIENT_MODE"):
        options["mode"] = os.environ["MCP_CLIENT_MODE"]
    async with Client(target, **options) as client:
        out["protocol"] = str(client.session.protocol_version) if hasattr(client.session, "protocol_version") else None
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        for name, args in calls:
            try:
                r = await client.call_tool(name, args)
                out["calls"].append({"name": name, "is_error": bool(r.is_error), "text": texts(r.content),
                                     "structured": r.structured_content})
            except Exception as e:  # noqa: BLE001 - the test wants every failure as data
                out["calls"].append({"name": name, "error": str(e)})
        for uri in reads:
            try:
                r = await client.read_resource(uri)
                out["reads"].append({"uri": uri, "text": "".join(getattr(c, "text", "") or "" for c in r.contents)})
            except Exception as e:  # noqa: BLE001
                out["reads"].append({"uri": uri, "error": str(e)})
        for name, args in prompts:
            try:
                r = await client.get_prompt(name, args)
                out["prompts"].append({"name": name, "texts": [getattr(m.content, "text", None) for m in r.messages]})
            except Exception as e:  # noqa: BLE001
                out["prompts"].append({"name": name, "error": str(e)})
    print(json.dumps(out))


asyncio.run(main())
