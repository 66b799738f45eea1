#!/usr/bin/env python3
"""Drives vcode's operator console in headless Chromium on a laptop-sized window (1366 × 768)
after real traffic, against the real fraud guard, and keeps a screenshot of each step:

    python3 tests/browser/console_flow.py --url http://127.0.0.1:8080 \\
        --admin-url http://127.0.0.1:9091 --token <VCODE_ADMIN_TOKEN> \\
        --open-admin-url http://127.0.0.1:9092 --budget 12 --evidence 3 \\
        --screenshots target/console-screenshots

`--url` is a vcode in dev mode sending its SMS through the fake gateway `--gateway-url` (its
`/sms/received` lists them) and taking that gateway's receipts signed with `--receipt-secret`, (codes are read from the dev inbox) serving CN and GB, whose
operator listener `--admin-url` asks for `--token`, with a per-client budget of `--budget` SMS an
hour, a fraud guard whose levels refuse a range without history past `--evidence` unexplained
unverified sends (`VCODE_FRAUD_EVIDENCE`; the refusal blocks its prefix for the first strike's
15 minutes), a grace period longer than this flow, and the price table PRICES;
`--open-admin-url` is the operator listener of one with no token. The traffic goes through the
public API as users and a pumping bot would send it: CN and GB users verify their codes as they
come (but one of each), the bot's numbers, spread over its prefix, never verify until the guard
refuses the prefix (`40300`). The console must show that traffic and the suspended prefix (its
reason and its level's evidence) as the operator routes' JSON says, safe-list a number and
remove it again (the configured entry `CONFIGURED_SAFE` read-only, a bad entry refused with the
route's message), lift the suspension in one click (the prefix is served again), and show sends
past the budget as quota refusals. A failed step
raises, with a screenshot of the page as it was (`failed-<step>.png`).
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

from demo_flow import browser

PRICES = {"CN": 0.045, "GB": 0.040}
# Users: each code verified as it comes, but the last of each country's.
CN_PHONES = [f"+861380013{n:04d}" for n in range(8101, 8106)]
GB_PHONES = [f"+4474001234{n:02d}" for n in range(51, 54)]
USERS = CN_PHONES + GB_PHONES
UNVERIFIED = {CN_PHONES[-1], GB_PHONES[-1]}
# The bot's prefix (China Mobile's 150 range): never verified. Its numbers differ from the
# prefix's next two digits on, so that no narrower range (5 or 7 digits) holds more than one of
# them: the prefix itself is the range the levels refuse.
PUMPED_PREFIX = "86150"
PUMPED_COUNTRY = "CN"
PUMPED = [f"+86150{n:02d}13{8300 + n:04d}" for n in range(1, 31)]
OVER_BUDGET = [f"+861390013{n:04d}" for n in range(8201, 8203)]
# Sends the guard refused: the one that tipped the prefix over, and one while it is blocked.
REFUSED = 2
# VCODE_FRAUD_SAFE_LIST of both consoles' vcode (London's fixed lines: never sent to here).
CONFIGURED_SAFE = "+4420"


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


def send(url, phone, expected=200, code=None):
    status, body = call(f"{url}/api/v1/otp/send", {"phone": phone})
    assert status == expected and (code is None or body["code"] == code), (phone, status, body)
    return body


def verify(url, phone, verification_id):
    """Verifies the latest code sent to `phone` under the id its send answered."""
    _, outbox = call(f"{url}/api/v1/dev/inbox?phone={urllib.parse.quote(phone)}")
    code = outbox["data"]["messages"][-1]["code"]
    status, body = call(f"{url}/api/v1/otp/verify", {"verification_id": verification_id, "code": code})
    assert status == 200 and body["data"]["verified"], (phone, status, body)


def post_receipts(args):
    """The gateway's signed receipts for the users' SMS: delivered, but those of UNVERIFIED,
    undelivered. Returns the expected counts by country: {country: (delivered, undelivered)}."""
    _, received = call(args.gateway_url + "/received")
    expected = {}
    for message in received:
        phone = message["phone"]
        if phone not in USERS:
            continue
        status = "undelivered" if phone in UNVERIFIED else "delivered"
        body = json.dumps({"message_id": message["message_id"], "status": status}).encode()
        now = str(int(__import__("time").time()))
        mac = hmac.new(args.receipt_secret.encode(), now.encode() + b"." + body, hashlib.sha256)
        request = urllib.request.Request(f"{args.url}/api/v1/receipts/webhook", data=body, method="POST",
                                         headers={"content-type": "application/json",
                                                  "x-vcode-timestamp": now,
                                                  "x-vcode-signature": "v1=" + mac.hexdigest()})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.load(response)["data"]["changed"] == 1, message
        country = "CN" if phone in CN_PHONES else "GB"
        delivered, undelivered = expected.get(country, (0, 0))
        expected[country] = (delivered + (status == "delivered"), undelivered + (status == "undelivered"))
    return expected


def drive_traffic(args):
    """Users' sends, verified as they come (but UNVERIFIED), then the bot's into PUMPED_PREFIX
    until the guard refuses the prefix; returns the bot's numbers not used yet."""
    for phone in USERS:
        sent = send(args.url, phone)
        if phone not in UNVERIFIED:
            verify(args.url, phone, sent["data"]["verification_id"])
    # The users' conversions reach the guard's levels in the background: let them, or CN would
    # still look unconverted to the guard (a busy machine may take a while).
    time.sleep(1.5)
    pumped = iter(PUMPED)
    for _ in range(args.evidence):
        send(args.url, next(pumped))
    for _ in range(REFUSED):
        refused = send(args.url, next(pumped), expected=403, code=40300)
        # Blocked for the first strike's cool-off (15 minutes), not a moment.
        assert 14 * 60 <= refused["data"]["retry_after"] <= 15 * 60, refused
    print(f"  traffic: {len(CN_PHONES)} CN and {len(GB_PHONES)} GB users, "
          f"{len(USERS) - len(UNVERIFIED)} verified; {args.evidence} sent to +{PUMPED_PREFIX} "
          f"unverified, then {REFUSED} refused (40300)")
    return pumped


