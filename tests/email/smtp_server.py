"""A real SMTP server for the mailer's tests (aiosmtpd), in one of these modes:

  plain       no STARTTLS, no AUTH
  starttls    STARTTLS required before MAIL (--cert, --key)
  auth        STARTTLS, then AUTH PLAIN/LOGIN required (--user, --password)
  smtps       TLS from the first byte (--cert, --key)
  refuse      RCPT answered 550, quoting the recipient
  refuse_data the message answered 554
  hang        the message never answered

Prints "PORT <n>" once listening, then one JSON line per message received (its sender,
recipients, raw data, whether TLS carried it, the AUTH user and the client's port, which
tells sessions apart). Runs until stdin closes.
"""
import argparse
import asyncio
import json
import socket
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Handler:
    def __init__(self, mode):
        self.mode = mode

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.mode == "refuse":
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.original_content.decode("latin-1"),
            # session.ssl after STARTTLS; the transport's for TLS from the first byte.
            "tls": session.ssl is not None
            or server.transport.get_extra_info("ssl_object") is not None,
            "auth": getattr(session, "relay_user", None) if session.authenticated else None,
            "peer_port": session.peer[1],
        }
        print(json.dumps(record), flush=True)
        if self.mode == "refuse_data":
            return "554 5.7.1 Message rejected as spam"
        if self.mode == "hang":
            await asyncio.sleep(3600)
        return "250 2.0.0 Ok: queued as 4F2B1"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()

    tls = None
    if args.cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.cert, args.key)

    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == args.user
            and auth_data.password.decode() == args.password
        )
        if ok:
            session.relay_user = args.user
        return AuthResult(success=ok, handled=False)

    # aiosmtpd's controller connects to its own port to see it is up, so port 0 will not do.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = dict(hostname="127.0.0.1", port=port)
    if args.mode in ("starttls", "auth"):
        options.update(tls_context=tls, require_starttls=True)
    if args.mode == "auth":
        options.update(authenticator=authenticate, auth_required=True)
    if args.mode == "smtps":
        options.update(ssl_context=tls)
    controller = Controller(Handler(args.mode), **options)
    controller.start()
    print(f"PORT {port}", flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
