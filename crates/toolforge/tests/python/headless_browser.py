"""What a user's browser does with an authorization URL, without a screen: follows redirects
(keeping cookies), signs in as LOGIN on the identity provider's login page (tests/node/
oidc_provider.mjs: any password), accepts its consent page, and either stops at a redirect to
`stop_at` (a client's callback nobody listens on; its query is returned) or goes on to the
end: the page the last redirect leads to (a gateway's or a CLI's callback).

    python headless_browser.py URL LOGIN [BEARER_TOKEN]

As a command it goes to the end and prints one JSON object: {"status", "url", "body"} of the
last page. BEARER_TOKEN, when given, is sent to URL's own origin only (the gateway checks that
whoever opens its consent link is the principal it was made for).
"""

import asyncio
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2


def _origin(url: str) -> str:
    u = urlparse(url)
    return f"{u.scheme}://{u.netloc}"


async def sign_in(url: str, login: str, stop_at: str | None = None, bearer: str | None = None):
    """The callback's query (dict) when `stop_at` is reached, else the last response."""
    start_origin = _origin(url)
    async with httpx2.AsyncClient(follow_redirects=False, timeout=20) as browser:

        async def send(method: str, target: str, **kwargs):
            headers = {}
            if bearer and _origin(target) == start_origin:
                headers["authorization"] = f"Bearer {bearer}"
            return await browser.request(method, target, headers=headers, **kwargs)

        response = await send("GET", url)
        for _ in range(20):
            if response.status_code in (302, 303, 307):
                location = urljoin(str(response.url), response.headers["location"])
                if stop_at and location.startswith(stop_at):
                    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}
                response = await send("GET", location)
            elif response.status_code == 200 and 'name="prompt"' in response.text:
                action = re.search(r'<form[^>]*action="([^"]+)"', response.text).group(1)
                prompt = re.search(r'name="prompt" value="([^"]+)"', response.text).group(1)
                form = {"prompt": prompt}
                if prompt == "login":
                    form.update(login=login, password="any password")
                response = await send("POST", urljoin(str(response.url), action), data=form)
            elif stop_at:
                raise RuntimeError(f"page {response.url}: {response.status_code} {response.text[:300]}")
            else:
                return response
        raise RuntimeError("the pages kept redirecting")


if __name__ == "__main__":
    last = asyncio.run(sign_in(sys.argv[1], sys.argv[2], bearer=sys.argv[3] if len(sys.argv) > 3 else None))
    print(json.dumps({"status": last.status_code, "url": str(last.url), "body": last.text[:2000]}))
