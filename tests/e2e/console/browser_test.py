#!/usr/bin/python3
"""The web console in a real browser: headless Chromium against a running
dpopt-server with real jobs, asserting on the DOM.

Usage: tests/e2e/console/browser_test.py [--server-bin PATH] [--screenshots DIR]
  --server-bin   dpopt-server (default: build/server/dpopt-server)
  --screenshots  write one PNG per page there (the README's docs/console-*.png
                 come from `--screenshots docs`)
Needs the dpopt Python package on PYTHONPATH (build/python/site) to set up
data and jobs, chromium, python3-websocket. Exit status 0 only if all checks
pass. Every expected value is read from the gRPC API (the Python client),
so the test checks that the console shows what the API releases.
"""
import argparse
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)

import dpopt  # noqa: E402
from cdp import Browser  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, workdir, extra=()):
        self.db = os.path.join(workdir, "dpopt.db")
        self.grpc = f"127.0.0.1:{free_port()}"
        self.log_path = os.path.join(workdir, "server.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, f"--db={self.db}", f"--listen={self.grpc}", "--workers=2", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.console = None
        for _ in range(300):
            text = open(self.log_path).read()
            m = re.search(r"web console on (https?://[^/\s]+)/console/", text)
            if m and os.path.exists(self.db + ".curator-token"):
                self.console = m.group(1)
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.console is None:
            self.stop()
            raise RuntimeError("server did not start its console: " + open(self.log_path).read())
        self.token = open(self.db + ".curator-token").read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"  ok   {name}")
        else:
            self.failed += 1
            print(f"  FAIL {name} {detail}")


def g6(x):
    """The console's number format (C's %.6g)."""
    return f"{x:.6g}"


def http_get(url, token=None, context=None):
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def spec(eps, steps=2000, label=""):
    return dpopt.spec("adult", model=dpopt.models.logistic_regression(l2=1e-4),
                      algorithm=dpopt.algorithms.dp_sgd(sampling_rate=0.01, steps=steps,
                                                        clip_norm=1.0, learning_rate=0.5),
                      epsilon=eps, delta=1e-6, evaluate_on="adult-test", label=label)


