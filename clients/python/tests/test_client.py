"""The dpopt Python client against a real dpopt-server (see conftest.py)."""
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt import specs
from dpopt.results import trace_table

REPO = os.environ.get("DPOPT_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def dpsgd(epsilon=1.0, steps=300, dataset="adult", **extra):
    return {"dataset": dataset,
            "model": {"logistic_regression": {"l2": 1e-4}},
            "privacy": {"epsilon": epsilon, "delta": 1e-6},
            "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": steps,
                                     "clip_norm": 1.0, "learning_rate": 0.5}},
            "evaluate_on": "adult-test", "trace_every": 30, **extra}


# ------------------------------------------------------------ token, specs

def test_token_discovery_order(tmp_path, monkeypatch):
    from dpopt._connection import resolve_token
    assert resolve_token() == (None, None)
    home_token = tmp_path / "home" / ".config" / "dpopt" / "token"
    home_token.parent.mkdir(parents=True)
    home_token.write_text("home.secret\n")
    home_token.chmod(0o600)
    assert resolve_token()[0] == "home.secret"
    monkeypatch.setenv("DPOPT_TOKEN", " env.secret ")
    assert resolve_token() == ("env.secret", "$DPOPT_TOKEN")
    f = tmp_path / "tok"
    f.write_text("file.secret\n")
    f.chmod(0o600)
    assert resolve_token(token_file=str(f))[0] == "file.secret"
    assert resolve_token(token="arg.secret", token_file=str(f))[0] == "arg.secret"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o610])
def test_a_token_file_others_can_read_is_refused(tmp_path, mode):
    from dpopt._connection import resolve_token
    f = tmp_path / "tok"
    f.write_text("file.secret\n")
    f.chmod(mode)
    with pytest.raises(PermissionError, match=f"chmod 600 {f}"):
        resolve_token(token_file=str(f))
    with pytest.raises(PermissionError, match="chmod 600"):
        dpopt.Client("127.0.0.1:1", token_file=str(f))


def test_loopback_is_decided_from_the_literal_address_only():
    # Decision functions alone: no channel is created, nothing is sent.
    from dpopt._connection import is_loopback, choose_tls
    for a in ["127.0.0.1:50051", "127.1.2.3:1", "[::1]:50051", "::1",
              "ipv4:127.0.0.1:5", "dns:///127.0.0.1:5", "unix:/tmp/s",
              "[::ffff:127.0.0.1]:9"]:
        assert is_loopback(a), a
    for a in ["unixhost:50051", "127.x.example.com:50051", "127.0.0.1.example.com:1",
              "localhost:50051", "10.0.0.1:50051", "[::2]:1", "example.org:443",
              "0.0.0.0:50051", "127.1:50051", "dns://8.8.8.8/127.0.0.1.nip.io:1"]:
        assert not is_loopback(a), a
    # Plaintext to loopback by default; TLS with the system's roots to any
    # other address; plaintext there only with insecure=True.
    assert choose_tls("127.0.0.1:50051", None, False) is False
    assert choose_tls("10.0.0.1:50051", None, False) is True
    assert choose_tls("unixhost:50051", None, False) is True
    assert choose_tls("10.0.0.1:50051", None, True) is False
    assert choose_tls("10.0.0.1:50051", "ca.pem", False) == "ca.pem"
    assert choose_tls("127.0.0.1:50051", True, False) is True
    with pytest.raises(ValueError, match="insecure=True"):
        choose_tls("10.0.0.1:50051", False, False)
    with pytest.raises(ValueError, match="refusing plaintext"):
        choose_tls("unixhost:50051", False, False)
    with pytest.raises(ValueError, match="contradict"):
        choose_tls("10.0.0.1:50051", True, True)


