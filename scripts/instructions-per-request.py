#!/usr/bin/env python3
"""Instructions a vcode build executes per request, counted by callgrind: repeatable on a
shared, busy machine where CPU time and req/s are not (the same binary, inputs and settings
give the same count whatever else runs).

    scripts/instructions-per-request.py target/release/vcode [other/vcode ...]
    scripts/instructions-per-request.py target/release/vcode \
        'target/release/vcode@VCODE_QUOTA_PHONE_HOUR=5,VCODE_QUOTA_PHONE_DAY=10'
                                   (the same build with settings of its own after `@`)
    REQUESTS=2000 scripts/instructions-per-request.py BIN...   (default 1000 per row)

For each binary and each row it starts the binary under `valgrind --tool=callgrind` without
instrumentation, warms up, instruments exactly REQUESTS sequential requests on one keep-alive
connection, dumps, and divides the instructions counted (all threads) by REQUESTS. Quotas are
off and logs at warn, as in bench-http.sh; the fraud guard judges every send with its
thresholds out of reach (`@VCODE_FRAUD_GUARD=off` turns it off). The rows, embedded and Redis:
    verify    a verify under a random verification_id: no such verification (404)
    phone     "verify by phone": VCODE_VERIFY_BY=phone, a random phone with no pending code
              (410): issue 42's row, one lookup as the thin handlers do
    send      a send to a new phone
    verified  a verify that matches: a code sent before instrumentation (in dev mode, its
              code read from the outbox), verified under its send's id (the fraud guard
              counts its conversion)
    tstart    a Twilio Verify start (POST /v2/Services/{VA}/Verifications) to a new phone
    tcheck    a Twilio Verify check of a random VerificationSid (20404), as verify's 404
    ROWS=send,verified limits the rows (default: verify, send, verified).
    A column whose binary is examples/thin_verify is the thin reference of bench-http.sh
              (started with its own arguments; its settings are ignored): the verify and
              phone rows POST the same body to /verify-map (embedded) or /verify (Redis, one
              EVALSHA), the send row to /send-map (the least a send with hashed codes does,
              in a sharded map: embedded) or /send-redis (the same in one EVALSHA: Redis);
              it has no other rows ("-").
    STORES=embedded,Redis,PostgreSQL,Cluster picks the stores (default embedded,Redis):
              PostgreSQL is a server of the script's own on a free loopback port (fsync off,
              a fresh database per column and row); Cluster is three primaries on loopback,
              started with redis-cli --cluster create.
    BIN@EVENTS turns events on for that column (VCODE_EVENTS_WEBHOOK_URL to a sink in this
              script that answers 204): the dispatcher's deliveries count too, in all threads.
    BIN@DEFAULTS runs that column as bench-http.sh's "defaults" rows: every default limit on
              (the quotas are not turned off), loopback a trusted proxy and each request from
              a random client address (X-Forwarded-For), the guard's thresholds out of reach.
    REDIS_SERVER=1 also runs the Redis store's redis-server under callgrind and adds, below
              each Redis row, the instructions redis-server executed per request over the same
              requests ("<row>, Redis, redis-server"): the scripts' cost on the one
              single-threaded node, which vcode's own count does not see. Only instructions
              within its processCommand count (the commands, not the socket reads and writes
              nor its timers, whose work grows with the keys that have a TTL and with the
              time valgrind takes), and the server is flushed before each row.
    POSTGRES_SERVER=1 likewise runs the PostgreSQL server under callgrind (autovacuum off,
              so that no worker comes and goes within a row) and adds below each PostgreSQL
              row the instructions all its processes executed per request ("<row>,
              PostgreSQL, postgres": the backends, the WAL writer, the checkpointer): the
              difference between a run with the row's requests and one idle for as long
              (the build runs natively against a server of its own, counted from its start).
Needs valgrind and redis-server (redis-cli for Cluster; Debian's postgresql for PostgreSQL:
initdb, postgres).
"""

