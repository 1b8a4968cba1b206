"""The official Python SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`) in its default
mode, logging in to a gateway from discovery alone: the gateway's 401 names its protected-resource
metadata, which names the authorization server; the SDK registers itself (RFC 7591), runs the
authorization code flow with PKCE and the `resource` parameter, and retries with the token.
The browser is headless (`headless_browser.py`): it follows the authorization redirect, signs
in as LOGIN on the provider's own login page, accepts its consent page and hands the code back
to the SDK.

    python oauth_sdk_client.py URL LOGIN [--call NAME JSON]...

OAUTH_CLIENT_NAME sets the `client_name` it registers with.

Prints one JSON object: {"tools": [names], "calls": [{name, is_error, text} | {name, error}],
"authorized": true when the browser was sent to the authorization server, "token_audience" and
"token_kid": the access token's `aud` and signing key id}; on failure {"error": message}.
"""

import asyncio
import base64
import json
import os
import sys

import httpx2
from headless_browser import sign_in
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:9/callback"


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def texts(blocks):
    return "\n".join(b.text for b in blocks if getattr(b, "type", "") == "text")


def decoded(part: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


async def main():
    url, login = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    calls = [(rest[i + 1], json.loads(rest[i + 2])) for i in range(0, len(rest), 3) if rest[i] == "--call"]
    out = {"calls": [], "authorized": False}
    redirect = {}

    async def redirect_handler(authorization_url: str) -> None:
        out["authorized"] = True
        redirect.update(await sign_in(authorization_url, login, stop_at=REDIRECT_URI))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"), iss=redirect.get("iss"))

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name=os.environ.get("OAUTH_CLIENT_NAME", "python sdk oauth client"),
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            for name, args in calls:
                try:
                    r = await client.call_tool(name, args)
                    out["calls"].append({"name": name, "is_error": bool(r.is_error), "text": texts(r.content)})
                except Exception as e:  # noqa: BLE001 - the test wants every failure as data
                    out["calls"].append({"name": name, "error": str(e)})
    if storage.tokens is not None:
        parts = storage.tokens.access_token.split(".")
        out["token_format"] = "jwt" if len(parts) == 3 else "opaque"
        if len(parts) == 3:
            out["token_audience"] = decoded(parts[1])["aud"]
            out["token_kid"] = decoded(parts[0])["kid"]
    print(json.dumps(out))


try:
    asyncio.run(main())
except Exception as e:  # noqa: BLE001 - one JSON line either way
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
