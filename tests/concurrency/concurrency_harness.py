#!/usr/bin/python3
"""Concurrency harness: a budget is never overspent under any
interleaving the harness can produce, and concurrent dataset and job
operations leave a consistent database.

Phases, against one dpopt-server on 127.0.0.1:
  1. one dataset: 50 submitter threads race for a "basic" budget of
     epsilon 3 with jobs of epsilon 0.1 each (the budget fits exactly 30);
  2. across datasets: 50 threads over 4 datasets (2 "basic", 2 "rdp"), and
     an analyst with an epsilon cap on one of them among the submitters;
  3. concurrent imports and deletes of different datasets (8 threads, each
     importing, charging and deleting its own datasets in a loop), while
     submitters keep charging another dataset;
  4. concurrent cancels: 24 long jobs, each cancelled by two threads at once.
After each phase the database invariants are checked
(dpopt_harness.check_database: every job charged exactly once, no charge
without its job, no basic budget exceeded by the sum of its charges, no
half-imported or half-deleted dataset, integrity_check ok), and the server's
own budget view of every private dataset.

Usage: tests/concurrency/concurrency_harness.py --server build/server/dpopt-server
       [--submitters 50] [--time-limit 150] [--keep]
"""

import argparse
import concurrent.futures as cf
import os
import shutil
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import dpopt_harness as h  # noqa: E402
import dpopt  # noqa: E402
from dpopt import errors  # noqa: E402


class Failure(AssertionError):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def check(self, what):
        if self.left() < 0:
            raise Failure(f"time limit exceeded during {what}")


def race_submitters(server, threads, pick, per_thread, token=None):
    """`threads` threads each submit up to `per_thread` quick jobs, starting
    together; pick(i, k) -> (dataset, epsilon, token or None). Returns
    ({dataset: admitted}, {dataset: refused for budget}, other errors)."""
    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    admitted, refused, other = {}, {}, []

    def worker(i):
        clients = {}
        try:
            barrier.wait(timeout=60)
            for k in range(per_thread):
                ds, eps, tok = pick(i, k)
                c = clients.get(tok)
                if c is None:
                    c = clients[tok] = dpopt.Client(server.address,
                                                    token=tok or server.token, timeout=60)
                try:
                    c.submit(h.dp_gd_spec(ds, eps, 3), wait=False)
                    with lock:
                        admitted[ds] = admitted.get(ds, 0) + 1
                except errors.BudgetExhaustedError as e:
                    if "queue" in str(e).lower():
                        with lock:
                            other.append(str(e))
                    else:
                        with lock:
                            refused[ds] = refused.get(ds, 0) + 1
                except errors.DpoptError as e:
                    with lock:
                        other.append(repr(e))
        finally:
            for c in clients.values():
                c.close()

    with cf.ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return admitted, refused, other


def wait_idle(client, deadline):
    while True:
        live = [j for j in client.jobs() if not j.done]
        if not live:
            return
        deadline.check(f"waiting for {len(live)} jobs to end")
        time.sleep(0.1)


def check_all(server, what):
    stats = h.check_database(server.db)
    with server.client() as c:
        h.budget_within(c, [d.name for d in c.datasets() if not d.public])
    print(f"  {what}: invariants ok ({stats['charges']} charges, {stats['jobs']} jobs, "
          f"{stats['datasets']} datasets)", flush=True)


def fixed_point_cost(entry_blob):
    """(epsilon in 1e-12 units, delta in 1e-18 units) of a basic-filter charge
    (core/privacy/README.md: integer fixed-point costs, exact sums)."""
    parts = entry_blob.split("|")
    return int(parts[2]), int(parts[3])


def ledger_blobs(server, dataset):
    with sqlite3.connect(f"file:{server.db}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT l.cost_blob FROM ledger l JOIN datasets d ON d.id = l.dataset_id "
            "WHERE d.name = ?", (dataset,))]