def test_keyword_helpers_build_the_same_spec_as_a_dict():
    kw = dpopt.spec("adult", model=dpopt.models.logistic_regression(l2=1e-4),
                    algorithm=dpopt.algorithms.dp_sgd(sampling_rate=0.01, steps=300,
                                                      clip_norm=1.0, learning_rate=0.5),
                    epsilon=1.0, delta=1e-6, evaluate_on="adult-test", trace_every=30)
    assert specs.to_proto(kw) == specs.to_proto(dpsgd())
    # Every job type of the proto has a helper.
    assert {"dp_sgd", "dp_gd", "dp_blsgd", "accel_dp_nag", "gd"} <= set(dpopt.algorithms.names)
    with pytest.raises(TypeError, match="unknown field"):
        dpopt.algorithms.dp_sgd(stepz=10)
    with pytest.raises(ValueError, match="invalid job spec"):
        specs.to_proto({"dataset": "adult", "algorithm": {"no_such_algo": {}}})


def test_spec_from_an_example_file_parses():
    path = os.path.join(REPO, "examples", "dp_grid_search.json")
    pb = specs.to_proto(path)
    assert pb.algorithm.WhichOneof("algorithm") == "dp_grid_search"


def test_trace_table_without_pandas_is_numpy():
    from dpopt.v1 import dpopt_pb2
    pts = [dpopt_pb2.TracePoint(step=1, iterate_norm=2.0, has_public_eval=True,
                                public_loss=0.5, public_accuracy=0.8),
           dpopt_pb2.TracePoint(step=2, iterate_norm=3.0)]
    t = trace_table(pts)
    assert t["step"].tolist() == [1, 2]
    assert t["public_accuracy"][0] == 0.8 and math.isnan(t["public_accuracy"][1])


def test_a_spec_dict_parsed_again_is_a_fresh_equal_message():
    d = dpsgd(steps=5)
    first, again = specs.to_proto(d), specs.to_proto(d)
    assert first == again and first is not again
    again.label = "changed"
    assert specs.to_proto(d).label == ""
    d["algorithm"]["dp_sgd"]["steps"] = 6  # the dict's content decides
    assert specs.to_proto(d).algorithm.dp_sgd.steps == 6
    for _ in range(2):
        with pytest.raises(ValueError, match="invalid job spec"):
            specs.to_proto({"dataset": "adult", "no_such_field": 1})


def test_job_fields_are_converted_from_the_latest_reply():
    # Job converts spec, calibration, cost, evaluation and times on first
    # use (a watch delivers several replies); each reply replaces them.
    from dpopt.client import Job
    from dpopt.v1 import dpopt_pb2
    pb = specs.to_proto(dpsgd(steps=7))
    reply = dpopt_pb2.Job(id="job-1", spec=pb, state=dpopt_pb2.JOB_STATE_RUNNING,
                          steps_done=2, steps_total=7)
    reply.calibration.steps = 7
    reply.created_at.seconds = 1700000000
    job = Job(None, reply)
    assert job.spec == specs.to_dict(pb) and job.label == pb.label
    assert job.calibration.steps == 7 and job.cost.epsilon == 0
    assert job.created_at.year == 2023 and job.finished_at is None
    assert not job.done and job.steps_done == 2
    final = dpopt_pb2.Job()
    final.CopyFrom(reply)
    final.state = dpopt_pb2.JOB_STATE_SUCCEEDED
    final.steps_done = 7
    final.cost.epsilon = 0.25
    final.finished_at.seconds = 1700000001
    job._set(final)
    assert job.done and job.steps_done == 7
    assert job.cost.epsilon == 0.25 and job.finished_at.year == 2023


# ------------------------------------------------------------ the server

def test_datasets_and_budget(curator):
    names = {d.name: d for d in curator.datasets()}
    assert {"adult", "adult-test"} <= set(names)
    adult = names["adult"]
    assert (adult.rows, adult.dimension, adult.public) == (32561, 123, False)
    assert adult.budget.epsilon_total == 30 and adult.budget.filter == "rdp"
    assert names["adult-test"].budget is None and names["adult-test"].public
    b = curator.budget("adult")
    assert b.dataset == "adult" and b.epsilon_remaining <= b.epsilon_total
    assert curator.dataset("adult").rows == 32561


