#!/usr/bin/python3
"""Crash harness: SIGKILLs dpopt-server at random points and checks
the stored invariants after every kill and every restart.

Each trial starts the server on the same database, runs one scenario's
workload against it from client threads, SIGKILLs the server after a random
delay, then

  1. checks a copy of the files the killed server left (SQLite recovery runs
     on the copy): the invariants of dpopt_harness.check_database, every
     admission/import the server had acknowledged is there, and the ledger's
     high-water mark is never ahead of the ledger;
  2. restarts the server and checks the database again (no job left QUEUED
     or RUNNING, the mark caught up with the ledger) and the server's own
     budget view of every dataset (RDP filters included).

Scenarios (where the kill lands): import (large streamed imports and deletes
of other datasets), admission (many concurrent submits, some refused for
budget), running (long jobs), trace (long jobs writing a trace point every
step), result (short jobs finishing and writing their results).

Usage:
  tests/crash/crash_harness.py --server build/server/dpopt-server \
      [--trials 20] [--time-limit 110] [--seed N] [--workdir DIR] [--keep]
Full run (docs/reliability.md): --trials 120 --time-limit 1800.
Exit status: 0 if every check passed and at least --min-trials trials ran.
"""

import argparse
import os
import random
import shutil
import sys
import sqlite3
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import dpopt_harness as h  # noqa: E402
import dpopt  # noqa: E402
from dpopt import errors  # noqa: E402

SCENARIOS = ("import", "admission", "running", "trace", "result")
# Kill delay window (seconds after the workload starts) per scenario.
WINDOW = {"import": (0.05, 1.2), "admission": (0.05, 0.8), "running": (0.3, 1.5),
          "trace": (0.3, 1.5), "result": (0.1, 1.2)}
PRIVATE = ("pool-basic", "pool-rdp")


class Workload:
    """Client threads of one trial; records what the server acknowledged."""

    def __init__(self, server, scenario, trial, rng):
        self.server = server
        self.scenario = scenario
        self.trial = trial
        self.rng = random.Random(rng.random())
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ack_jobs = {}        # id -> last state seen (db code)
        self.ack_datasets = set()
        self.in_flight = {"import": 0, "delete": 0, "submit": 0, "wait": 0}
        self.refused = 0
        self.refusals = set()
        self.threads = []
        self.unexpected = []

    def _flight(self, kind, delta):
        with self.lock:
            self.in_flight[kind] += delta

    def _ack(self, job):
        code = {"QUEUED": h.QUEUED, "RUNNING": h.RUNNING, "SUCCEEDED": h.SUCCEEDED,
                "FAILED": h.FAILED, "CANCELLED": h.CANCELLED}[job.state.value]
        with self.lock:
            self.ack_jobs[job.id] = code

    def _guard(self, fn):
        def run():
            try:
                client = self.server.client(timeout=20)
            except Exception as e:  # noqa: BLE001
                self.unexpected.append(repr(e))
                return
            try:
                while not self.stop.is_set():
                    fn(client)
            except (errors.UnavailableError, errors.DpoptError) as e:
                # The kill: calls in flight fail with UNAVAILABLE (or
                # CANCELLED/UNKNOWN from a torn stream).
                if not self.stop.is_set() and e.code is not None and \
                        e.code.name not in ("UNAVAILABLE", "CANCELLED", "UNKNOWN",
                                            "DEADLINE_EXCEEDED"):
                    self.unexpected.append(repr(e))
            except Exception as e:  # noqa: BLE001
                if not self.stop.is_set():
                    self.unexpected.append(repr(e))
            finally:
                client.close()
        return run

    def _submit(self, client, dataset, eps, steps, trace_every=0, wait=False):
        self._flight("submit", 1)
        try:
            job = client.submit(h.dp_gd_spec(dataset, eps, steps, trace_every), wait=False)
        except errors.BudgetExhaustedError as e:
            with self.lock:
                self.refused += 1
                self.refusals.add(str(e)[:90])
            return None
        finally:
            self._flight("submit", -1)
        self._ack(job)
        if wait:
            self._flight("wait", 1)
            try:
                job.wait(progress=False, timeout=30)
            finally:
                self._flight("wait", -1)
            self._ack(job)
        return job

    # -- scenarios

    def importer(self, client):
        k = self.rng.randrange(1 << 30)
        name = f"imp-{self.trial}-{k}"
        self._flight("import", 1)
        try:
            h.import_csv(client, name, self.rng.choice((2000, 20000, 80000)), eps_budget=5,
                         seed=k)
        finally:
            self._flight("import", -1)
        with self.lock:
            self.ack_datasets.add(name)
        victims = [d.name for d in client.datasets()
                   if d.name.startswith("imp-") and d.name != name]
        if victims:
            self._flight("delete", 1)
            try:
                client.delete_dataset(self.rng.choice(victims))
            except errors.NotFoundError:
                pass  # the other importer thread deleted it first
            finally:
                self._flight("delete", -1)

    def admitter(self, client):
        ds = self.rng.choice(PRIVATE + ("pub",))
        self._submit(client, ds, 0.05, 5)

    def runner(self, client):
        self._submit(client, self.rng.choice(PRIVATE), 0.05, 200000)
        time.sleep(0.2)

    def tracer(self, client):
        self._submit(client, self.rng.choice(PRIVATE + ("pub",)), 0.05, 10000, trace_every=1)
        time.sleep(0.2)

    def finisher(self, client):
        self._submit(client, self.rng.choice(PRIVATE + ("pub",)), 0.02, 20, wait=True)

    def start(self):
        fns = {"import": [self.importer, self.importer, self.admitter],
               "admission": [self.admitter] * 6,
               "running": [self.runner, self.runner, self.admitter],
               "trace": [self.tracer, self.tracer],
               "result": [self.finisher] * 4}[self.scenario]
        for fn in fns:
            t = threading.Thread(target=self._guard(fn), daemon=True)
            t.start()
            self.threads.append(t)

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
            if t.is_alive():
                self.unexpected.append("a client thread did not stop within 60 s")


