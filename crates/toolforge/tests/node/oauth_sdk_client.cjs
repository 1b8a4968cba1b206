// The official TypeScript SDK's OAuth client (an `OAuthClientProvider` given to
// `StreamableHTTPClientTransport`) in its default mode, logging in to a gateway from discovery
// alone: the gateway's 401 names its protected-resource metadata, which names the authorization
// server; the SDK registers itself (RFC 7591), sends the browser to the authorization endpoint
// with PKCE and the `resource` parameter, and once `finishAuth(code)` has the token, connects
// again. The browser is headless: it follows redirects, signs in as LOGIN on the provider's own
// login page, accepts its consent page and stops at the redirect to the client's callback.
// Needs NODE_PATH to hold the node_modules with @modelcontextprotocol/sdk.
//
//   node oauth_sdk_client.cjs URL LOGIN [TOOL JSON]
//
// Prints one JSON object: {"tools": [names], "call": {is_error, text}, "authorized": true when
// the browser was sent to the authorization server, "token_audience": the access token's `aud`};
// on failure {"error": message}.
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { UnauthorizedError } = require("@modelcontextprotocol/sdk/client/auth.js");

const REDIRECT_URI = "http://127.0.0.1:9/callback";

/** What a user's browser does; resolves to the callback's query parameters. */
async function signIn(authorizationUrl, login) {
  const cookies = new Map();
  const send = async (url, init = {}) => {
    const headers = { ...(init.headers ?? {}) };
    if (cookies.size) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";");
      const at = pair.indexOf("=");
      const name = pair.slice(0, at).trim();
      const expired = attributes.some((a) => /max-age=0|expires=thu, 01 jan 1970/i.test(a.trim()));
      if (expired) cookies.delete(name);
      else cookies.set(name, pair.slice(at + 1).trim());
    }
    return response;
  };
  let response = await send(authorizationUrl);
  for (let hop = 0; hop < 20; hop++) {
    if (response.status === 302 || response.status === 303) {
      const location = new URL(response.headers.get("location"), response.url || authorizationUrl);
      if (location.href.startsWith(REDIRECT_URI)) return Object.fromEntries(location.searchParams);
      response = await send(location.href);
      continue;
    }
    const html = await response.text();
    if (response.status !== 200 || !html.includes("<form")) {
      throw new Error(`authorization page ${response.url}: ${response.status} ${html.slice(0, 300)}`);
    }
    const action = new URL(/<form[^>]*action="([^"]+)"/.exec(html)[1], response.url);
    const prompt = /name="prompt" value="([^"]+)"/.exec(html)[1];
    const form = new URLSearchParams({ prompt });
    if (prompt === "login") {
      form.set("login", login);
      form.set("password", "any password");
    }
    response = await send(action.href, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    });
  }
  throw new Error("the authorization server kept redirecting");
}

class MemoryProvider {
  constructor(login) {
    this.login = login;
    this.callback = undefined;
    this.authorized = false;
  }
  get redirectUrl() {
    return REDIRECT_URI;
  }
  get clientMetadata() {
    return {
      client_name: "typescript sdk oauth client",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  async redirectToAuthorization(url) {
    this.authorized = true;
    this.callback = await signIn(url.href, this.login);
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

function audience(token) {
  return JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString()).aud;
}

async function main() {
  const [url, login, tool, args] = process.argv.slice(2);
  const provider = new MemoryProvider(login);
  const out = { authorized: false };
  let client = new Client({ name: "typescript-oauth", version: "1.0.0" });
  let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  try {
    await client.connect(transport);
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !provider.callback) throw e;
    await transport.finishAuth(provider.callback.code);
    client = new Client({ name: "typescript-oauth", version: "1.0.0" });
    transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    await client.connect(transport);
  }
  out.authorized = provider.authorized;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  if (tool) {
    const r = await client.callTool({ name: tool, arguments: JSON.parse(args ?? "{}") });
    out.call = { is_error: Boolean(r.isError), text: r.content.map((c) => c.text ?? "").join("\n") };
  }
  out.token_audience = audience(provider.saved.access_token);
  await client.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.message : e) }));
  process.exit(0);
});
