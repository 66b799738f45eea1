#!/usr/bin/env python3
"""Reference requests and signatures from the providers' official Python SDKs, offline.

Reads JSON on stdin: {"cases": [...]} as in tests/sdk/fixtures.json ("inputs" and "ours" of
each case), and prints {"cases": [...]} with, for each case, what the official SDK computes:

- "sdk_request": the request the SDK itself sends for the case's inputs (method, URL, headers,
  body), captured at the HTTP transport (requests.Session.send) with the SDK's clock and nonce
  fixed to the case's; nothing leaves the machine.
- "sdk_signature_of_ours": the Authorization the SDK's own signer computes for vcode's request
  ("ours"), so that vcode's signature can be compared for the very same bytes.

Exit status 3 with a message on stderr when an SDK package is missing (the Rust test then skips
loudly); install them with: python3 -m pip install -r tests/sdk/requirements.txt
"""

import json
import sys
import time
import urllib.parse
from contextlib import contextmanager

try:
    import requests
    from alibabacloud_dysmsapi20170525 import models as dysms_models
    from alibabacloud_dysmsapi20170525.client import Client as DysmsClient
    from alibabacloud_tea_openapi import models as openapi_models
    from alibabacloud_tea_openapi.utils import Utils as OpenApiUtils
    from darabonba.request import DaraRequest
    from darabonba.runtime import RuntimeOptions
    from tencentcloud.common import abstract_client as tencent_abstract_client
    from tencentcloud.common import credential as tencent_credential
    from tencentcloud.common.common_client import CommonClient as TencentClient
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from twilio.rest import Client as TwilioClient
except ImportError as missing:  # pragma: no cover - the Rust test reports it
    print(f"missing SDK package: {missing}", file=sys.stderr)
    sys.exit(3)


@contextmanager
def capture_transport(status, answer):
    """Every requests.Session.send records the prepared request and answers `answer`."""
    captured = []
    original = requests.Session.send

    def send(self, prepared, **kwargs):
        body = prepared.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        captured.append(
            {
                "method": prepared.method,
                "url": prepared.url,
                "headers": {k.lower(): v for k, v in prepared.headers.items()},
                "body": body.decode("utf-8"),
            }
        )
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(answer).encode("utf-8")
        response.headers["Content-Type"] = "application/json;charset=utf-8"
        response.url = prepared.url
        response.request = prepared
        return response

    requests.Session.send = send
    try:
        yield captured
    finally:
        requests.Session.send = original


@contextmanager
def patched(owner, name, value):
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def template_value(inputs, kind):
    """A template parameter's value: the code, or the minutes until it expires."""
    return inputs["code"] if kind == "code" else str(inputs["minutes"])


def aliyun_sdk_request(inputs):
    """Dysmsapi SendSms through alibabacloud-dysmsapi20170525 / alibabacloud-tea-openapi."""
    template_param = json.dumps(
        {name: template_value(inputs, kind) for name, kind in inputs["params"]},
        separators=(",", ":"),
        sort_keys=True,
        ensure_ascii=False,
    )
    config = openapi_models.Config(
        access_key_id=inputs["access_key_id"],
        access_key_secret=inputs["access_key_secret"],
        endpoint=inputs["host"],
    )
    client = DysmsClient(config)
    request = dysms_models.SendSmsRequest(
        phone_numbers=inputs["phone"].lstrip("+"),
        sign_name=inputs["sign_name"],
        template_code=inputs["template_code"],
        template_param=template_param,
    )
    answer = {"Code": "OK", "Message": "OK", "BizId": "900619746936498440^0", "RequestId": "F655A8D5-B967-440B-8683-DAD6FF8DE990"}
    timestamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inputs["unix_secs"]))
    nonce = inputs["nonce"]
    with patched(OpenApiUtils, "get_timestamp", staticmethod(lambda: timestamp)), patched(
        OpenApiUtils, "get_nonce", staticmethod(lambda: nonce)
    ), capture_transport(200, answer) as captured:
        client.send_sms_with_options(request, RuntimeOptions())
    return captured[0]


def aliyun_signature_of_ours(inputs, ours):
    """The SDK's ACS3-HMAC-SHA256 signer over vcode's request and the headers it signed."""
    url = urllib.parse.urlsplit(ours["url"])
    headers = dict((k.lower(), v) for k, v in ours["headers"])
    signed = headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    request = DaraRequest()
    request.method = ours["method"]
    request.pathname = url.path or "/"
    request.query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    request.headers = {name: headers[name] for name in signed}
    return OpenApiUtils.get_authorization(
        request,
        "ACS3-HMAC-SHA256",
        headers["x-acs-content-sha256"],
        inputs["access_key_id"],
        inputs["access_key_secret"],
    )