def setup(server):
    with server.client() as c:
        h.import_csv(c, "pool-basic", 400, eps_budget=25, budget_filter="basic")
        h.import_csv(c, "pool-rdp", 400, eps_budget=40, budget_filter="rdp", seed=3)
        h.import_csv(c, "pub", 400, public=True, seed=5)


def private_names(server):
    with server.client() as c:
        return [d.name for d in c.datasets() if not d.public]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, help="the dpopt-server binary")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--min-trials", type=int, default=None,
                    help="fail if the time limit stops the run earlier (default: trials/2)")
    ap.add_argument("--time-limit", type=float, default=110.0, help="seconds for all trials")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    min_trials = args.min_trials if args.min_trials is not None else max(1, args.trials // 2)
    rng = random.Random(seed)
    work = args.workdir or h.make_workdir("dpopt-crash-")
    os.makedirs(work, exist_ok=True)
    server = h.ServerProcess(args.server, work, workers=2, queue=256,
                             # One principal submits every job here: the per-principal
                             # limits (tested by tests/security) are off.
                             extra_args=("--max-jobs-per-principal=0",
                                         "--max-estimates-per-second=0"))
    print(f"crash harness: seed {seed}, up to {args.trials} trials in {args.time_limit:.0f} s, "
          f"work dir {work}", flush=True)
    t0 = time.monotonic()
    done = 0
    failed = None
    counts = {s: 0 for s in SCENARIOS}
    running_at_kill = 0
    imports_cut = 0
    staged_left = 0
    refusals = set()
    submits_cut = 0
    try:
        server.start()
        setup(server)
        for trial in range(args.trials):
            if time.monotonic() - t0 > args.time_limit:
                print(f"time limit reached after {done} trials", flush=True)
                break
            if trial > 0:
                server.start()
            scenario = SCENARIOS[trial % len(SCENARIOS)] if trial < len(SCENARIOS) \
                else rng.choice(SCENARIOS)
            lo, hi = WINDOW[scenario]
            delay = rng.uniform(lo, hi)
            w = Workload(server, scenario, trial, rng)
            w.start()
            time.sleep(delay)
            with w.lock:
                flight = dict(w.in_flight)
            server.kill()
            w.join()
            if w.unexpected:
                raise h.InvariantError(f"unexpected client errors: {w.unexpected[:3]}")
            ack = {"jobs": dict(w.ack_jobs), "datasets": set(w.ack_datasets)}
            # 1. The files as the kill left them (checked on a copy).
            mark = h.read_mark(server.mark)
            snap = h.snapshot_copy(server.db, work)
            with sqlite3.connect(snap) as conn:
                running = conn.execute(
                    f"SELECT count(*) FROM jobs WHERE state = {h.RUNNING}").fetchone()[0]
            before = h.check_database(snap, ack)
            if mark is not None and mark > before["last_seq"]:
                raise h.InvariantError(f"ledger mark {mark} is ahead of the ledger "
                                       f"(last charge #{before['last_seq']})")
            # 2. Restart and check again.
            server.start()
            after = h.check_database(server.db, ack, expect_no_live_jobs=True)
            if after["charges"] != before["charges"]:
                raise h.InvariantError(f"restart changed the ledger: {before} -> {after}")
            mark_after = h.read_mark(server.mark)
            if mark_after != after["last_seq"]:
                raise h.InvariantError(f"mark {mark_after} != ledger #{after['last_seq']} "
                                       "after the restart")
            with server.client() as c:
                h.budget_within(c, private_names(server))
            server.terminate()
            done += 1
            counts[scenario] += 1
            running_at_kill += running
            imports_cut += flight["import"] + flight["delete"]
            staged_left += before["staged_imports"]
            submits_cut += flight["submit"]
            refusals |= w.refusals
            print(f"trial {trial:3d} {scenario:9s} kill at {delay:5.2f} s: in flight "
                  f"{flight['import']} import, {flight['delete']} delete, "
                  f"{flight['submit']} submit, {flight['wait']} wait; {running} running; "
                  f"acked {len(ack['jobs'])} jobs, {len(ack['datasets'])} imports, {w.refused} "
                  f"refused; {before['staged_imports']} staged import(s) left by the kill, "
                  f"removed at restart; ledger "
                  f"{after['charges']} charges, {after['jobs']} jobs; checks ok", flush=True)
    except (h.InvariantError, RuntimeError) as e:
        failed = e
    finally:
        server.kill()
    elapsed = time.monotonic() - t0
    print(f"crash harness: {done} trials in {elapsed:.0f} s (seed {seed}); per scenario "
          f"{counts}; kills with jobs running: {running_at_kill} jobs; imports/deletes cut: "
          f"{imports_cut} ({staged_left} staged imports removed at restart); submits cut: {submits_cut}; refusals seen: {sorted(refusals)}", flush=True)
    if failed is not None:
        print(f"FAILED: {failed}\nserver log tail:\n{server.tail()}", flush=True)
        print(f"work dir kept: {work}")
        return 1
    if done < min_trials:
        print(f"FAILED: only {done} trials (< {min_trials}) within the time limit")
        return 1
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    print("crash harness: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
