#!/usr/bin/env python3
"""Times the real ALTCHA widget solving a running vcode's challenges in headless Chromium, and
checks that vcode accepts every payload it produces.

    npm install --prefix tests/pow            # the widget (package.json)
    apt-get install chromium                  # or set CHROMIUM
    VCODE_BIND=127.0.0.1:8080 cargo run --release &
    python3 tests/pow/widget_timing.py [--vcode http://127.0.0.1:8080] [--runs 10] [--workers N]

A local page (this script's own server, which passes the challenge route through, so the page
and the challenge share an origin) runs the widget `--runs` times in a row with `--workers`
web workers (default: the browser's choice, one per core) and posts the times back.
"""

import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WIDGET = os.path.join(HERE, "node_modules", "altcha", "dist", "main", "altcha.js")

PAGE = """<!doctype html>
<meta charset="utf-8">
<altcha-widget id="widget" challenge="/challenge" %(workers)s></altcha-widget>
<script type="module">
  import '/altcha.js';
  await customElements.whenDefined('altcha-widget');
  const widget = document.getElementById('widget');
  widget.configure({ minDuration: 0 });
  const runs = [];
  try {
    for (let i = 0; i < %(runs)d; i++) {
      widget.reset();
      const started = performance.now();
      const { payload } = await widget.verify();
      runs.push({ ms: performance.now() - started, payload });
    }
  } catch (error) {
    runs.push({ error: String(error) });
  }
  await fetch('/result', { method: 'POST', body: JSON.stringify({
    cores: navigator.hardwareConcurrency, userAgent: navigator.userAgent, runs }) });
</script>
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vcode", default="http://127.0.0.1:8080")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int)
    args = parser.parse_args()
    if not os.path.exists(WIDGET):
        sys.exit("the widget is missing: npm install --prefix tests/pow")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser"
    )
    if not chromium:
        sys.exit("no Chromium: apt-get install chromium, or set CHROMIUM")

    page = PAGE % {
        "runs": args.runs,
        "workers": f'workers="{args.workers}"' if args.workers else "",
    }
    result = {}
    done = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def reply(self, body, content_type):
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/":
                self.reply(page.encode(), "text/html")
            elif self.path == "/altcha.js":
                with open(WIDGET, "rb") as widget:
                    self.reply(widget.read(), "text/javascript")
            elif self.path == "/challenge":
                url = args.vcode + "/api/v1/pow/challenge"
                with urllib.request.urlopen(url) as answer:
                    self.reply(answer.read(), "application/json")
            else:
                self.send_error(404)

        def do_POST(self):
            length = int(self.headers["content-length"])
            result.update(json.loads(self.rfile.read(length)))
            self.reply(b"{}", "application/json")
            done.set()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={profile}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            finished = done.wait(timeout=60 + 30 * args.runs)
        finally:
            browser.terminate()
            browser.wait()
    server.shutdown()
    if not finished:
        sys.exit("the page did not report within the time allowed")

    runs = result["runs"]
    failed = [run["error"] for run in runs if "error" in run]
    if failed:
        sys.exit(f"the widget failed: {failed}")
    accepted = sum(verify(args.vcode, run["payload"]) for run in runs)
    times = sorted(run["ms"] for run in runs)
    print(f"{result['userAgent']}")
    print(f"{len(times)} solves, {args.workers or result['cores']} workers "
          f"({result['cores']} cores): mean {statistics.mean(times):.0f} ms, "
          f"median {statistics.median(times):.0f} ms, max {times[-1]:.0f} ms; "
          f"vcode accepted {accepted} of {len(runs)} payloads")
    sys.exit(0 if accepted == len(runs) else 1)


def verify(vcode, payload):
    request = urllib.request.Request(
        vcode + "/api/v1/pow/verify",
        data=json.dumps({"payload": payload}).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return json.load(answer)["data"]["verified"] is True
    except urllib.error.HTTPError:
        return False


if __name__ == "__main__":
    main()