def phase_one_dataset(server, n, deadline):
    eps_budget, delta_budget = 3.0, 1e-2
    with server.client() as c:
        h.import_csv(c, "race-one", 300, eps_budget=eps_budget, delta_budget=delta_budget,
                     budget_filter="basic")
    admitted, refused, other = race_submitters(
        server, n, lambda i, k: ("race-one", 0.1, None), per_thread=2)
    expect(not other, f"unexpected errors: {other[:3]}")
    with server.client() as c:
        b = c.budget("race-one")
        ledger = c.ledger("race-one")
    got = admitted.get("race-one", 0)
    expect(got == len(ledger.entries), "admissions and charges differ")
    # Every job is identical, so every charge costs the same (integer
    # fixed-point units, exact sums): the budget fits exactly
    # min(floor(E / e), floor(D / d)) of them. More is an overspend; fewer
    # means a job was refused although it fitted.
    blobs = ledger_blobs(server, "race-one")
    costs = {fixed_point_cost(x) for x in blobs}
    expect(len(costs) == 1, f"identical jobs were charged differently: {costs}")
    e, d = costs.pop()
    fits = min(int(round(eps_budget * 1e12)) // e, int(round(delta_budget * 1e18)) // d)
    total = sum(x.epsilon for x in ledger.entries)
    print(f"  one dataset: {n} submitters x 2 at once: {got} admitted, "
          f"{refused.get('race-one', 0)} refused for budget; the budget fits exactly {fits}; "
          f"spent {b.epsilon_spent:.6g} of {b.epsilon_total:g} (sum of charges {total:.6g})",
          flush=True)
    expect(got == min(fits, 2 * n), f"admitted {got}, but exactly {min(fits, 2 * n)} fit")
    expect(total <= eps_budget * (1 + 1e-9), f"overspent: {total} > {eps_budget}")
    wait_idle(server.client(), deadline)
    check_all(server, "one dataset")


def phase_across(server, n, deadline):
    names = ["race-b1", "race-b2", "race-r1", "race-r2"]
    with server.client() as c:
        for i, name in enumerate(names):
            # Budgets tight enough that every dataset refuses some of the
            # 50 racing submitters (the RDP ones at about 15 jobs).
            h.import_csv(c, name, 300, eps_budget=(2.0, 3.0, 0.5, 0.6)[i],
                         budget_filter="basic" if "-b" in name else "rdp", seed=i)
        # The capped analyst races on a "basic" dataset of its own, so its
        # admissions are limited by the cap alone and are exact to check.
        h.import_csv(c, "race-cap", 300, eps_budget=10.0, budget_filter="basic", seed=7)
        _, analyst_token = c.create_principal("racer", "analyst")
        c.grant("racer", "race-cap", epsilon_cap=0.25)

    def pick(i, k):
        if i < 10:  # the capped analyst
            return "race-cap", 0.1, analyst_token
        return names[(i + k) % len(names)], 0.15, None

    admitted, refused, other = race_submitters(server, n, pick, per_thread=4)
    expect(not other, f"unexpected errors: {other[:3]}")
    with server.client() as c:
        for name in names:
            b = c.budget(name)
            print(f"  across: {name}: {admitted.get(name, 0)} admitted, "
                  f"{refused.get(name, 0)} refused, spent {b.epsilon_spent:.4g} of "
                  f"{b.epsilon_total:g} ({b.filter})", flush=True)
            expect(b.epsilon_spent <= b.epsilon_total * (1 + 1e-9), f"{name} overspent")
            expect(b.charges == len(c.ledger(name).entries), f"{name}: charge count")
            expect(admitted.get(name, 0) == b.charges, f"{name}: admissions != charges")
            # Nothing under-admitted: after refusals, one more identical job
            # must not fit either (the server's own estimate).
            if refused.get(name, 0):
                est = c.estimate(h.dp_gd_spec(name, 0.15, 3))
                expect(not est.admissible,
                       f"{name}: refused jobs, yet one more would be admitted now")
    with dpopt.Client(server.address, token=analyst_token) as a:
        b = a.budget("race-cap")
        mine = a.ledger("race-cap").entries
    blobs = ledger_blobs(server, "race-cap")
    costs = {fixed_point_cost(x) for x in blobs}
    expect(len(costs) == 1, f"identical jobs charged differently: {costs}")
    e, _ = costs.pop()
    fits = int(round(0.25 * 1e12)) // e
    print(f"  across: analyst with cap 0.25 on race-cap, 10 threads x 4: {len(mine)} admitted "
          f"(the cap fits exactly {fits}), {refused.get('race-cap', 0)} refused, spent "
          f"{b.caller_epsilon_spent:.4g}", flush=True)
    expect(len(mine) == fits, f"analyst admitted {len(mine)}, exactly {fits} fit the cap")
    expect(sum(x.epsilon for x in mine) <= 0.25 * (1 + 1e-9), "analyst charges exceed cap")
    wait_idle(server.client(), deadline)
    check_all(server, "across datasets")


def phase_import_delete(server, deadline, threads=8, rounds=3):
    errs = []
    stop = threading.Event()

    def churn(i):
        with server.client() as c:
            for r in range(rounds):
                name = f"churn-{i}-{r}"
                try:
                    h.import_csv(c, name, 3000 + 500 * i, eps_budget=1.0, seed=i + r)
                    c.submit(h.dp_gd_spec(name, 0.1, 3), wait=False)
                    c.delete_dataset(name)
                    try:
                        c.dataset(name)
                        errs.append(f"{name} still visible after delete")
                    except errors.NotFoundError:
                        pass
                except errors.DpoptError as e:
                    errs.append(f"{name}: {e!r}")

    def background():
        with server.client() as c:
            while not stop.is_set():
                try:
                    c.submit(h.dp_gd_spec("race-r2", 0.01, 3), wait=False)
                except errors.BudgetExhaustedError:
                    pass
                time.sleep(0.01)

    bg = threading.Thread(target=background, daemon=True)
    bg.start()
    with cf.ThreadPoolExecutor(threads) as pool:
        list(pool.map(churn, range(threads)))
    stop.set()
    bg.join(timeout=30)
    expect(not errs, f"import/delete errors: {errs[:3]}")
    with server.client() as c:
        left = [d.name for d in c.datasets() if d.name.startswith("churn-")]
    expect(not left, f"deleted datasets still listed: {left}")
    print(f"  imports and deletes: {threads} threads x {rounds} rounds ok", flush=True)
    wait_idle(server.client(), deadline)
    check_all(server, "imports and deletes")


def phase_cancel(server, deadline, jobs=24):
    with server.client() as c:
        h.import_csv(c, "cancel-pool", 300, eps_budget=20.0, budget_filter="rdp", seed=9)
        ids = [c.submit(h.dp_gd_spec("cancel-pool", 0.1, 10 ** 6), wait=False).id
               for _ in range(jobs)]
    barrier = threading.Barrier(2 * jobs)
    results = {"ok": 0, "already": 0}
    errs = []
    lock = threading.Lock()

    def cancel(jid):
        with server.client() as c:
            barrier.wait(timeout=60)
            try:
                c.job(jid).cancel()
                with lock:
                    results["ok"] += 1
            except errors.DpoptError as e:
                if e.code is not None and e.code.name == "FAILED_PRECONDITION":
                    with lock:
                        results["already"] += 1
                else:
                    with lock:
                        errs.append(repr(e))

    with cf.ThreadPoolExecutor(2 * jobs) as pool:
        list(pool.map(cancel, ids + ids))
    expect(not errs, f"cancel errors: {errs[:3]}")
    wait_idle(server.client(), deadline)
    with server.client() as c:
        states = [c.job(j).state.value for j in ids]
        ledger = c.ledger("cancel-pool")
    expect(all(s == "CANCELLED" for s in states), f"states after cancel: {set(states)}")
    expect(len(ledger.entries) == jobs, f"{len(ledger.entries)} charges for {jobs} jobs")
    print(f"  cancels: {jobs} long jobs x 2 concurrent cancels: {results['ok']} accepted, "
          f"{results['already']} already ended; all CANCELLED, each charged once", flush=True)
    check_all(server, "cancels")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--submitters", type=int, default=50)
    ap.add_argument("--time-limit", type=float, default=150.0)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = h.make_workdir("dpopt-conc-")
    server = h.ServerProcess(args.server, work, workers=2, queue=1024,
                             # One principal submits every job here: the per-principal
                             # limits (tested by tests/security) are off.
                             extra_args=("--max-jobs-per-principal=0",
                                         "--max-estimates-per-second=0"))
    deadline = Deadline(args.time_limit)
    t0 = time.monotonic()
    try:
        server.start()
        for name, fn in (("one dataset", lambda: phase_one_dataset(server, args.submitters,
                                                                    deadline)),
                         ("across datasets", lambda: phase_across(server, args.submitters,
                                                                  deadline)),
                         ("imports and deletes", lambda: phase_import_delete(server, deadline)),
                         ("cancels", lambda: phase_cancel(server, deadline))):
            print(f"== {name}", flush=True)
            fn()
            deadline.check(name)
        server.terminate()
        h.check_database(server.db, expect_no_live_jobs=True)
    except (Failure, h.InvariantError, RuntimeError, dpopt.errors.DpoptError) as e:
        print(f"FAILED: {e}\nserver log tail:\n{server.tail()}\nwork dir kept: {work}")
        server.kill()
        return 1
    finally:
        server.kill()
    print(f"concurrency harness: OK in {time.monotonic() - t0:.0f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
