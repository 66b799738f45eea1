#!/usr/bin/env python3
"""What PostgreSQL does for vcode's sends and verifies, statement by statement: a server of this
script's own with pg_stat_statements (track = all: the statements inside the functions too) and,
with EXPLAIN=1, auto_explain (every statement's plan, with its buffers, in the server's log).
Sends N codes to new numbers of one prefix, then verifies them (their codes read from the dev
outbox), and prints the statements of the verifies (or of the sends: ROW=send) by their time,
plans and buffers, and each table's sequential and index scans over the whole run.

    scripts/postgres-plans.py target/release/vcode
    N=300 EXPLAIN=1 scripts/postgres-plans.py target/release/vcode   # plans: see the log it names
    ROW=send ANALYZE=1 AUTOVACUUM=on scripts/postgres-plans.py target/release/vcode

VARS=NAME=value,... goes to the build (default: the guard's evidence out of reach, so that a
run of sends into one prefix is never refused). A plan that reads a table sequentially where
it should look rows up by key shows as seq_tup_read growing with the run (2026-12-06: the
levels' generic plan hashed the whole table on every call; 1.7 million rows read over 1,000
verifies, found with this script). Needs Debian's postgresql (initdb, postgres, psql).
"""

import importlib.util
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The servers, the database and the requests as instructions-per-request.py makes them.
_spec = importlib.util.spec_from_file_location(
    "instructions_per_request", os.path.join(HERE, "instructions-per-request.py"))
ipr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ipr)

STATEMENTS = """SELECT calls, round(total_exec_time::numeric, 1) AS exec_ms,
  round(total_plan_time::numeric, 1) AS plan_ms, plans, shared_blks_hit AS hit, rows,
  left(regexp_replace(query, '\\s+', ' ', 'g'), 140) AS statement
FROM pg_stat_statements WHERE calls > 1 ORDER BY total_exec_time DESC LIMIT 20"""
TABLES = """SELECT relname, n_live_tup AS live, n_dead_tup AS dead, n_tup_upd AS updated,
  n_tup_hot_upd AS hot, seq_scan, seq_tup_read, idx_scan
FROM pg_stat_user_tables WHERE seq_scan + coalesce(idx_scan, 0) > 0
ORDER BY seq_tup_read DESC, idx_scan DESC LIMIT 15"""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    count = int(os.environ.get("N", "1000"))
    row = os.environ.get("ROW", "verified")
    explain = os.environ.get("EXPLAIN") == "1"
    settings = ["-c", "autovacuum=" + os.environ.get("AUTOVACUUM", "off"),
                "-c", "shared_preload_libraries=pg_stat_statements"
                + (",auto_explain" if explain else ""),
                "-c", "pg_stat_statements.track=all", "-c", "pg_stat_statements.track_planning=on",
                "-c", "logging_collector=on", "-c", "log_directory=log"]
    if explain:
        settings += ["-c", "auto_explain.log_min_duration=0",
                     "-c", "auto_explain.log_nested_statements=on",
                     "-c", "auto_explain.log_analyze=on", "-c", "auto_explain.log_buffers=on"]
    server, pg_port, data = ipr.start_postgres(settings=settings)
    url = ipr.fresh_database(pg_port)

    def psql(sql):
        return subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "vcode", "-d",
             url.rsplit("/", 1)[1], "-X", "-c", sql],
            capture_output=True, text=True, check=True).stdout

    port = ipr.free_port()
    env = ipr.build_env(binary, port, VCODE_DATABASE_URL=url, VCODE_DEV_MODE="1")
    variables = os.environ.get("VARS", "VCODE_FRAUD_EVIDENCE=1000000")
    env.update(pair.split("=", 1) for pair in variables.split(",") if pair)
    vcode = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        ipr.wait_for_port(port, timeout=60)
        psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if row == "send":
            psql("SELECT pg_stat_statements_reset()")
            ipr.drive(port, "send", count, [])
        else:
            sent = ipr.sent_codes(port, count)
            if os.environ.get("ANALYZE") == "1":
                psql("ANALYZE")
            psql("SELECT pg_stat_statements_reset()")
            ipr.drive(port, "verified", count, sent)
        time.sleep(2)  # the backends report their table counts once idle
        print(f"{count} {row} requests, {binary}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(psql(STATEMENTS))
        print("each table over the whole run (the sends too):")
        print(psql(TABLES))
        if explain:
            print(f"plans: {data}/log/ (kept)")
    finally:
        vcode.terminate()
        vcode.wait()
        server.terminate()
        server.wait()
        if not explain:
            subprocess.run(["rm", "-rf", data], check=False)


if __name__ == "__main__":
    main()
