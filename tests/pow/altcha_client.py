#!/usr/bin/env python3
"""An ALTCHA client made with the PyPI `altcha` library (ALTCHA's Python implementation, not
the Rust crate the service uses), for the proof-of-work tests.

    altcha_client.py solve     reads a challenge (JSON) on stdin, prints the base64 payload
                               the widget would send
    altcha_client.py foreign   prints the payload of a challenge made and signed elsewhere
                               (its own key), solved: valid ALTCHA, not the service's

Exit status 3: the library is missing (install: see requirements.txt).
"""

import json
import secrets
import sys
import time

try:
    import altcha
except ImportError:
    sys.stderr.write(
        "the PyPI altcha library is missing: "
        "python3 -m pip install -r tests/pow/requirements.txt\n"
    )
    sys.exit(3)


def solved_payload(challenge):
    solution = altcha.solve_challenge(challenge, timeout=60.0)
    if solution is None:
        sys.exit("no solution within 60 s")
    return altcha.Payload(challenge, solution).to_base64()


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "solve":
        challenge = altcha.Challenge.from_dict(json.load(sys.stdin))
        print(solved_payload(challenge))
    elif command == "foreign":
        challenge = altcha.create_challenge(
            algorithm="PBKDF2/SHA-256",
            cost=10,
            counter=secrets.randbelow(50),
            expires_at=int(time.time()) + 300,
            hmac_secret=secrets.token_hex(32),
            hmac_key_secret=secrets.token_hex(32),
        )
        print(solved_payload(challenge))
    else:
        sys.exit(f"usage: {sys.argv[0]} solve|foreign")


if __name__ == "__main__":
    main()
