"""Reads one received message on stdin and prints what an independent reader finds in it, as
JSON: whether its DKIM signature verifies (dkimpy, with the published key record given as the
first argument standing in for DNS), its headers decoded (Python's email package), and its
text and HTML parts."""
import json
import sys
from email import policy
from email.parser import BytesParser

import dkim

record = sys.argv[1].encode() if len(sys.argv) > 1 else None
raw = sys.stdin.buffer.read()

looked_up = []


def dns(name, timeout=5):
    looked_up.append(name.decode())
    return record


verified = dkim.verify(raw, dnsfunc=dns) if record else False
message = BytesParser(policy=policy.default).parsebytes(raw)
parts = {}
for part in message.walk():
    if part.get_content_maintype() == "text":
        parts[part.get_content_type()] = part.get_content()
print(json.dumps({
    "dkim": bool(verified),
    "looked_up": looked_up,
    "headers": [[name, str(value)] for name, value in message.items()],
    "text": parts.get("text/plain"),
    "html": parts.get("text/html"),
}))