def test_estimate_prices_without_charging(curator):
    before = curator.budget("adult")
    est = curator.estimate(dpsgd())
    assert est.admissible and est.cost.charged
    assert est.calibration.steps == 300 and est.calibration.noise_multiplier > 0
    assert 0 < est.cost.epsilon <= 1.0 + 1e-9
    assert est.budget_after.epsilon_remaining < est.budget_before.epsilon_remaining
    after = curator.budget("adult")
    assert (after.charges, after.epsilon_spent) == (before.charges, before.epsilon_spent)


def test_submit_wait_result_and_ledger(curator, capsys):
    before = curator.ledger("adult")
    job = curator.submit(dpsgd(label="pytest dp-sgd"), progress=True)
    assert job.state == dpopt.JobState.SUCCEEDED, job.message
    assert job.steps_done == job.steps_total == 300
    # The progress bar (tqdm) went to stderr.
    assert "300/300" in capsys.readouterr().err
    res = job.result()
    assert res.weights.shape == (123,) and np.all(np.isfinite(res.weights))
    assert isinstance(res.trace, pd.DataFrame)
    assert list(res.trace.columns) == list(dpopt.TRACE_COLUMNS)
    # trace_every 30: step 1, then 30, 60, ..., 300.
    assert res.trace["step"].tolist() == [1] + list(range(30, 301, 30))
    # DP-SGD at epsilon 1 beats the majority class (0.76) on the public test
    # set; the server's evaluation matches the released model's.
    assert res.evaluation.dataset == "adult-test" and res.evaluation.accuracy > 0.78
    assert res.trace["public_accuracy"].iloc[-1] == pytest.approx(res.evaluation.accuracy)
    assert res.cost.epsilon == pytest.approx(job.cost.epsilon) and res.cost.charged
    assert res.iterates is None
    after = curator.ledger("adult")
    assert len(after) == len(before) + 1
    entry = after.entries[-1]
    assert entry.job_id == job.id and entry.principal == "curator"
    assert entry.epsilon == pytest.approx(job.cost.epsilon)
    assert isinstance(entry.event, dict)
    frame = after.to_pandas()
    assert frame["job_id"].iloc[-1] == job.id
    assert any(j.id == job.id for j in curator.jobs("adult"))
    assert curator.job(job.id).state == "SUCCEEDED"


def test_dry_run_is_synthetic_and_charges_nothing(curator):
    before = curator.ledger("adult")
    job = curator.submit(dpsgd(label="pytest dry run"), dry_run=True, progress=False)
    assert job.state == dpopt.JobState.SUCCEEDED, job.message
    assert job.synthetic_data and job.spec.get("dry_run") is True
    assert "public schema of dataset adult" in job.synthetic_source
    assert "DRY RUN" in repr(job)
    assert not job.cost.charged and job.cost.epsilon > 0  # the real job's cost
    res = job.result()
    assert res.synthetic_data and res.synthetic_source == job.synthetic_source
    assert res.weights.shape == (123,) and len(res.trace) > 0
    assert len(curator.ledger("adult")) == len(before)
    assert any(j.id == job.id and j.synthetic_data for j in curator.jobs("adult"))


def test_worker_pool_requests_without_a_pool_are_refused_before_charging(curator):
    # This server runs without --mpi-pool: placing is refused, and so is a
    # job asking for the pool, with nothing charged; a dry run ignores the
    # execution field (synthetic rows in the server process).
    assert dpopt.spec("adult", algorithm=dpopt.algorithms.gd(steps=1),
                      execution="mpi_pool")["execution"] == "EXECUTION_MPI_POOL"
    with pytest.raises(ValueError, match="execution must be one of"):
        dpopt.spec("adult", algorithm=dpopt.algorithms.gd(steps=1), execution="cluster")
    with pytest.raises(dpopt.InvalidRequestError, match="no worker pool") as e:
        curator.place_dataset("adult")
    assert e.value.code.name == "FAILED_PRECONDITION"
    before = curator.ledger("adult")
    pool_job = dpsgd(steps=30, execution="EXECUTION_MPI_POOL")
    with pytest.raises(dpopt.InvalidRequestError, match="no worker pool"):
        curator.submit(pool_job, progress=False)
    assert curator.dataset("adult").placement is None
    job = curator.submit(pool_job, dry_run=True, progress=False)
    assert job.state == dpopt.JobState.SUCCEEDED and job.synthetic_data, job.message
    assert job.spec.get("execution") == "EXECUTION_MPI_POOL"
    assert len(curator.ledger("adult")) == len(before)


