#!/usr/bin/env python3
"""Drives vcode's operator console in headless Chromium on a laptop-sized window (1366 × 768)
after real traffic, and keeps a screenshot of each step:

    python3 tests/browser/console_flow.py --url http://127.0.0.1:8080 \\
        --admin-url http://127.0.0.1:9091 --token <VCODE_ADMIN_TOKEN> \\
        --open-admin-url http://127.0.0.1:9092 --screenshots target/console-screenshots

`--url` is a vcode in dev mode (codes are read from the dev outbox) whose operator listener
`--admin-url` asks for `--token`, with a per-client budget of BUDGET SMS an hour and the price
table PRICES; `--open-admin-url` is the operator listener of one with no token. The traffic goes
through the public API as users would send it: sends to CN and GB numbers, most verified with the
code the outbox shows, then sends past the budget. The console must show that traffic. A failed
step raises, with a screenshot of the page as it was (`failed-<step>.png`).
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

from demo_flow import browser

BUDGET = 8
# Sent to (and mostly verified by) users; the per-client budget refuses what comes after.
CN_PHONES = [f"+861380013{n:04d}" for n in range(8101, 8106)]
GB_PHONES = [f"+4474001234{n:02d}" for n in range(51, 54)]
assert len(CN_PHONES) + len(GB_PHONES) == BUDGET
UNVERIFIED = {CN_PHONES[-1], GB_PHONES[-1]}
OVER_BUDGET = [f"+861390013{n:04d}" for n in range(8201, 8203)]
GUARD_MISSING = "This instance does not serve the fraud guard's routes."


def call(url, body=None, headers=None):
    """The status and JSON body of one request (errors are answers too)."""
    request = urllib.request.Request(url, method="POST" if body is not None else "GET",
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def drive_traffic(url):
    """Sends within the budget (all but UNVERIFIED verified with the outbox's code), then
    sends past it; returns how many went out per country."""
    for phone in CN_PHONES + GB_PHONES:
        status, body = call(f"{url}/api/v1/otp/send", {"phone": phone})
        assert status == 200, (phone, status, body)
    for phone in CN_PHONES + GB_PHONES:
        if phone in UNVERIFIED:
            continue
        _, outbox = call(f"{url}/api/v1/dev/outbox?phone={urllib.parse.quote(phone)}")
        code = outbox["data"]["messages"][-1]["code"]
        status, body = call(f"{url}/api/v1/otp/verify", {"phone": phone, "code": code})
        assert status == 200 and body["data"]["verified"], (phone, status, body)
    for phone in OVER_BUDGET:
        status, body = call(f"{url}/api/v1/otp/send", {"phone": phone})
        assert status == 429, (phone, status, body)
    print(f"  traffic: {len(CN_PHONES)} CN and {len(GB_PHONES)} GB sent, "
          f"{len(CN_PHONES) + len(GB_PHONES) - len(UNVERIFIED)} verified, {len(OVER_BUDGET)} over the budget")


class Flow:
    def __init__(self, args, driver):
        self.args, self.driver = args, driver
        self.wait = WebDriverWait(driver, 20)
        self.count = 0

    def shot(self, name):
        self.count += 1
        path = os.path.join(self.args.screenshots, f"console-{self.count:02d}-{name}.png")
        self.driver.save_screenshot(path)
        print(f"  screenshot {path}")

    def step(self, name, action):
        print(f"step: console-{name}")
        try:
            action()
        except Exception:
            self.driver.save_screenshot(os.path.join(self.args.screenshots, f"failed-console-{name}.png"))
            print(f"browser console: {self.driver.get_log('browser')}", file=sys.stderr)
            raise
        self.shot(name)

    def visible(self, element_id):
        return self.wait.until(seen.visibility_of_element_located((By.ID, element_id)))

    def text(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css).text.strip()

    def loads(self):
        return int(self.driver.execute_script("return document.body.dataset.loads || '0'"))

    def browser_problems(self):
        """What the page's console reported, but for the answers the console expects: 401
        before the token, 404 from routes an instance does not serve."""
        expected = ("status of 401", "status of 404")
        return [entry for entry in self.driver.get_log("browser")
                if entry["level"] == "SEVERE"
                and not (entry.get("source") == "network" and any(e in entry["message"] for e in expected))
                or "Content Security Policy" in entry["message"]]

    def run(self):
        d = self.driver

        def asks_for_the_token():
            d.get(self.args.admin_url + "/console")
            self.visible("token")
            assert "vcode console" in d.title, d.title
            assert not d.find_element(By.ID, "console").is_displayed()
            self.visible("token").send_keys("not-the-token")
            d.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
            refused = self.visible("login-error")
            assert "refused" in refused.text, refused.text
        self.step("asks-for-the-token", asks_for_the_token)

        def shows_the_traffic():
            self.visible("token").send_keys(self.args.token)
            d.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
            self.visible("console")
            self.wait.until(lambda _: self.loads() >= 1)
            # The token is this tab's, never in the URL.
            assert self.args.token not in d.current_url
            assert d.execute_script("return sessionStorage.getItem('vcode-console-token')") == self.args.token
            # Quota refusals of today, from the stats route.
            over = self.text("#refusals tr[data-quota=quota_ip] td:nth-child(2)")
            assert over == str(len(OVER_BUDGET)), over
            assert d.find_elements(By.CSS_SELECTOR, "#chart-refusals canvas"), "no refusals chart"
            guard = self.text("#suspensions-note")
            if guard == GUARD_MISSING:
                print("  the fraud guard's routes are not served: their panels say so")
                assert self.text("#traffic-note") == GUARD_MISSING
                assert "fraud guard" in self.text("#spend-note"), self.text("#spend-note")
                assert self.text("#tile-spend") == "—"
            else:
                self.check_guard_panels()
            problems = self.browser_problems()
            assert not problems, problems
        self.step("shows-the-traffic", shows_the_traffic)

        def stays_in_the_tab():
            before = self.loads()
            d.find_element(By.ID, "refresh").click()
            self.wait.until(lambda _: self.loads() > before)
            d.refresh()
            self.visible("console")
            assert not d.find_element(By.ID, "login").is_displayed()
            d.find_element(By.ID, "forget").click()
            self.visible("token")
            assert d.execute_script("return sessionStorage.getItem('vcode-console-token')") is None
        self.step("forgets-the-token", stays_in_the_tab)

        def open_without_a_token():
            d.get(self.args.open_admin_url + "/console")
            self.visible("console")
            self.wait.until(lambda _: self.loads() >= 1)
            assert not d.find_element(By.ID, "login").is_displayed()
            note = self.text("#refusals-note")
            assert "VCODE_ADMIN_TOKEN" in note, note
            assert self.text("#refusals-total-head") == "since start"
            problems = self.browser_problems()
            assert not problems, problems
        self.step("no-token-configured", open_without_a_token)

    def check_guard_panels(self):
        d = self.driver
        sends = len(CN_PHONES) + len(GB_PHONES)
        assert self.text("#tile-sends") == str(sends), self.text("#tile-sends")
        for country, phones, price in (("CN", CN_PHONES, 0.045), ("GB", GB_PHONES, 0.040)):
            cells = d.find_elements(By.CSS_SELECTOR, f"#spend tr[data-country={country}] td")
            assert cells and cells[1].text == str(len(phones)), [c.text for c in cells]
            assert cells[3].text == f"${price * len(phones):.2f}", cells[3].text
        assert d.find_elements(By.CSS_SELECTOR, "#chart-traffic canvas"), "no traffic chart"
        assert d.find_elements(By.CSS_SELECTOR, "#prefixes tbody tr"), "no top prefix"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--open-admin-url", required=True)
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    drive_traffic(args.url)
    driver = browser(1366, 768)
    try:
        Flow(args, driver).run()
    finally:
        driver.quit()
    print("console flow passed")


if __name__ == "__main__":
    main()