import base64
import glob
import hashlib
import http.client
import http.server
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REQUESTS = int(os.environ.get("REQUESTS", "1000"))
WARMUP = 200
KEY = os.urandom(32).hex()
# A Twilio-compatible account for the t* rows: its SID, its token, and HTTP Basic of both.
TWILIO_ACCOUNT = "AC" + os.urandom(16).hex()
TWILIO_TOKEN = os.urandom(16).hex()
TWILIO_AUTH = "Basic " + base64.b64encode(f"{TWILIO_ACCOUNT}:{TWILIO_TOKEN}".encode()).decode()
QUOTAS_OFF = {
    name: "0"
    for name in [
        "VCODE_QUOTA_PHONE_HOUR",
        "VCODE_QUOTA_PHONE_DAY",
        "VCODE_QUOTA_IP_HOUR",
        "VCODE_QUOTA_PHONE_FAILS_DAY",
        "VCODE_QUOTA_CLIENT_FAILS_DAY",
        "VCODE_QUOTA_GLOBAL_MINUTE",
        "VCODE_QUOTA_CAPTCHA_IP_MINUTE",
    ]
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=60):
    """Until something listens on `port` (a minute at most: valgrind starts slowly)."""
    for _ in range(timeout * 10):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)


def random_id():
    """128 random bits as the service writes a verification id (22 URL-safe base64 characters)."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def send_phone(i):
    return f"+86138{(i * 7919 + random.randrange(10**4)) % 10**8:08d}"


def twilio_service(port):
    """A new Service of the Twilio-compatible account: its SID."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/v2/Services", "FriendlyName=bench",
                       {"Content-Type": "application/x-www-form-urlencoded",
                        "Authorization": TWILIO_AUTH})
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    if answer.status != 201:
        sys.exit(f"create a Twilio Service: HTTP {answer.status} {data!r}")
    return json.loads(data)["sid"]


def twilio_request(kind, i, service):
    if kind == "tstart":
        phone = send_phone(i).replace("+", "%2B")
        return f"/v2/Services/{service}/Verifications", f"To={phone}&Channel=sms"
    return (f"/v2/Services/{service}/VerificationCheck",
            f"VerificationSid=VE{os.urandom(16).hex()}&Code=123456")


def request_body(kind, i, sent):
    """A random id for verify (404 by id: the default VCODE_VERIFY_BY=id), a new phone per
    send, and for verified the next code `sent` holds."""
    if kind == "verify":
        body = {"phone": f"+86139{random.randrange(10**8):08d}", "code": "123456",
                "verification_id": random_id()}
        return "POST", "/api/v1/otp/verify", body
    if kind == "phone":
        body = {"phone": f"+86139{random.randrange(10**8):08d}", "code": "123456"}
        return "POST", "/api/v1/otp/verify", body
    if kind == "verified":
        phone, verification_id, code = sent.pop()
        return "POST", "/api/v1/otp/verify", {"phone": phone, "code": code,
                                              "verification_id": verification_id}
    return "POST", "/api/v1/otp/send", {"phone": send_phone(i)}


def call(connection, method, path, body=None, spread=False):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if spread:
        # A client of its own per request, as bench-http.sh's defaults rows (clients=1000000).
        headers["X-Forwarded-For"] = f"10.{random.randrange(16)}.{random.randrange(256)}.{random.randrange(256)}"
    connection.request(method, path, json.dumps(body) if body is not None else None, headers)
    answer = connection.getresponse()
    data = answer.read()
    if answer.status >= 500:
        sys.exit(f"{path}: HTTP {answer.status}")
    return answer.status, data


def sent_codes(port, count):
    """`count` codes sent to new phones: (phone, verification_id, code) each, from the outbox."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent = []
    # Phones of their own, none pending yet (other rows and runs share the Redis).
    phones = set()
    while len(phones) < count:
        phones.add(f"+86137{random.randrange(10**8):08d}")
    for phone in phones:
        status, data = call(connection, "POST", "/api/v1/otp/send", {"phone": phone})
        if status != 200:
            sys.exit(f"send for verified: HTTP {status} {data!r}")
        verification_id = json.loads(data)["data"]["verification_id"]
        _, outbox = call(connection, "GET", "/api/v1/dev/inbox?phone=" + phone.replace("+", "%2B"))
        code = json.loads(outbox)["data"]["messages"][-1]["code"]
        sent.append((phone, verification_id, code))
    connection.close()
    return sent


# What each kind of row must answer, so that a row never counts an error of another kind.
EXPECTED = {"phone": 410, "verified": 200}


def is_thin(binary):
    return os.path.basename(binary) == "thin_verify"


def thin_path(store_env, kind):
    """The thin reference's handler for a `kind` row on `store_env`: a send or a verify, the
    sharded map's (embedded) or one EVALSHA (Redis)."""
    embedded = store_env == "embedded"
    if kind == "send":
        return "/send-map" if embedded else "/send-redis"
    return "/verify-map" if embedded else "/verify"


