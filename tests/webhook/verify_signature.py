"""The gateway's side of vcode's webhook signature, exactly as docs/security-at-rest.md shows
it (a test checks that the block below is the documented one, and runs it on requests vcode
sent).

    WEBHOOK_SECRET=... python3 verify_signature.py TIMESTAMP SIGNATURE [NOW] < body

exits 0 if the body is vcode's, signed less than 5 minutes before NOW (default: the clock),
else 1 with the reason on stderr.
"""

# --- recipe ---
import hashlib
import hmac
import time

TOLERANCE_SECS = 300


def verify(secret: bytes, timestamp: str, signature: str, body: bytes, now=None) -> bool:
    """True if vcode signed `body` (the raw bytes) at `timestamp`, within the tolerance."""
    now = time.time() if now is None else now
    if not (timestamp.isascii() and timestamp.isdigit()):
        return False
    if abs(now - int(timestamp)) > TOLERANCE_SECS:
        return False  # too old (a replay) or from a clock far off
    signed = timestamp.encode() + b"." + body
    expected = "v1=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)
# --- end of recipe ---


if __name__ == "__main__":
    import os
    import sys

    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    # From the environment, not the command line, which other users can read.
    secret = os.environ["WEBHOOK_SECRET"].encode()
    timestamp, signature = sys.argv[1], sys.argv[2]
    now = float(sys.argv[3]) if len(sys.argv) == 4 else None
    if verify(secret, timestamp, signature, sys.stdin.buffer.read(), now):
        sys.exit(0)
    print("refused: wrong signature or timestamp outside the window", file=sys.stderr)
    sys.exit(1)