def tencent_sdk_request(inputs):
    """SMS SendSms (2021-01-11) through tencentcloud-sdk-python-common's TC3 signer."""
    cred = tencent_credential.Credential(inputs["secret_id"], inputs["secret_key"])
    profile = ClientProfile(httpProfile=HttpProfile(endpoint=inputs["host"]))
    client = TencentClient("sms", "2021-01-11", cred, inputs["region"], profile=profile)
    answer = {
        "Response": {
            "SendStatusSet": [
                {"SerialNo": "5000:1045710669157053657849499619", "PhoneNumber": inputs["phone"], "Fee": 1,
                 "SessionContext": "", "Code": "Ok", "Message": "send success", "IsoCode": "CN"}
            ],
            "RequestId": "a0aabda6-cf91-4f3e-a81f-9198114a2279",
        }
    }
    fixed = inputs["unix_secs"]
    clock = type("FixedClock", (), {"time": staticmethod(lambda: fixed), "sleep": staticmethod(time.sleep)})
    params = {
        "PhoneNumberSet": [inputs["phone"]],
        "SmsSdkAppId": inputs["sdk_app_id"],
        "SignName": inputs["sign_name"],
        "TemplateId": inputs["template_id"],
        "TemplateParamSet": [template_value(inputs, kind) for kind in inputs["params"]],
    }
    with patched(tencent_abstract_client, "time", clock), capture_transport(200, answer) as captured:
        client.call_json("SendSms", params)
    return captured[0]


def tencent_signature_of_ours(inputs, ours):
    """The SDK's TC3 signer (AbstractClient._get_tc3_signature) over vcode's exact body."""
    headers = dict((k.lower(), v) for k, v in ours["headers"])
    timestamp = int(headers["x-tc-timestamp"])
    request = type("Request", (), {})()
    request.method = ours["method"]
    request.uri = urllib.parse.urlsplit(ours["url"]).path or "/"
    request.data = ours["body"]
    request.header = {"Content-Type": headers["content-type"], "Host": headers["host"], "X-TC-Timestamp": str(timestamp)}
    date = time.strftime("%Y-%m-%d", time.gmtime(timestamp))
    signature = tencent_abstract_client.AbstractClient._get_tc3_signature(
        None, None, request, date, "sms", inputs["secret_key"]
    )
    return "TC3-HMAC-SHA256 Credential=%s/%s/%s/tc3_request, SignedHeaders=content-type;host, Signature=%s" % (
        inputs["secret_id"], date, "sms", signature)


def twilio_sdk_request(inputs):
    """Messages.json through twilio.rest.Client (Basic auth, form body): with the auth token,
    Client(account_sid, auth_token); with an API key, Client(key_sid, key_secret, account_sid)
    as Twilio documents it. From, MessagingServiceSid or both, as the case has them, and the
    StatusCallback of delivery receipts when the case has one."""
    body = inputs["text"].replace("{code}", inputs["code"]).replace("{minutes}", str(inputs["minutes"]))
    if "api_key_sid" in inputs:
        client = TwilioClient(inputs["api_key_sid"], inputs["api_key_secret"], inputs["account_sid"])
    else:
        client = TwilioClient(inputs["account_sid"], inputs["auth_token"])
    senders = {}
    if "from" in inputs:
        senders["from_"] = inputs["from"]
    if "messaging_service_sid" in inputs:
        senders["messaging_service_sid"] = inputs["messaging_service_sid"]
    if "status_callback" in inputs:
        senders["status_callback"] = inputs["status_callback"]
    answer = {"sid": "SM1f0e8ae6ade43cb3c0ce4525424e404f", "status": "queued", "to": inputs["to"],
              "from": inputs.get("from"), "messaging_service_sid": inputs.get("messaging_service_sid"),
              "body": body, "account_sid": inputs["account_sid"],
              "api_version": "2010-04-01", "num_segments": "1", "direction": "outbound-api",
              "uri": "/2010-04-01/Accounts/%s/Messages/SM1f0e8ae6ade43cb3c0ce4525424e404f.json" % inputs["account_sid"]}
    with capture_transport(201, answer) as captured:
        client.messages.create(to=inputs["to"], body=body, **senders)
    return captured[0]


PROVIDERS = {
    "aliyun": (aliyun_sdk_request, aliyun_signature_of_ours),
    "tencent": (tencent_sdk_request, tencent_signature_of_ours),
    "twilio": (twilio_sdk_request, None),
}


def main():
    cases = json.load(sys.stdin)["cases"]
    out = []
    for case in cases:
        sdk_request, signature_of_ours = PROVIDERS[case["provider"]]
        result = {"name": case["name"], "sdk_request": sdk_request(case["inputs"])}
        if signature_of_ours is not None and case.get("ours"):
            result["sdk_signature_of_ours"] = signature_of_ours(case["inputs"], case["ours"])
        out.append(result)
    json.dump({"cases": out}, sys.stdout, ensure_ascii=False, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