class Flow:
    def __init__(self, args, driver, pumped):
        self.args, self.driver, self.pumped = args, driver, pumped
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

    def cells(self, css):
        return [cell.text.strip() for cell in self.driver.find_elements(By.CSS_SELECTOR, f"{css} td")]

    def loads(self):
        return int(self.driver.execute_script("return document.body.dataset.loads || '0'"))

    def reload(self):
        """Clicks Refresh and waits for the page to have drawn the new data."""
        before = self.loads()
        self.driver.find_element(By.ID, "refresh").click()
        self.wait.until(lambda _: self.loads() > before)

    def admin(self, path):
        """The `data` of an operator route, as the console reads it."""
        status, body = call(self.args.admin_url + path, headers={"authorization": f"Bearer {self.args.token}"})
        assert status == 200, (path, status, body)
        return body["data"]

    def chart(self, element_id):
        """The labels and data of a chart, as drawn (uPlot's own instance)."""
        return self.driver.execute_script(
            "const plot = charts[arguments[0]];"
            "return {labels: plot.series.map((s) => s.label), data: plot.data};", element_id)

    def browser_problems(self):
        """What the page's console reported, but for the answers the console expects: 401
        before the token, 404 from the stats route without a token configured."""
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

        def shows_the_suspended_prefix():
            self.visible("token").send_keys(self.args.token)
            d.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
            self.visible("console")
            self.wait.until(lambda _: self.loads() >= 1)
            # The token is this tab's, never in the URL.
            assert self.args.token not in d.current_url
            assert d.execute_script("return sessionStorage.getItem('vcode-console-token')") == self.args.token
            self.check_traffic()
            self.check_suspended_prefix()
            problems = self.browser_problems()
            assert not problems, problems
        self.step("shows-the-suspended-prefix", shows_the_suspended_prefix)

        def safe_lists_a_number():
            self.check_configured_safe_entry()
            safe = PUMPED[-1]
            d.find_element(By.ID, "safe-entry").send_keys(safe)
            d.find_element(By.ID, "safe-by").send_keys("console test")
            before = self.loads()
            d.find_element(By.CSS_SELECTOR, "#safe-add button[type=submit]").click()
            self.wait.until(lambda _: self.loads() > before)
            cells = self.cells(f"#safe-list tr[data-entry='{safe}']")
            assert cells[:2] == [safe, "every send"] and cells[2].startswith("console test, "), cells
            assert cells[3] == "Remove", cells
            listed = self.admin("/api/v1/admin/fraud/safe-list")["entries"]
            assert [(e["entry"], e["source"], e.get("added_by")) for e in listed] == \
                [(CONFIGURED_SAFE, "configured", None), (safe, "operator", "console test")], listed
            assert d.find_element(By.ID, "safe-entry").get_attribute("value") == ""
            # A bad entry: the route's message, nothing added.
            d.find_element(By.ID, "safe-entry").send_keys("86x150")
            before = self.loads()
            d.find_element(By.CSS_SELECTOR, "#safe-add button[type=submit]").click()
            self.wait.until(lambda _: self.loads() > before)
            error = self.visible("safe-error").text
            assert "86x150" in error and "digits" in error, error
            assert len(self.admin("/api/v1/admin/fraud/safe-list")["entries"]) == 2
            refused = [e for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
            assert all("status of 400" in e["message"] for e in refused), refused
            d.find_element(By.ID, "safe-entry").clear()
            self.shot("safe-listed")
            # Removed in one click.
            before = self.loads()
            d.find_element(By.CSS_SELECTOR, f"#safe-list tr[data-entry='{safe}'] button.unlist").click()
            self.wait.until(lambda _: self.loads() > before)
            assert not d.find_elements(By.CSS_SELECTOR, f"#safe-list tr[data-entry='{safe}']")
            assert not d.find_element(By.ID, "safe-error").is_displayed()
            assert [e["entry"] for e in self.admin("/api/v1/admin/fraud/safe-list")["entries"]] == [CONFIGURED_SAFE]
        self.step("safe-lists-a-number", safe_lists_a_number)

        def lifts_the_suspension():
            lift = d.find_element(By.CSS_SELECTOR, f"#suspensions tr[data-prefix='{PUMPED_PREFIX}'] button.lift")
            before = self.loads()
            lift.click()
            self.wait.until(lambda _: self.loads() > before)
            assert not d.find_elements(By.CSS_SELECTOR, "#suspensions tbody tr"), "still listed"
            assert self.text("#suspensions-note") == "None: every prefix is served."
            assert self.text("#tile-suspended") == "0"
            state = d.find_element(By.CSS_SELECTOR, f"#prefixes tr[data-prefix='{PUMPED_PREFIX}']")
            assert state.get_attribute("data-state") == "ok", state.get_attribute("data-state")
            # The operator routes agree, and the prefix is served again.
            assert self.admin("/api/v1/admin/fraud/suspensions")["suspensions"] == []
            send(self.args.url, next(self.pumped))
            self.reload()
            sends = len(USERS) + self.args.evidence + 1
            assert self.text("#tile-sends") == str(sends), (self.text("#tile-sends"), sends)
            cells = self.cells(f"#prefixes tr[data-prefix='{PUMPED_PREFIX}']")
            assert cells[1] == str(self.args.evidence + 1) and cells[5] == "ok", cells
        self.step("lifts-the-suspension", lifts_the_suspension)

        def shows_quota_refusals():
            # Every send so far was within the per-client budget; these two are past it.
            assert len(USERS) + self.args.evidence + 1 == self.args.budget
            for phone in OVER_BUDGET:
                send(self.args.url, phone, expected=429)
            self.reload()
            over = self.text("#refusals tr[data-quota=quota_ip] td:nth-child(2)")
            assert over == str(len(OVER_BUDGET)), over
            assert d.find_elements(By.CSS_SELECTOR, "#chart-refusals canvas"), "no refusals chart"
        self.step("shows-quota-refusals", shows_quota_refusals)

        def shows_the_delivery_rate():
            # Before any receipt the panel says why it is empty.
            assert "No delivery receipt" in self.text("#delivery-note"), self.text("#delivery-note")
            expected = post_receipts(self.args)
            assert expected == {"CN": (len(CN_PHONES) - 1, 1), "GB": (len(GB_PHONES) - 1, 1)}, expected
            self.reload()
            route = self.admin("/api/v1/admin/delivery-rates?hours=1")["rates"]
            assert {(r["country"], r["delivered"], r["undelivered"]) for r in route} == \
                {(country, *counts) for country, counts in expected.items()}, route
            for rate in route:
                cells = self.cells(f"#delivery tr[data-provider='{rate['provider']}'][data-country='{rate['country']}']")
                assert cells[0] == "webhook" and cells[1].startswith(rate["country"]), cells
                assert cells[2:4] == [str(rate["delivered"]), str(rate["undelivered"])], (cells, rate)
                assert cells[4] == f"{round(rate['rate'] * 100)} %", (cells, rate)
            assert not d.find_element(By.ID, "delivery-note").is_displayed()
        self.step("shows-the-delivery-rate", shows_the_delivery_rate)

        def stays_in_the_tab():
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
            assert self.text("#tile-sends") == "0"
            assert self.text("#suspensions-note") == "None: every prefix is served."
            self.check_configured_safe_entry()
            problems = self.browser_problems()
            assert not problems, problems
        self.step("no-token-configured", open_without_a_token)

    def check_configured_safe_entry(self):
        """VCODE_FRAUD_SAFE_LIST's entry: listed for every send, read-only (no Remove)."""
        cells = self.cells(f"#safe-list tr[data-entry='{CONFIGURED_SAFE}']")
        assert cells == [CONFIGURED_SAFE, "every send", "—", "configured"], cells
        row = self.driver.find_element(By.CSS_SELECTOR, f"#safe-list tr[data-entry='{CONFIGURED_SAFE}']")
        assert row.get_attribute("data-source") == "configured"
        assert not row.find_elements(By.CSS_SELECTOR, "button")

    def check_traffic(self):
        """Tiles, charts and spend against the traffic route's JSON and what was sent."""
        d = self.driver
        traffic = self.admin("/api/v1/admin/fraud/traffic?minutes=60")
        sends = len(USERS) + self.args.evidence
        verified = len(USERS) - len(UNVERIFIED)
        assert sum(b["sends"] for b in traffic["series"]) == sends, traffic["series"]
        assert sum(b["refused"] for b in traffic["series"]) == REFUSED, traffic["series"]
        assert self.text("#tile-sends") == str(sends), self.text("#tile-sends")
        assert self.text("#tile-verified") == str(verified), self.text("#tile-verified")
        assert self.text("#tile-refused") == str(REFUSED), self.text("#tile-refused")
        assert self.text("#tile-suspended") == "1", self.text("#tile-suspended")
        assert self.text("#level") == f"fraud guard: {traffic['level']}", self.text("#level")
        # The charts: every send in the sends series, a conversion line per country.
        drawn = self.chart("chart-traffic")
        assert drawn["labels"][1:] == ["sent", "verified", "refused by the guard"], drawn["labels"]
        assert [sum(series) for series in drawn["data"][1:]] == [sends, verified, REFUSED], drawn["data"][1:]
        conversion = self.chart("chart-conversion")
        assert {"CN", "GB"} <= set(conversion["labels"]), conversion["labels"]
        by_country = {"CN": len(CN_PHONES) + self.args.evidence, "GB": len(GB_PHONES)}
        for country, count in by_country.items():
            assert sum(b["by_country"].get(country, {}).get("sends", 0) for b in traffic["series"]) == count
            before = self.loads()
            Select(d.find_element(By.ID, "country")).select_by_value(country)
            self.wait.until(lambda _: self.loads() > before)
            drawn = self.chart("chart-traffic")
            assert sum(drawn["data"][1]) == count, (country, drawn["data"][1])
        before = self.loads()
        Select(d.find_element(By.ID, "country")).select_by_value("")
        self.wait.until(lambda _: self.loads() > before)
        d.execute_script("document.activeElement.blur()")
        # The spend: SMS per country × the price table.
        for country, price in PRICES.items():
            cells = self.cells(f"#spend tr[data-country={country}]")
            assert cells and cells[1] == str(by_country[country]), cells
            assert cells[3] == f"${price * by_country[country]:.2f}", cells[3]
        # The top prefixes, as the route ranks them; the guard's conversion is null before any
        # send is past the grace period, and says so.
        rows = d.find_elements(By.CSS_SELECTOR, "#prefixes tbody tr")
        assert [r.get_attribute("data-prefix") for r in rows] == [p["prefix"] for p in traffic["top_prefixes"]]
        for prefix in traffic["top_prefixes"]:
            cells = self.cells(f"#prefixes tr[data-prefix='{prefix['prefix']}']")
            assert cells[0] == f"+{prefix['prefix']} {prefix['country']}", cells
            assert cells[1:4] == [str(prefix["sends"]), str(prefix["verified"]), str(prefix["unconverted"])], cells
            assert prefix["conversion"] is None and cells[4] == "—", (prefix, cells)
            assert cells[5] == prefix["state"], (prefix, cells)

    def check_suspended_prefix(self):
        """The pumped prefix: suspended in the suspended table (its level's reason and evidence)
        and in the top prefixes, with its country, as the suspensions route says."""
        d = self.driver
        listed = self.admin("/api/v1/admin/fraud/suspensions")["suspensions"]
        assert [s["prefix"] for s in listed] == [PUMPED_PREFIX], listed
        suspended = listed[0]
        assert suspended["country"] == PUMPED_COUNTRY and suspended["reason"] == "unconverted", suspended
        # The range's recent sends, the refused one included, none verified.
        assert (suspended["sends"], suspended["conversions"]) == (self.args.evidence + 1, 0), suspended
        evidence = suspended["evidence"]
        assert evidence.startswith(f"range3 {PUMPED_PREFIX}: unconverted sends beyond"), suspended
        row = d.find_element(By.CSS_SELECTOR, f"#suspensions tr[data-prefix='{PUMPED_PREFIX}']")
        assert row.get_attribute("data-reason") == "unconverted"
        cells = self.cells(f"#suspensions tr[data-prefix='{PUMPED_PREFIX}']")
        assert cells[0] == f"+{PUMPED_PREFIX} {PUMPED_COUNTRY}", cells
        # The reason, its level's evidence under it.
        assert cells[1].splitlines() == ["unconverted", evidence], cells
        assert cells[2] == str(suspended["sends"]), cells
        # Blocked for the first strike's cool-off (15 minutes).
        assert cells[3] == "0 %" and cells[4] in ("in 14 min", "in 15 min"), cells
        # The evidence wraps in its cell: the table fits its panel, the Lift button in view.
        widths = d.execute_script(
            "const t = document.getElementById('suspensions');"
            "return [t.scrollWidth, t.parentElement.clientWidth];")
        assert widths[0] <= widths[1], f"the suspensions table overflows its panel: {widths}"
        label = row.find_element(By.CSS_SELECTOR, ".state")
        assert "state-suspended" in label.get_attribute("class").split(), label.get_attribute("class")
        assert label.get_attribute("title") == evidence, label.get_attribute("title")
        title = row.find_element(By.CSS_SELECTOR, "td:first-child").get_attribute("title")
        assert title == "China", title
        cells = self.cells(f"#prefixes tr[data-prefix='{PUMPED_PREFIX}']")
        assert cells[1] == str(self.args.evidence) and cells[5] == "suspended", cells


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--open-admin-url", required=True)
    parser.add_argument("--budget", type=int, required=True)
    parser.add_argument("--evidence", type=int, required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--gateway-url", required=True)
    parser.add_argument("--receipt-secret", required=True)
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    pumped = drive_traffic(args)
    driver = browser(1366, 768)
    try:
        Flow(args, driver, pumped).run()
    finally:
        driver.quit()
    print("console flow passed")


if __name__ == "__main__":
    main()
