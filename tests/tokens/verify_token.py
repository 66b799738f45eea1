"""A backend's check of vcode's verification tokens, exactly as docs/tokens.md shows it (a test
checks that the block below is the documented one, and runs it on tokens a live vcode signed).

    python3 verify_token.py JWKS_URL ISSUER AUDIENCE < tokens

reads one token a line and prints one JSON line for each: the claims if the token is good
(signed by a published key, unexpired, this issuer and audience, never seen before), else
{"error": reason}.
"""

# --- recipe ---
import time

import jwt  # PyJWT, with `cryptography` for EdDSA: pip install "pyjwt[crypto]"


class TokenChecker:
    def __init__(self, jwks_url: str, issuer: str, audience: str):
        # Fetches the keys once, then again for an unknown kid (a rotation).
        self.keys = jwt.PyJWKClient(jwks_url, lifespan=300)
        self.issuer, self.audience = issuer, audience
        self.seen = {}  # jti -> exp; use your database or Redis (SET jti 1 NX EXAT exp)

    def verify(self, token: str) -> dict:
        """The claims of a good token (sub: the phone, purpose); raises otherwise."""
        key = self.keys.get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token, key, algorithms=["EdDSA"], issuer=self.issuer, audience=self.audience,
            options={"require": ["exp", "iat", "iss", "sub", "jti", "aud"]},
        )
        now = time.time()
        self.seen = {jti: exp for jti, exp in self.seen.items() if exp > now}
        if claims["jti"] in self.seen:
            raise jwt.InvalidTokenError("token already used")  # a replay
        self.seen[claims["jti"]] = claims["exp"]
        return claims
# --- end of recipe ---


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) != 4:
        sys.exit(__doc__)
    checker = TokenChecker(*sys.argv[1:])
    for line in sys.stdin:
        try:
            print(json.dumps(checker.verify(line.strip())), flush=True)
        except jwt.PyJWTError as error:
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
