"""A backend that asks its caller for a sampling answer in the middle of a call, for relay tests.

    python asking_backend.py stdio
    python asking_backend.py http PORT    (0: any free port)

Over HTTP it prints `listening on http://127.0.0.1:PORT/mcp` on stdout once its socket listens.

Tool `ask(name)`: waits until two calls are in flight at once (so the calls overlap for
certain, with no timing guess; across processes through the file ASK_BARRIER_FILE when set), then sends `sampling/createMessage` to its client for this call
and returns the text of the answer (the handshake era only: a server may not ask mid-call on
2026-07-28).

Tool `who(name)`: samples the client the way each era allows: mid-call on 2025-11-25, an
`input_required` result and a retry on 2026-07-28; returns the text of the answer.
"""

import asyncio
import os
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent

server = MCPServer("asking-backend")
state = {"expect": 2, "in_flight": 0}
all_in = asyncio.Event()


@server.tool()
async def ask(name: str, ctx: Context) -> str:
    """Asks the calling client (sampling) who answers for `name`, once all expected calls are in."""
    state["in_flight"] += 1
    if state["in_flight"] >= state["expect"]:
        all_in.set()
    try:
        barrier = os.environ.get("ASK_BARRIER_FILE")
        if barrier:
            # One process per client session ("isolation": "session"): the calls meet in a file.
            with open(barrier, "a") as f:
                f.write(name + "\n")
            for _ in range(600):
                with open(barrier) as f:
                    if len(f.read().splitlines()) >= state["expect"]:
                        break
                await asyncio.sleep(0.05)
        else:
            await asyncio.wait_for(all_in.wait(), 30)
        answer = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"who answers for {name}?"))],
            max_tokens=16,
            related_request_id=ctx.request_id,
        )
        return answer.content.text
    finally:
        state["in_flight"] -= 1


def question(name: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"who answers for {name}?"))],
        max_tokens=16,
    )


@server.tool()
async def who(name: str, answer: Annotated[CreateMessageResult, Resolve(question)]) -> str:
    """Asks the calling client (sampling) who answers for `name`, in either protocol era."""
    return answer.content.text


if __name__ == "__main__":
    if sys.argv[1] == "http":
        import socket

        import anyio
        import uvicorn

        # Bound here, so port 0 works and the port is known before the first request.
        sock = socket.create_server(("127.0.0.1", int(sys.argv[2])))
        print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
        app = server.streamable_http_app(host="127.0.0.1")
        anyio.run(uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve, [sock])
    else:
        server.run("stdio")
