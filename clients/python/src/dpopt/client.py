"""The dpopt client: datasets, budgets, estimates, jobs and the ledger."""

import io
import os
import sys
import time
from typing import List, Optional

import grpc
import numpy as np

from dpopt import errors, specs
from dpopt._connection import make_channel, resolve_server, resolve_token
from dpopt.results import (Budget, Dataset, Estimate, Grant, JobState, Ledger,
                           LedgerEntry, Placement, Principal, Result, Calibration,
                           Cost, Evaluation, _time)
from dpopt.v1 import dpopt_pb2, dpopt_pb2_grpc

_CHUNK = 1 << 20
_FORMATS = {"libsvm": dpopt_pb2.DATASET_FORMAT_LIBSVM, "csv": dpopt_pb2.DATASET_FORMAT_CSV}
_FILTERS = {"rdp": dpopt_pb2.BUDGET_FILTER_RDP, "basic": dpopt_pb2.BUDGET_FILTER_BASIC}
_RELATIONS = {"add_remove": dpopt_pb2.ADD_REMOVE, "replace_one": dpopt_pb2.REPLACE_ONE}
_LABELS = {"binary": dpopt_pb2.LABEL_TYPE_BINARY,
           "multiclass": dpopt_pb2.LABEL_TYPE_MULTICLASS, "real": dpopt_pb2.LABEL_TYPE_REAL}
_ROLES = {"analyst": dpopt_pb2.ROLE_ANALYST, "curator": dpopt_pb2.ROLE_CURATOR}


def _choice(table, value, what):
    try:
        return table[value.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"{what} must be one of {sorted(table)}, not {value!r}") from None


