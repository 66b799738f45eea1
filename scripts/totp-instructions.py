#!/usr/bin/env python3
"""Instructions a TOTP check costs against an OTP verify, per request, in one run on one store
(issue 40's rule: a TOTP check costs at most 1.3x the CPU of an OTP verify), counted by
callgrind as scripts/instructions-per-request.py counts its rows (whose helpers this imports).

    scripts/totp-instructions.py target/release/vcode
    REQUESTS=500 STORES=embedded,Redis,PostgreSQL scripts/totp-instructions.py BIN

Rows, each a server of its own under callgrind, the same API key on every request, quotas off,
the fraud guard monitoring (it counts the sends and converts the verifies, refusing none):
    verified  an OTP verify that matches (a code sent before instrumentation, read from the
              dev outbox, verified under its send's id)
    totp      a TOTP check that passes (POST /api/v1/totp/{identity}/verify): a factor enrolled
              and confirmed before instrumentation for each request, its code (the next step's,
              within the skew) computed by pyotp just before the request; the answer is the
              same signed token
Needs valgrind, redis-server, pyotp (tests/totp/requirements.txt); Debian's postgresql for
PostgreSQL.
"""

import hashlib
import http.client
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pyotp

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "ipr", os.path.join(HERE, "instructions-per-request.py"))
ipr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ipr)

REQUESTS = int(os.environ.get("REQUESTS", "1000"))
WARMUP = 100
API_KEY = "vck_" + os.urandom(24).hex()
AUTH = {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"}


def post(connection, path, body):
    connection.request("POST", path, json.dumps(body), AUTH)
    answer = connection.getresponse()
    data = answer.read()
    return answer.status, data


def enrolled(port, count):
    """`count` confirmed factors: (identity, factor id, pyotp TOTP) each."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    factors = []
    for i in range(count):
        identity = f"user-{i}-{random.randrange(10**9)}"
        status, data = post(connection, f"/api/v1/totp/{identity}/factors", {})
        if status != 200:
            sys.exit(f"enrol: HTTP {status} {data!r}")
        data = json.loads(data)["data"]
        app = pyotp.parse_uri(data["uri"])
        factor = data["factor"]["factor_id"]
        # Confirmed with the code of now; the checks type the next step's (in the skew), which
        # is never one this confirmation spent.
        for _ in range(2):
            status, data = post(connection, f"/api/v1/totp/{identity}/factors/{factor}/confirm",
                                {"code": app.now()})
            if status == 200:
                break
        if status != 200:
            sys.exit(f"confirm: HTTP {status} {data!r}")
        factors.append((identity, factor, app))
    connection.close()
    return factors


def drive(port, kind, items):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for item in items:
        if kind == "totp":
            identity, factor, app = item
            status, data = post(connection, f"/api/v1/totp/{identity}/verify",
                                {"factor_id": factor, "code": app.at(time.time() + 30)})
        else:
            phone, verification_id, code = item
            status, data = post(connection, "/api/v1/otp/verify",
                                {"phone": phone, "code": code, "verification_id": verification_id})
        if status != 200:
            sys.exit(f"{kind}: HTTP {status} {data!r}")
    connection.close()


def measure(binary, store_env, kind, stores):
    port = ipr.free_port()
    work = os.environ.get("KEEP") or tempfile.mkdtemp()
    out = os.path.join(work, f"callgrind.out.totp-{kind}-{store_env}-{port}")
    env = ipr.build_env(binary, port, VCODE_DEV_MODE="1", VCODE_REQUIRE_API_KEY="send,verify",
                        VCODE_FRAUD_GUARD="monitor",
                        VCODE_API_KEYS="bench:" + hashlib.sha256(API_KEY.encode()).hexdigest())
    if store_env == "Redis":
        subprocess.run(["redis-cli", "-p", str(stores["redis_port"]), "FLUSHALL"], check=True,
                       stdout=subprocess.DEVNULL)
        env["VCODE_REDIS_URL"] = f"redis://127.0.0.1:{stores['redis_port']}"
    if store_env == "PostgreSQL":
        env["VCODE_DATABASE_URL"] = ipr.fresh_database(stores["pg_port"])
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=no",
         f"--callgrind-out-file={out}", binary],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ipr.wait_for_port(port)
        if kind == "totp":
            items = enrolled(port, WARMUP + REQUESTS)
        else:
            items = sent_with_key(port, WARMUP + REQUESTS)
        drive(port, kind, items[:WARMUP])
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        drive(port, kind, items[WARMUP:])
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        server.kill()
        server.wait()
    return ipr.dumped_instructions(out) / REQUESTS


def sent_with_key(port, count):
    """`count` codes sent to new phones with the API key: (phone, id, code) each."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent, phones = [], set()
    while len(phones) < count:
        phones.add(f"+86137{random.randrange(10**8):08d}")
    for phone in phones:
        status, data = post(connection, "/api/v1/otp/send", {"phone": phone})
        if status != 200:
            sys.exit(f"send: HTTP {status} {data!r}")
        verification_id = json.loads(data)["data"]["verification_id"]
        connection.request("GET", "/api/v1/dev/inbox?phone=" + phone.replace("+", "%2B"))
        answer = connection.getresponse()
        code = json.loads(answer.read())["data"]["messages"][-1]["code"]
        sent.append((phone, verification_id, code))
    connection.close()
    return sent


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    store_names = os.environ.get("STORES", "embedded,Redis").split(",")
    redis_port = ipr.free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ipr.wait_for_port(redis_port)
    postgres, pg_port, pg_data = (ipr.start_postgres() if "PostgreSQL" in store_names
                                  else (None, None, None))
    stores = {"redis_port": redis_port, "pg_port": pg_port}
    try:
        print(f"{'store':<12}{'OTP verify':>14}{'TOTP check':>14}{'ratio':>8}")
        for store in store_names:
            otp = measure(binary, store, "verified", stores)
            totp = measure(binary, store, "totp", stores)
            print(f"{store:<12}{otp:>14,.0f}{totp:>14,.0f}{totp / otp:>7.2f}x", flush=True)
        print(f"instructions per request (callgrind, all threads), {REQUESTS} requests a row, "
              f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    finally:
        redis.terminate()
        if postgres:
            postgres.terminate()
            postgres.wait()
            shutil.rmtree(pg_data, ignore_errors=True)


if __name__ == "__main__":
    main()
