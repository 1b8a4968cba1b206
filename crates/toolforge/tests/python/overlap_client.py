"""Two MCP sessions whose calls overlap, each answering sampling with its own name.

    python overlap_client.py URL TOOL

Both sessions (the Python SDK's ClientSession, the handshake era: a server may ask a client
mid-call only there) call TOOL with {"name": <own name>} at once. Prints one JSON object:
{"A": {"text", "is_error"} | {"error"}, "B": ..., "asked": {"A": [names asked about], "B": [...]}}.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, TextContent


async def session(url, tool, me, asked):
    async def sampling(context, params):
        asked[me].append(params.messages[0].content.text)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=f"answered by {me}"), model="test")

    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write, sampling_callback=sampling) as s:
            await s.initialize()
            try:
                r = await s.call_tool(tool, {"name": me})
                text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                return {"text": text, "is_error": bool(r.is_error)}
            except Exception as e:  # noqa: BLE001 - the test wants every failure as data
                return {"error": str(e)}


async def main():
    url, tool = sys.argv[1], sys.argv[2]
    asked = {"A": [], "B": []}
    a, b = await asyncio.wait_for(
        asyncio.gather(session(url, tool, "A", asked), session(url, tool, "B", asked)), 60
    )
    print(json.dumps({"A": a, "B": b, "asked": asked}))


asyncio.run(main())
