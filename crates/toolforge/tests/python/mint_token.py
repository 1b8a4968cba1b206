"""Signs a JWT access token with the identity provider's own key (the private JWKS that
tests/node/oidc_provider.mjs signs with), for the claims a real provider would not issue on
request: another audience, an expired token, one not valid yet. Each is otherwise what the
provider issues: RS256, the provider's `kid`, its issuer.

    python mint_token.py KEYS_FILE CLAIMS_JSON

Prints the token.
"""

import json
import sys

import jwt

keys = json.load(open(sys.argv[1]))["keys"]
key = keys[0]
private = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(key))
print(jwt.encode(json.loads(sys.argv[2]), private, algorithm="RS256", headers={"kid": key["kid"], "typ": "at+jwt"}))
