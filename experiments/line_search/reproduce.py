#!/usr/bin/env python3
"""Line-search convex experiments (Chen & Lee, Figs. 3 and 4) through dpopt's gRPC API,
with the dpopt Python client (clients/python; run.sh builds it).

Curator side (this script, before import): Adult = a9a + a9a.t, Bank, IPUMS-BR;
every feature min-max scaled to [0, 1] with bounds taken from the full public
source file (playing the role of curator-declared domain bounds: fitting
them on private rows would leak; the service never computes bounds from
rows), a constant-1 bias column prepended, labels mapped to -1/+1. One fixed
80/20 split (seed 0). The 80% part is imported as a PRIVATE dataset
(add/remove, declared bounds [0, 1], a large reproduction budget); the 20%
part as a PUBLIC dataset used for evaluate_on.

Analyst side: every job goes through SubmitJob; accuracy is the server's
evaluation on the public 20%; the training objective (unclipped mean loss +
mu/2 ||w||^2 on the 80%) is computed here from the released model with the
curator's copy of the data (the paper's "objective value").
"""
import argparse
import json
import math
import os
import time

import dpopt
import numpy as np

# Vendored copies of the shared datasets (data/README.md); DPOPT_DATA overrides.
DATA = os.environ.get(
    "DPOPT_DATA",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data"))
EPSILONS = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6]
DELTA = 1e-8
MU = 0.001
ALGOS = ["dp_blsgd", "dp_blsgd_ac", "dp_blgd", "dp_sgd", "dp_gd"]


def load_adult():
    rows, labels = [], []
    for name in ("a9a", "a9a.t"):
        with open(os.path.join(DATA, "adult", name)) as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                x = np.zeros(123)
                for tok in parts[1:]:
                    i, v = tok.split(":")
                    x[int(i) - 1] = float(v)
                rows.append(x)
                labels.append(1.0 if float(parts[0]) > 0 else -1.0)
    return np.array(rows), np.array(labels)


def load_dense(path):
    a = np.loadtxt(path)
    return a[:, :-1], np.where(a[:, -1] > 0, 1.0, -1.0)


def preprocess(x):
    # Curator-declared bounds = min/max of the full public source file.
    lo, hi = x.min(axis=0), x.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    z = np.clip((x - lo) / span, 0.0, 1.0)
    return np.hstack([np.ones((x.shape[0], 1)), z])


def split(x, y, seed=0):
    idx = np.random.default_rng(seed).permutation(len(y))
    k = int(round(0.8 * len(y)))
    return (x[idx[:k]], y[idx[:k]]), (x[idx[k:]], y[idx[k:]])


def loss(kind, x, y, w):
    m = y * (x @ w)
    if kind == "logistic":
        l = np.logaddexp(0.0, -m)
    else:
        l = np.maximum(0.0, 1.0 - m)
    return float(l.mean() + MU / 2 * w @ w)


def accuracy(x, y, w):
    return float(np.mean(np.where(x @ w >= 0, 1.0, -1.0) == y))


