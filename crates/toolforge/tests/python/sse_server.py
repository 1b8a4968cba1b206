"""An MCP server on the official Python SDK speaking only the legacy HTTP+SSE transport
(2024-11-05): `GET /sse` and `POST /messages/`.

    python sse_server.py PORT

PORT 0 takes a free port; once it listens it prints `listening on http://127.0.0.1:PORT/sse`
on stdout.

Tools: `add(a, b)` returns a + b; `echo(text)` returns the text; `crash()` ends the process
mid-call (its caller gets no answer). Resource `legacy://motd`.
"""

import asyncio
import os
import socket
import sys

import uvicorn

from mcp.server.mcpserver import MCPServer

server = MCPServer("legacy-sse-fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Returns the text it was given."""
    return f"echo: {text}"


@server.tool()
def crash() -> str:
    """Ends the server in the middle of the call."""
    os._exit(3)


@server.resource("legacy://motd")
def motd() -> str:
    return "served over the legacy transport"


async def main(port: int) -> None:
    # Bound here, not by uvicorn, so that the port is known before anyone connects.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = server.sse_app(sse_path="/sse", message_path="/messages/", host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/sse", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