def test_job_listing_pages(curator):
    ids = [curator.submit(dataset="adult-test", algorithm=dpopt.algorithms.gd(
        steps=2, learning_rate=0.5), model=dpopt.models.logistic_regression(l2=1e-3),
        wait=False).id for _ in range(3)]
    everything = [j.id for j in curator.jobs()]
    assert everything[-3:] == ids
    # One job per page, oldest first: the pages are the full listing.
    paged, token = [], ""
    for _ in range(len(everything) + 1):
        page, token = curator.jobs_page(page_size=1, page_token=token)
        paged += [j.id for j in page]
        if not token:
            break
    assert paged == everything
    newest, token = curator.jobs_page(page_size=2, newest_first=True)
    assert [j.id for j in newest] == ids[::-1][:2] and token
    assert [j.id for j in curator.jobs(newest_first=True, limit=3)] == ids[::-1]
    with pytest.raises(dpopt.InvalidRequestError):
        curator.jobs_page(page_token="garbage")
    for i in ids:
        curator.job(i).wait(progress=False)


def test_submit_with_keywords_and_trace_iterates(curator):
    job = curator.submit(dataset="adult-test", algorithm=dpopt.algorithms.gd(
        steps=20, learning_rate=0.5), model=dpopt.models.logistic_regression(l2=1e-3),
        trace_every=5, trace_iterates=True, progress=False)
    assert job.state == "SUCCEEDED", job.message
    res = job.result()
    assert res.iterates.shape == (5, 123)  # steps 1, 5, 10, 15, 20
    assert not job.cost.charged  # a public dataset is never charged


def test_result_gathers_every_page_of_a_long_trace(curator):
    # 1200 points of 123 values: the server sends at most 1000 points and
    # 1 MiB per reply, so the trace comes in two pages.
    job = curator.submit(dataset="adult-test", algorithm=dpopt.algorithms.gd(
        steps=1200, learning_rate=0.5), model=dpopt.models.logistic_regression(l2=1e-3),
        trace_every=1, trace_iterates=True, progress=False)
    assert job.state == "SUCCEEDED", job.message
    res = job.result()
    assert res.iterates.shape == (1200, 123)
    assert res.trace["step"].tolist() == list(range(1, 1201))


def test_result_waits_like_a_future(curator):
    # Long enough (200 epochs) to be still queued or running when result()
    # is called: the server's own view of the job is checked first.
    job = curator.submit(dpsgd(steps=20000, epsilon=0.5), wait=False)
    assert job.refresh().state in (dpopt.JobState.QUEUED, dpopt.JobState.RUNNING)
    res = job.result()  # waits for the job instead of refusing an unfinished one
    assert job.state == "SUCCEEDED", job.message
    assert job.steps_done == 20000
    assert res.weights.shape == (123,)


def test_no_wait_cancel_and_job_failed_error(curator):
    job = curator.submit(dpsgd(steps=20000, epsilon=0.5), wait=False)
    assert not job.done
    with pytest.raises(TimeoutError):
        job.result(timeout=0.5)  # the job goes on
    with pytest.raises(TimeoutError):
        job.wait(progress=False, timeout=0.5)
    job.cancel()
    job.wait(progress=False, timeout=60)
    assert job.state == dpopt.JobState.CANCELLED
    with pytest.raises(dpopt.JobFailedError, match="CANCELLED"):
        job.result()


# ------------------------------------------------------------ errors

