"""An MCP Apps host's view of a server, on the official Python SDK (Streamable HTTP).

    python apps_client.py URL

Prints one JSON object: {"extensions": the server's capabilities.extensions, "tools": [{name,
ui}], "resources": [{uri, mimeType}], "reads": {uri: text | {"error": message}}}, where `ui` is
the tool's `_meta.ui.resourceUri` and every such URI is read as a host renders it.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main():
    async with streamable_http_client(sys.argv[1]) as (read, write, *_):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            caps = init.capabilities.model_dump(by_alias=True, exclude_none=True)
            tools = (await session.list_tools()).tools
            out = {
                "extensions": caps.get("extensions"),
                "tools": [
                    {"name": t.name, "ui": ((t.meta or {}).get("ui") or {}).get("resourceUri")}
                    for t in tools
                ],
                "resources": [
                    {"uri": str(r.uri), "mimeType": r.mime_type}
                    for r in (await session.list_resources()).resources
                ],
                "reads": {},
            }
            for tool in out["tools"]:
                uri = tool["ui"]
                if not uri or uri in out["reads"]:
                    continue
                try:
                    result = await session.read_resource(uri)
                    out["reads"][uri] = {
                        "text": "".join(getattr(c, "text", "") for c in result.contents),
                        "uris": [str(c.uri) for c in result.contents],
                        "mimeType": result.contents[0].mime_type if result.contents else None,
                    }
                except Exception as e:  # noqa: BLE001 - the test wants every failure as data
                    out["reads"][uri] = {"error": str(e)}
            print(json.dumps(out))


asyncio.run(main())
