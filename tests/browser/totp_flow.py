#!/usr/bin/env python3
"""Drives the demo page's authenticator-app card in headless Chromium, as a person with an
authenticator app would: set it up, read the QR code the page shows (zxing-cpp decodes the
picture the page shows, pyotp is the app), confirm with a first code, refuse a wrong one, then
sign in with the next code and see the token (`channel` `totp`). A screenshot of each step:

    python3 tests/browser/totp_flow.py --url http://127.0.0.1:8080 --screenshots target/demo-screenshots
"""

import argparse
import base64
import io
import json
import os
import sys
import time

import pyotp
import zxingcpp
from PIL import Image
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_flow import Flow, browser  # noqa: E402


def run(flow):
    d = flow.driver
    app = {}

    def open_page():
        d.get(flow.url + "/demo")
        flow.visible("totp-enrol")
    flow.step("open", open_page)

    def enrol():
        flow.visible("totp-enrol").click()
        qr = flow.wait.until(lambda _: flow.visible("totp-qr").get_attribute("src") or None)
        assert qr.startswith("data:image/png;base64,"), qr[:40]
        picture = Image.open(io.BytesIO(base64.b64decode(qr.split(",", 1)[1])))
        [uri] = [result.text for result in zxingcpp.read_barcodes(picture)]
        app["totp"] = pyotp.parse_uri(uri)
        shown = flow.visible("totp-secret").text.replace(" ", "")
        assert shown == app["totp"].secret, (shown, app["totp"].secret)
        assert app["totp"].issuer == "vcode demo", app["totp"].issuer
    flow.step("enrolled-qr-shown", enrol)

    def confirm():
        # Early in a step, so that the next step's code stays within the skew meanwhile.
        while time.time() % 30 > 18:
            time.sleep(0.2)
        app["now"] = time.time()
        flow.type_into("totp-code", app["totp"].at(app["now"]))
        flow.visible("totp-submit").click()
        flow.wait.until(lambda _: "Confirmed" in flow.visible("totp-note").text)
        assert flow.visible("totp-submit").text == "Sign in"
    flow.step("confirmed", confirm)

    def wrong():
        right = app["totp"].at(app["now"] + 30)
        flow.type_into("totp-code", "000000" if right != "000000" else "111111")
        flow.visible("totp-submit").click()
        error = flow.visible("error")
        assert error.get_attribute("data-code") == "40010", error.text
        assert "tries left" in error.text, error.text
    flow.step("wrong-code-shown-as-a-sentence", wrong)

    def sign_in():
        flow.type_into("totp-code", app["totp"].at(app["now"] + 30))
        flow.visible("totp-submit").click()
        flow.visible("step-done")
        claims = json.loads(flow.visible("claims").text.split("\n\nheader:")[0])
        assert claims["channel"] == "totp", claims
        assert claims["sub"] == app["totp"].name, claims
        assert claims["vid"].startswith("YF"), claims
    flow.step("signed-in-token-shown", sign_in)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--prefix", default="totp-")
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    driver = browser(420, 1100)
    try:
        run(Flow(args.url, args.screenshots, driver, args.prefix))
    finally:
        driver.quit()
    print("totp flow passed")


if __name__ == "__main__":
    main()
