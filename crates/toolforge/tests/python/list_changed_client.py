"""Two MCP sessions on the official Python SDK, to check who is told the tool list changed.

    python list_changed_client.py SCOPED_URL OPEN_URL TOOL [NOTIFICATION [--repeat]]

Opens a session on each URL, lists tools on both, calls TOOL (no arguments) on the open one,
waits until the open session receives NOTIFICATION (default `notifications/tools/list_changed`,
at most 15 s; with --repeat TOOL is called again every second until then, for a backend that
tells only the listeners it has at the time) and then 1.5 s more, lists tools on both again, and prints one JSON object:
{"scoped": {"before": [names], "after": [names], "notified": n}, "open": {...}}.
"""

import asyncio
import json
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


NOTIFICATION = sys.argv[4] if len(sys.argv) > 4 else "notifications/tools/list_changed"
REPEAT = sys.argv[5:6] == ["--repeat"]


async def open_session(stack, url, counts, key):
    async def on_message(message):
        if getattr(message, "method", "") == NOTIFICATION:
            counts[key] += 1

    streams = await stack.enter_async_context(streamable_http_client(url))
    session = await stack.enter_async_context(
        ClientSession(streams[0], streams[1], message_handler=on_message)
    )
    await session.initialize()
    return session


async def names(session):
    return [t.name for t in (await session.list_tools()).tools]


async def main():
    scoped_url, open_url, tool = sys.argv[1:4]
    counts = {"scoped": 0, "open": 0}
    async with AsyncExitStack() as stack:
        scoped = await open_session(stack, scoped_url, counts, "scoped")
        opened = await open_session(stack, open_url, counts, "open")
        before = {"scoped": await names(scoped), "open": await names(opened)}
        await opened.call_tool(tool, {})
        for i in range(150):
            if counts["open"]:
                break
            if REPEAT and i % 10 == 9:
                await opened.call_tool(tool, {})
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)
        after = {"scoped": await names(scoped), "open": await names(opened)}
    print(json.dumps({
        key: {"before": before[key], "after": after[key], "notified": counts[key]}
        for key in ("scoped", "open")
    }))


asyncio.run(main())
