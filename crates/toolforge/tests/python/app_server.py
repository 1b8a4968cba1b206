"""A fastmcp server with one MCP App, for the apps tests (fastmcp's own venv).

    python app_server.py LABEL        # stdio

Tool `show_card(title)` links the app resource `ui://widget/card.html` (`_meta.ui.resourceUri`,
the way fastmcp declares apps), whose HTML names LABEL; so two of these behind one gateway
collide on both the tool name and the URI. Tool `ping` is a plain tool.
"""

import sys

from fastmcp import FastMCP
from fastmcp.apps.config import AppConfig

LABEL = sys.argv[1] if len(sys.argv) > 1 else "app"
server = FastMCP(f"cards-{LABEL}")


@server.tool(app=AppConfig(resource_uri="ui://widget/card.html"))
def show_card(title: str) -> str:
    """Shows a card with a title."""
    return f"{LABEL}: {title}"


@server.tool
def ping() -> str:
    """Answers pong."""
    return f"pong from {LABEL}"


@server.resource("ui://widget/card.html")
def card() -> str:
    return f"<!doctype html><html><body><h1>card of {LABEL}</h1></body></html>"


if __name__ == "__main__":
    server.run(show_banner=False)
