#!/usr/bin/python3
"""Accelerated reproduction client (Kuru et al. 2022, Sec. 5) for dpopt.v1.

Generates the synthetic data of the paper's Sec. 5 with a fixed seed,
imports it through the dpopt Python client (clients/python), runs the
paper's grid as jobs (six algorithms x m x T x c x runs), reads the
privatized iterate traces back (job results with trace_iterates), evaluates
F(x_t) - F* on its own copy of the data, and writes results.md and the
figures laid out like the paper's Figs. 3 and 4.

Only the iterates (privatized output) come back from the server; F, x* and
L are computed here, by the experimenter who generated the data.
"""

import argparse
import os
import time

import numpy as np

N, D, LAM, C_L1, EPS = 100_000, 20, 0.01, 20.0, 1.0
SEED = 20220623
ALGOS = [  # (proto field, label) in the paper's panel order
    ("accel_dp_gd", "DP-GD"), ("accel_dp_nag", "DP-NAG"),
    ("accel_dp_masg", "DP-MASG"), ("accel_dp_hb", "DP-HB"),
    ("accel_dp_nag_opt", "DP-NAG-opt"), ("accel_dp_masg_opt", "DP-MASG-opt")]
COLORS = {100: "green", 200: "black", 500: "blue", 1000: "red"}


def make_data():
    """The paper's Sec. 5: u ~ U[0,1]^d, rows rescaled to ||u||_1 <= 20,
    w ~ N(0, I), z = sign(u^T w) in {-1, +1}."""
    rng = np.random.default_rng(SEED)
    u = rng.random((N, D))
    l1 = np.abs(u).sum(axis=1)
    scale = np.where(l1 > C_L1, C_L1 / l1, 1.0)
    u = u * scale[:, None]
    w = rng.standard_normal(D)
    z = np.where(u @ w >= 0, 1.0, -1.0)
    return u, z


def objective(u, z, xs):
    """F(x) = mean log(1 + exp(-z u^T x)) + lam ||x||^2 for each row of xs."""
    m = (u @ xs.T) * (-z[:, None])
    return np.logaddexp(0.0, m).mean(axis=0) + LAM * (xs * xs).sum(axis=1)


def gradient(u, z, x):
    s = -z / (1.0 + np.exp(z * (u @ x)))
    return u.T @ s / len(z) + 2 * LAM * x


