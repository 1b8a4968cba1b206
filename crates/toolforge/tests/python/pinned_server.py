"""A server whose tool description is read from a file at start, for the pinning tests.

    python pinned_server.py DESCRIPTION_FILE      # stdio

Tools: `lookup(q)` (its description is the file's text) and `echo(text)` (returns `text`).
"""

import sys

from mcp.server.mcpserver import MCPServer

with open(sys.argv[1], encoding="utf-8") as f:
    DESCRIPTION = f.read().strip()

server = MCPServer("pinned-fixture")


@server.tool(description=DESCRIPTION)
def lookup(q: str) -> str:
    return f"found {q}"


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    server.run()
