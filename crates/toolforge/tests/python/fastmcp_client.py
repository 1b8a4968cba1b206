"""fastmcp's own `Client` in its default mode (`auto`: 2026-07-28 first, the handshake era as a
fallback), against the tools of `fastmcp_server.py` behind the gateway.

    python fastmcp_client.py URL
    python fastmcp_client.py stdio COMMAND ARGS...

Sampling is answered with "fixed model answer"; elicitation is accepted with {"name": "Ada"}.
Prints one JSON object: {"protocol", "tools": [names], "divide", "divide_by_zero", "count",
"progress": [[progress, total]], "ask_model", "ask_user", "read", "prompt"}; a step that raised
holds {"error": message}.
"""

import asyncio
import json
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport


def target(argv):
    if argv[0] == "stdio":
        return StdioTransport(command=argv[1], args=argv[2:])
    return argv[0]


def texts(blocks):
    return "\n".join(b.text for b in blocks if getattr(b, "type", "") == "text")


async def sampling(messages, params, context):
    return "fixed model answer"


async def elicitation(message, response_type, params, context):
    return {"name": "Ada"}


async def step(coro):
    try:
        return await coro
    except Exception as e:  # noqa: BLE001 - the test wants every failure as data
        return {"error": f"{type(e).__name__}: {e}"}


async def main():
    out = {"progress": []}

    async def progress(value, total, message):
        out["progress"].append([value, total])

    client = Client(target(sys.argv[1:]), sampling_handler=sampling, elicitation_handler=elicitation)
    async with client:
        out["protocol"] = client.protocol_version
        # A gateway answers at once and lists each backend's tools once it is ready: with
        # `gateway --stdio` the client can ask before the backend has started (empty list).
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            out["tools"] = [t.name for t in await client.list_tools()]
            if out["tools"] or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)

        async def call(name, args, **kw):
            r = await client.call_tool(name, args, raise_on_error=False, **kw)
            return {"is_error": bool(r.is_error), "text": texts(r.content), "structured": r.structured_content}

        out["divide"] = await step(call("divide", {"a": 7, "b": 2}))
        out["divide_by_zero"] = await step(call("divide", {"a": 1, "b": 0}))
        out["count"] = await step(call("count", {"steps": 3}, progress_handler=progress))
        out["ask_model"] = await step(call("ask_model", {"question": "what is the answer?"}))
        out["ask_user"] = await step(call("ask_user", {"question": "who are you?"}))

        async def read():
            return {"text": "".join(getattr(c, "text", "") or "" for c in await client.read_resource("fixture://greeting"))}

        async def prompt():
            r = await client.get_prompt("greet", {"name": "Ada"})
            return {"texts": [getattr(m.content, "text", None) for m in r.messages]}

        out["read"] = await step(read())
        out["prompt"] = await step(prompt())
    print(json.dumps(out))


asyncio.run(main())
