"""An application's webhook receiver for the event tests: verifies every request with the
official Standard Webhooks library (PyPI `standardwebhooks`) and records what came.

    python3 tests/events/receiver.py            (the secret in RECEIVER_SECRET: whsec_...)

Prints the port it listens on (loopback, chosen by the system), then serves:
  POST /hook        a webhook: answered with the current mode's status (200 by default)
                    after the current delay; recorded either way, with whether the library
                    verified it (a request that fails verification is answered 400)
  GET  /deliveries  everything recorded: [{"id", "verified", "status", "type", "data", "raw"}]
  POST /mode        {"status": 503, "delay_ms": 0}: how the next requests are answered
Exits 3 when the library is missing (the Rust test skips, or fails under TEST_REQUIRE_SDK).
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError
except ImportError as error:
    print(f"standardwebhooks is not installed: {error}", file=sys.stderr)
    sys.exit(3)

WEBHOOK = Webhook(os.environ["RECEIVER_SECRET"])
LOCK = threading.Lock()
DELIVERIES = []
MODE = {"status": 200, "delay_ms": 0}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _body(self):
        return self.rfile.read(int(self.headers.get("content-length", 0)))

    def _answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self._body()
        if self.path == "/mode":
            with LOCK:
                MODE.update(json.loads(body))
            return self._answer(200)
        with LOCK:
            status, delay_ms = MODE["status"], MODE["delay_ms"]
        if delay_ms:
            time.sleep(delay_ms / 1000)
        try:
            event = WEBHOOK.verify(body, dict(self.headers.items()))
            verified = True
        except WebhookVerificationError:
            event, verified, status = {}, False, 400
        with LOCK:
            DELIVERIES.append({
                "id": self.headers.get("webhook-id"),
                "verified": verified,
                "status": status,
                "type": event.get("type"),
                "data": event.get("data"),
                "raw": body.decode(),
            })
        self._answer(status)

    def do_GET(self):
        with LOCK:
            body = json.dumps(DELIVERIES).encode()
        self._answer(200, body)


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("RECEIVER_PORT", "0"))), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