class Client:
    """A connection to a dpopt server.

    Args:
        server: ``HOST:PORT`` (default ``$DPOPT_SERVER``, else
            ``127.0.0.1:50051``).
        token: the bearer token. Default, as for the CLI: the file
            ``token_file``, else ``$DPOPT_TOKEN``, else
            ``~/.config/dpopt/token``.
        token_file: a file holding the token.
        tls: None (default): plaintext to a loopback address, TLS with the
            system's trusted roots to any other; True for TLS with the
            system's roots always; a CA file path; a :class:`dpopt.TLS`
            (mutual TLS with ``cert``/``key``); False for plaintext (to a
            loopback address only, unless ``insecure``).
        insecure: plaintext to a non-loopback address (the token crosses
            the network in clear text); without it such connections use
            TLS.
        timeout: deadline of each call in seconds (imports get 10x).

    The client is cheap; use it as a context manager or call :meth:`close`.
    """

    def __init__(self, server=None, token=None, *, token_file=None, tls=None, timeout=120.0,
                 insecure=False):
        self.server = resolve_server(server)
        self._token, self._token_source = resolve_token(token, token_file)
        self.timeout = float(timeout)
        self._channel = make_channel(self.server, tls, insecure)
        self._datasets = dpopt_pb2_grpc.DatasetServiceStub(self._channel)
        self._budget = dpopt_pb2_grpc.BudgetServiceStub(self._channel)
        self._jobs = dpopt_pb2_grpc.JobServiceStub(self._channel)
        self._admin = dpopt_pb2_grpc.AdminServiceStub(self._channel)

    # ------------------------------------------------------------ plumbing

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"dpopt.Client({self.server!r}, token from {self._token_source or 'nowhere'})"

    def _metadata(self):
        return (("authorization", "Bearer " + self._token),) if self._token else ()

    def _hint(self, err):
        if err.code() == grpc.StatusCode.UNAUTHENTICATED and not self._token:
            return "no token: pass token=..., set $DPOPT_TOKEN or write ~/.config/dpopt/token"
        if err.code() == grpc.StatusCode.UNAVAILABLE:
            return f"server {self.server}"
        return ""

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self.timeout, metadata=self._metadata())
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self._hint(e)) from None

    def wait_ready(self, timeout=30.0):
        """Blocks until the server accepts connections (UnavailableError
        after `timeout` seconds)."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise errors.UnavailableError(
                f"server {self.server} not reachable after {timeout:g} s",
                grpc.StatusCode.UNAVAILABLE) from None
        return self

    # ------------------------------------------------------------ datasets

    def datasets(self) -> List[Dataset]:
        """Datasets the caller may see (analysts: granted and public ones)."""
        r = self._call(self._datasets.ListDatasets, dpopt_pb2.ListDatasetsRequest())
        return [Dataset.from_proto(d) for d in r.datasets]

    def dataset(self, name) -> Dataset:
        """Public metadata of one dataset (NotFoundError if not visible)."""
        return Dataset.from_proto(
            self._call(self._datasets.GetDataset, dpopt_pb2.GetDatasetRequest(name=name)))

    def import_dataset(self, name, data, *, format="libsvm", dimension=0, public=False,
                       epsilon_budget=0.0, delta_budget=0.0, budget_filter="rdp",
                       relation="add_remove", label_type="binary", num_classes=0,
                       delimiter="", has_header=False, label_column=None, label_last=False,
                       bounds=None, description="", feature_names=(),
                       dummy_for="") -> Dataset:
        """Curators: imports a dataset file (path or bytes) in one transaction.

        The keywords are the fields of ``ImportHeader`` (proto/dpopt/v1/
        dpopt.proto); ``bounds`` is a dict with ``lower``, ``upper`` (per
        feature) and/or ``row_norm_bound``. A private dataset needs
        ``epsilon_budget`` (and ``delta_budget``). ``dimension`` is required
        for LIBSVM; a CSV file's is inferred from its first line when left at
        0 (a nonzero one must match the file). ``dummy_for``: this public
        dataset is the dummy that dry runs on that private dataset read.
        """
        header = dpopt_pb2.ImportHeader(
            name=name, format=_choice(_FORMATS, format, "format"), dimension=int(dimension),
            public=public, epsilon_budget=float(epsilon_budget),
            delta_budget=float(delta_budget),
            budget_filter=_choice(_FILTERS, budget_filter, "budget_filter"),
            relation=_choice(_RELATIONS, relation, "relation"),
            label_type=_choice(_LABELS, label_type, "label_type"),
            num_classes=int(num_classes), delimiter=delimiter, has_header=has_header,
            label_last=label_last, description=description, feature_names=list(feature_names),
            dummy_for=dummy_for)
        if label_column is not None:
            header.label_column = int(label_column)
        if bounds:
            header.bounds.lower.extend(float(v) for v in bounds.get("lower", ()))
            header.bounds.upper.extend(float(v) for v in bounds.get("upper", ()))
            header.bounds.row_norm_bound = float(bounds.get("row_norm_bound", 0.0))
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                data = f.read()
        payload = bytes(data)

        def requests():
            yield dpopt_pb2.ImportDatasetRequest(header=header)
            for i in range(0, len(payload), _CHUNK):
                yield dpopt_pb2.ImportDatasetRequest(chunk=payload[i:i + _CHUNK])

        return Dataset.from_proto(
            self._call(self._datasets.ImportDataset, requests(), timeout=10 * self.timeout))

    def import_arrays(self, name, x, y, **header) -> Dataset:
        """Curators: imports numpy rows ``x`` (n x d) and labels ``y`` (n) as a
        CSV dataset, every value written with 17 significant digits (an exact
        round trip of doubles). Keywords as for :meth:`import_dataset`."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1, 1)
        if x.ndim != 2 or x.shape[0] != y.shape[0]:
            raise ValueError("x must be n x d and y must have n labels")
        buf = io.StringIO()
        np.savetxt(buf, np.hstack([x, y]), fmt="%.17g", delimiter=",")
        header.setdefault("dimension", x.shape[1])
        return self.import_dataset(name, buf.getvalue().encode(), format="csv",
                                   label_last=True, **header)

    def delete_dataset(self, name):
        """Curators: erases the dataset's rows for good (its ledger stays and
        its name stays reserved). Returns the number of cancelled jobs. (If
        a reader kept the server's WAL busy, copies of erased pages may stay
        in it until the server's background retry truncates it.)"""
        r = self._call(self._datasets.DeleteDataset, dpopt_pb2.DeleteDatasetRequest(name=name))
        return r.cancelled_jobs

    def place_dataset(self, name) -> Placement:
        """Curators: places the dataset on the server's MPI worker pool
        (``dpopt-server --mpi-pool=N``): the server reads its rows once and
        sends each rank one contiguous shard, which the rank keeps on its
        host. Jobs with ``"execution": "EXECUTION_MPI_POOL"`` then read their
        rows there. Placing again replaces the shards; deleting the dataset
        deletes them. Returns every rank's host and rows. The call's deadline
        is 10x the client's timeout, as for imports. Raises
        :class:`dpopt.InvalidRequestError` (FAILED_PRECONDITION) when the
        server has no pool, :class:`dpopt.UnavailableError` when the pool
        cannot be reached."""
        r = self._call(self._datasets.PlaceDataset,
                       dpopt_pb2.PlaceDatasetRequest(name=name), timeout=10 * self.timeout)
        return Placement.from_place_reply(r)

    # ------------------------------------------------------------ budget

    def budget(self, dataset) -> Budget:
        """The dataset's budget: total, spent, remaining (and the caller's cap
        and spend for a capped analyst)."""
        return Budget.from_proto(
            self._call(self._budget.GetBudget, dpopt_pb2.GetBudgetRequest(dataset=dataset)))

    def ledger(self, dataset) -> Ledger:
        """The dataset's charges, oldest first (analysts: their own only)."""
        r = self._call(self._budget.ListLedger, dpopt_pb2.ListLedgerRequest(dataset=dataset))
        return Ledger([LedgerEntry.from_proto(e) for e in r.entries],
                      Budget.from_proto(r.budget) if r.HasField("budget") else None)

    # ------------------------------------------------------------ jobs

    def estimate(self, spec=None, **spec_fields) -> Estimate:
        """Calibrates and prices a job; charges nothing. The spec: see
        :mod:`dpopt.specs`."""
        pb = specs.to_proto(spec, **spec_fields)
        return Estimate.from_proto(
            self._call(self._jobs.EstimateJob, dpopt_pb2.EstimateJobRequest(spec=pb)))

    def submit(self, spec=None, *, wait=True, progress=None, timeout=None, dry_run=False,
               **spec_fields):
        """Submits a job: the server calibrates it, charges the ledger (in the
        same transaction as the budget check) and queues it.

        With ``dry_run=True`` the job runs as submitted on SYNTHETIC data with
        the dataset's public schema (or the dataset's public dummy): nothing
        is charged and no private row is read; ``job.synthetic_data`` is True
        and its result says so too (docs/user-guide.md, "Dry runs").

        Args:
            spec: a spec dict, JSON path or JobSpec (or spec keywords).
            wait: block until the job ends (default) and return it final.
            progress: show a progress bar while waiting (default: when tqdm
                is installed).
            timeout: give up waiting after this many seconds (TimeoutError;
                the job keeps running).

        Returns:
            :class:`Job`. Raises :class:`BudgetExhaustedError` (nothing
            charged) when the budget or the caller's cap would be exceeded.
        """
        pb = specs.to_proto(spec, **spec_fields)
        if dry_run:
            pb.dry_run = True
        job = Job(self, self._call(self._jobs.SubmitJob, dpopt_pb2.SubmitJobRequest(spec=pb)))
        if wait:
            job.wait(progress=progress, timeout=timeout)
        return job

    def job(self, job_id) -> "Job":
        """A job by id (NotFoundError unless it is the caller's or the caller
        is a curator)."""
        return Job(self, self._call(self._jobs.GetJob, dpopt_pb2.GetJobRequest(id=job_id)))

    def jobs(self, dataset="", *, newest_first=False, limit=None) -> List["Job"]:
        """The caller's jobs (curators: all), optionally of one dataset,
        oldest first (or newest first); every page, or the first `limit`."""
        out = []
        token = ""
        while True:
            want = 1000 if limit is None else min(1000, limit - len(out))
            page, token = self.jobs_page(dataset, page_size=want, page_token=token,
                                         newest_first=newest_first)
            out.extend(page)
            if not token or (limit is not None and len(out) >= limit):
                return out

    def jobs_page(self, dataset="", *, page_size=0, page_token="", newest_first=False):
        """One page of jobs: ``(jobs, next_page_token)``; the token is empty
        on the last page. ``page_size`` 0: the server's default (100)."""
        r = self._call(self._jobs.ListJobs, dpopt_pb2.ListJobsRequest(
            dataset=dataset, page_size=int(page_size), page_token=page_token,
            newest_first=newest_first))
        return [Job(self, j) for j in r.jobs], r.next_page_token

    # ------------------------------------------------------------ access

    def whoami(self) -> Principal:
        """The principal behind the token."""
        return Principal.from_proto(self._call(self._admin.WhoAmI, dpopt_pb2.WhoAmIRequest()))

    def create_principal(self, name, role="analyst", ttl_seconds=None, no_expiry=False):
        """Curators: creates a principal; returns ``(Principal, token)``. The
        token is shown only here. It lives ``ttl_seconds`` (default: the
        server's maximum token lifetime, 90 days unless the curator changed
        it), or never with ``no_expiry=True`` (curators; analysts only on a
        server without a maximum)."""
        if ttl_seconds is not None and (int(ttl_seconds) <= 0 or no_expiry):
            raise ValueError("ttl_seconds must be > 0 and not combined with no_expiry "
                             "(leave it out for the server's default lifetime)")
        r = self._call(self._admin.CreatePrincipal, dpopt_pb2.CreatePrincipalRequest(
            name=name, role=_choice(_ROLES, role, "role"),
            token_ttl_seconds=int(ttl_seconds or 0), token_no_expiry=bool(no_expiry)))
        return Principal.from_proto(r.principal), r.token

    def grant(self, principal, dataset, epsilon_cap=0.0, *, approval_above=0.0,
              approval_timeout=0) -> Grant:
        """Curators: lets an analyst use a dataset, optionally capping its
        total epsilon there (0 = no cap). Jobs costing more than
        ``approval_above`` epsilon (0 = never) wait for a curator's approval
        (:meth:`pending_jobs`, :meth:`approve`, :meth:`reject`), at most
        ``approval_timeout`` seconds (0 = the server's default, 7 days)."""
        return Grant.from_proto(self._call(self._admin.GrantDataset, dpopt_pb2.GrantDatasetRequest(
            principal=principal, dataset=dataset, epsilon_cap=float(epsilon_cap),
            approval_above_epsilon=float(approval_above),
            approval_timeout_seconds=int(approval_timeout))))

    def pending_jobs(self, dataset="") -> List["Job"]:
        """Curators: jobs waiting for approval, oldest first."""
        r = self._call(self._jobs.ListPendingJobs,
                       dpopt_pb2.ListPendingJobsRequest(dataset=dataset))
        return [Job(self, j) for j in r.jobs]

    def approve(self, job_id) -> "Job":
        """Curators: approves a waiting job; it is charged (in the admission
        transaction: :class:`BudgetExhaustedError`, nothing charged, when the
        budget or cap has no room left) and queued."""
        return Job(self, self._call(self._jobs.ApproveJob,
                                    dpopt_pb2.ApproveJobRequest(id=job_id)))

    def reject(self, job_id, reason="") -> "Job":
        """Curators: rejects a waiting job (REJECTED, nothing charged); the
        reason is shown to its submitter."""
        return Job(self, self._call(self._jobs.RejectJob,
                                    dpopt_pb2.RejectJobRequest(id=job_id, reason=reason)))

    def grants(self, principal="", dataset="") -> List[Grant]:
        """Curators: grants, optionally filtered."""
        r = self._call(self._admin.ListGrants, dpopt_pb2.ListGrantsRequest(
            principal=principal, dataset=dataset))
        return [Grant.from_proto(g) for g in r.grants]