class Console:
    """The browser on the console: log in, open pages, read the DOM."""

    def __init__(self, browser, base, shots):
        self.b = browser
        self.base = base
        self.shots = shots

    def login(self, token):
        if self.b.evaluate("location.pathname") != "/console/login":
            self.b.navigate(self.base + "/console/login")
        self.b.wait_for("location.pathname === '/console/login' && "
                        "!document.getElementById('login-button').disabled", what="the login form")
        self.b.evaluate(f"document.getElementById('token').value = {json.dumps(token)}; "
                        "document.getElementById('login').requestSubmit(); true")

    def logout(self):
        self.b.evaluate("document.getElementById('logout').click(); true")
        self.b.wait_for("location.pathname === '/console/login'")

    def open(self, path, shot=None):
        self.b.navigate(self.base + path)
        self.b.wait_for(f"location.pathname === {json.dumps(path)} && "
                        "document.getElementById('main').dataset.status", what=path)
        if shot and self.shots:
            self.b.screenshot(os.path.join(self.shots, shot))

    def js(self, expr):
        return self.b.evaluate(expr)

    def status(self):
        return int(self.js("document.getElementById('main').dataset.status"))

    def texts(self, selector):
        return self.js(f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
                       ".map(e => e.textContent.trim())")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server-bin", default=os.path.join(REPO, "build", "server", "dpopt-server"))
    ap.add_argument("--screenshots", default="")
    args = ap.parse_args()
    shots = os.path.abspath(args.screenshots) if args.screenshots else ""
    if shots:
        os.makedirs(shots, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="dpopt-console.")
    c = Checks()
    server = browser = tls_server = None
    try:
        server = Server(args.server_bin, tmp, ["--console_listen=127.0.0.1:0"])
        print(f"console at {server.console}")
        cur = dpopt.Client(server.grpc, token=server.token).wait_ready(30)
        adult = os.path.join(REPO, "data", "adult")
        cur.import_dataset("adult", os.path.join(adult, "a9a"), dimension=123,
                           epsilon_budget=3, delta_budget=1e-6, description="Adult census (a9a)")
        cur.import_dataset("adult-test", os.path.join(adult, "a9a.t"), dimension=123, public=True)
        _, alice_token = cur.create_principal("alice")
        _, bob_token = cur.create_principal("bob")
        cur.grant("alice", "adult", epsilon_cap=1.0)
        alice = dpopt.Client(server.grpc, token=alice_token)
        j1 = cur.submit(spec(1.0, label="curator, epsilon 1"), progress=False)
        j2 = alice.submit(spec(0.3, label="alice, epsilon 0.3"), progress=False)
        try:
            alice.submit(spec(1.0), progress=False)
            c.check("alice's job over her cap is refused", False)
        except dpopt.BudgetExhaustedError:
            pass
        # A long job that is still running while the pages are checked.
        long_spec = spec(0.5, steps=400000, label="long run")
        long_spec["trace_every"] = 500
        running = cur.submit(long_spec, wait=False)
        for _ in range(100):
            if running.refresh().state == "RUNNING":
                break
            time.sleep(0.1)
        res1 = j1.result()
        dry = cur.submit(spec(1.0, label="dry run"), dry_run=True, progress=False)
        budget = cur.budget("adult")
        ledger = cur.ledger("adult")

        print("plain HTTP checks")
        st, hdr, body = http_get(server.console + "/console/api/datasets")
        c.check("no token: 401 with the API's message", st == 401 and "UNAUTHENTICATED" in body,
                f"{st} {body[:200]}")
        st, _, _ = http_get(server.console + "/console/api/datasets", token="0123456789abcdef.bad")
        c.check("unknown token: 401", st == 401, str(st))
        st, hdr, _ = http_get(server.console + "/console/")
        csp = hdr.get("Content-Security-Policy", "")
        c.check("shell has a strict CSP (no inline script, no CDN)",
                st == 200 and "script-src 'self'" in csp and "default-src 'none'" in csp, csp)
        st, _, _ = http_get(server.console + "/console/nope/at/all")
        c.check("unknown path: 404", st == 404, str(st))

        browser = Browser()
        ui = Console(browser, server.console, shots)

        print("login")
        browser.navigate(server.console + "/console/jobs")
        browser.wait_for("location.pathname === '/console/login'")
        c.check("without a token the console asks to log in",
                "next=%2Fconsole%2Fjobs" in ui.js("location.search"), ui.js("location.search"))
        if shots:
            browser.screenshot(os.path.join(shots, "console-login.png"))
        ui.login("0123456789abcdef.wrong")
        browser.wait_for("!document.getElementById('login-error').hidden")
        c.check("a wrong token is refused on the login page",
                "Unknown" in ui.js("document.getElementById('login-error').textContent"))
        ui.login(server.token)
        browser.wait_for("location.pathname === '/console/jobs' && "
                         "document.getElementById('main').dataset.status")
        c.check("login goes back to the page asked for", True)
        c.check("the header names the caller", ui.js(
            "document.getElementById('who').textContent") == "curator (curator)")

        print("datasets page (curator)")
        ui.open("/console/", "console-datasets.png")
        names = ui.texts("table.datasets tbody tr td:first-child")
        c.check("datasets listed as the API lists them",
                sorted(names) == sorted(d.name for d in cur.datasets()), str(names))
        row = ui.texts("table.datasets tbody tr:first-child td")
        c.check("adult's spent/total budget shown",
                f"{g6(budget.epsilon_spent)} of {g6(budget.epsilon_total)}" in row[4], str(row))

        print("dataset page (curator)")
        ui.open("/console/datasets/adult", "console-dataset.png")
        c.check("budget spent = the API's", ui.js(
            "document.querySelector('.eps-spent').textContent") == g6(budget.epsilon_spent))
        c.check("budget remaining = the API's", ui.js(
            "document.querySelector('.eps-remaining').textContent") == g6(budget.epsilon_remaining))
        pts = ui.js("document.querySelector('#spending polyline[data-name^=\"sum\"]')"
                    ".dataset.points")
        c.check("spending plot has one point per ledger charge", int(pts) == len(ledger),
                f"{pts} vs {len(ledger)}")
        shares = ui.js("Array.from(document.querySelectorAll('table.shares tbody tr'))"
                       ".map(r => Array.from(r.cells).map(x => x.textContent))")
        by = {r[0]: r for r in shares}
        c.check("per-analyst shares: curator and alice, alice's cap",
                set(by) == {"curator", "alice"} and by["alice"][4] == "1"
                and by["alice"][1] == "1", str(shares))
        c.check("dataset page lists the dataset's jobs",
                len(ui.texts("#jobs table.jobs tbody tr")) == len(cur.jobs("adult")))
        c.check("a running job makes the page live",
                ui.js("!!document.querySelector('[data-live=\"1\"]')"))

        print("ledger page (curator)")
        ui.open("/console/ledger/adult", "console-ledger.png")
        rows = ui.js("Array.from(document.querySelectorAll('table.ledger tbody tr'))"
                     ".map(r => [r.cells[2].textContent, r.cells[3].textContent, r.cells[4].textContent])")
        c.check("ledger rows = the API's entries (principal, job, epsilon)",
                rows == [[e.principal, e.job_id, g6(e.epsilon)] for e in ledger], str(rows))

        print("jobs page (curator)")
        ui.open("/console/jobs", "console-jobs.png")
        ids = ui.texts("table.jobs tbody tr td:first-child")
        c.check("jobs page lists every job", sorted(ids) == sorted(j.id for j in cur.jobs()))
        c.check("the running job is shown RUNNING and the page is live",
                ui.js(f"Array.from(document.querySelectorAll('table.jobs tbody tr')).find("
                      f"r => r.cells[0].textContent === {json.dumps(running.id)}).cells[5]"
                      ".textContent") == "RUNNING"
                and ui.js("document.querySelector('[data-page=\"jobs\"]').dataset.live") == "1")

        c.check("the dry run is marked in the jobs list",
                ui.js(f"Array.from(document.querySelectorAll('table.jobs tbody tr')).find("
                      f"r => r.cells[0].textContent === {json.dumps(dry.id)})"
                      ".querySelectorAll('.dry-run').length") == 1)

        print("job page (curator, dry run)")
        ui.open(f"/console/jobs/{dry.id}")
        facts = ui.js("Object.fromEntries(Array.from(document.querySelectorAll('[data-page=\"job\"] > dl dt'))"
                      ".map(dt => [dt.textContent, dt.nextElementSibling.textContent]))")
        c.check("a dry run's page says SYNTHETIC DATA and where its rows came from",
                "SYNTHETIC DATA" in facts.get("dry run", "")
                and dry.synthetic_source in facts.get("dry run", ""), str(facts))
        c.check("a dry run's cost says it was not charged",
                "no (dry run)" in ui.js("document.querySelector('#cost').textContent"))

        print("job page (curator, succeeded)")
        ui.open(f"/console/jobs/{j1.id}", "console-job.png")
        c.check("state SUCCEEDED", ui.js(
            "document.querySelector('[data-page=\"job\"]').dataset.state") == "SUCCEEDED")
        n_eval = int(res1.trace["public_loss"].notna().sum())
        series = ui.js("Object.fromEntries(Array.from(document.querySelectorAll("
                       "'#trace polyline')).map(p => [p.dataset.name, +p.dataset.points]))")
        c.check("three trace plots", ui.js("document.querySelectorAll('#trace svg.plot').length") == 3)
        c.check("trace plots have one point per trace point",
                series == {"public loss": n_eval, "public accuracy": n_eval,
                           "iterate norm": len(res1.trace), "noisy gradient norm": len(res1.trace)},
                str(series))
        facts = ui.js("Object.fromEntries(Array.from(document.querySelectorAll('#calibration dt'))"
                      ".map(dt => [dt.textContent, dt.nextElementSibling.textContent]))")
        c.check("calibration = the API's",
                facts.get("noise multiplier") == g6(j1.calibration.noise_multiplier)
                and facts.get("steps") == str(j1.calibration.steps), str(facts))
        c.check("accuracy = the API's evaluation", ui.js(
            "document.querySelector('.accuracy').textContent") == g6(res1.evaluation.accuracy))
        spec_json = json.loads(ui.js("document.querySelector('pre.spec').textContent"))
        c.check("job spec shown as proto3 JSON", spec_json == j1.spec, str(spec_json))

        print("job page (curator, live)")
        ui.open(f"/console/jobs/{running.id}")
        c.check("running job shown RUNNING with a progress bar",
                ui.js("document.querySelector('[data-page=\"job\"]').dataset.state") == "RUNNING"
                and ui.js("!!document.querySelector('progress')"))
        live_points = "+(document.querySelector('#trace polyline[data-name=\"iterate norm\"]')" \
                      " || {dataset: {points: 0}}).dataset.points"
        n1 = browser.wait_for(f"{live_points} >= 2 && {live_points}", what="a live trace")
        n2 = browser.wait_for(f"{live_points} > {n1} && {live_points}", timeout=20,
                              what="the live trace plot to grow")
        c.check("the running job's trace plot grows as the job runs", n2 > n1 >= 2,
                f"{n1} -> {n2}")
        if shots:
            browser.screenshot(os.path.join(shots, "console-job-running.png"))
        running.cancel()
        browser.wait_for("document.querySelector('[data-page=\"job\"]') && "
                         "document.querySelector('[data-page=\"job\"]').dataset.state === 'CANCELLED'",
                         timeout=15, what="the page to update itself to CANCELLED")
        c.check("the job page follows the job live (RUNNING -> CANCELLED)", True)
        ui.logout()

        print("analyst alice")
        ui.login(alice_token)
        browser.wait_for("location.pathname === '/console/' && "
                         "document.getElementById('main').dataset.status")
        names = ui.texts("table.datasets tbody tr td:first-child")
        c.check("alice sees the granted and public datasets",
                sorted(names) == ["adult", "adult-test"], str(names))
        ui.open("/console/datasets/adult")
        c.check("alice's page shows her cap",
                "your cap" in ui.texts("#budget dt"), str(ui.texts("#budget dt")))
        mine = ui.texts("table.shares tbody tr td:first-child")
        c.check("alice sees only her own share", mine == ["alice"], str(mine))
        ui.open("/console/ledger/adult")
        rows = ui.texts("table.ledger tbody tr td:nth-child(4)")
        c.check("alice's ledger holds only her charges", rows == [j2.id], str(rows))
        ui.open(f"/console/jobs/{j1.id}")
        c.check("the curator's job is NOT_FOUND for alice",
                ui.status() == 404 and ui.js("document.querySelector('.error').dataset.code")
                == "NOT_FOUND")
        ui.open("/console/jobs")
        c.check("alice's jobs page lists only her job",
                ui.texts("table.jobs tbody tr td:first-child") == [j2.id])
        ui.logout()

        print("analyst bob (no grant)")
        ui.login(bob_token)
        browser.wait_for("location.pathname === '/console/' && "
                         "document.getElementById('main').dataset.status")
        c.check("bob sees only the public dataset",
                ui.texts("table.datasets tbody tr td:first-child") == ["adult-test"])
        ui.open("/console/datasets/adult")
        hidden = ui.js("document.querySelector('.error').textContent")
        ui.open("/console/datasets/no-such-dataset")
        missing = ui.js("document.querySelector('.error').textContent")
        c.check("an ungranted dataset looks exactly like a missing one",
                ui.status() == 404 and hidden.replace("adult", "X") ==
                missing.replace("no-such-dataset", "X"), f"{hidden!r} vs {missing!r}")

        print("TLS")
        certs = os.path.join(tmp, "certs")
        subprocess.run([os.path.join(REPO, "tests", "common", "make-test-certs.sh"), certs],
                       check=True)
        tls_dir = os.path.join(tmp, "tls")
        os.makedirs(tls_dir)
        tls_server = Server(args.server_bin, tls_dir, [
            f"--tls_cert={certs}/server.crt", f"--tls_key={certs}/server.key",
            "--console_listen=127.0.0.1:0"])
        c.check("with TLS files the console serves HTTPS", tls_server.console.startswith("https://"))
        ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
        https = tls_server.console.replace("127.0.0.1", "localhost")
        st, _, body = http_get(https + "/console/api/whoami", tls_server.token, ctx)
        c.check("HTTPS + token: whoami", st == 200 and json.loads(body)["name"] == "curator",
                f"{st} {body[:100]}")
        try:
            http_get(https.replace("https://", "http://") + "/console/api/whoami", tls_server.token)
            c.check("plain HTTP to the TLS console fails", False)
        except (urllib.error.URLError, ConnectionError, OSError):
            c.check("plain HTTP to the TLS console fails", True)
        refused = subprocess.run(
            [args.server_bin, f"--db={tmp}/other.db", "--listen=127.0.0.1:0",
             "--console_listen=0.0.0.0:0"], capture_output=True, text=True, timeout=30)
        c.check("no plaintext console off loopback",
                refused.returncode != 0 and "refusing to serve the console" in refused.stderr,
                refused.stderr[-300:])
    finally:
        if browser:
            browser.close()
        for s in (server, tls_server):
            if s:
                s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"console browser test: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