def drive(port, kind, count, sent, service=None, first=0, thin=None, spread=False):
    # Phones by index: the instrumented requests go on from the warm-up's (`first`), so that
    # no phone is sent to twice (a second send within the cooldown answers 429).
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(first, first + count):
        if kind.startswith("t"):
            path, form = twilio_request(kind, i, service)
            connection.request("POST", path, form,
                               {"Content-Type": "application/x-www-form-urlencoded",
                                "Authorization": TWILIO_AUTH})
            answer = connection.getresponse()
            data = answer.read()
            if answer.status >= 500 or (kind == "tstart" and answer.status != 201):
                sys.exit(f"{kind}: HTTP {answer.status} {data!r}")
            continue
        method, path, body = request_body(kind, i, sent)
        if thin:
            path = thin
        status, data = call(connection, method, path, body, spread)
        if not thin and kind in EXPECTED and status != EXPECTED[kind]:
            sys.exit(f"{kind}: HTTP {status} {data!r}")
    connection.close()


def dumped_instructions(out_file, dump=1):
    """The instruction total of the `dump`-th explicit dump (`<out>.<dump>`), or with `dump`
    None of the profile written at exit (`<out>`)."""
    with open(out_file if dump is None else f"{out_file}.{dump}") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    sys.exit(f"no totals in {out_file}.{dump}")


