"""An authenticator app no one here wrote: PyPI `pyotp` reads an `otpauth://` URI as an app
does and computes its codes, and PyPI `zxing-cpp` reads the enrolment's QR code PNG back to a
URI. Run by `cargo test --test api totp`.

usage: authenticator.py PNG_FILE URI UNIX_SECONDS OFFSET...

Prints one JSON object: what pyotp read of the URI (secret, issuer, account name, digits,
period, algorithm), the URI the QR code holds, and the code at UNIX_SECONDS + each offset.
"""

import json
import sys

import pyotp
import zxingcpp
from PIL import Image

png_file, uri, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
offsets = [int(offset) for offset in sys.argv[4:]]

totp = pyotp.parse_uri(uri)
assert isinstance(totp, pyotp.TOTP), type(totp)
decoded = [result.text for result in zxingcpp.read_barcodes(Image.open(png_file))]
print(
    json.dumps(
        {
            "secret": totp.secret,
            "issuer": totp.issuer,
            "name": totp.name,
            "digits": totp.digits,
            "period": totp.interval,
            "algorithm": totp.digest().name,
            "qr": decoded,
            "codes": {str(offset): totp.at(now + offset) for offset in offsets},
        }
    )
)
