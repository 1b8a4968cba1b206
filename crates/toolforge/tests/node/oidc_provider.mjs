// A real OpenID provider on loopback: the certified `oidc-provider` package, configured the way
// an MCP deployment configures its identity provider: dynamic client registration (RFC 7591),
// authorization code with PKCE, resource indicators (RFC 8707) that put the resource in the
// access token's `aud`, and JWT access tokens signed with the key of KEYS_FILE (a private
// JWKS; a new RSA key with a random `kid` is written there first when the file does not exist). Its own development login and consent pages run the interaction: any login name is an
// account, and it becomes the token's `sub`. Needs NODE_PATH to hold the node_modules with
// oidc-provider.
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

const server = createServer();
server.listen(Number(portArg ?? 0), "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks,
    scopes: ["openid", "offline_access", "tools"],
    features: {
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A client that names one resource gets a token for it; the MCP clients always name one.
        defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resourceIndicator) => ({
          scope: "tools",
          audience: resourceIndicator,
          accessTokenTTL: 600,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
    // Every login name is an account whose subject is that name.
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    clientBasedCORS: () => true,
  });
  // The development pages' notice on every start says nothing the test needs.
  provider.on("server_error", (_ctx, err) => console.error("oidc-provider:", err));
  server.on("request", provider.callback());
  console.log(`oidc-provider listening on ${issuer}`);
});
