#!/usr/bin/python3
"""End-to-end benchmark of dpopt against a PyTorch peer; writes the report.

Run through scripts/bench.sh (which builds in Release and runs the Google
Benchmark suite first). This script:
  1. starts dpopt-server on a temp database and a free loopback port;
  2. imports a9a (private, and a public copy) and a generated dense dataset
     of 1M x 100 (CSV, through the CLI: wall time and peak RSS of both
     processes) plus its 1e4 and 1e5-row prefixes;
  3. runs jobs through the server and reads their server-side run time
     (started_at to finished_at): DP-SGD and DP-GD on a9a, non-private GD on
     the public copy, DP-SGD with expected batch 1000 on each dense size,
     and consecutive pa_exponential jobs (run time by position, i.e. by job
     worker);
  4. measures budget queries per second from a loopback client, and small
     jobs: submit-to-result latency from one client, jobs per second from
     eight client processes (tests/bench/small_jobs.py);
  5. runs the PyTorch peer (tests/bench/torch_peer.py) on the same data and
     batch sizes, DP (Opacus-style) and non-private;
  6. writes docs/performance.md (table, machine, commit, date) and the plot
     docs/performance-steps.png.

--smoke shrinks everything to a few seconds (ctest bench_smoke) and writes
into --out instead of docs/.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Server:
    def __init__(self, build, workdir, extra=()):
        self.db = os.path.join(workdir, "bench.db")
        self.stderr = open(os.path.join(workdir, "server.log"), "w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "server", "dpopt-server"), f"--db={self.db}",
             "--listen=127.0.0.1:0",
             # One principal drives every measurement: no per-principal limits.
             "--max-jobs-per-principal=0", "--max-estimates-per-second=0", *extra],
            stdout=subprocess.DEVNULL, stderr=self.stderr)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("dpopt-server exited; see " + self.stderr.name)
            self.stderr.seek(0)
            m = re.search(r"listening on port (\d+)", self.stderr.read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.1)
        if self.port is None:
            raise RuntimeError("dpopt-server did not start")
        self.address = f"127.0.0.1:{self.port}"
        with open(self.db + ".curator-token") as f:
            self.token = f.read().strip()

    def reset_peak_rss(self):
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM
            return True
        except OSError:
            return False

    def peak_rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_seconds(job):
    return (job.finished_at - job.started_at).total_seconds()


def submit(client, dataset, algorithm, *, epsilon=None, delta=None, label=""):
    import dpopt
    spec = dpopt.spec(dataset, model=dpopt.models.logistic_regression(l2=1e-4),
                      algorithm=algorithm, epsilon=epsilon, delta=delta, label=label,
                      trace_every=1000000)
    job = client.submit(spec, wait=True, progress=False, timeout=3600)
    if job.state != "SUCCEEDED":
        raise RuntimeError(f"job {label} ended {job.state}: {job.message}")
    return job


def generate_dense(path_npy, rows, d=100, seed=0):
    """n x (d+1) float64 (label last), standard normal features, labels from
    a fixed linear model plus noise; 1 row in 50 scaled by 10."""
    if os.path.exists(path_npy):
        arr = np.load(path_npy, mmap_mode="r")
        if arr.shape[0] >= rows:
            return
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path_npy, mode="w+", dtype=np.float64, shape=(rows, d + 1))
    w = rng.standard_normal(d)
    for start in range(0, rows, 100000):
        n = min(100000, rows - start)
        x = rng.standard_normal((n, d))
        x[::50] *= 10
        y = np.where(x @ w + rng.standard_normal(n) > 0, 1.0, -1.0)
        out[start:start + n, :d] = x
        out[start:start + n, d] = y
    out.flush()


def write_csv(path_npy, rows, path_csv):
    """CSV of the first `rows` rows (%.6g, label last), written in chunks."""
    if os.path.exists(path_csv):
        return
    arr = np.load(path_npy, mmap_mode="r")
    tmp = path_csv + ".tmp"
    with open(tmp, "w") as f:
        for start in range(0, rows, 50000):
            np.savetxt(f, arr[start:min(rows, start + 50000)], fmt="%.6g", delimiter=",")
    os.replace(tmp, path_csv)


def pa_exponential_sequence(build, server, client, jobs):
    """Run times (s) of `jobs` consecutive pa_exponential jobs on the example
    max-affine problem, each submitted when the one before has ended. The
    server's two job workers then take the jobs in turn (odd positions one,
    even positions the other), so a cost that one worker pays per job and the
    other has cached shows as a spread between the two positions' medians."""
    env = dict(os.environ, DPOPT_TOKEN=server.token)
    data = os.path.join(REPO, "examples", "data")
    r = subprocess.run(
        [os.path.join(build, "client", "dpopt"), "dataset", "import", "max-affine-bench",
         os.path.join(data, "max_affine.csv"), "--format=csv", "--dimension=5", "--header",
         f"--polytope={os.path.join(data, 'max_affine_polytope.json')}", "--b-max=1",
         "--epsilon-budget=1000", "--budget-filter=basic", f"--server={server.address}"],
        env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"max-affine import failed: {r.stderr}")
    runs = []
    for k in range(jobs):
        job = client.submit({"dataset": "max-affine-bench", "privacy": {"epsilon": 0.5},
                             "algorithm": {"pa_exponential": {}},
                             "label": f"bench pa_exponential #{k}"},
                            wait=True, progress=False, timeout=600)
        if job.state != "SUCCEEDED":
            raise RuntimeError(f"pa_exponential #{k} ended {job.state}: {job.message}")
        runs.append(run_seconds(job))
    odd, even = runs[0::2], runs[1::2]
    return {"runs": runs, "odd_median": statistics.median(odd),
            "even_median": statistics.median(even) if even else float("nan")}