def solve_optimum(u, z, L, mu):
    """As in the paper's Sec. 5: non-private NAG, alpha = 1/L, from x0 = 10*1
    (run 3000 iterations to be safe; the paper uses 1000)."""
    k = L / mu
    beta = (np.sqrt(k) - 1) / (np.sqrt(k) + 1)
    x = np.full(D, 10.0)
    prev = x.copy()
    for _ in range(3000):
        y = x + beta * (x - prev)
        prev = x
        x = y - gradient(u, z, y) / L
    return x, float(objective(u, z, x[None, :])[0]), float(np.linalg.norm(gradient(u, z, x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    # The dpopt Python client (clients/python; run.sh builds the wheel and
    # puts it on PYTHONPATH). The token comes from $DPOPT_TOKEN.
    import dpopt

    t_start = time.monotonic()
    u, z = make_data()
    # L as in the paper (Sec. 5): lambda_max(U^T U / n) + 2 lambda. This
    # reads the data: the experimenter generated it and declares L as a
    # public input of the jobs (a reproduction setting; the paper computes L
    # from the data without accounting for it).
    L = float(np.linalg.eigvalsh(u.T @ u / N).max() + 2 * LAM)
    mu = 2 * LAM
    x_star, f_star, gnorm = solve_optimum(u, z, L, mu)
    x0 = np.full(D, 10.0)
    f0 = float(objective(u, z, x0[None, :])[0])
    print(f"data: n={N} d={D} seed={SEED} positives={np.mean(z > 0):.3f} "
          f"L={L:.6g} kappa={L / mu:.6g} F(x0)-F*={f0 - f_star:.6g} "
          f"|grad F(x*)|={gnorm:.2e}", flush=True)

    client = dpopt.Client(args.server, timeout=900).wait_ready(60)

    t_grid = [100, 200] if args.quick else [100, 200, 500, 1000]
    m_grid = [100_000, 1000]
    c_grid = [0.1, 1.0]
    cells = [(a, m, c, T) for a, _ in ALGOS for m in m_grid for c in c_grid for T in t_grid]
    n_jobs = len(cells) * args.runs

    # Import: CSV with the label last, exact decimal round trip of doubles
    # (import_arrays writes every value with %.17g).
    epsilon_budget = float(n_jobs) * EPS + 1
    info = client.import_arrays(
        "accelerated-synthetic", u, z, epsilon_budget=epsilon_budget, delta_budget=0.0,
        budget_filter="basic", relation="add_remove", label_type="binary",
        bounds={"lower": [0.0] * D, "upper": [1.0] * D},
        description="accelerated family synthetic data (Kuru et al. 2022, Sec. 5), "
                    "reproduction setting")
    print(f"imported {info.name}: rows={info.rows} budget eps={epsilon_budget:g} "
          f"(basic composition, add/remove)", flush=True)

    def spec(algo, m, c, T, run):
        common = {"steps": T, "batch_size": 0 if m == N else m, "clip_norm": 2 * C_L1,
                  "smoothness": L, "strong_convexity": mu, "step_scale": c,
                  "initial_point": [10.0] * D}
        return {
            "dataset": info.name, "label": f"{algo} m={m} c={c} T={T} run={run}",
            "model": {"logistic_regression": {"l2": 2 * LAM}},
            "privacy": {"epsilon": EPS},
            "algorithm": {algo: {"common": common}},
            "trace_every": max(1, T // 100), "trace_iterates": True}

    # Submit with at most `window` jobs outstanding; evaluate as they finish.
    todo = [(cell, r) for r in range(args.runs) for cell in cells]
    pending = {}
    errors = {}   # cell -> list of (steps, F - F*) per run
    t_final = {}
    window = 24
    done = 0
    while todo or pending:
        while todo and len(pending) < window:
            cell, r = todo.pop(0)
            job = client.submit(spec(*cell, r), wait=False)
            pending[job.id] = cell
        finished = [j for j in client.jobs(dataset=info.name) if j.id in pending and j.done]
        for j in finished:
            cell = pending.pop(j.id)
            if j.state != dpopt.JobState.SUCCEEDED:
                raise SystemExit(f"job {j.id} {cell} ended JOB_STATE_{j.state.value}: {j.message}")
            res = j.result()
            steps = np.asarray(res.trace["step"])
            xs = res.iterates
            errors.setdefault(cell, []).append((steps, objective(u, z, xs) - f_star))
            t_final[cell] = res.calibration.steps
            done += 1
        if not finished:
            time.sleep(0.5)
        elif done % 100 < len(finished):
            print(f"{done}/{n_jobs} jobs done ({time.monotonic() - t_start:.0f} s)", flush=True)

    b = client.budget(info.name)
    elapsed = time.monotonic() - t_start
    print(f"all {n_jobs} jobs done in {elapsed:.0f} s; ledger: {b.charges} charges, "
          f"epsilon spent {b.epsilon_spent:.6f}", flush=True)

    # Mean curves (arithmetic mean over runs, as in the paper's figures).
    curves = {}
    for cell, rs in errors.items():
        steps = rs[0][0]
        assert all(np.array_equal(s, steps) for s, _ in rs)
        e = np.array([v for _, v in rs])
        curves[cell] = (steps, e.mean(axis=0), e[:, -1].std(ddof=1) if len(rs) > 1 else 0.0)

    write_table(args, curves, t_final, t_grid, m_grid, c_grid, L, f0 - f_star, b, n_jobs, elapsed)
    plot(args, curves, t_grid, m_grid, c_grid)


def write_table(args, curves, t_final, t_grid, m_grid, c_grid, L, gap0, b, n_jobs, elapsed):
    lines = ["# Accelerated reproduction: final errors F(x_T) - F*", "",
             f"Mean over {args.runs} runs (± sample std of the final error); "
             "-opt cells also give T_final. Generated by `experiments/accelerated/run.sh`.", "",
             f"Data: n = {N}, d = {D}, seed {SEED}; L = {L:.6g}, mu = {2 * LAM}, "
             f"F(x0) - F* = {gap0:.4g}. eps = {EPS} per job (pure DP, add/remove, "
             "Poisson sampling at m/n, L1 clip 40, so every b_t equals the paper's S1 = 40 value).",
             f"Ledger after the grid: {b.charges} charges, epsilon spent {b.epsilon_spent:.6f} "
             f"({n_jobs} jobs x {EPS}). Wall time {elapsed / 60:.1f} min.", ""]
    for m in m_grid:
        for c in c_grid:
            lines += [f"## m = {m}, c = {c}", "",
                      "| algorithm | " + " | ".join(f"T = {T}" for T in t_grid) + " |",
                      "|---|" + "---|" * len(t_grid)]
            for algo, label in ALGOS:
                row = []
                for T in t_grid:
                    _, mean, sd = curves[(algo, m, c, T)]
                    s = f"{mean[-1]:.4g} ± {sd:.2g}"
                    if algo.endswith("_opt"):
                        s += f" (T_final {t_final[(algo, m, c, T)]})"
                    row.append(s)
                lines.append(f"| {label} | " + " | ".join(row) + " |")
            lines.append("")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines))


def plot(args, curves, t_grid, m_grid, c_grid):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for fig_no, m in ((3, 100_000), (4, 1000)):
        fig, axes = plt.subplots(4, 3, figsize=(13, 14), sharex=True)
        for block, c in enumerate(c_grid):
            for i, (algo, label) in enumerate(ALGOS):
                ax = axes[2 * block + i // 3][i % 3]
                for T in t_grid:
                    steps, mean, _ = curves[(algo, m, c, T)]
                    ax.semilogy(steps, mean, color=COLORS[T], label=f"T = {T}", lw=1.2)
                ax.set_ylim(1e-3, 1e2)
                ax.set_xlim(0, 1000)
                ax.set_title(f"{label}, c = {c}")
                ax.grid(True, which="major", alpha=0.3)
                if i % 3 == 0:
                    ax.set_ylabel("F(x_t) - F*")
                if block == 1 and i >= 3:
                    ax.set_xlabel("t")
        axes[0][0].legend(loc="lower left", fontsize=8)
        fig.suptitle(f"Fig. {fig_no} layout: m = {m}, eps = {EPS}, mean of {args.runs} runs")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"fig{fig_no}_m{m}.png"), dpi=90)
        plt.close(fig)


if __name__ == "__main__":
    main()