def test_bad_spec_is_invalid_argument_and_not_charged(curator):
    before = curator.budget("adult")
    with pytest.raises(dpopt.InvalidRequestError) as e:
        curator.submit(dpsgd(epsilon=-1))
    assert e.value.code_name == "INVALID_ARGUMENT" and "epsilon" in e.value.message
    with pytest.raises(dpopt.NotFoundError):
        curator.estimate(dpsgd(dataset="no-such-dataset"))
    with pytest.raises(dpopt.NotFoundError):
        curator.job("no-such-job")
    assert curator.budget("adult").charges == before.charges


def test_missing_or_wrong_token_is_authentication_error(server):
    with dpopt.Client(server.address) as anon:
        with pytest.raises(dpopt.AuthenticationError, match="DPOPT_TOKEN"):
            anon.datasets()
    with dpopt.Client(server.address, token="0123456789abcdef.nope") as bad:
        with pytest.raises(dpopt.AuthenticationError):
            bad.whoami()


def test_token_from_environment_and_file(server, monkeypatch):
    monkeypatch.setenv("DPOPT_TOKEN", server.token)
    monkeypatch.setenv("DPOPT_SERVER", server.address)
    with dpopt.Client() as c:
        assert c.whoami().role == "curator"
    monkeypatch.delenv("DPOPT_TOKEN")
    with dpopt.Client(server.address, token_file=server.token_file) as c:
        assert c.whoami().name == "curator"


def test_unreachable_server_is_unavailable():
    with dpopt.Client("127.0.0.1:1", token="x.y", timeout=5) as c:
        with pytest.raises(dpopt.UnavailableError):
            c.datasets()


def test_analyst_roles_caps_and_budget_exhausted(curator, server):
    _, token = curator.create_principal("pytest-alice")
    with dpopt.Client(server.address, token=token) as alice:
        assert alice.whoami().role == "analyst"
        assert [d.name for d in alice.datasets()] == ["adult-test"]
        with pytest.raises(dpopt.NotFoundError):
            alice.budget("adult")
        with pytest.raises(dpopt.PermissionDeniedError):
            alice.import_dataset("mine", b"1 1:1\n", dimension=1, public=True)
        curator.grant("pytest-alice", "adult", epsilon_cap=0.5)
        b = alice.budget("adult")
        assert b.caller_epsilon_cap == 0.5 and b.caller_epsilon_spent == 0
        charges = curator.budget("adult").charges
        with pytest.raises(dpopt.BudgetExhaustedError) as e:
            alice.submit(dpsgd(epsilon=1.0))
        assert e.value.code_name == "RESOURCE_EXHAUSTED"
        assert curator.budget("adult").charges == charges  # nothing charged
        job = alice.submit(dpsgd(epsilon=0.2, steps=100), progress=False)
        assert job.state == "SUCCEEDED"
        # An analyst's ledger holds only her own charges; the curator sees all.
        mine = alice.ledger("adult")
        assert [e.job_id for e in mine] == [job.id]
        assert len(curator.ledger("adult")) > 1
        assert [j.id for j in alice.jobs()] == [job.id]
    assert any(g.principal == "pytest-alice" for g in curator.grants(dataset="adult"))


def test_costly_jobs_wait_for_a_curators_approval(curator, server):
    _, token = curator.create_principal("pytest-bob")
    g = curator.grant("pytest-bob", "adult", approval_above=0.3)
    assert g.approval_above_epsilon == 0.3 and g.approval_timeout_seconds == 7 * 24 * 3600
    with dpopt.Client(server.address, token=token) as bob:
        charges = curator.budget("adult").charges
        job = bob.submit(dpsgd(epsilon=0.5, steps=100), wait=False)
        assert job.state == dpopt.JobState.PENDING_APPROVAL and not job.done
        assert "approval" in job.message and job.approval_expires_at is not None
        with pytest.raises(dpopt.PermissionDeniedError):
            bob.approve(job.id)
        assert [j.id for j in curator.pending_jobs("adult")] == [job.id]
        rejected = curator.reject(job.id, "not this week")
        assert rejected.state == dpopt.JobState.REJECTED
        assert job.wait(progress=False).state == "REJECTED"
        with pytest.raises(dpopt.JobFailedError) as e:
            job.result()
        assert "not this week" in str(e.value)
        assert curator.budget("adult").charges == charges  # nothing charged
        again = bob.submit(dpsgd(epsilon=0.5, steps=100), wait=False)
        curator.approve(again.id)
        assert again.wait(progress=False).state == "SUCCEEDED", again.message
        assert again.cost.charged
        assert curator.budget("adult").charges == charges + 1