class Job:
    """A submitted job. Attributes reflect the last reply; :meth:`refresh`
    re-reads it.

    Attributes:
        id, state (:class:`JobState`), message (reason for FAILED/CANCELLED),
        steps_done, steps_total, principal, spec (dict), calibration, cost,
        evaluation (on the public evaluation set, once finished),
        created_at, started_at, finished_at, proto; synthetic_data (a dry
        run: it ran on synthetic data and charged nothing) and
        synthetic_source (where those rows came from).
    """

    def __init__(self, client, proto):
        self._client = client
        self._set(proto)

    def _set(self, p):
        # Called for every reply and watch event: the scalars here, the
        # rest converted on first use (spec, calibration, cost, evaluation
        # and the times below), so following a job costs little per event.
        self.proto = p
        self._converted = {}
        self.id = p.id
        self.state = JobState.from_proto(p.state)
        self.message = p.message
        self.steps_done = p.steps_done
        self.steps_total = p.steps_total
        self.principal = p.principal
        self.label = p.spec.label
        self.synthetic_data = p.synthetic_data
        self.synthetic_source = p.synthetic_source

    def _convert(self, name, convert):
        if name not in self._converted:
            self._converted[name] = convert(getattr(self.proto, name))
        return self._converted[name]

    @property
    def spec(self):
        return self._convert("spec", specs.to_dict)

    @property
    def calibration(self):
        return self._convert("calibration", Calibration.from_proto)

    @property
    def cost(self):
        return self._convert("cost", Cost.from_proto)

    @property
    def evaluation(self):
        return self._convert("evaluation", Evaluation.from_proto)

    @property
    def created_at(self):
        return self._convert("created_at", _time)

    @property
    def started_at(self):
        return self._convert("started_at", _time)

    @property
    def finished_at(self):
        return self._convert("finished_at", _time)

    @property
    def approval_expires_at(self):
        return self._convert("approval_expires_at", _time)

    def __repr__(self):
        return (f"<dpopt.Job {self.id} {self.state.value} {self.steps_done}/{self.steps_total}"
                f"{' DRY RUN (synthetic data)' if self.synthetic_data else ''}"
                f"{' ' + repr(self.label) if self.label else ''}>")

    @property
    def done(self):
        return self.state.terminal

    def refresh(self):
        c = self._client
        self._set(c._call(c._jobs.GetJob, dpopt_pb2.GetJobRequest(id=self.id)))
        return self

    def cancel(self):
        """Cancels the job (it stays charged)."""
        c = self._client
        self._set(c._call(c._jobs.CancelJob, dpopt_pb2.CancelJobRequest(id=self.id)))
        return self

    def wait(self, progress=None, timeout=None):
        """Follows the job's event stream until it ends; returns self.

        Args:
            progress: None (default: a tqdm bar when tqdm is installed),
                True/False.
            timeout: seconds; TimeoutError when exceeded (the job goes on).
        """
        bar = _progress_bar(self, progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not self.done:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"job {self.id} still {self.state.value} after {timeout} s")
                self._follow(bar, deadline)
        finally:
            if bar is not None:
                bar.close()
        return self

    def _follow(self, bar, deadline):
        c = self._client
        left = None if deadline is None else max(0.1, deadline - time.monotonic())
        stream = c._jobs.WatchJob(dpopt_pb2.WatchJobRequest(id=self.id), timeout=left,
                                  metadata=c._metadata())
        try:
            for ev in stream:
                if ev.HasField("job"):
                    self._set(ev.job)
                    _advance(bar, self.steps_done, self.steps_total, self.state)
                elif ev.HasField("trace"):
                    _advance(bar, ev.trace.step, self.steps_total, self.state)
                if self.done:
                    return
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return  # the caller's loop raises TimeoutError
            # A watcher that fell too far behind is dropped by the server
            # (RESOURCE_EXHAUSTED, "... was dropped ..."): watch again.
            dropped = (code == grpc.StatusCode.RESOURCE_EXHAUSTED
                       and "dropped" in (e.details() or ""))
            if not dropped and code not in (grpc.StatusCode.UNAVAILABLE,
                                            grpc.StatusCode.CANCELLED):
                raise errors.from_rpc_error(e, c._hint(e)) from None
            time.sleep(0.5)  # server restarting: re-read and watch again
        self.refresh()

    def result(self, timeout=None, progress=False) -> Result:
        """Waits for the job to end (like ``concurrent.futures.Future.result``)
        and returns its privatized model, trace and evaluation (the server
        sends a long trace in pages of at most 1000 points and 1 MiB; this
        gathers them all).

        Args:
            timeout: seconds to wait; None (default) waits as long as it
                takes. TimeoutError when exceeded (the job goes on).
            progress: show a progress bar while waiting (default off).

        Raises :class:`JobFailedError` for a FAILED, CANCELLED or REJECTED
        job (the message carries the curator's reason). A job waiting for
        approval is waited for like a running one.
        """
        if not self.done:
            self.refresh()
        if not self.done:
            self.wait(progress=progress, timeout=timeout)
        if self.state in (JobState.FAILED, JobState.CANCELLED, JobState.REJECTED):
            raise errors.JobFailedError(
                f"job {self.id} {self.state.value}: {self.message}", job=self)
        c = self._client
        reply = c._call(c._jobs.GetJobResult, dpopt_pb2.GetJobResultRequest(id=self.id))
        # The server sends the trace a bounded page at a time: gather them.
        while reply.next_trace_offset and len(reply.trace) < reply.trace_points_total:
            page = c._call(c._jobs.GetJobResult, dpopt_pb2.GetJobResultRequest(
                id=self.id, trace_offset=reply.next_trace_offset))
            if not page.trace:
                break
            reply.trace.extend(page.trace)
            reply.next_trace_offset = page.next_trace_offset
        return Result.from_proto(reply)


def _progress_bar(job, progress):
    if progress is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=max(job.steps_total, 1), desc=job.label or job.id, unit="step",
                file=sys.stderr, leave=True, dynamic_ncols=True)


def _advance(bar, step, total, state):
    if bar is None:
        return
    if total and bar.total != total:
        bar.total = total
    step = min(int(step), bar.total)
    bar.set_postfix_str(state.value.lower(), refresh=False)
    if step > bar.n:
        bar.update(step - bar.n)  # tqdm rate-limits the redraws
    if state.terminal:
        bar.refresh()
