"""An MCP server that requires OAuth, as fastmcp users protect one: Streamable HTTP behind
fastmcp's `JWTVerifier` (the issuer's JWKS, its `iss`, the server's own URL as the audience),
published with `RemoteAuthProvider` (RFC 9728 protected-resource metadata naming the scope
`tools`, and a 401 naming the metadata). Its one tool, `whoami`, answers who the token it was called with names.

    python oauth_backend.py ISSUER PORT    (PORT 0: any free port)

Prints `listening on http://127.0.0.1:PORT/mcp` on stdout once its socket listens; that URL is
the audience its tokens must name.
"""

import socket
import sys

import anyio
import uvicorn
from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import JWTVerifier
from fastmcp.server.dependencies import get_access_token

issuer = sys.argv[1]
sock = socket.create_server(("127.0.0.1", int(sys.argv[2])))
base = f"http://127.0.0.1:{sock.getsockname()[1]}"
resource = f"{base}/mcp"

verifier = JWTVerifier(jwks_uri=f"{issuer}/jwks", issuer=issuer, audience=resource)
server = FastMCP(
    "oauth-backend",
    auth=RemoteAuthProvider(
        token_verifier=verifier, authorization_servers=[issuer], base_url=base, scopes_supported=["tools"]
    ),
)


@server.tool
def whoami() -> dict:
    """Who the access token of this call names: its subject and its actor."""
    claims = get_access_token().claims
    return {"sub": claims.get("sub"), "act": claims.get("act"), "aud": claims.get("aud")}


print(f"listening on {resource}", flush=True)
app = server.http_app(path="/mcp")
anyio.run(uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve, [sock])