class RedisServer:
    """The Redis store's server; with REDIS_SERVER=1 under callgrind, instrumented only while
    `counting` (each count one dump of its own)."""

    def __init__(self, port):
        self.counted = os.environ.get("REDIS_SERVER") == "1"
        command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no"]
        if self.counted:
            work = os.environ.get("KEEP") or tempfile.mkdtemp()
            os.makedirs(work, exist_ok=True)
            self.out = os.path.join(work, f"callgrind.out.redis-server-{port}")
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       "--toggle-collect=processCommand",
                       f"--callgrind-out-file={self.out}", *command]
        self.dumps = 0
        self.port = port
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        wait_for_port(port)

    def control(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.process.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def flush(self):
        """Every key gone: each row starts from an empty server."""
        if self.counted:
            subprocess.run(["redis-cli", "-p", str(self.port), "FLUSHALL"], check=True,
                           stdout=subprocess.DEVNULL)

    def begin(self):
        if self.counted:
            self.control("-z")
            self.control("-i", "on")

    def end(self):
        """The instructions counted since `begin`, or None when not counting."""
        if not self.counted:
            return None
        self.control("-d")
        self.control("-i", "off")
        self.dumps += 1
        return dumped_instructions(self.out, self.dumps)


def postgres_bin(name):
    """`name` of the newest PostgreSQL under /usr/lib/postgresql, else from PATH."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/" + name),
                      key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return versions[-1] if versions else name


def as_postgres(command):
    """PostgreSQL refuses root: its programs run as the postgres user then."""
    if os.geteuid() == 0:
        return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups"] + command
    return command


class PostgresCount:
    """With POSTGRES_SERVER=1, what the PostgreSQL server executes per request: a server of its
    own under callgrind (every process instrumented from its start; autovacuum off, so that no
    worker comes and goes with the time valgrind takes) serves the row's build, run natively,
    for the warm-up and then `n` requests, and is stopped; its processes' profiles, written as
    each ends, are summed. Run once with REQUESTS and once idle for as long after the warm-up,
    the difference divided by REQUESTS is the requests' own cost (start-up, migrations,
    warm-up and the timers' work cancel). Valgrind's gdbserver cannot be reached in a forked,
    idle backend, so the count is taken at exit rather than by callgrind_control."""

    def __init__(self):
        self.counted = os.environ.get("POSTGRES_SERVER") == "1"

    def total(self, drive_build):
        """Starts a counted server, lets `drive_build(database_url)` drive it, stops it and
        returns the instructions all its processes executed."""
        work = tempfile.mkdtemp(prefix="vcode-ipr-pg-count-")
        if os.geteuid() == 0:
            subprocess.run(["chown", "postgres:postgres", work], check=True)
        server, port, data = start_postgres(
            wrap=["valgrind", "--tool=callgrind",
                  f"--callgrind-out-file={work}/callgrind.out.postgres.%p"],
            settings=["-c", "autovacuum=off"])
        try:
            drive_build(fresh_database(port))
        finally:
            server.send_signal(signal.SIGINT)  # a fast shutdown: every process ends and dumps
            server.wait()
            shutil.rmtree(data, ignore_errors=True)
        total = sum(dumped_instructions(path, None)
                    for path in glob.glob(f"{work}/callgrind.out.postgres.*"))
        if os.environ.get("KEEP"):
            print(f"  postgres's profiles: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
        return total


POSTGRES_COUNT = PostgresCount()


def start_postgres(wrap=(), settings=()):
    """A PostgreSQL server of this script's own: (process, port, data directory); `wrap`
    prefixes its command (valgrind), `settings` are added to it."""
    data = tempfile.mkdtemp(prefix="vcode-ipr-pg-")
    if os.geteuid() == 0:
        subprocess.run(["chown", "postgres:postgres", data], check=True)
    subprocess.run(as_postgres([postgres_bin("initdb"), "-D", data, "-U", "vcode",
                                "--auth=trust", "-E", "UTF8", "--locale=C"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(
        as_postgres([*wrap, postgres_bin("postgres"), "-D", data, "-p", str(port), "-h",
                     "127.0.0.1", "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off",
                     *settings]),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200 if wrap else 100):
        if subprocess.run([postgres_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
                          ).returncode == 0:
            break
        time.sleep(0.1)
    return server, port, data


def fresh_database(pg_port):
    """A new database on the script's server, so each build applies its own migrations."""
    name = f"vcode_{os.urandom(6).hex()}"
    subprocess.run([postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(pg_port), "-U",
                    "vcode", name], check=True)
    return f"postgres://vcode@127.0.0.1:{pg_port}/{name}"


class Sink(http.server.BaseHTTPRequestHandler):
    """An event receiver that takes everything (no signature check: not what is measured)."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def start_sink():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/events"


EVENT_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


def start_cluster():
    """Three primaries on loopback, slots spread by redis-cli; returns (processes, seeds)."""
    # A node's cluster bus listens 10000 above its port: both must be free.
    ports = []
    while len(ports) < 3:
        port = free_port()
        if port <= 55535 and port not in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            ports.append(port)
    work = tempfile.mkdtemp()
    processes = [subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--cluster-enabled", "yes", "--dir", work,
         "--cluster-config-file", f"nodes-{port}.conf"], stdout=subprocess.DEVNULL)
        for port in ports]
    time.sleep(0.5)
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                    "--cluster-yes"], check=True, stdout=subprocess.DEVNULL)
    for _ in range(100):
        info = subprocess.run(["redis-cli", "-p", str(ports[0]), "cluster", "info"],
                              capture_output=True, text=True).stdout
        if "cluster_state:ok" in info:
            break
        time.sleep(0.1)
    return processes, ",".join(f"redis://127.0.0.1:{p}" for p in ports)


LABELS = {"phone": "verify by phone"}
KNOWN = {}


def tenant_quotas_off(binary):
    """The tenant budgets off, for a build that has them (an older one refuses their names):
    the t* rows start more verifications of one account than its default budget allows."""
    if binary not in KNOWN:
        shown = subprocess.run([binary, "check-config"], capture_output=True, text=True,
                               env=dict(os.environ, VCODE_SECRET_KEY=KEY)).stdout
        KNOWN[binary] = "VCODE_QUOTA_TENANT_HOUR" in shown
    if not KNOWN[binary]:
        return {}
    return {"VCODE_QUOTA_TENANT_HOUR": "0", "VCODE_QUOTA_TENANT_DAY": "0"}


def build_env(binary, port, thin=False, **settings):
    """What every measured build runs with: its port, warn logs, the bench's key, the quotas
    (and, but for the thin reference, the tenants' budgets) off, the fraud guard on with its
    thresholds out of reach (at its own, a row of sends to new numbers in one range times
    refusals after the first ten); then `settings`."""
    return dict(os.environ, VCODE_BIND=f"127.0.0.1:{port}", VCODE_ADMIN_BIND="127.0.0.1:0",
                RUST_LOG="warn", VCODE_SECRET_KEY=KEY, VCODE_FRAUD_EVIDENCE="1000000",
                **QUOTAS_OFF, **({} if thin else tenant_quotas_off(binary)), **settings)


def measure(build, store_env, kind, redis, stores):
    """(vcode's instructions per request, its store server's or None)."""
    binary, _, settings = build.partition("@")
    thin = thin_path(store_env, kind) if is_thin(binary) else None
    if is_thin(binary) and (kind not in ("verify", "phone", "send")
                            or store_env not in ("embedded", "Redis")):
        return None, None
    port = free_port()
    # KEEP=dir keeps each row's profile there, for callgrind_annotate.
    work = os.environ.get("KEEP") or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    # The settings too: two columns of one binary keep a profile each.
    label = f"{os.path.basename(binary)}-{abs(hash(build)) % 10**6}-{kind}-{store_env}"
    out = os.path.join(work, f"callgrind.out.{label}")
    env = build_env(binary, port, thin=bool(thin),
                    VCODE_TWILIO_COMPAT_ACCOUNTS=TWILIO_ACCOUNT + ":"
                    + hashlib.sha256(TWILIO_TOKEN.encode()).hexdigest())
    pairs = [pair for pair in settings.split(",") if pair]
    if "EVENTS" in pairs:
        pairs.remove("EVENTS")
        env["VCODE_EVENTS_WEBHOOK_URL"] = stores["sink"]
        env["VCODE_EVENTS_WEBHOOK_SECRET"] = EVENT_SECRET
    spread = "DEFAULTS" in pairs
    if spread:
        pairs.remove("DEFAULTS")
        for name in QUOTAS_OFF:
            env.pop(name, None)
        for name in [name for name in env if name.startswith("VCODE_QUOTA_TENANT_")]:
            env.pop(name)
        env.update(VCODE_TRUSTED_PROXIES="127.0.0.1", VCODE_FRAUD_EVIDENCE="1000000")
    env.update(pair.split("=", 1) for pair in pairs)
    if store_env == "Redis":
        redis.flush()
        env["VCODE_REDIS_URL"] = f"redis://127.0.0.1:{stores['redis_port']}"
    if store_env == "PostgreSQL":
        env["VCODE_DATABASE_URL"] = fresh_database(stores["pg_port"])
    if store_env == "Cluster":
        env["VCODE_REDIS_CLUSTER_NODES"] = stores["cluster"]
    if kind == "phone":
        env["VCODE_VERIFY_BY"] = "phone"
    if kind == "verified":
        # The outbox, to read the codes sent before instrumentation.
        env["VCODE_DEV_MODE"] = "1"
    arguments = ([f"127.0.0.1:{port}", f"redis://127.0.0.1:{stores['redis_port']}"]
                 if thin else [])
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=no",
         f"--callgrind-out-file={out}", binary, *arguments],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        sent = sent_codes(port, WARMUP + REQUESTS) if kind == "verified" else []
        service = twilio_service(port) if kind.startswith("t") else None
        drive(port, kind, WARMUP, sent, service, thin=thin, spread=spread)
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if store_env == "Redis":
            redis.begin()
        drive(port, kind, REQUESTS, sent, service, first=WARMUP, thin=thin, spread=spread)
        # A dump holds what was counted since instrumentation began: exactly these requests.
        subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server_count = redis.end() if store_env == "Redis" else None
    finally:
        server.kill()
        server.wait()
    if store_env == "PostgreSQL" and POSTGRES_COUNT.counted:
        server_count = postgres_per_request(binary, env, kind, thin, spread)
    return (dumped_instructions(out) / REQUESTS,
            None if server_count is None else server_count / REQUESTS)


def postgres_per_request(binary, env, kind, thin, spread=False):
    """PostgreSQL's instructions over REQUESTS of `kind` (POSTGRES_SERVER=1), with the build
    run natively against a counted server: the difference of a run with them and one that
    waits as long instead (the build's and the server's timers, a flush a second and the WAL
    writer's wake-ups, run for as long in both, and cancel)."""
    took = {}

    def run(count, idle=0.0):
        def drive_build(database_url):
            port = free_port()
            server_env = dict(env, VCODE_BIND=f"127.0.0.1:{port}", VCODE_DATABASE_URL=database_url,
                              # A server under valgrind answers tens of times slower.
                              VCODE_DATABASE_STATEMENT_TIMEOUT_MS="30000",
                              VCODE_DATABASE_CONNECT_TIMEOUT_MS="30000")
            server = subprocess.Popen([binary], env=server_env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            try:
                wait_for_port(port, timeout=300)
                # The codes to verify are sent in both runs alike: only the verifies differ.
                sent = sent_codes(port, WARMUP + REQUESTS) if kind == "verified" else []
                service = twilio_service(port) if kind.startswith("t") else None
                drive(port, kind, WARMUP, sent, service, thin=thin, spread=spread)
                started = time.monotonic()
                drive(port, kind, count, sent, service, first=WARMUP, thin=thin, spread=spread)
                time.sleep(idle)
                took[count] = time.monotonic() - started
            finally:
                server.terminate()  # its connections close: the backends end and dump
                server.wait()
        return POSTGRES_COUNT.total(drive_build)
    counted = run(REQUESTS)
    return counted - run(0, idle=took[REQUESTS])


SERVER_NAMES = {"Redis": "redis-server", "PostgreSQL": "postgres"}


def main():
    binaries = sys.argv[1:]
    if not binaries:
        sys.exit(__doc__)
    redis_port = free_port()
    redis = RedisServer(redis_port)
    store_names = os.environ.get("STORES", "embedded,Redis").split(",")
    postgres, pg_port, pg_data = (start_postgres() if "PostgreSQL" in store_names
                                  else (None, None, None))
    time.sleep(0.5)
    cluster_processes, stores = [], {"sink": start_sink(), "pg_port": pg_port,
                                     "redis_port": redis_port}
    if "Cluster" in store_names:
        cluster_processes, stores["cluster"] = start_cluster()
    try:
        kinds = os.environ.get("ROWS", "verify,send,verified").split(",")
        rows = [(kind, store) for kind in kinds for store in store_names]
        for i, binary in enumerate(binaries):
            print(f"[{i}] {binary}")
        print(f"{'row':<18}" + "".join(f"{f'[{i}]':>12}" for i in range(len(binaries))))
        for kind, store in rows:
            measured = [measure(b, store, kind, redis, stores) for b in binaries]
            name = LABELS.get(kind, kind)
            for label, counts in [(f"{name}, {store}", [m[0] for m in measured]),
                                  (f"{name}, {store}, {SERVER_NAMES.get(store, 'server')}",
                                   [m[1] for m in measured])]:
                if all(c is None for c in counts):
                    continue
                ratios = "".join("      -" if c is None or counts[0] is None
                                 else f"  {c / counts[0]:.2f}x" for c in counts[1:])
                print(f"{label:<18}" + "".join("           -" if c is None else f"{c:>12,.0f}"
                                               for c in counts) + ratios, flush=True)
        print(f"instructions per request (callgrind, all threads), {REQUESTS} requests a row, "
              f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    finally:
        redis.process.terminate()
        if postgres:
            postgres.terminate()
            postgres.wait()
            shutil.rmtree(pg_data, ignore_errors=True)
        for process in cluster_processes:
            process.terminate()


if __name__ == "__main__":
    main()
