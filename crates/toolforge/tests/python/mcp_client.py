"""A plain MCP client on the official Python SDK, for black-box tests of the gateway.

    python mcp_client.py http URL [--call NAME JSON]...
    python mcp_client.py sse URL [--call NAME JSON]...   (the legacy HTTP+SSE transport)
    python mcp_client.py stdio -- COMMAND ARGS... [--call NAME JSON]...   (calls before --)
    --call-timeout SECS: the client gives up on a call after SECS (and cancels it).
    --header NAME:VALUE: an HTTP header on every request (http and sse modes; repeatable).
    --read URI: read a resource after listing (repeatable).
    --prompt NAME JSON: get a prompt with these arguments after listing (repeatable).

Prints one JSON object: {"server": name, "tools": [names], "calls": [{name, is_error, text,
structured, raw} | {name, error, error_raw}], "resources": [uris], "templates": [uri
templates], "prompts": [names], "reads": [{uri, text, raw} | {uri, error}], "got_prompts":
[{name, messages, raw} | {name, error}]}. The last five are present when the server offers
resources (or prompts). `raw` is the whole result as the SDK parsed it, `error_raw` a JSON-RPC
error's whole `error` object.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


CALL_TIMEOUT = None
HEADERS = {}


READS = []
PROMPTS = []


def parse(argv):
    mode, rest = argv[0], argv[1:]
    calls, target = [], []
    i = 0
    while i < len(rest):
        if rest[i] == "--call-timeout":
            global CALL_TIMEOUT
            CALL_TIMEOUT = float(rest[i + 1])
            i += 2
        elif rest[i] == "--header":
            name, _, value = rest[i + 1].partition(":")
            HEADERS[name.strip()] = value.strip()
            i += 2
        elif rest[i] == "--read":
            READS.append(rest[i + 1])
            i += 2
        elif rest[i] == "--prompt":
            PROMPTS.append((rest[i + 1], json.loads(rest[i + 2])))
            i += 3
        elif rest[i] == "--call":
            calls.append((rest[i + 1], json.loads(rest[i + 2])))
            i += 3
        elif rest[i] == "--":
            target = rest[i + 1 :]
            break
        else:
            target.append(rest[i])
            i += 1
    return mode, target, calls


def raw(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def session_run(read, write, calls):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        out = {"server": init.server_info.name, "tools": [t.name for t in tools.tools], "calls": []}
        for name, args in calls:
            try:
                r = await session.call_tool(name, args, read_timeout_seconds=CALL_TIMEOUT)
                text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                out["calls"].append(
                    {"name": name, "is_error": bool(r.is_error), "text": text,
                     "structured": r.structured_content, "raw": raw(r)}
                )
            except Exception as e:  # noqa: BLE001 - the test wants every failure as data
                error = getattr(e, "error", None)
                out["calls"].append({"name": name, "error": str(e),
                                     "error_raw": raw(error) if error is not None else None})
        caps = init.capabilities
        if caps.resources is not None:
            out["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
            templates = (await session.list_resource_templates()).resource_templates
            out["templates"] = [t.uri_template for t in templates]
            out["reads"] = []
            for uri in READS:
                try:
                    r = await session.read_resource(uri)
                    text = "\n".join(getattr(c, "text", "") for c in r.contents)
                    out["reads"].append({"uri": uri, "text": text, "raw": raw(r)})
                except Exception as e:  # noqa: BLE001
                    out["reads"].append({"uri": uri, "error": str(e)})
        if caps.prompts is not None:
            out["prompts"] = [p.name for p in (await session.list_prompts()).prompts]
            out["got_prompts"] = []
            for name, args in PROMPTS:
                try:
                    r = await session.get_prompt(name, args)
                    out["got_prompts"].append(
                        {"name": name, "messages": len(r.messages), "raw": raw(r)})
                except Exception as e:  # noqa: BLE001
                    out["got_prompts"].append({"name": name, "error": str(e)})
        return out


async def main():
    mode, target, calls = parse(sys.argv[1:])
    if mode == "sse":
        async with sse_client(target[0], headers=HEADERS or None) as streams:
            out = await session_run(streams[0], streams[1], calls)
    elif mode == "http":
        async with create_mcp_http_client(headers=HEADERS or None) as http:
            async with streamable_http_client(target[0], http_client=http) as streams:
                out = await session_run(streams[0], streams[1], calls)
    else:
        params = StdioServerParameters(command=target[0], args=target[1:])
        async with stdio_client(params) as streams:
            out = await session_run(streams[0], streams[1], calls)
    print(json.dumps(out))


asyncio.run(main())
