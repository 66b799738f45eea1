#!/usr/bin/env python3
"""Drives vcode's demo page in headless Chromium (Debian's chromium and chromium-driver) through
the whole flow, as a person would, and keeps a screenshot of each step:

    python3 tests/browser/demo_flow.py --url http://127.0.0.1:8080 --screenshots target/demo-screenshots

vcode must run in dev mode (the page shows the code from the dev inbox). The captcha is read
the way a person reads the picture: here from the dev route that tells its answer. A failed
step raises, with a screenshot of the page as it was (`failed-<step>.png`).
"""

import argparse
import json
import os
import sys
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

PHONE = "+8613800138123"
# Written with capitals: the token's `sub` is the address folded to lower case.
EMAIL = "Ada.Lovelace@Example.COM"


def browser(width, height):
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(flag)
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(20)
    return driver


class Flow:
    def __init__(self, url, screenshots, driver, prefix):
        self.url, self.screenshots, self.driver, self.prefix = url, screenshots, driver, prefix
        self.wait = WebDriverWait(driver, 20)
        self.count = 0

    def shot(self, name):
        self.count += 1
        path = os.path.join(self.screenshots, f"{self.prefix}{self.count:02d}-{name}.png")
        self.driver.save_screenshot(path)
        print(f"  screenshot {path}")

    def step(self, name, action):
        print(f"step: {self.prefix}{name}")
        try:
            action()
        except Exception:
            self.driver.save_screenshot(os.path.join(self.screenshots, f"failed-{self.prefix}{name}.png"))
            logs = self.driver.get_log("browser") if hasattr(self.driver, "get_log") else []
            print(f"browser console: {logs}", file=sys.stderr)
            raise
        self.shot(name)

    def visible(self, element_id):
        return self.wait.until(seen.visibility_of_element_located((By.ID, element_id)))

    def type_into(self, element_id, text):
        field = self.visible(element_id)
        field.clear()
        field.send_keys(text)

    def dev_json(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.load(response)

    def run(self, gate, channel):
        d = self.driver
        # The field the flow types into and what the page and the token must show of it.
        field, destination, subject = (("email", EMAIL, EMAIL.lower()) if channel == "email"
                                       else ("phone", PHONE, PHONE))

        def open_page():
            d.get(self.url + "/demo")
            self.visible("phone")
            assert "vcode demo" in d.title, d.title
            if gate == "captcha":
                # The picture has loaded: it has a size.
                self.wait.until(lambda _: d.execute_script(
                    "const i = document.getElementById('captcha-image'); return i.complete && i.naturalWidth > 0"))
        self.step("open", open_page)

        def wrong_gate():
            self.type_into("phone", PHONE)
            if gate == "captcha":
                self.type_into("captcha-answer", "WRONG")
                self.visible("send").click()
                error = self.visible("error")
                assert error.get_attribute("data-code") == "40020", error.get_attribute("data-code")
                assert "picture" in error.text, error.text
                # A fresh picture replaces the burnt one.
                self.wait.until(lambda _: d.execute_script(
                    "const i = document.getElementById('captcha-image'); return i.complete && i.naturalWidth > 0"))
        if gate == "captcha":
            self.step("wrong-captcha-shown-as-a-sentence", wrong_gate)

        def pass_gate():
            if channel == "email":
                self.visible("channel-email").click()
                # Only the chosen field is shown (and sent).
                assert not d.find_element(By.ID, "phone").is_displayed()
            self.type_into(field, destination)
            if gate == "captcha":
                captcha_id = self.wait.until(lambda _: self.visible("captcha-image").get_attribute("data-captcha-id"))
                answer = self.dev_json(f"/api/v1/dev/captcha/{captcha_id}")["data"]["answer"]
                self.type_into("captcha-answer", answer)
            if gate == "pow":
                d.execute_script("document.getElementById('altcha').verify()")
                self.wait.until(lambda _: d.execute_script(
                    "return document.getElementById('altcha').getState() === 'verified'"))
        self.step("gate-passed", pass_gate)

        def send():
            self.visible("send").click()
            self.visible("step-code")
            self.visible("outbox-code")
            assert destination in self.visible("sent-to").text
            kind = self.visible("outbox-kind").text
            assert kind == ("email" if channel == "email" else "SMS"), kind
        self.step("code-sent", send)

        def wrong_code():
            code = self.visible("outbox-code").text.strip()
            wrong = "000000" if code != "000000" else "111111"
            self.type_into("code", wrong)
            self.visible("verify").click()
            error = self.visible("error")
            assert error.get_attribute("data-code") == "40010", error.text
            assert "tries left" in error.text, error.text
        self.step("wrong-code-shown-as-a-sentence", wrong_code)

        def verify():
            code = self.visible("outbox-code").text.strip()
            assert code.isdigit(), code
            self.type_into("code", code)
            self.visible("verify").click()
            self.visible("step-done")
            token = self.visible("token").text
            claims = self.visible("claims").text
            assert not self.driver.find_element(By.ID, "error").is_displayed()
            if token.count(".") == 2:
                payload = json.loads(claims.split("\n\nheader:")[0])
                assert payload["sub"] == subject, payload
                assert payload["channel"] == ("email" if channel == "email" else "sms"), payload
                assert payload["purpose"] == "login", payload
                print(f"  token claims: {payload}")
            else:
                print(f"  no token in this build: {token}")
        self.step("verified-token-and-claims", verify)

        def docs_page():
            # The docs page renders the description under its CSP (Swagger UI, vendored).
            d.get(self.url + "/docs")
            self.wait.until(lambda _: any(
                "/api/v1/otp/send" in path.text
                for path in d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")))
            blocked = [entry for entry in d.get_log("browser") if "Content Security Policy" in entry["message"]]
            assert not blocked, blocked
        if gate == "captcha" and channel == "sms":
            self.step("docs-page", docs_page)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--gate", choices=["none", "captcha", "pow"], default="captcha")
    parser.add_argument("--channel", choices=["sms", "email"], default="sms")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--width", type=int, default=390)
    parser.add_argument("--height", type=int, default=844)
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    driver = browser(args.width, args.height)
    try:
        Flow(args.url, args.screenshots, driver, args.prefix).run(args.gate, args.channel)
    finally:
        driver.quit()
    print("demo flow passed")


if __name__ == "__main__":
    main()