def dda_stream_memory(build, rows, dim):
    """Peak RSS of the server side of an MPI dp_dda job's stream
    (tests/bench/dda_stream_memory): the one-string stream of before, the
    chunked stream, and a real job on 2 ranks of the test-only worker.
    None if the tool (or mpirun) is missing."""
    tool = os.path.join(build, "tests", "bench", "dda_stream_memory")
    worker = os.path.join(build, "tests", "core", "optim", "distributed_dda",
                          "dpopt-dda-worker-testing")
    if not os.path.exists(tool):
        return None
    out = []
    modes = ["one-string", "streamed"]
    if shutil.which("mpirun") and os.path.exists(worker):
        modes.append("mpi")
    for mode in modes:
        cmd = [tool, mode, str(rows), str(dim)] + ([worker] if mode == "mpi" else [])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError(f"dda_stream_memory {mode} failed: {r.stderr}")
        fields = dict(kv.split("=") for kv in r.stdout.split())
        out.append({k: (v if k == "mode" else float(v)) for k, v in fields.items()})
    return out


def process_cpu_seconds(pid):
    """(user, system) CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def disk_write_mb_per_s(directory, mb):
    """Sequential write of `mb` MiB then fdatasync, as a floor for storing
    an import durably (the file is removed)."""
    path = os.path.join(directory, "disk-probe.bin")
    block = os.urandom(8 << 20)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(max(1, mb // 8)):
            os.write(fd, block)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    return max(1, mb // 8) * 8 / (time.perf_counter() - start)


def wait_for_checkpoint(db_path, timeout=120):
    """Seconds until the database file stops growing after an import: the
    background checkpoint copying the import's rows from the WAL into it
    (polled every 0.1 s; settled once unchanged for 1 s)."""
    start = time.perf_counter()
    last, last_change = -1, start
    while time.perf_counter() - start < timeout:
        size = os.path.getsize(db_path)
        now = time.perf_counter()
        if size != last:
            last, last_change = size, now
        elif now - last_change >= 1.0:
            return last_change - start
        time.sleep(0.1)
    return float("nan")


def cli_import(build, server, name, path, dim, detail=None):
    """Imports through the CLI; returns (wall s, CLI peak RSS MB, server peak MB).
    `detail` (a dict), if given, receives the CPU seconds of both processes."""
    reset = server.reset_peak_rss()
    env = dict(os.environ, DPOPT_TOKEN=server.token)
    server_cpu0 = process_cpu_seconds(server.proc.pid)
    cmd = ["/usr/bin/time", "-f", "%e %M %U %S", os.path.join(build, "client", "dpopt"),
           "dataset", "import", name, path, "--format=csv", f"--dimension={dim}",
           "--epsilon-budget=1000", "--delta-budget=1e-5", f"--server={server.address}"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"import failed: {r.stderr}")
    wall, rss_kb, cli_user, cli_sys = r.stderr.strip().splitlines()[-1].split()
    if detail is not None:
        server_cpu1 = process_cpu_seconds(server.proc.pid)
        detail.update(cli_user=float(cli_user), cli_sys=float(cli_sys),
                      server_user=server_cpu1[0] - server_cpu0[0],
                      server_sys=server_cpu1[1] - server_cpu0[1])
    return float(wall), int(rss_kb) / 1024, server.peak_rss_mb() if reset else float("nan")


def small_jobs(build, server, csv, data_dir, jobs, clients, jobs_each):
    """Submit-to-result latency of small jobs from one client process, and
    jobs per second from `clients` processes at once (tests/bench/small_jobs.py)."""
    small = os.path.join(data_dir, "dense2000.csv")
    if not os.path.exists(small):
        with open(csv) as f, open(small + ".tmp", "w") as out:
            for _, line in zip(range(2000), f):
                out.write(line)
        os.replace(small + ".tmp", small)
    cmd = ["/usr/bin/time", "-f", "%e", os.path.join(build, "client", "dpopt"),
           "dataset", "import", "dense2000", small, "--format=csv", "--dimension=100",
           "--epsilon-budget=100000", "--delta-budget=0.01", f"--server={server.address}"]
    env = dict(os.environ, DPOPT_TOKEN=server.token)
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    def run(n):
        return subprocess.Popen(
            ["/usr/bin/python3", os.path.join(HERE, "small_jobs.py"), "--build-dir", build,
             "--server", server.address, "--dataset", "dense2000", "--jobs", str(n)],
            env=env, stdout=subprocess.PIPE, text=True)

    def collect(proc):
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError("small_jobs.py failed")
        return json.loads(out.strip().splitlines()[-1])

    one = collect(run(jobs))
    lat = sorted(one["seconds"])
    start = time.perf_counter()
    procs = [run(jobs_each) for _ in range(clients)]
    many = [collect(p) for p in procs]
    wall = time.perf_counter() - start
    # Throughput over the window in which all clients were submitting: each
    # process's own timed wall (after its warm-up jobs), the longest counts.
    busy = max(m["wall"] for m in many)
    return {"jobs": jobs, "p50": lat[len(lat) // 2],
            "p90": lat[min(len(lat) - 1, int(0.9 * len(lat)))],
            "clients": clients, "jobs_each": jobs_each,
            "jobs_per_second": clients * jobs_each / busy, "wall_with_startup": wall}


def budget_qps(server, seconds, in_flight=64):
    import grpc
    from dpopt.v1 import dpopt_pb2, dpopt_pb2_grpc
    channel = grpc.insecure_channel(server.address)
    stub = dpopt_pb2_grpc.BudgetServiceStub(channel)
    md = (("authorization", "Bearer " + server.token),)
    req = dpopt_pb2.GetBudgetRequest(dataset="adult")
    stub.GetBudget(req, metadata=md)  # warm
    done = 0
    lock = threading.Lock()
    sem = threading.Semaphore(in_flight)
    errors = []

    def finished(fut):
        nonlocal done
        if fut.exception() is not None:
            errors.append(fut.exception())
        with lock:
            done += 1
        sem.release()

    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        sem.acquire()
        stub.GetBudget.future(req, metadata=md).add_done_callback(finished)
    for _ in range(in_flight):
        sem.acquire()
    elapsed = time.perf_counter() - start
    channel.close()
    if errors:
        raise RuntimeError(f"budget query failed: {errors[0]}")
    return done / elapsed


def peer(args_list, threads):
    env = dict(os.environ)
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"), *args_list,
           "--threads", str(threads)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"peer failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def best_peer(args_list):
    """The peer at 2 threads (as specified) and at 1 thread; the faster one
    is the reference (on a loaded 2-core machine OpenMP's spinning threads
    can make 2 threads slower, which would flatter dpopt)."""
    runs = [peer(args_list, 2), peer(args_list, 1)]
    best = min(runs, key=lambda r: r["step_seconds"])
    best["all_threads"] = {str(r["threads"]): r["step_seconds"] for r in runs}
    return best


def gbench_figures(path):
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            continue
        name = b["name"]
        if b.get("run_type") == "aggregate":
            # With repetitions: the median stands for the benchmark.
            if b.get("aggregate_name") != "median":
                continue
            name = b.get("run_name", name)
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        out[name] = {"seconds": b["real_time"] * unit,
                          "items_per_second": b.get("items_per_second"),
                          "label": b.get("label", ""),
                          "order": (b.get("family_index", 0),
                                    b.get("per_family_instance_index", 0))}
    # Source order (random interleaving shuffles the JSON).
    out = dict(sorted(out.items(), key=lambda kv: kv[1]["order"]))
    return out, data.get("context", {})


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load": load}


def busy_cpu_seconds():
    """CPU seconds all processes on the machine spent busy so far (/proc/stat:
    user, nice, system, irq, softirq), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    return sum(int(fields[i]) for i in (1, 2, 3, 6, 7)) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds():
    """CPU seconds of this process and its waited-for children (the server,
    the CLIs, the PyTorch peer)."""
    import resource
    return sum(getattr(resource.getrusage(who), field)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--gbench-json", default="", help="Google Benchmark JSON output")
    ap.add_argument("--out", default=os.path.join(REPO, "docs"),
                    help="folder for performance.md and the plot (default docs/)")
    ap.add_argument("--data-dir", default="",
                    help="cache for generated data (default BUILD/bench-data)")
    ap.add_argument("--smoke", action="store_true", help="a few seconds of everything")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    sys.path.insert(0, os.path.join(build, "python", "site"))
    import dpopt

    smoke = args.smoke
    sizes = [10000] if smoke else [10000, 100000, 1000000]
    big = sizes[-1]
    steps_sgd = 20 if smoke else 2000
    steps_gd = 5 if smoke else 500
    steps_dense = 20 if smoke else 1000
    peer_steps_a9a = 20 if smoke else 2000
    data_dir = args.data_dir or os.path.join(build, "bench-data")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    a9a = os.path.join(REPO, "data", "adult", "a9a")
    results = {"smoke": smoke, "machine_before": machine()}
    with open(a9a) as f:
        lines = [len(line.split()) - 1 for line in f if line.strip()]
    results["a9a_nonzeros_per_row"] = sum(lines) / len(lines)
    # Contention: CPU used by processes other than this run's while it ran
    # (the load average counts the benchmark itself), and the load average
    # bench.sh saw before it started anything.
    window0 = (time.perf_counter(), busy_cpu_seconds(), own_cpu_seconds())
    try:
        results["load_before_script"] = float(os.environ["DPOPT_BENCH_LOADAVG"])
    except (KeyError, ValueError):
        pass

    npy = os.path.join(data_dir, f"dense{big}.npy")
    log(f"generating {big} x 100 dense rows")
    generate_dense(npy, big)
    csvs = {}
    for n in sizes:
        csvs[n] = os.path.join(data_dir, f"dense{n}.csv")
        write_csv(npy, n, csvs[n])
    results["csv_mb"] = os.path.getsize(csvs[big]) / 2**20

    workdir = tempfile.mkdtemp(prefix="dpopt-bench-")
    # A dataset cache large enough for the 1M x 100 dataset (808 MiB decoded;
    # the default cap is 512 MiB): a curator serving large datasets raises it,
    # and the step figures should not include decoding the dataset per job.
    server = Server(build, workdir, extra=("--dataset-cache-mb=2048",))
    try:
        client = dpopt.Client(server.address, server.token)
        client.wait_ready()
        # Import of the big CSV first, on a fresh server (peak RSS of both).
        # Three imports (under three names; one in smoke mode), the median
        # counts: single runs on this VM vary by +-0.6 s. Each waits for the
        # background checkpoint of the one before.
        log(f"importing dense{big} ({results['csv_mb']:.0f} MB CSV) through the CLI")
        walls, checkpoints = [], []
        for rep in range(1 if smoke else 3):
            cpu = {}
            name = f"dense{big}" if rep == 0 else f"dense{big}-again{rep}"
            wall, cli_rss, server_rss = cli_import(build, server, name, csvs[big], 100,
                                                   detail=cpu)
            walls.append(wall)
            checkpoints.append(wait_for_checkpoint(server.db))
            if rep == 0:
                first = {"cli_peak_rss_mb": cli_rss, "server_peak_rss_mb": server_rss,
                         "cpu": cpu}
            log(f"  {wall:.2f} s, CLI {cli_rss:.0f} MB, server {server_rss:.0f} MB; "
                f"background checkpoint done {checkpoints[-1]:.1f} s later")
        results["import"] = {"rows": big, "seconds": statistics.median(walls),
                             "all_seconds": walls, "checkpoint_seconds": checkpoints,
                             "values_mb": big * 101 * 8 / 2**20, **first}
        results["disk_probe_mb"] = 64 if smoke else 512
        results["disk_write_mb_s"] = disk_write_mb_per_s(workdir, results["disk_probe_mb"])
        for n in sizes[:-1]:
            cli_import(build, server, f"dense{n}", csvs[n], 100)
        client.import_dataset("adult", a9a, format="libsvm", dimension=123,
                              epsilon_budget=1000, delta_budget=1e-5)
        client.import_dataset("adult-public", a9a, format="libsvm", dimension=123, public=True)

        # Repeated runs, medians: on a shared 2-core machine sub-second runs
        # vary by 20-40% from noise alone. (The peer's figure is the faster
        # of its two thread settings, which favours the peer.)
        reps_sgd = 1 if smoke else 3
        log(f"DP-SGD on a9a, q = 0.01, {steps_sgd} steps, {reps_sgd} runs")
        sgd_runs = []
        for rep in range(reps_sgd):
            job = submit(client, "adult", dpopt.algorithms.dp_sgd(
                sampling_rate=0.01, steps=steps_sgd, clip_norm=1.0, learning_rate=0.5),
                epsilon=1.0, delta=1e-6, label=f"bench dp-sgd a9a #{rep}")
            sgd_runs.append(run_seconds(job))
        sgd_seconds = statistics.median(sgd_runs)
        results["dpsgd_a9a"] = {"steps": steps_sgd, "runs": sgd_runs, "seconds": sgd_seconds,
                                "step_seconds": sgd_seconds / steps_sgd}
        reps_gd = 1 if smoke else 5
        log(f"DP-GD and GD on a9a, {steps_gd} steps, {reps_gd} alternated runs each")
        dpgd_runs, gd_runs = [], []
        for rep in range(reps_gd):
            job = submit(client, "adult", dpopt.algorithms.dp_gd(
                steps=steps_gd, clip_norm=1.0, learning_rate=0.5), epsilon=1.0,
                delta=1e-6, label=f"bench dp-gd a9a #{rep}")
            dpgd_runs.append(run_seconds(job) / steps_gd)
            job = submit(client, "adult-public", dpopt.algorithms.gd(
                steps=steps_gd, learning_rate=0.5), label=f"bench gd a9a #{rep}")
            gd_runs.append(run_seconds(job) / steps_gd)
        results["dpgd_a9a"] = {"steps": steps_gd, "runs": dpgd_runs,
                               "step_seconds": statistics.median(dpgd_runs)}
        results["gd_a9a"] = {"steps": steps_gd, "runs": gd_runs,
                             "step_seconds": statistics.median(gd_runs)}

        results["dense"] = {}
        for n in sizes:
            q = 1000.0 / n
            log(f"DP-SGD on dense{n}, q = {q:g}, {steps_dense} steps")
            # The first job on a dataset decodes it (and fills the cache);
            # the figure is the median of the later jobs' run times.
            runs = []
            for rep in range(1 if smoke else 4):
                job = submit(client, f"dense{n}", dpopt.algorithms.dp_sgd(
                    sampling_rate=q, steps=steps_dense, clip_norm=1.0, learning_rate=0.5),
                    epsilon=1.0, delta=1e-6, label=f"bench dp-sgd dense{n} #{rep}")
                runs.append(run_seconds(job))
            results["dense"][str(n)] = {"q": q, "steps": steps_dense,
                                        "first_job_seconds": runs[0],
                                        "runs": runs,
                                        "step_seconds": statistics.median(
                                            runs[1:] or runs) / steps_dense}
        n_pa = 4 if smoke else 24
        log(f"pa_exponential: {n_pa} consecutive jobs (the two job workers take turns)")
        results["pa_sequence"] = pa_exponential_sequence(build, server, client, n_pa)
        log("budget queries")
        results["budget_qps"] = budget_qps(server, 1.0 if smoke else 5.0)
        log("small jobs (10-step dp_gd on 2,000 rows), 1 client, then 8 at once")
        results["small_jobs"] = small_jobs(build, server, csvs[sizes[0]], data_dir,
                                           jobs=3 if smoke else 100,
                                           clients=2 if smoke else 8,
                                           jobs_each=3 if smoke else 40)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    mem_rows, mem_dim = (20000, 10) if smoke else (400000, 100)
    log(f"MPI dp_dda job stream: server memory, {mem_rows} x {mem_dim}")
    results["dda_stream_memory"] = dda_stream_memory(build, mem_rows, mem_dim)

    log("PyTorch peer on a9a")
    results["peer_dp_a9a"] = best_peer(["--libsvm", a9a, "--dimension", "123", "--q", "0.01",
                                        "--steps", str(peer_steps_a9a)])
    results["peer_nonprivate_a9a"] = best_peer(
        ["--libsvm", a9a, "--dimension", "123", "--q", "0.01", "--steps",
         str(peer_steps_a9a), "--mode", "nonprivate"])
    results["peer_dense"] = {}
    for n in sizes:
        log(f"PyTorch peer on dense{n}")
        results["peer_dense"][str(n)] = best_peer(
            ["--npy", npy, "--rows", str(n), "--q", str(1000.0 / n), "--steps",
             str(steps_dense)])

    gb, gb_context = gbench_figures(args.gbench_json) or ({}, {})
    results["gbench"] = gb
    results["machine_after"] = machine()
    t1, busy1, own1 = time.perf_counter(), busy_cpu_seconds(), own_cpu_seconds()
    if busy1 is not None and window0[1] is not None:
        results["other_cpu"] = {
            "seconds": max(0.0, (busy1 - window0[1]) - (own1 - window0[2])),
            "wall_seconds": t1 - window0[0]}
    with open(os.path.join(args.out, "performance.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    write_report(results, args.out, gb_context)
    log(f"wrote {os.path.join(args.out, 'performance.md')}")


def fmt_time(s):
    if s is None or s != s:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def write_report(r, out, gb_context):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    # The files this run writes (docs/performance.* by default) do not count.
    written = [f":(exclude){os.path.relpath(os.path.join(out, name), REPO)}"
               for name in ("performance.md", "performance.json", "performance-steps.png")
               if not os.path.relpath(os.path.join(out, name), REPO).startswith("..")]
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no",
                            "--", ".", *written],
                           capture_output=True, text=True).stdout.strip()
    m0 = r["machine_before"]
    gb = r["gbench"]

    def g(name, key="seconds"):
        v = gb.get(name, {}).get(key)
        return v

    rows = []

    def row(figure, ours, peer, ratio, target):
        rows.append(f"| {figure} | {ours} | {peer} | {ratio} | {target} |")

    def gp(prefix, key="seconds"):
        # A benchmark by name, with or without Google Benchmark's suffixes
        # (/real_time, ...).
        for name, v in gb.items():
            if name == prefix or name.startswith(prefix + "/"):
                return v.get(key)
        return None

    floor_rows = []

    def floor_row(figure, ours, floor, floor_what, target):
        ratio = f"**{ours / floor:.2f}x**" if ours and floor else "-"
        floor_rows.append(f"| {figure} | {fmt_time(ours)} | {fmt_time(floor)} ({floor_what}) "
                          f"| {ratio} | {target} |")

    sgd = r["dpsgd_a9a"]
    epoch = sgd["step_seconds"] / 0.01
    peer = r["peer_dp_a9a"]
    row(f"DP-SGD on a9a, q = 0.01, per epoch (server run time / epochs, median of "
        f"{len(sgd.get('runs', [0]))} runs)",
        fmt_time(epoch), f"{fmt_time(peer['epoch_seconds'])} (PyTorch, Opacus-style)",
        f"**{peer['epoch_seconds'] / epoch:.1f}x** faster", ">= 10x")
    npeer = r["peer_nonprivate_a9a"]
    row("same, vs non-private PyTorch minibatch SGD (batch 326)", fmt_time(epoch),
        fmt_time(npeer["epoch_seconds"]), f"{npeer['epoch_seconds'] / epoch:.1f}x faster", "-")
    big = max(r["dense"], key=int)
    dense = r["dense"][big]
    work = g("BM_ClippedGradientSum/1000000/1000")
    row(f"DP-SGD step on {int(big):,} x 100, q = {dense['q']:g} (batch 1000)",
        fmt_time(dense["step_seconds"]),
        f"{fmt_time(r['peer_dense'][big]['step_seconds'])} (PyTorch)",
        f"{r['peer_dense'][big]['step_seconds'] / dense['step_seconds']:.1f}x faster", "-")
    if work:
        row("same step / its gradient work (clipped sum of 1000 rows, gbench)",
            fmt_time(dense["step_seconds"]), fmt_time(work),
            f"**{dense['step_seconds'] / work:.2f}x**", "<= 2x")
        micro = g("BM_DpSgdStep/1000000/1000")
        if micro:
            row("oracle step alone (sample + clip + noise, gbench) / gradient work",
                fmt_time(micro), fmt_time(work), f"{micro / work:.2f}x", "<= 2x")
    row(f"DP-GD step on a9a / non-private GD step (server, median of "
        f"{len(r['dpgd_a9a'].get('runs', [0]))} alternated runs)", fmt_time(r["dpgd_a9a"]["step_seconds"]),
        fmt_time(r["gd_a9a"]["step_seconds"]),
        f"**{r['dpgd_a9a']['step_seconds'] / r['gd_a9a']['step_seconds']:.2f}x**", "<= 1.1x")
    for it, where in (("1", "w after 100 GD steps: clipped and unclipped rows mix, as in a job"),
                      ("0", "w = 0.01: every row clipped")):
        clipped, scaled = g(f"BM_FullGradientSum/1/{it}"), g(f"BM_FullGradientSum/0/{it}")
        if clipped and scaled:
            row(f"DP-GD kernel / GD kernel, a9a, {where} (gbench, no job loop, "
                "noise or VM drift between jobs)", fmt_time(clipped), fmt_time(scaled),
                f"{clipped / scaled:.2f}x", "<= 1.1x")
    imp = r["import"]
    runs = imp.get("all_seconds", [imp["seconds"]])
    row(f"import {imp['rows']:,} x 100 CSV ({r['csv_mb']:.0f} MB), CLI end to end"
        + (f", median of {len(runs)} ({', '.join(f'{x:.2f}' for x in runs)} s)"
           if len(runs) > 1 else ""),
        f"**{imp['seconds']:.2f} s**", "-", "-", "< 5 s")
    row("import peak RSS: CLI / server", f"{imp['cli_peak_rss_mb']:.0f} MB / "
        f"{imp['server_peak_rss_mb']:.0f} MB", "-", "-", "a few hundred MB")
    if g("BM_RoundedGaussian/1024", "items_per_second"):
        row("exact rounded Gaussian (tau = 1024), one core",
            f"**{g('BM_RoundedGaussian/1024', 'items_per_second') / 1e6:.2f} M/s**", "-", "-",
            ">= 8 M/s")
    if g("BM_SecureWords", "items_per_second"):
        kernel = g("BM_KernelWords", "items_per_second")
        row("secure 64-bit words (OpenSSL DRBG), one core",
            f"**{g('BM_SecureWords', 'items_per_second') / 1e6:.0f} M/s**",
            f"{kernel / 1e6:.0f} M/s (getrandom)" if kernel else "-",
            f"{g('BM_SecureWords', 'items_per_second') / kernel:.1f}x" if kernel else "-",
            ">= 300 M/s")
    pa = r.get("pa_sequence")
    if pa:
        slow, fast = max(pa["odd_median"], pa["even_median"]), min(pa["odd_median"],
                                                                   pa["even_median"])
        row(f"{len(pa['runs'])} consecutive pa_exponential jobs (example problem), median run "
            "time at odd / even positions, i.e. on each of the two job workers "
            f"(all runs, ms: {', '.join(f'{1e3 * x:.0f}' for x in pa['runs'])})",
            f"{fmt_time(pa['odd_median'])} / {fmt_time(pa['even_median'])}", "-",
            f"**{slow / fast:.2f}x**" if fast > 0 else "-", "~1x (equal workers)")
    row("budget queries (GetBudget) from a loopback Python client, 64 in flight",
        f"**{r['budget_qps']:.0f}/s**", "-", "-", ">= 2,000/s")

    # Every figure against this machine's floor for the same work, measured
    # in the same run (dpopt_bench's BM_Floor* probes: plain loops over plain
    # arrays, no dpopt code).
    big_step = r["dense"][big]["step_seconds"]
    floor_row(f"DP-SGD step, {int(big):,} x 100, batch 1000 (server run time / steps)",
              big_step, gp(f"BM_FloorGather/{big}/1000"),
              "gather of 1000 random rows of a row-major array, two passes, one exp per row",
              "<= 1.2x")
    madds = gp("BM_FloorMultiplyAdds", "items_per_second")
    draw = gp("BM_RoundedGaussian/1048576")
    nnz = r.get("a9a_nonzeros_per_row")
    if madds and draw and nnz:
        a9a_floor = 2 * 0.01 * 32561 * nnz / madds + 123 * draw
        floor_row("DP-SGD step on a9a, q = 0.01 (server run time / steps)",
                  sgd["step_seconds"], a9a_floor,
                  f"2 x {0.01 * 32561 * nnz:,.0f} multiply-adds at {madds / 1e9:.2f} G/s "
                  f"+ 123 exact Gaussian draws at {1e-6 / draw:.0f} M/s", "<= 3x")
    for t in (1, 2):
        floor_row(f"full-batch DP-GD step, {int(big):,} x 100, {t} thread(s) (gbench)",
                  gp(f"BM_DpGdStepThreads/{big}/{t}"), gp(f"BM_FloorStream/{big}/{t}"),
                  f"one streaming pass over the values, {t} thread(s)", "-")
    one_t, two_t = gp(f"BM_DpGdStepThreads/{big}/1"), gp(f"BM_DpGdStepThreads/{big}/2")
    if one_t and two_t:
        floor_rows.append(f"| same, speed-up from 1 to 2 threads | **{one_t / two_t:.2f}x** | "
                          f"{gp(f'BM_FloorStream/{big}/1') / gp(f'BM_FloorStream/{big}/2'):.2f}x "
                          f"(streaming floor) | - | >= 1.8x |")
    sj = r.get("small_jobs")
    if sj:
        floor_row(f"small job submit to result, p50 of {sj['jobs']} (10-step dp_gd on 2,000 "
                  "rows, one Python client)", sj["p50"], gp("BM_FloorDurableCommit"),
                  "one durable SQLite commit", "<= 3 ms")
        floor_rows.append(f"| same, p90 | {fmt_time(sj['p90'])} | - | - | - |")
        floor_rows.append(f"| small jobs from {sj['clients']} client processes at once | "
                          f"**{sj['jobs_per_second']:.0f} jobs/s** | - | - | >= 500/s |")

    # Plot: step time against dataset size, batch 1000.
    sizes = sorted(int(n) for n in r["dense"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(sizes, [r["dense"][str(n)]["step_seconds"] * 1e3 for n in sizes], "o-",
            label="dpopt (server run time / steps)")
    ax.plot(sizes, [r["peer_dense"][str(n)]["step_seconds"] * 1e3 for n in sizes], "s--",
            label="PyTorch peer (Opacus-style DP-SGD)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows n (100 dense features)")
    ax.set_ylabel("time per DP-SGD step (ms)")
    ax.set_title("DP-SGD step time, expected batch 1000 (q = 1000 / n)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "performance-steps.png"), dpi=110)

    micro_rows = []
    for name, v in gb.items():
        ips = v.get("items_per_second")
        micro_rows.append(f"| `{name}` | {v['label']} | {fmt_time(v['seconds'])} | "
                          + (f"{ips / 1e6:.2f} M/s" if ips else "") + " |")
    cores = m0["cores"] or 1
    other = r.get("other_cpu")
    other_share = (other["seconds"] / (other["wall_seconds"] * cores)
                   if other and other["wall_seconds"] > 0 else None)
    load_before = r.get("load_before_script", m0["load"][0])
    contention = (load_before > 0.5 * cores or
                  (other_share is not None and other_share > 0.1))
    load_text = (f"Load average (1 min) when `bench.sh` started: {load_before:.1f}"
                 + (f"; other processes used {other['seconds']:.1f} CPU seconds during the "
                    f"{other['wall_seconds']:.0f} s of end-to-end runs "
                    f"({100 * other_share:.0f}% of the cores)" if other_share is not None else "")
                 + ".")
    size_rows = "\n".join(
        f"| {n:,} | {fmt_time(r['dense'][str(n)]['step_seconds'])} | "
        f"{fmt_time(r['peer_dense'][str(n)]['step_seconds'])} | "
        f"{r['peer_dense'][str(n)]['step_seconds'] / r['dense'][str(n)]['step_seconds']:.1f}x |"
        for n in sizes)
    cpu = imp.get("cpu", {})
    import_text = "-"
    if cpu and "disk_write_mb_s" in r:
        total_cpu = sum(cpu.values())
        cpu_floor = total_cpu / (m0["cores"] or 1)
        disk = r["disk_write_mb_s"]
        import_text = (
            f"The {imp['rows']:,}-row import took {imp['seconds']:.2f} s end to end "
            f"(median). CPU of the first: "
            f"server {cpu['server_user']:.2f} s user + {cpu['server_sys']:.2f} s system "
            f"(parsing, gRPC, SQLite), CLI {cpu['cli_user']:.2f} s + {cpu['cli_sys']:.2f} s: "
            f"{total_cpu:.1f} CPU seconds, so at least {cpu_floor:.1f} s "
            f"on {m0['cores']} cores even if every stage overlapped perfectly. Storage: "
            f"{imp['values_mb']:.0f} MiB of doubles (values and labels) are written "
            f"once on the import's path, to SQLite's WAL, durably when the import "
            f"commits (its writeback starts block by block, overlapping parsing); "
            f"the background checkpointer then copies them into the database file, "
            f"done about {', '.join(f'{x:.1f}' for x in imp.get('checkpoint_seconds', []))} s "
            f"after each import returned. This disk writes {disk:.0f} MiB/s "
            f"sequentially with one fdatasync (a {r.get('disk_probe_mb', 512)} MiB probe), "
            f"so writing the values once takes {imp['values_mb'] / disk:.1f} s. ")
        disk_floor = imp["values_mb"] / disk
        floor = max(cpu_floor, disk_floor)
        if imp["seconds"] <= 1.15 * floor:
            import_text += (
                f"The import is thus at this machine's floor, set by its "
                f"{'disk' if disk_floor >= cpu_floor else 'CPU'} ({imp['seconds']:.2f} s "
                f"against {floor:.1f} s; the probe only estimates what the disk sustains).")
        else:
            import_text += (
                f"Above both floors, what remains on the path is CPU that does not "
                f"overlap: SQLite writes the WAL a 4 KiB page at a time (two pwrite calls "
                f"per page) and the parser converts {imp['rows'] * 101:,} decimals.")
    dda_memory_text = "Not measured (`dda_stream_memory` or mpirun missing)."
    mem = r.get("dda_stream_memory")
    if mem:
        what = {"one-string": "every shard encoded, then one string (as before streaming)",
                "streamed": "the chunked stream (4 MiB chunks), pulled as mpirun reads it",
                "mpi": "a real 2-iteration job on 2 ranks (the server process only)"}
        first = mem[0]
        dda_memory_text = (
            f"`tests/bench/dda_stream_memory`: {int(first['rows']):,} x {int(first['dim'])} "
            f"dense rows on 8 nodes ({first['loaded_mib']:.0f} MiB resident once loaded; "
            f"the stream is {max(m['stream_mib'] for m in mem):.0f} MiB).\n\n"
            "| the server side of the stream | peak resident memory above the loaded "
            "dataset |\n|---|---|\n"
            + "\n".join(f"| {what[m['mode']]} | {m['above_loaded_mib']:.0f} MiB |"
                        for m in mem))
    text = f"""# Performance

Written by `scripts/bench.sh`{' (SMOKE MODE: tiny runs, numbers meaningless)' if r['smoke'] else ''};
the raw figures are in `performance.json`. The last column gives the project's
target for each figure.

- Commit `{commit}`{' (with uncommitted changes)' if dirty else ''}, {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}
- Machine: {m0['cpu']}, {m0['cores']} cores, Linux {m0['kernel']}; Release build
- {load_text}
  {'**Measured under contention**: other processes shared the cores during the run, so absolute times are pessimistic for both sides; ratios measured in the same run are the figures to read.' if contention else 'The machine was quiet during the run.'}
- PyTorch peer: `tests/bench/torch_peer.py` (torch {r['peer_dp_a9a']['torch']}, float32),
  Opacus's computation written out (Poisson sampling by one uniform per row, per-sample
  gradients from hooked activations and backprops, per-sample clipping, Gaussian noise,
  division by q n), same data and expected batch size, logistic regression without bias;
  run with 2 threads and with 1 thread, the faster counts
  (a9a: {', '.join(f"{k} thread(s) {fmt_time(v)}/step" for k, v in r['peer_dp_a9a']['all_threads'].items())}).
- dpopt figures are server-side run times of real jobs (`started_at` to `finished_at`,
  which includes loading the dataset, calibration checks, noise and trace recording),
  DP-SGD with C = 1 at epsilon = 1, delta = 1e-6 (RDP).

| figure | dpopt | peer / reference | ratio | target |
|---|---|---|---|---|
{chr(10).join(rows)}

## Against this machine's floor

The floor of each figure is the same work done by a plain loop over plain arrays on this
machine, measured in the same run (`dpopt_bench`'s `BM_Floor*` benchmarks): the
ratio says how much of the machine's speed dpopt leaves unused, independently of
any peer.

| figure | dpopt | floor (what it does) | ratio | target |
|---|---|---|---|---|
{chr(10).join(floor_rows)}

## Step time against dataset size

Expected batch 1000 (q = 1000 / n), 100 dense features, {r['dense'][str(sizes[0])]['steps']} steps;
dpopt's Poisson sampling costs O(expected batch) (geometric skips, exact), the peer's
O(n) (one uniform per row, as Opacus).

![DP-SGD step time against n](performance-steps.png)

| n | dpopt step | peer step | ratio |
|---|---|---|---|
{size_rows}

## Import: where the time goes

{import_text}

## MPI dp_dda: the server's memory for the job stream

{dda_memory_text}

## Microbenchmarks (Google Benchmark, `dpopt_bench`{'' if r['smoke'] else '; medians of 5 repetitions run in random order'})

| benchmark | label | time per iteration | items/s |
|---|---|---|---|
{chr(10).join(micro_rows)}

Reproduce: `scripts/bench.sh` (about 10 minutes on 2 cores; generated data is cached in
`build-release/bench-data/`). `scripts/bench.sh --smoke` runs everything in a few seconds
(ctest `bench_smoke`).
"""
    with open(os.path.join(out, "performance.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