def test_import_arrays_round_trip(curator):
    rng = np.random.default_rng(0)
    x = rng.random((50, 3))
    y = np.where(rng.random(50) > 0.5, 1.0, -1.0)
    d = curator.import_arrays("pytest-small", x, y, public=True)
    assert (d.rows, d.dimension, d.public) == (50, 3, True)
    with pytest.raises(dpopt.InvalidRequestError):  # the name is taken
        curator.import_arrays("pytest-small", x, y, public=True)
    assert curator.delete_dataset("pytest-small") == 0  # no job was running
    with pytest.raises(dpopt.NotFoundError):
        curator.dataset("pytest-small")
    assert "pytest-small" not in {d.name for d in curator.datasets()}


def test_import_csv_infers_its_dimension(curator):
    d = curator.import_dataset("pytest-csv", b"0.5,1,2,1\n3,4,5,-1\n", format="csv",
                               label_last=True, public=True)
    assert (d.rows, d.dimension) == (2, 3)
    # A declared dimension must match the file; a row of another width is
    # refused naming its line.
    with pytest.raises(dpopt.InvalidRequestError) as e:
        curator.import_dataset("pytest-csv2", b"0.5,1,2,1\n", format="csv",
                               label_last=True, dimension=2, public=True)
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert "the file has 4 columns (dimension 3 + 1 label)" in e.value.message
    assert "declared dimension is 2" in e.value.message
    with pytest.raises(dpopt.InvalidRequestError, match="line 2: expected 4 columns"):
        curator.import_dataset("pytest-csv2", b"0.5,1,2,1\n3,4,-1\n", format="csv",
                               label_last=True, public=True)
    assert curator.delete_dataset("pytest-csv") == 0


# ------------------------------------------------------------ TLS

def test_tls_and_mutual_tls(tmp_path):
    from conftest import Server
    certs = tmp_path / "certs"
    subprocess.run([os.path.join(REPO, "tests", "common", "make-test-certs.sh"), str(certs)],
                   check=True)
    s = Server(str(tmp_path), [f"--tls_cert={certs}/server.crt", f"--tls_key={certs}/server.key",
                               f"--tls_client_ca={certs}/ca.crt"])
    try:
        tls = dpopt.TLS(ca=str(certs / "ca.crt"), cert=str(certs / "client.crt"),
                        key=str(certs / "client.key"), server_name="localhost")
        with dpopt.Client(s.address, token=s.token, tls=tls) as c:
            assert c.whoami().name == "curator"
        with dpopt.Client(s.address, token=s.token, timeout=5) as plain:
            with pytest.raises(dpopt.UnavailableError):
                plain.whoami()
        no_client_cert = dpopt.TLS(ca=str(certs / "ca.crt"), server_name="localhost")
        with dpopt.Client(s.address, token=s.token, tls=no_client_cert, timeout=5) as c:
            with pytest.raises(dpopt.UnavailableError):
                c.whoami()
    finally:
        s.stop()


# ------------------------------------------------------------ the example

def test_example_script_runs(server, tmp_path):
    env = dict(os.environ, DPOPT_SERVER=server.address, DPOPT_TOKEN=server.token,
               MPLBACKEND="Agg")
    script = os.path.join(REPO, "examples", "python", "dpsgd_adult.py")
    out = subprocess.run([sys.executable, script, "--out", str(tmp_path), "--steps", "400"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "epsilon = 0.25" in out.stdout and "epsilon = 1" in out.stdout
    png = tmp_path / "dpsgd_adult_trace.png"
    assert png.exists() and png.stat().st_size > 10000