def non_private(kind, x, y, iters=3000):
    """Reference minimiser: Newton (logistic) / long subgradient run (hinge)."""
    n, d = x.shape
    w = np.zeros(d)
    if kind == "logistic":
        for _ in range(30):
            m = y * (x @ w)
            p = 1 / (1 + np.exp(m))
            g = -(x.T @ (y * p)) / n + MU * w
            h = (x.T * (p * (1 - p))) @ x / n + MU * np.eye(d)
            w -= np.linalg.solve(h, g)
        return w
    best, best_f = w.copy(), loss(kind, x, y, w)
    for t in range(1, iters + 1):
        m = y * (x @ w)
        g = -(x.T @ (y * (m < 1))) / n + MU * w
        w = w - (1.0 / math.sqrt(t)) * g
        f = loss(kind, x, y, w)
        if f < best_f:
            best, best_f = w.copy(), f
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default="adult,bank,ipums-br")
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--algos", default=",".join(ALGOS))
    args = ap.parse_args()
    # The token comes from $DPOPT_TOKEN (run.sh exports the curator's).
    client = dpopt.Client(args.server, timeout=120)

    def import_csv(name, x, y, public):
        text = "\n".join(" ".join(repr(float(v)) for v in row) + " " +
                         ("1" if lab > 0 else "0") for row, lab in zip(x, y))
        # Reproduction setting: a budget large enough for the whole grid.
        budget = {} if public else {"epsilon_budget": 1e5, "delta_budget": 1e-3,
                                    "relation": "add_remove"}
        return client.import_dataset(
            name, text.encode(), format="csv", dimension=x.shape[1], public=public,
            delimiter="whitespace", label_last=True, label_type="binary",
            bounds={"lower": [0.0] * x.shape[1], "upper": [1.0] * x.shape[1]},
            description="line-search reproduction (curator-scaled to [0,1] + bias)", **budget)

    def algo_spec(algo, n_train):
        if algo in ("dp_blsgd", "dp_blsgd_ac"):
            return {algo: {"sampling_rate": 0.1, "planned_iterations": 50}}
        if algo == "dp_blgd":
            return {algo: {"sampling_rate": 1.0, "planned_iterations": 50}}
        if algo == "dp_sgd":
            return {"dp_sgd": {"sampling_rate": min(1.0, 1000.0 / n_train),
                               "steps": 200, "clip_norm": 3.0,
                               "learning_rate": 0.25}}
        return {"dp_gd": {"steps": 50, "clip_norm": 3.0, "learning_rate": 0.25}}

    def model_spec(kind, algo):
        if kind == "logistic":
            return {"logistic_regression": {"l2": MU}}
        # The line-search methods use the hinge loss; baselines that need
        # smoothness the huberized hinge (Chen & Lee 2022, Sec. 5.1).
        if algo.startswith("dp_bl"):
            return {"hinge_svm": {"l2": MU}}
        return {"huberized_hinge_svm": {"l2": MU, "huber_width": 0.5}}

    results = []
    summary = {"reference": {}, "notes": []}
    for dname in args.datasets.split(","):
        t0 = time.time()
        if dname == "adult":
            x, y = load_adult()
        else:
            x, y = load_dense(os.path.join(DATA, dname, dname + ".dat"))
        x = preprocess(x)
        (xtr, ytr), (xte, yte) = split(x, y)
        majority = max(np.mean(y > 0), np.mean(y < 0))
        import_csv(dname + "-train", xtr, ytr, public=False)
        import_csv(dname + "-test", xte, yte, public=True)
        print(f"[{dname}] imported {len(ytr)} + {len(yte)} rows, d = {x.shape[1]}"
              f" ({time.time() - t0:.1f} s)", flush=True)
        for kind in ("logistic", "svm"):
            w_np = non_private(kind, xtr, ytr)
            summary["reference"][f"{dname}/{kind}"] = {
                "majority_accuracy_full": float(majority),
                "majority_accuracy_test": float(max(np.mean(yte > 0), np.mean(yte < 0))),
                "nonprivate_accuracy": accuracy(xte, yte, w_np),
                "nonprivate_objective": loss(kind, xtr, ytr, w_np),
            }
            pending = []
            for eps in [float(e) for e in args.epsilons.split(",")]:
                for algo in args.algos.split(","):
                    for rep in range(args.reps):
                        spec = {
                            "dataset": dname + "-train",
                            "model": model_spec(kind, algo),
                            "privacy": {"epsilon": eps, "delta": DELTA},
                            "algorithm": algo_spec(algo, len(ytr)),
                            "evaluate_on": dname + "-test",
                            "label": f"line_search {dname} {kind} {algo} eps={eps} rep={rep}",
                        }
                        pending.append((dname, kind, algo, eps, rep, spec))
            # Keep the server queue (capacity 64) fed, 2 workers.
            inflight = []
            t1 = time.time()
            while pending or inflight:
                while pending and len(inflight) < 48:
                    item = pending.pop(0)
                    try:
                        job = client.submit(item[5], wait=False)
                    except dpopt.DpoptError as e:
                        dn, kd, algo, eps, rep, _ = item
                        results.append({"dataset": dn, "model": kd, "algo": algo,
                                        "epsilon": eps, "rep": rep,
                                        "state": "REFUSED:" + e.code_name,
                                        "message": e.message, "steps_done": 0})
                        continue
                    inflight.append((item, job.id))
                still = []
                for item, jid in inflight:
                    j = client.job(jid)
                    state = "JOB_STATE_" + j.state.value  # results.json keeps the proto names
                    if state in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING"):
                        still.append((item, jid))
                        continue
                    dn, kd, algo, eps, rep, _ = item
                    rec = {"dataset": dn, "model": kd, "algo": algo, "epsilon": eps,
                           "rep": rep, "state": state, "message": j.message,
                           "steps_done": j.steps_done}
                    if state == "JOB_STATE_SUCCEEDED":
                        r = j.result()
                        w = r.weights
                        rec["accuracy"] = r.evaluation.accuracy
                        rec["accuracy_check"] = accuracy(xte, yte, w)
                        rec["objective"] = loss(kd, xtr, ytr, w)
                        rec["charged_epsilon"] = r.cost.epsilon
                    results.append(rec)
                inflight = still
                if inflight:
                    time.sleep(0.2)
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump({"results": results, "summary": summary}, f, indent=1)
            print(f"[{dname}/{kind}] {sum(1 for r in results if r['dataset'] == dname and r['model'] == kind)}"
                  f" jobs in {time.time() - t1:.1f} s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"results": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
