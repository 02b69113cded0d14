#!/usr/bin/env python3
"""SIGTERM drains dpopt-server.

1. With a long job running, SIGTERM: the health check reports NOT_SERVING,
   a new submission is refused with UNAVAILABLE and charges nothing, the
   running job finishes SUCCEEDED, and the server exits 0. This server logs
   with --log-format=json: every line is one JSON object, the job's events
   carry its id, principal and dataset, and no token secret appears.
2. With --drain-timeout shorter than the job: the job is cancelled (and stays
   charged) and the server still exits 0 within the timeout plus a margin.

Loopback only; every wait is bounded.

    tests/ops/drain.py --server build/server/dpopt-server --cli build/client/dpopt
"""

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
import dpopt_harness as h  # noqa: E402
import dpopt  # noqa: E402


def health(cli, address):
    r = subprocess.run([cli, "health", f"--server={address}"],
                       capture_output=True, text=True, timeout=10)
    return r.stdout.strip()


def long_job(client, dataset, steps):
    # Charged, slow enough to be running at SIGTERM.
    return client.submit(h.dp_gd_spec(dataset, 0.5, steps), wait=False)


def wait_state(client, job_id, states, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job.state in states:
            return job
        time.sleep(0.05)
    raise RuntimeError(f"job {job_id} not in {states} within {timeout} s")


def final_state(db, job_id):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT state FROM jobs WHERE id = ?",
                            (job_id,)).fetchone()[0]


def charges(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0]


def check_json_log(path, secret, job_id):
    events = []
    with open(path) as f:
        for line in f:
            if line.startswith("---- start"):  # the harness's own marker
                continue
            events.append(json.loads(line))  # every line is one object
    for e in events:
        for key in ("time", "level", "event", "message"):
            assert key in e, f"{key} missing in {e}"
    mine = [e for e in events if e.get("job") == job_id]
    kinds = {e["event"] for e in mine}
    assert {"job_admitted", "job_finished"} <= kinds, kinds
    assert all(e.get("principal") == "curator" and e.get("dataset") == "d"
               for e in mine), mine
    with open(path) as f:
        assert secret not in f.read(), "a token secret is in the JSON log"
    return len(events)


def scenario(args, drain_timeout, steps, expect_done, log_format="text"):
    work = h.make_workdir("dpopt-drain-")
    server = h.ServerProcess(args.server, work, workers=1,
                             extra_args=[f"--drain-timeout={drain_timeout}s",
                                         f"--log-format={log_format}"])
    try:
        server.start()
        client = server.client()
        h.import_csv(client, "d", 20000, eps_budget=100.0)
        assert health(args.cli, server.address) == "SERVING"
        job = long_job(client, "d", steps)
        wait_state(client, job.id, ("RUNNING",), 60)
        before = charges(server.db)
        server.proc.send_signal(signal.SIGTERM)
        start = time.monotonic()
        # Draining: not serving, and no new job is admitted or charged.
        saw_not_serving = False
        refused = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server.proc.poll() is None:
            try:
                if health(args.cli, server.address) == "NOT_SERVING":
                    saw_not_serving = True
                    client.submit(h.dp_gd_spec("d", 0.1, 5), wait=False)
                    refused = "admitted"
                    break
            except dpopt.UnavailableError as e:
                refused = str(e)
                break
            except Exception as e:  # the server stopped in between
                refused = refused or f"stopped: {e}"
                break
            time.sleep(0.02)
        code = server.proc.wait(timeout=drain_timeout + 30)
        elapsed = time.monotonic() - start
        server.proc = None
        assert code == 0, f"exit code {code}\n{server.tail()}"
        assert saw_not_serving, "health never reported NOT_SERVING while draining"
        assert refused is not None and refused != "admitted", \
            f"a job was admitted while draining: {refused}"
        assert charges(server.db) == before, "something was charged while draining"
        state = final_state(server.db, job.id)
        # storage JobState: 2 succeeded, 4 cancelled.
        if expect_done:
            assert state == h.SUCCEEDED, f"job state {state}, expected SUCCEEDED"
        else:
            assert state == h.CANCELLED, f"job state {state}, expected CANCELLED"
            assert elapsed < drain_timeout + 20, f"exit took {elapsed:.1f} s"
        if log_format == "json":
            n = check_json_log(server.log_path, server.token.split(".", 1)[1],
                               job.id)
            print(f"JSON log: {n} events, all parse, no secret")
        print(f"drain-timeout {drain_timeout}s: job {'finished' if expect_done else 'cancelled'}, "
              f"refusal while draining: {refused!r}, exit 0 after {elapsed:.1f} s")
    finally:
        if server.proc is not None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    scenario(args, drain_timeout=60, steps=3000, expect_done=True,
             log_format="json")
    scenario(args, drain_timeout=1, steps=1000000, expect_done=False)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
