"""What Twilio's official SDK says of status callbacks (tests/api/receipts.rs): for each case on
stdin, the signature RequestValidator computes over `sign_url` and `params` with `token` (and
`algorithm`), and whether RequestValidator.validate under vcode's auth token (`validator_token`)
accepts the request vcode receives: `url` with the `posted` parameters, that signature, and the
algorithm its settings header names.
Exit 3 when the SDK is missing."""
import json
import sys

try:
    from twilio.request_validator import RequestValidator, get_signature_algorithm
except ImportError as missing:
    print("the twilio SDK is not installed: %s" % missing, file=sys.stderr)
    sys.exit(3)


class MultiDict(dict):
    """Form parameters as a web framework hands them over: every value of a repeated name."""

    def __init__(self, pairs):
        super().__init__()
        for name, value in pairs:
            self.setdefault(name, []).append(value)

    def getall(self, name):
        return self[name]


def main():
    verdicts = []
    for case in json.load(sys.stdin):
        signer = RequestValidator(case["token"])
        signature = signer.compute_signature(case["sign_url"], MultiDict(case["params"]),
                                             case["algorithm"])
        validator = RequestValidator(case["validator_token"])
        algorithm = get_signature_algorithm(case["settings_header"])
        valid = validator.validate(case["url"], MultiDict(case["posted"]), signature, algorithm)
        verdicts.append({"name": case["name"], "signature": signature, "valid": bool(valid)})
    json.dump(verdicts, sys.stdout)


main()
