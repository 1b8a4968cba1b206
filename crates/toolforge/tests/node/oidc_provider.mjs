// A real OpenID provider on loopback: the certified `oidc-provider` package, configured the way
// an MCP deployment configures its identity provider: dynamic client registration (RFC 7591),
// authorization code with PKCE, resource indicators (RFC 8707) that put the resource in the
// access token's `aud`, and JWT access tokens signed with the key of KEYS_FILE (a private
// JWKS; a new RSA key with a random `kid` is written there first when the file does not exist). Its own development login and consent pages run the interaction: any login name is an
// account, and it becomes the token's `sub`. Needs NODE_PATH to hold the node_modules with
// oidc-provider.
//
// For a gateway reaching OAuth-protected servers it also has a pre-registered confidential
// client, `toolforge-gateway` / `gateway-secret`, allowed client credentials and the RFC 8693
// token exchange (registered as a grant type: the subject token must be one of this provider's
// access tokens; the exchanged token keeps its `sub`, is meant for the `audience` or `resource`
// asked for, and names the client as the actor, `act.sub`), and may introspect tokens (RFC
// 7662). A client registered with "opaque" in its `client_name` gets opaque access tokens. `GET /_test/exchanges` answers how
// many exchanges were made per subject, for tests that check the gateway keeps exchanged tokens.
//
//   node oidc_provider.mjs KEYS_FILE [PORT]
//
// Listens on 127.0.0.1 (PORT, or one the system picks) and prints one line,
// `oidc-provider listening on http://127.0.0.1:PORT`: that URL is the issuer. Restarted on the same PORT with another KEYS_FILE, it
// is the same issuer after a key rotation.
import { createServer } from "node:http";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const { default: Provider } = await import(
  pathToFileURL(join(process.env.NODE_PATH ?? "node_modules", "oidc-provider/lib/index.js")).href
);

const [keysFile, portArg] = process.argv.slice(2);
if (!existsSync(keysFile)) {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const key = { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), alg: "RS256", use: "sig" };
  writeFileSync(keysFile, JSON.stringify({ keys: [key] }), { mode: 0o600 });
}
const jwks = JSON.parse(readFileSync(keysFile, "utf8"));

const jose = await import(
  pathToFileURL(join(process.env.NODE_PATH ?? "node_modules", "jose/dist/webapi/index.js")).href
);
const signingKey = jwks.keys[0];
const privateKey = await jose.importJWK(signingKey, "RS256");
const publicKeys = jose.createLocalJWKSet({
  keys: jwks.keys.map(({ kty, n, e, kid, alg, use }) => ({ kty, n, e, kid, alg, use })),
});
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
const exchanges = {};

const server = createServer();
server.listen(Number(portArg ?? 0), "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks,
    scopes: ["openid", "offline_access", "tools"],
    features: {
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A client that names one resource gets a token for it; the MCP clients always name one.
        defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        // Clients whose name says "opaque" get opaque tokens, checked by introspection.
        getResourceServerInfo: (_ctx, resourceIndicator, client) => ({
          scope: "tools",
          audience: resourceIndicator,
          accessTokenTTL: 600,
          accessTokenFormat: client?.clientName?.includes("opaque") ? "opaque" : "jwt",
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
    // Every login name is an account whose subject is that name.
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    clientBasedCORS: () => true,
    clients: [
      {
        client_id: "toolforge-gateway",
        client_secret: "gateway-secret",
        grant_types: ["client_credentials", TOKEN_EXCHANGE],
        redirect_uris: [],
        response_types: [],
        scope: "tools",
      },
    ],
  });
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    async (ctx) => {
      const { subject_token: subjectToken, subject_token_type: subjectType, audience, resource } =
        ctx.oidc.params;
      const refuse = (description) => {
        ctx.status = 400;
        ctx.body = { error: "invalid_grant", error_description: description };
      };
      if (subjectType !== ACCESS_TOKEN_TYPE) return refuse("subject_token_type must be an access token");
      let subject;
      try {
        ({ payload: subject } = await jose.jwtVerify(subjectToken, publicKeys, { issuer }));
      } catch (e) {
        return refuse(`the subject token is not valid: ${e.code ?? e.message}`);
      }
      const now = Math.floor(Date.now() / 1000);
      const client = ctx.oidc.client.clientId;
      const token = await new jose.SignJWT({
        sub: subject.sub,
        aud: audience ?? resource,
        scope: "tools",
        client_id: client,
        act: { sub: client },
        jti: randomUUID(),
      })
        .setProtectedHeader({ alg: "RS256", kid: signingKey.kid, typ: "at+jwt" })
        .setIssuer(issuer)
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(privateKey);
      exchanges[subject.sub] = (exchanges[subject.sub] ?? 0) + 1;
      ctx.body = {
        access_token: token,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: "Bearer",
        expires_in: 300,
      };
    },
    ["subject_token", "subject_token_type", "requested_token_type", "audience", "resource", "scope"],
  );
  for (const event of ["server_error", "authorization.error", "grant.error", "registration_create.error"]) {
    provider.on(event, (_ctx, err) => console.error(`oidc-provider ${event}:`, err.message, err.error_description ?? ""));
  }
  const handle = provider.callback();
  server.on("request", (req, res) => {
    if (req.url === "/_test/exchanges") {
      res.setHeader("content-type", "application/json");
      return res.end(JSON.stringify(exchanges));
    }
    return handle(req, res);
  });
  console.log(`oidc-provider listening on ${issuer}`);
});
