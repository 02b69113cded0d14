#!/usr/bin/env python3
"""A real Prometheus scrapes dpopt-server's metrics.

Starts dpopt-server with --metrics-listen on a loopback port, runs a few
jobs (and one refused submission), starts Debian's `prometheus` on another
loopback port with a 1 s scrape of the server, and queries Prometheus's HTTP
API until it has the job counter and an RPC latency histogram. Everything
listens on 127.0.0.1; every wait is bounded. Exit 77 (ctest: skipped) with a
message when no `prometheus` binary is installed.

    tests/ops/prometheus_scrape.py --server build/server/dpopt-server
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
import dpopt_harness as h  # noqa: E402


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, expr):
    url = f"http://{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    data = json.loads(http_get(url))
    if data.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed: {data}")
    return data["data"]["result"]


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what} (last: {last!r})")


def check_dataset_budgets(server_bin):
    """With --metrics-dataset-budgets, each private dataset's spent and
    remaining epsilon are exported (and match the API's budget)."""
    work = h.make_workdir("dpopt-prom-budgets-")
    port = h.free_port()
    server = h.ServerProcess(server_bin, work, extra_args=[
        f"--metrics-listen=127.0.0.1:{port}", "--metrics-dataset-budgets"])
    try:
        server.start()
        client = server.client()
        h.import_csv(client, "d", 200, eps_budget=1.0)
        h.import_csv(client, "pub", 50, public=True)
        client.submit(h.dp_gd_spec("d", 0.2, 5), wait=True)
        budget = client.budget("d")
        values = {}
        for line in http_get(f"http://127.0.0.1:{port}/metrics").splitlines():
            for name in ("dpopt_dataset_epsilon_spent",
                         "dpopt_dataset_epsilon_remaining"):
                if line.startswith(name + "{"):
                    labels, value = line.rsplit(" ", 1)
                    values[(name, labels[len(name):])] = float(value)
        spent = values[("dpopt_dataset_epsilon_spent", '{dataset="d"}')]
        remaining = values[("dpopt_dataset_epsilon_remaining", '{dataset="d"}')]
        assert abs(spent - budget.epsilon_spent) < 1e-9, (spent, budget)
        assert abs(remaining - budget.epsilon_remaining) < 1e-9, (remaining, budget)
        assert spent > 0
        assert not any('dataset="pub"' in k[1] for k in values), \
            "a public dataset has a budget metric"
        print("dataset budgets exported:", spent, remaining)
    finally:
        server.terminate()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, help="dpopt-server binary")
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "",
                    help="prometheus binary (default: from PATH)")
    ap.add_argument("--timeout", type=float, default=90.0)
    args = ap.parse_args()
    if not args.prometheus or not os.path.exists(args.prometheus):
        print("SKIP: no prometheus binary (apt-get install prometheus; "
              "scripts/install-deps.sh installs it)")
        return 77

    work = h.make_workdir("dpopt-prom-")
    metrics_port = h.free_port()
    prom_port = h.free_port()
    server = h.ServerProcess(
        args.server, work,
        extra_args=[f"--metrics-listen=127.0.0.1:{metrics_port}"])
    prom = None
    try:
        server.start()
        # The exposition itself, before Prometheus: the families exist.
        text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
        for family in ("dpopt_database_bytes", "dpopt_wal_bytes"):
            assert family in text, f"{family} missing from /metrics"

        client = server.client()
        h.import_csv(client, "d", 200, eps_budget=1.0)
        for _ in range(3):
            client.submit(h.dp_gd_spec("d", 0.2, 5), wait=True)
        refused = False
        try:
            client.submit(h.dp_gd_spec("d", 5.0, 5), wait=True)  # over budget
        except Exception:
            refused = True
        assert refused, "a submission over the budget was admitted"
        # Imports and checkpoints, straight from the exposition.
        samples = {}
        for line in http_get(f"http://127.0.0.1:{metrics_port}/metrics").splitlines():
            if line.startswith("dpopt_") and " " in line:
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        assert samples.get('dpopt_imports_total{code="OK"}') == 1, samples
        assert samples.get("dpopt_import_rows_total") == 200, samples
        assert samples.get("dpopt_import_bytes_total", 0) > 0, samples
        assert samples.get("dpopt_import_seconds_count") == 1, samples
        for family in ("dpopt_checkpoints", "dpopt_checkpoint_seconds_total",
                       "dpopt_checkpoint_last_seconds"):
            assert family in samples, f"{family} missing from /metrics"

        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: dpopt\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n")
        prom_log = open(os.path.join(work, "prometheus.log"), "w")
        prom = subprocess.Popen(
            [args.prometheus, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=prom_log, stderr=subprocess.STDOUT)
        addr = f"127.0.0.1:{prom_port}"

        up = wait_for("the scrape target to be up",
                      lambda: [r for r in query(addr, 'up{job="dpopt"}')
                               if r["value"][1] == "1"], args.timeout)
        print("target up:", up[0]["metric"])
        finished = wait_for(
            "dpopt_jobs_finished_total",
            lambda: query(addr, 'dpopt_jobs_finished_total{job_type="dp_gd",'
                                'state="JOB_STATE_SUCCEEDED"}'),
            args.timeout)
        count = float(finished[0]["value"][1])
        assert count == 3, f"3 jobs succeeded, Prometheus counted {count}"
        refusals = wait_for(
            "dpopt_jobs_refused_total",
            lambda: query(addr, 'dpopt_jobs_refused_total{reason="budget"}'),
            args.timeout)
        assert float(refusals[0]["value"][1]) == 1, refusals
        latency = wait_for(
            "an RPC latency histogram",
            lambda: query(addr, 'dpopt_rpc_latency_seconds_count{method='
                                '"/dpopt.v1.JobService/SubmitJob"}'),
            args.timeout)
        assert float(latency[0]["value"][1]) >= 4, latency
        buckets = query(addr, 'dpopt_rpc_latency_seconds_bucket{method='
                              '"/dpopt.v1.JobService/SubmitJob"}')
        assert len(buckets) > 5, "no histogram buckets"
        quantile = query(addr, 'histogram_quantile(0.5, '
                               'dpopt_rpc_latency_seconds_bucket{method='
                               '"/dpopt.v1.JobService/SubmitJob"})')
        print("jobs finished:", count, "refused (budget):",
              refusals[0]["value"][1], "SubmitJob p50 (s):",
              quantile[0]["value"][1] if quantile else "n/a")
        # No principal name and no dataset name is a label by default.
        text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert "curator" not in text and 'dataset="d"' not in text, \
            "a principal or dataset name appears in the metrics"
        check_dataset_budgets(args.server)
        print("PASS")
        return 0
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(timeout=30)
            except subprocess.TimeoutExpired:
                prom.kill()
        server.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
