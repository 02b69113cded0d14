"""Shared pieces of the reliability harnesses: a dpopt-server
process on 127.0.0.1, workload data and specs, and the invariant checker.

Used by tests/crash/crash_harness.py, tests/concurrency/concurrency_harness.py
and tests/soak/soak.py. Needs the built Python client on PYTHONPATH
(build/python/site) and /usr/bin/python3 (python3-grpcio, python3-protobuf).
"""

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time

import dpopt

# jobs.state in the database (storage/job_store.h JobState; not the proto enum).
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = 0, 1, 2, 3, 4
PENDING_APPROVAL, REJECTED = 5, 6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def health(address, timeout=1.0):
    """grpc.health.v1 Check of the whole server: "SERVING", "NOT_SERVING",
    ..., or None when nothing answers. The messages are tiny and fixed
    (HealthCheckRequest{} is empty; HealthCheckResponse is field 1, an enum),
    so they are encoded here rather than generated."""
    import grpc
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        try:
            reply = check(b"", timeout=timeout)
        except grpc.RpcError:
            return None
    if reply == b"":
        return _HEALTH_STATUS[0]
    if len(reply) == 2 and reply[0] == 0x08:
        return _HEALTH_STATUS.get(reply[1], str(reply[1]))
    return None


class ServerProcess:
    """dpopt-server on a database; start()/kill()/terminate() as often as
    needed (the database, token and mark survive)."""

    def __init__(self, server_bin, workdir, workers=2, queue=64, extra_args=()):
        self.bin = server_bin
        self.dir = workdir
        self.db = os.path.join(workdir, "dpopt.db")
        self.mark = self.db + ".ledger-mark"
        self.token_file = self.db + ".curator-token"
        self.workers = workers
        self.queue = queue
        self.extra_args = list(extra_args)
        self.proc = None
        self.address = None
        self.log_path = os.path.join(workdir, "server.log")
        self.starts = 0

    def start(self, timeout=60.0):
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        log = open(self.log_path, "a")
        log.write(f"---- start {self.starts}\n")
        log.flush()
        self.proc = subprocess.Popen(
            [self.bin, f"--db={self.db}", f"--listen={self.address}",
             f"--workers={self.workers}", f"--queue={self.queue}", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dpopt-server exited with {self.proc.returncode}:\n"
                                   + self.tail())
            # The port opens before the database (health NOT_SERVING while
            # it is opened and interrupted jobs are recovered): ready means
            # SERVING, not listening.
            if (os.path.exists(self.token_file) and os.path.getsize(self.token_file) > 0
                    and health(self.address) == "SERVING"):
                return self
            time.sleep(0.05)
        raise RuntimeError("dpopt-server did not listen in time:\n" + self.tail())

    @property
    def token(self):
        with open(self.token_file) as f:
            return f.read().strip()

    def client(self, timeout=60.0):
        return dpopt.Client(self.address, token=self.token, timeout=timeout)

    def kill(self):
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def terminate(self):
        """SIGTERM: a clean shutdown, which must exit 0 (under the sanitizers
        that includes LeakSanitizer's check at exit). Raises RuntimeError
        otherwise."""
        if self.proc is None:
            return
        code = self.proc.poll()
        if code is None:
            self.proc.terminate()
            try:
                code = self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                raise RuntimeError("dpopt-server did not shut down within 60 s of SIGTERM")
        self.proc = None
        if code != 0:
            raise RuntimeError(f"dpopt-server exited with {code} on SIGTERM:\n" + self.tail())

    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def tail(self, n=4000):
        try:
            with open(self.log_path) as f:
                return f.read()[-n:]
        except OSError:
            return ""


def csv_rows(n, seed=0):
    """n rows of a 2-feature CSV (label last), deterministic."""
    out = []
    for i in range(n):
        a = ((i + seed) % 10) / 10.0
        b = ((i * 3 + seed) % 7) / 7.0
        out.append(f"{a},{b},{1 if a + b > 0.9 else -1}\n")
    return "".join(out).encode()


def import_csv(client, name, rows, eps_budget=100.0, budget_filter="basic", seed=0,
               public=False, delta_budget=1e-3):
    kw = {} if public else dict(epsilon_budget=eps_budget, delta_budget=delta_budget,
                                budget_filter=budget_filter)
    return client.import_dataset(name, csv_rows(rows, seed), format="csv", dimension=2,
                                 label_last=True, public=public, **kw)


def dp_gd_spec(dataset, eps, steps, trace_every=0):
    spec = {"dataset": dataset,
            "model": {"logistic_regression": {"l2": 0.01}},
            "privacy": {"epsilon": eps, "delta": 1e-7},
            "algorithm": {"dp_gd": {"steps": steps, "clip_norm": 1, "learning_rate": 0.5}}}
    if trace_every:
        spec["trace_every"] = trace_every
    return spec


class InvariantError(AssertionError):
    pass


def _q(conn, sql, *args):
    return conn.execute(sql, args).fetchall()


def snapshot_copy(db_path, into_dir):
    """Copies the database and its WAL (not the -shm) as a crashed server left
    them, so checks run SQLite's recovery on the copy, not on the original."""
    dst = os.path.join(into_dir, "snapshot.db")
    for suffix in ("", "-wal"):
        if os.path.exists(dst + suffix):
            os.remove(dst + suffix)
        if os.path.exists(db_path + suffix):
            shutil.copyfile(db_path + suffix, dst + suffix)
    return dst


def read_mark(mark_path):
    """The ledger high-water mark (storage/ledger_mark.h), None if absent."""
    if not os.path.exists(mark_path):
        return None
    with open(mark_path) as f:
        text = f.read()
    prefix = "dpopt-ledger-mark v1 seq="
    if not text.startswith(prefix) or not text.endswith("\n"):
        raise InvariantError(f"malformed ledger mark {text!r}")
    return int(text[len(prefix):-1])


IMPORT_IN_PROGRESS = -1  # datasets.deleted_at of a staged import


def check_database(db_path, acknowledged=None, expect_no_live_jobs=False):
    """Checks the stored invariants of a dpopt database; raises InvariantError.

    - PRAGMA integrity_check ok, no foreign-key violations;
    - the ledger is append-only and gap-free: seq = 1..N;
    - every job on a private dataset has exactly one charge, on its own
      dataset, except a dry run (jobs.synthetic_source set: none) and a job
      that waited for approval (jobs.approval_expires_at set: none while
      PENDING_APPROVAL or REJECTED, at most one otherwise); no job on a
      public dataset is charged; no charge without its job (so no released
      result without a charge);
    - a SUCCEEDED job has a result; a job with a result is SUCCEEDED;
    - no budget exceeded: for a "basic" filter dataset the sums of the
      charged epsilons and deltas stay within its budget (basic composition,
      recomputed here independently of the server);
    - no half-imported dataset: every live dataset's blocks are numbered
      0..k-1, contiguous in rows, and add up to its row and nonzero counts;
      a deleted dataset has no rows left; an import in progress (deleted_at
      = -1, storage/dataset_store.h kImportInProgress: invisible to every
      reader) has a contiguous prefix of blocks, and none survives a restart
      (expect_no_live_jobs);
    - if expect_no_live_jobs (right after a restart, before new work): no
      job is QUEUED or RUNNING (interrupted jobs became FAILED);
    - `acknowledged` (optional): {"jobs": {id: state_seen}, "datasets": set}
      that the server confirmed before the crash: each job exists and is
      charged (its admission was durable), each job seen SUCCEEDED still is,
      each confirmed import exists complete.
    Returns a dict of counts.
    """
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        errors = []
        ic = _q(conn, "PRAGMA integrity_check")
        if ic != [("ok",)]:
            errors.append(f"integrity_check: {ic[:5]}")
        fk = _q(conn, "PRAGMA foreign_key_check")
        if fk:
            errors.append(f"foreign_key_check: {fk[:5]}")
        seqs = [r[0] for r in _q(conn, "SELECT seq FROM ledger ORDER BY seq")]
        if seqs != list(range(1, len(seqs) + 1)):
            errors.append(f"ledger sequence has gaps: {seqs[:10]}...")
        bad = _q(conn, f"""
            SELECT j.id, d.is_public, count(l.seq) AS n,
                   sum(CASE WHEN l.dataset_id != j.dataset_id THEN 1 ELSE 0 END)
            FROM jobs j JOIN datasets d ON d.id = j.dataset_id
            LEFT JOIN ledger l ON l.job_id = j.id
            GROUP BY j.id
            HAVING (d.is_public = 0 AND j.synthetic_source = ''
                    AND j.approval_expires_at = 0 AND n != 1)
                   OR (j.synthetic_source != '' AND n != 0)
                   OR (j.approval_expires_at != 0
                       AND j.state IN ({PENDING_APPROVAL}, {REJECTED}) AND n != 0)
                   OR (j.approval_expires_at != 0 AND n > 1)
                   OR (d.is_public = 1 AND n != 0)
                   OR sum(CASE WHEN l.dataset_id != j.dataset_id THEN 1 ELSE 0 END) > 0""")
        if bad:
            errors.append(f"jobs not charged exactly once (id, public, charges): {bad[:5]}")
        orphan = _q(conn, "SELECT seq, job_id FROM ledger WHERE job_id NOT IN "
                          "(SELECT id FROM jobs)")
        if orphan:
            errors.append(f"charges without a job: {orphan[:5]}")
        res = _q(conn, f"""SELECT id, state, length(result) FROM jobs
                         WHERE (state = {SUCCEEDED}) != (length(result) > 0)""")
        if res:
            errors.append(f"result/state mismatch (id, state, bytes): {res[:5]}")
        over = _q(conn, """
            SELECT d.name, d.epsilon_budget, sum(l.epsilon), d.delta_budget, sum(l.delta)
            FROM datasets d JOIN ledger l ON l.dataset_id = d.id
            WHERE d.budget_filter = 'basic'
            GROUP BY d.id
            HAVING sum(l.epsilon) > d.epsilon_budget * (1 + 1e-9)
                OR sum(l.delta) > d.delta_budget * (1 + 1e-9)""")
        if over:
            errors.append(f"budget exceeded (name, eps budget, eps spent, ...): {over}")
        datasets = _q(conn, "SELECT id, name, num_rows, nonzeros, deleted_at FROM datasets")
        staged_imports = 0
        for did, name, num_rows, nnz, deleted_at in datasets:
            blocks = _q(conn, "SELECT block, first_row, num_rows, nonzeros FROM dataset_blocks "
                              "WHERE dataset_id = ? ORDER BY block", did)
            if deleted_at == IMPORT_IN_PROGRESS:
                staged_imports += 1
                if expect_no_live_jobs:
                    errors.append(f"staged import {name} survived the restart")
                if any(b[0] != i for i, b in enumerate(blocks)):
                    errors.append(f"staged import {name}: blocks not contiguous")
                continue
            if deleted_at:
                if blocks:
                    errors.append(f"deleted dataset {name} still has {len(blocks)} blocks")
                continue
            row = 0
            ok = True
            for i, (block, first_row, n, _) in enumerate(blocks):
                if block != i or first_row != row:
                    ok = False
                row += n
            if not ok or row != num_rows or sum(b[3] for b in blocks) != nnz:
                errors.append(f"half-imported dataset {name}: {len(blocks)} blocks, "
                              f"{row} of {num_rows} rows")
        live = _q(conn, f"SELECT count(*) FROM jobs WHERE state IN ({QUEUED}, {RUNNING})")[0][0]
        if expect_no_live_jobs and live:
            errors.append(f"{live} job(s) still QUEUED/RUNNING after the restart")
        if acknowledged:
            states = dict(_q(conn, "SELECT id, state FROM jobs"))
            for jid, seen in acknowledged.get("jobs", {}).items():
                if jid not in states:
                    errors.append(f"acknowledged job {jid} is gone")
                elif seen == SUCCEEDED and states[jid] != SUCCEEDED:
                    errors.append(f"job {jid} was SUCCEEDED, now state {states[jid]}")
            names = {r[1] for r in datasets if r[4] != IMPORT_IN_PROGRESS}
            for name in acknowledged.get("datasets", ()):
                if name not in names:
                    errors.append(f"acknowledged import {name} is gone")
        if errors:
            raise InvariantError("; ".join(errors))
        return {
            "charges": len(seqs),
            "jobs": _q(conn, "SELECT count(*) FROM jobs")[0][0],
            "datasets": len(datasets),
            "last_seq": seqs[-1] if seqs else 0,
            "staged_imports": staged_imports,
        }
    finally:
        conn.close()


def budget_within(client, names):
    """The server's own view (any filter, RDP included): spent <= budget."""
    for name in names:
        b = client.budget(name)
        if b.epsilon_spent > b.epsilon_total * (1 + 1e-9) or b.epsilon_remaining < -1e-9:
            raise InvariantError(f"server reports {name} over budget: {b}")


def make_workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))
