#!/usr/bin/python3
"""External-client interop test for dpopt.v1 with Python gRPC (python3-grpcio).

Talks to a running dpopt-server through stubs generated from proto/ at test
time (see ../run.sh), the way a third-party analyst would: health check,
dataset listing and metadata, job estimate, a small DP-SGD job watched to
completion, its result, and the error codes of malformed requests.

Usage: interop_client.py --stubs DIR --server HOST:PORT --dataset NAME
                         [--eval-dataset NAME]
Exit status 0 only if every check passed.
"""

import argparse
import collections
import math
import os
import sys
import time

import grpc

TERMINAL_STATES = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
RPC_TIMEOUT = 30.0
JOB_TIMEOUT = 300.0


class Checks:
    """Runs named checks in order; a failed check is reported, not fatal."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn):
        start = time.monotonic()
        try:
            fn()
        except grpc.RpcError as e:
            self.failed += 1
            print(f"FAIL {name}: RPC failed: {e.code().name}: {e.details()}", flush=True)
            return False
        except Exception as e:  # report and go on: later checks may still run
            self.failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            return False
        self.passed += 1
        print(f"ok   {name} ({time.monotonic() - start:.2f}s)", flush=True)
        return True


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


def expect_code(fn, code, what):
    """Calls fn(); it must fail with grpc status `code`."""
    try:
        fn()
    except grpc.RpcError as e:
        expect(e.code() == code,
               f"{what}: expected {code.name}, got {e.code().name}: {e.details()}")
        expect(e.details(), f"{what}: {code.name} without a message")
        return e.details()
    raise AssertionError(f"{what}: expected {code.name}, call succeeded")


class BearerToken(grpc.UnaryUnaryClientInterceptor,
                  grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor):
    """Adds 'authorization: Bearer TOKEN' to every call."""

    def __init__(self, token):
        self._md = ("authorization", "Bearer " + token)

    def _details(self, d):
        md = list(d.metadata or []) + [self._md]
        return d._replace(metadata=md) if hasattr(d, "_replace") else _Details(
            d.method, d.timeout, md, d.credentials, d.wait_for_ready,
            d.compression)

    def intercept_unary_unary(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_unary_stream(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_stream_unary(self, cont, d, it):
        return cont(self._details(d), it)


class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials",
                     "wait_for_ready", "compression")),
        grpc.ClientCallDetails):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stubs", required=True, help="dir with generated *_pb2 modules")
    ap.add_argument("--server", required=True)
    ap.add_argument("--dataset", required=True, help="private dataset to train on")
    ap.add_argument("--eval-dataset", default="", help="public dataset for evaluate_on")
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--tls-ca", default="", help="PEM CA that signed the server (TLS)")
    ap.add_argument("--tls-cert", default="", help="PEM client certificate (mutual TLS)")
    ap.add_argument("--tls-key", default="", help="PEM client key (mutual TLS)")
    args = ap.parse_args()

    sys.path.insert(0, args.stubs)
    from dpopt.v1 import dpopt_pb2, dpopt_pb2_grpc, job_spec_pb2
    # proto/grpc/health/v1/health.proto generates the package grpc.health.v1,
    # which lives inside grpcio's own `grpc` package name: make the generated
    # folder part of it (python3-grpcio ships no grpc.health).
    grpc.__path__.append(os.path.join(args.stubs, "grpc"))
    from grpc.health.v1 import health_pb2, health_pb2_grpc
    from google.protobuf import json_format

    token = os.environ.get("DPOPT_TOKEN", "")
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    if args.tls_ca:
        creds = grpc.ssl_channel_credentials(
            root_certificates=read(args.tls_ca),
            private_key=read(args.tls_key) if args.tls_key else None,
            certificate_chain=read(args.tls_cert) if args.tls_cert else None)
        bare = grpc.secure_channel(args.server, creds)
    else:
        bare = grpc.insecure_channel(args.server)
    channel = grpc.intercept_channel(bare, BearerToken(token)) if token else bare
    health = health_pb2_grpc.HealthStub(channel)
    datasets = dpopt_pb2_grpc.DatasetServiceStub(channel)
    budget = dpopt_pb2_grpc.BudgetServiceStub(channel)
    jobs = dpopt_pb2_grpc.JobServiceStub(channel)
    state = {}
    checks = Checks()

    def spec(epsilon=None, dataset=None):
        s = {
            "dataset": dataset or args.dataset,
            "model": {"logistic_regression": {"l2": 1e-4}},
            "privacy": {"epsilon": args.epsilon if epsilon is None else epsilon,
                        "delta": 1e-6},
            "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": args.steps,
                                     "clip_norm": 1.0, "learning_rate": 0.5}},
            "label": "python-interop",
        }
        if args.eval_dataset:
            s["evaluate_on"] = args.eval_dataset
        # The proto3 JSON form is the documented spec format: parse it the
        # same way the CLI does.
        return json_format.ParseDict(s, job_spec_pb2.JobSpec())

    def charges():
        return budget.GetBudget(dpopt_pb2.GetBudgetRequest(dataset=args.dataset),
                                timeout=RPC_TIMEOUT).charges

    def health_check():
        r = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=RPC_TIMEOUT)
        expect(r.status == health_pb2.HealthCheckResponse.SERVING,
               f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)}")

    def list_datasets():
        r = datasets.ListDatasets(dpopt_pb2.ListDatasetsRequest(), timeout=RPC_TIMEOUT)
        names = [d.name for d in r.datasets]
        expect(args.dataset in names, f"{args.dataset} not in {names}")
        if args.eval_dataset:
            expect(args.eval_dataset in names, f"{args.eval_dataset} not in {names}")

    def get_dataset():
        d = datasets.GetDataset(dpopt_pb2.GetDatasetRequest(name=args.dataset),
                                timeout=RPC_TIMEOUT)
        expect(d.name == args.dataset, f"name {d.name!r}")
        expect(d.rows > 0, f"rows {d.rows}")
        expect(d.dimension > 0, f"dimension {d.dimension}")
        expect(not d.public, "private dataset reported as public")
        expect(d.HasField("budget"), "private dataset without budget")
        expect(d.budget.epsilon_total > 0, f"epsilon_total {d.budget.epsilon_total}")
        expect(d.budget.epsilon_remaining <= d.budget.epsilon_total + 1e-9,
               "remaining > total")
        state["dimension"] = d.dimension
        b = budget.GetBudget(dpopt_pb2.GetBudgetRequest(dataset=args.dataset),
                             timeout=RPC_TIMEOUT)
        expect(b.dataset == args.dataset, f"budget for {b.dataset!r}")
        expect(abs(b.epsilon_total - d.budget.epsilon_total) < 1e-12,
               "GetBudget and GetDataset disagree on epsilon_total")
        expect(b.accounting, "budget without accounting description")
        if args.eval_dataset:
            e = datasets.GetDataset(dpopt_pb2.GetDatasetRequest(name=args.eval_dataset),
                                    timeout=RPC_TIMEOUT)
            expect(e.public, f"{args.eval_dataset} not public")
            expect(not e.HasField("budget"), "public dataset with a budget")

    def estimate():
        before = charges()
        r = jobs.EstimateJob(dpopt_pb2.EstimateJobRequest(spec=spec()), timeout=RPC_TIMEOUT)
        c = r.calibration
        expect(c.noise_multiplier > 0 and math.isfinite(c.noise_multiplier),
               f"noise_multiplier {c.noise_multiplier}")
        expect(c.steps == args.steps, f"steps {c.steps} != {args.steps}")
        expect(abs(c.sampling_rate - 0.01) < 1e-12, f"sampling_rate {c.sampling_rate}")
        expect(c.clip_norm == 1.0, f"clip_norm {c.clip_norm}")
        expect(0 < r.cost.epsilon <= args.epsilon * (1 + 1e-9),
               f"cost epsilon {r.cost.epsilon} not in (0, {args.epsilon}]")
        expect(r.cost.delta <= 1e-6 * (1 + 1e-9), f"cost delta {r.cost.delta}")
        expect(r.admissible, f"not admissible: {r.message}")
        expect(r.budget_after.epsilon_remaining < r.budget_before.epsilon_remaining,
               "estimate does not lower the remaining budget")
        expect(charges() == before, "EstimateJob charged the ledger")

    def submit():
        before = charges()
        job = jobs.SubmitJob(dpopt_pb2.SubmitJobRequest(spec=spec()), timeout=RPC_TIMEOUT)
        expect(job.id, "job without id")
        expect(job.cost.charged, "job on a private dataset not marked charged")
        expect(job.steps_total == args.steps or job.steps_total == 0,
               f"steps_total {job.steps_total}")
        expect(charges() == before + 1, "SubmitJob did not add one ledger charge")
        state["job"] = job.id

    def watch():
        expect("job" in state, "no job submitted")
        deadline = time.monotonic() + JOB_TIMEOUT
        final = None
        traces = []
        first = None
        stream = jobs.WatchJob(dpopt_pb2.WatchJobRequest(id=state["job"]), timeout=JOB_TIMEOUT)
        for ev in stream:
            kind = ev.WhichOneof("event")
            if first is None:
                first = kind
            if kind == "trace":
                traces.append(ev.trace)
            elif kind == "job":
                expect(ev.job.id == state["job"], f"event for job {ev.job.id}")
                if dpopt_pb2.JobState.Name(ev.job.state) in TERMINAL_STATES:
                    final = ev.job
            expect(time.monotonic() < deadline, "job did not finish in time")
        expect(first == "job", f"first event is {first}, not the job")
        expect(final is not None, "stream ended without a terminal state")
        name = dpopt_pb2.JobState.Name(final.state)
        expect(name == "JOB_STATE_SUCCEEDED", f"job ended {name}: {final.message}")
        steps = [t.step for t in traces]
        expect(steps == sorted(steps), "trace steps out of order")
        for t in traces:
            expect(math.isfinite(t.iterate_norm), "non-finite trace value")
        # GetJob agrees with the stream.
        j = jobs.GetJob(dpopt_pb2.GetJobRequest(id=state["job"]), timeout=RPC_TIMEOUT)
        expect(j.state == final.state, "GetJob state differs from WatchJob")
        expect(j.steps_done == args.steps, f"steps_done {j.steps_done}")
        listed = jobs.ListJobs(dpopt_pb2.ListJobsRequest(dataset=args.dataset),
                               timeout=RPC_TIMEOUT)
        expect(state["job"] in [x.id for x in listed.jobs], "job missing from ListJobs")

    def result():
        r = jobs.GetJobResult(dpopt_pb2.GetJobResultRequest(id=state["job"]),
                              timeout=RPC_TIMEOUT)
        expect(r.job_id == state["job"], f"result for {r.job_id}")
        w = list(r.model.weights)
        expect(len(w) == state.get("dimension", -1),
               f"{len(w)} weights for dimension {state.get('dimension')}")
        expect(all(math.isfinite(x) for x in w), "non-finite weights")
        expect(any(x != 0 for x in w), "all-zero model")
        expect(0 < r.cost.epsilon <= args.epsilon * (1 + 1e-9), f"cost {r.cost.epsilon}")
        if args.eval_dataset:
            expect(r.evaluation.dataset == args.eval_dataset,
                   f"evaluated on {r.evaluation.dataset!r}")
            expect(0.5 < r.evaluation.accuracy <= 1.0,
                   f"accuracy {r.evaluation.accuracy} (no better than chance)")
            print(f"     accuracy on {args.eval_dataset}: {r.evaluation.accuracy:.4f}")

    def invalid_argument():
        before = charges()
        for rpc, req in (("EstimateJob", dpopt_pb2.EstimateJobRequest(spec=spec(epsilon=-1.0))),
                         ("SubmitJob", dpopt_pb2.SubmitJobRequest(spec=spec(epsilon=-1.0)))):
            expect_code(lambda: getattr(jobs, rpc)(req, timeout=RPC_TIMEOUT),
                        grpc.StatusCode.INVALID_ARGUMENT, f"{rpc} with epsilon=-1")
        expect(charges() == before, "a refused job was charged")

    def not_found():
        missing = "no-such-dataset-interop"
        expect_code(lambda: datasets.GetDataset(dpopt_pb2.GetDatasetRequest(name=missing),
                                                timeout=RPC_TIMEOUT),
                    grpc.StatusCode.NOT_FOUND, "GetDataset(unknown)")
        expect_code(lambda: jobs.SubmitJob(dpopt_pb2.SubmitJobRequest(spec=spec(dataset=missing)),
                                           timeout=RPC_TIMEOUT),
                    grpc.StatusCode.NOT_FOUND, "SubmitJob(unknown dataset)")
        expect_code(lambda: jobs.GetJob(dpopt_pb2.GetJobRequest(id="no-such-job"),
                                        timeout=RPC_TIMEOUT),
                    grpc.StatusCode.NOT_FOUND, "GetJob(unknown)")

    checks.run("health: grpc.health.v1 Check is SERVING", health_check)

    def unauthenticated():
        anon = dpopt_pb2_grpc.DatasetServiceStub(bare)
        expect_code(lambda: anon.ListDatasets(dpopt_pb2.ListDatasetsRequest()),
                    grpc.StatusCode.UNAUTHENTICATED, "ListDatasets without a token")
        bad = dpopt_pb2_grpc.DatasetServiceStub(grpc.intercept_channel(
            bare, BearerToken("0123456789abcdef." + "0" * 64)))
        expect_code(lambda: bad.ListDatasets(dpopt_pb2.ListDatasetsRequest()),
                    grpc.StatusCode.UNAUTHENTICATED, "ListDatasets with a wrong token")

    def tls_required():
        # The server speaks only TLS and requires a client certificate: a
        # plaintext channel and a TLS channel without a client certificate
        # both fail before any RPC reaches a handler.
        plain = dpopt_pb2_grpc.DatasetServiceStub(grpc.intercept_channel(
            grpc.insecure_channel(args.server), BearerToken(token)))
        expect_code(lambda: plain.ListDatasets(dpopt_pb2.ListDatasetsRequest(), timeout=5),
                    grpc.StatusCode.UNAVAILABLE, "ListDatasets over plaintext")
        no_cert = grpc.secure_channel(
            args.server, grpc.ssl_channel_credentials(root_certificates=read(args.tls_ca)))
        anon_tls = dpopt_pb2_grpc.DatasetServiceStub(
            grpc.intercept_channel(no_cert, BearerToken(token)))
        expect_code(lambda: anon_tls.ListDatasets(dpopt_pb2.ListDatasetsRequest(), timeout=5),
                    grpc.StatusCode.UNAVAILABLE, "ListDatasets over TLS without a client cert")

    if token:
        checks.run("no or a wrong token: UNAUTHENTICATED", unauthenticated)
    if args.tls_ca and args.tls_cert:
        checks.run("mutual TLS: plaintext and certificate-less clients refused", tls_required)
    checks.run("ListDatasets lists the imported datasets", list_datasets)
    checks.run("GetDataset / GetBudget: public metadata and budget", get_dataset)
    checks.run("EstimateJob calibrates and charges nothing", estimate)
    if checks.run("SubmitJob charges the ledger once", submit):
        if checks.run("WatchJob streams to SUCCEEDED", watch):
            checks.run("GetJobResult returns the privatized model", result)
    checks.run("negative epsilon -> INVALID_ARGUMENT, nothing charged", invalid_argument)
    checks.run("unknown dataset / job -> NOT_FOUND", not_found)

    print(f"python interop: {checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
