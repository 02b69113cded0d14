#!/usr/bin/python3
"""Soak: many short jobs through one dpopt-server on 127.0.0.1.

Runs --jobs short DP-GD jobs (half on a private dataset, charged; half on a
public one) from --concurrency client threads, each submitting and following
its jobs to the end, and samples the server process every --sample jobs:
resident memory (VmRSS), open file descriptors, database size (main file +
WAL), and the latency of job listing (the first page, the newest page, and
every page of the whole listing).

Checks (exit 1 if one fails):
  - every job SUCCEEDED and every private job is charged exactly once
    (the invariants of dpopt_harness.check_database at the end);
  - open file descriptors flat: the last sample at most 4 above the one
    taken after the warm-up (the first 20% of the jobs);
  - resident memory flat: growth over the same span at most 16 MiB + 10%
    (a leak of 10 KiB per job over 3000 jobs would exceed it);
  - the database grows only by what is recorded: after a clean shutdown
    (WAL checkpointed), the file grew by at most 3x the bytes the jobs,
    their traces, charges and audit records hold (B-tree pages, indexes and
    free space in partly filled pages) plus 1 MiB;
  - the paged listing returns every job exactly once.
Listing latencies are printed, not checked (timing belongs in benchmarks).

Usage: tests/soak/soak.py --server build/server/dpopt-server
       [--jobs 3000] [--concurrency 8] [--time-limit 1200] [--csv FILE]
CI runs a smoke (--jobs 300); the full run is documented in docs/reliability.md.
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
from dpopt import errors  # noqa: E402


def proc_stats(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def db_bytes(db):
    return sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))


def recorded_bytes(db):
    """Bytes of the rows the jobs put in the database."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        q = lambda sql: conn.execute(sql).fetchone()[0] or 0  # noqa: E731
        return (q("SELECT sum(length(id) + length(principal) + length(message) + length(spec)"
                  " + length(calibration) + length(cost) + length(result)"
                  " + length(evaluation) + 64) FROM jobs")
                + q("SELECT sum(length(job_id) + length(data) + 16) FROM job_trace")
                + q("SELECT sum(length(job_id) + length(event_json) + length(accountant)"
                    " + length(cost_blob) + length(principal) + length(note) + 48) FROM ledger")
                + q("SELECT sum(length(principal) + length(method) + length(dataset)"
                    " + length(job_id) + length(target) + length(detail) + 32) FROM audit"))


def time_listing(client):
    t = time.perf_counter()
    client.jobs_page(page_size=100)
    first = time.perf_counter() - t
    t = time.perf_counter()
    client.jobs_page(page_size=100, newest_first=True)
    newest = time.perf_counter() - t
    t = time.perf_counter()
    ids, token, pages = [], "", 0
    while True:
        page, token = client.jobs_page(page_size=1000, page_token=token)
        ids += [j.id for j in page]
        pages += 1
        if not token:
            break
    return first, newest, time.perf_counter() - t, ids, pages


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sample", type=int, default=0, help="jobs between samples (default jobs/10)")
    ap.add_argument("--time-limit", type=float, default=1200.0)
    ap.add_argument("--csv", default=None, help="write the samples to this CSV file")
    ap.add_argument("--private-every", type=int, default=2,
                    help="every Nth job on the private dataset (charged); 0: none")
    ap.add_argument("--no-list-samples", action="store_true",
                    help="time the listing only at the end (to tell its memory from the jobs')")
    ap.add_argument("--no-rss-check", action="store_true",
                    help="report RSS without checking it (sanitizer builds: ASan's quarantine "
                         "holds freed memory; LeakSanitizer checks leaks at the clean shutdown)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sample_every = args.sample or max(1, args.jobs // 10)
    work = h.make_workdir("dpopt-soak-")
    server = h.ServerProcess(args.server, work, workers=2, queue=256,
                             # One principal submits every job here: the per-principal
                             # limits (tested by tests/security) are off.
                             extra_args=("--max-jobs-per-principal=0",
                                         "--max-estimates-per-second=0"))
    failures = []
    samples = []
    t0 = time.monotonic()
    try:
        server.start()
        with server.client() as c:
            h.import_csv(c, "soak-private", 200, eps_budget=1e6, budget_filter="rdp")
            h.import_csv(c, "soak-public", 200, public=True, seed=1)
        with sqlite3.connect(f"file:{server.db}?mode=ro", uri=True):
            pass
        start_bytes = db_bytes(server.db)
        start_recorded = recorded_bytes(server.db)
        done = 0
        lock = threading.Lock()
        stop = threading.Event()
        bad = []

        def worker(i):
            nonlocal done
            with server.client() as c:
                while not stop.is_set():
                    with lock:
                        if done >= args.jobs:
                            return
                        k = done
                        done += 1
                    private = args.private_every > 0 and k % args.private_every == 0
                    ds = "soak-private" if private else "soak-public"
                    try:
                        job = c.submit(h.dp_gd_spec(ds, 0.01, 3), wait=True, progress=False,
                                       timeout=120)
                    except (errors.DpoptError, TimeoutError) as e:
                        bad.append(repr(e))
                        stop.set()
                        return
                    if job.state != "SUCCEEDED":
                        bad.append(f"{job.id}: {job.state} {job.message}")
                    if (k + 1) % sample_every == 0:
                        rss, fds = proc_stats(server.pid())
                        first, newest, whole, pages = 0.0, 0.0, 0.0, 0
                        if not args.no_list_samples:
                            first, newest, whole, _, pages = time_listing(c)
                        s = dict(jobs=k + 1, rss=rss, fds=fds, db=db_bytes(server.db),
                                 list_first_ms=first * 1e3, list_newest_ms=newest * 1e3,
                                 list_all_ms=whole * 1e3, pages=pages,
                                 elapsed=time.monotonic() - t0)
                        with lock:
                            samples.append(s)
                        print(f"  {s['jobs']:6d} jobs {s['elapsed']:6.0f} s: RSS "
                              f"{rss / 2**20:6.1f} MiB, {fds} fds, db {s['db'] / 2**20:6.2f} MiB;"
                              f" list first page {s['list_first_ms']:.1f} ms, newest page "
                              f"{s['list_newest_ms']:.1f} ms, all {pages} page(s) "
                              f"{s['list_all_ms']:.0f} ms", flush=True)
                    if time.monotonic() - t0 > args.time_limit:
                        bad.append(f"time limit {args.time_limit} s reached after {k} jobs")
                        stop.set()
                        return

        with cf.ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(worker, range(args.concurrency)))
        if bad:
            failures.append(f"job errors: {bad[:3]} ({len(bad)} in all)")
        with server.client() as c:
            _, _, _, ids, pages = time_listing(c)
        if len(ids) != len(set(ids)) or len(ids) != args.jobs:
            failures.append(f"paged listing returned {len(ids)} ids ({len(set(ids))} "
                            f"distinct) for {args.jobs} jobs")
        samples.sort(key=lambda s: s["jobs"])
        if len(samples) >= 3:
            base = samples[max(0, len(samples) // 5 - 1)]
            last = samples[-1]
            if last["fds"] > base["fds"] + 4:
                failures.append(f"open fds grew from {base['fds']} to {last['fds']}")
            limit = 16 * 2**20 + 0.10 * base["rss"]
            if last["rss"] - base["rss"] > limit and not args.no_rss_check:
                failures.append(f"RSS grew {((last['rss'] - base['rss']) / 2**20):.1f} MiB "
                                f"between {base['jobs']} and {last['jobs']} jobs")
            print(f"soak: from {base['jobs']} to {last['jobs']} jobs: RSS "
                  f"{base['rss'] / 2**20:.1f} -> {last['rss'] / 2**20:.1f} MiB, fds "
                  f"{base['fds']} -> {last['fds']}", flush=True)
        server.terminate()  # clean shutdown checkpoints the WAL
        stats = h.check_database(server.db, expect_no_live_jobs=True)
        grown = db_bytes(server.db) - start_bytes
        recorded = recorded_bytes(server.db) - start_recorded
        print(f"soak: {args.jobs} jobs, {stats['charges']} charges; database grew "
              f"{grown / 2**20:.2f} MiB for {recorded / 2**20:.2f} MiB recorded "
              f"({grown / max(1, args.jobs):.0f} bytes/job, {grown / max(1, recorded):.2f}x)",
              flush=True)
        n_private = len([k for k in range(args.jobs)
                         if args.private_every > 0 and k % args.private_every == 0])
        if stats["charges"] != n_private:
            failures.append(f"{stats['charges']} charges for {n_private} private jobs")
        if grown > 3 * recorded + 2**20:
            failures.append(f"database grew {grown} bytes for {recorded} recorded")
        if args.csv:
            with open(args.csv, "w") as f:
                keys = list(samples[0]) if samples else []
                f.write(",".join(keys) + "\n")
                for s in samples:
                    f.write(",".join(f"{s[k]:.3f}" if isinstance(s[k], float) else str(s[k])
                                     for k in keys) + "\n")
    except (h.InvariantError, RuntimeError, errors.DpoptError) as e:
        failures.append(repr(e))
    finally:
        server.kill()
    if failures:
        print("FAILED: " + "; ".join(failures) + f"\nserver log tail:\n{server.tail()}"
              f"\nwork dir kept: {work}")
        return 1
    print(f"soak: OK in {time.monotonic() - t0:.0f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
