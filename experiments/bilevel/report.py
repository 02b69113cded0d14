#!/usr/bin/env python3
"""Tables (tables.md) and figures (PNG) from reproduce.py's results/*.json."""
import json
import math
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def load(out, name):
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def med_iqr(v):
    v = np.asarray(v, dtype=float)
    return float(np.median(v)), float(np.quantile(v, 0.25)), float(np.quantile(v, 0.75))


def fmt(v, digits=3):
    m, lo, hi = med_iqr(v)
    return f"{m:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def e1_table(d):
    lines = ["## E1: leak and audit (Example 3.1, lambda 9, eta 0.5, T 1, replace-one)", "",
             "DP jobs per dataset (S and S'): the 'runs' column; "
             "epsilon_LB: threshold audit, half the runs choose the event, half "
             "bound it (Clopper-Pearson, 95%); mu: Gaussian-DP parameter of x_1[0] "
             "estimated from the same runs (its bound sqrt(2 rho) is what the zCDP "
             "charge certifies).", "",
             "| d | n | epsilon | runs | naive: reconstruction error of xi_n | DP: epsilon_LB | DP: mu (+- se) | sqrt(2 rho) | epsilon implied by mu |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        lines.append(f"| {r['d']} | {r['n']} | {r['epsilon']} | {r['runs_per_side']} | "
                     f"{r['naive_reconstruction_error']:.2e} | "
                     f"{r['empirical_epsilon_lb']:.3f} | {r['mu_hat']:.4f} +- {r['mu_hat_se']:.4f} | "
                     f"{r['mu_bound_sqrt_2rho']:.4f} | {r['epsilon_from_mu_hat']:.3f} |")
    return lines


def e2_report(d, out):
    rows = d["rows"]
    lines = ["## E2: synthetic scaling (family Q, X = B(0, 5), T 20, lambda 10, eta 0.5, delta 1/n^2)", "",
             "Median [IQR] of ||G_{F_S,eta}(x_out)|| over the seeds (closed-form "
             "oracle). (i) non-private penalty method (naive mode, public copy); "
             "(ii) outer-only noise with exact inner solves (local numpy reference, "
             "NOT private); (iii) Algorithm 1 (dp_bilevel, practical inner solver, "
             "split thirds); (iv) Algorithm 3 (dp_bilevel_minibatch, b_in = 256, "
             "b_out = 32 or 256).", ""]
    dims = sorted({r["d"] for r in rows if r["method"] != "split"})
    epss = sorted({r["epsilon"] for r in rows if r["method"] != "split"})
    methods = ["ii", "iii", "iv-b32", "iv-b256"]
    lines.append("| d | n | epsilon | (i) | " + " | ".join(f"({m})" for m in methods) + " |")
    lines.append("|---|---|---|---|" + "---|" * len(methods))
    slopes = []
    for dd in dims:
        ns = sorted({r["n"] for r in rows if r["d"] == dd and r["method"] != "split"})
        for n in ns:
            for e in epss:
                cells = []
                np_val = None
                for m in methods:
                    rr = [r for r in rows if r["d"] == dd and r["n"] == n and r["epsilon"] == e
                          and r["method"] == m]
                    if rr:
                        np_val = rr[0]["nonprivate"]
                    cells.append(fmt(rr[0]["grad_mapping"]) if rr else "-")
                lines.append(f"| {dd} | {n} | {e} | {np_val:.2e} | " + " | ".join(cells) + " |")
        for e in epss:
            xs, ys = [], []
            for n in ns:
                rr = [r for r in rows if r["d"] == dd and r["n"] == n and r["epsilon"] == e
                      and r["method"] == "iii"]
                if rr:
                    xs.append(math.log(n))
                    ys.append(math.log(np.median(rr[0]["grad_mapping"])))
            if len(xs) >= 2:
                slopes.append((dd, e, float(np.polyfit(xs, ys, 1)[0])))
    lines += ["", "Fitted log-log slope of the median ||G|| of (iii) against n:", "",
              "| d | epsilon | slope |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c:.3f} |" for a, b, c in slopes]
    split = [r for r in rows if r["method"] == "split"]
    if split:
        lines += ["", f"Budget split sweep (d {split[0]['d']}, n {split[0]['n']}, epsilon "
                  f"{split[0]['epsilon']}):", "", "| (w_out, w_in1, w_in2) | ||G|| median [IQR] |",
                  "|---|---|"]
        lines += ["| (" + ", ".join(f"{w:.3g}" for w in r["split"]) + f") | {fmt(r['grad_mapping'])} |"
                  for r in split]
    fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.5), squeeze=False)
    colors = {0.5: "tab:red", 1.0: "tab:orange", 2.0: "tab:green", 8.0: "tab:blue"}
    styles = {"iii": "-o", "ii": ":x", "iv-b32": "--s", "iv-b256": "-.^"}
    for ax, dd in zip(axes[0], dims):
        ns = sorted({r["n"] for r in rows if r["d"] == dd and r["method"] != "split"})
        for e in epss:
            for m in methods:
                pts = [(r["n"], np.median(r["grad_mapping"])) for r in rows
                       if r["d"] == dd and r["epsilon"] == e and r["method"] == m]
                if len(pts) >= 1:
                    pts.sort()
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[m],
                            color=colors.get(e, "k"), label=f"({m}) eps={e}",
                            alpha=1.0 if m == "iii" else 0.6, markersize=4)
        nps = sorted({(r["n"], r["nonprivate"]) for r in rows if r["d"] == dd and "nonprivate" in r})
        ax.plot([p[0] for p in nps], [p[1] for p in nps], "k-", lw=2, label="(i) non-private")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("||G_{F_S,eta}(x_out)||")
        ax.set_title(f"family Q, dx = dy = {dd}")
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e2_scaling.png"), dpi=110)
    plt.close(fig)
    return lines


def e3_report(d, out):
    rows = d["rows"]
    ref = {r["n"]: r for r in rows if r["method"] == "c"}
    lines = ["## E3: private ridge-regularization tuning (synthetic, d 20, label noise 3)", "",
             "Median [IQR] over seeds. omega* = argmin of the population risk of the "
             "non-private ridge fit on a training half (200-point log grid in "
             "[1e-3, 10]). (a) dp_tune_regularization, outer sigma = 0, split (0, 1/2, "
             "1/2); (a-paper) the paper's outer noise, split thirds; (b) non-private "
             "bilevel penalty method, exact inner solves (local reference); (d) "
             "dp_grid_search, 20 log-spaced weights, report-noisy-min; (e) dp_gd with "
             "fixed omega = 1 on all rows. Risk = 1/2 ||theta - w||^2 + 1/2 sigma^2 "
             "(closed form; Bayes risk 4.5).", ""]
    for n in sorted(ref):
        lines.append(f"n = {n}: omega* = {ref[n]['w_star']:.4g}, risk(omega*) = "
                     f"{ref[n]['risk_star']:.4f}")
    lines.append("")
    lines.append("| n | T | epsilon | method | omega_out | \\|ln omega_out - ln omega*\\| | risk |")
    lines.append("|---|---|---|---|---|---|---|")
    keyed = [r for r in rows if r["method"] != "c"]
    keyed.sort(key=lambda r: (r["n"], r["T"], -1 if r["epsilon"] is None else r["epsilon"], r["method"]))
    for r in keyed:
        e = "-" if r["epsilon"] is None else r["epsilon"]
        lines.append(f"| {r['n']} | {r['T']} | {e} | {r['method']} | {fmt(r['weights'])} | "
                     f"{fmt(r['log_error'])} | {fmt(r['risk'], 4)} |")
    combos = sorted({(r["n"], r["T"]) for r in keyed})
    fig, axes = plt.subplots(2, len(combos), figsize=(5 * len(combos), 8), squeeze=False)
    marks = {"a": "-o", "a-paper": "--s", "d": "-.^", "e": ":x"}
    for j, (n, T) in enumerate(combos):
        for m in ("a", "a-paper", "d", "e"):
            pts = sorted((r["epsilon"], np.median(r["log_error"]), np.median(r["risk"]))
                         for r in keyed if r["n"] == n and r["method"] == m and r["epsilon"] is not None
                         and (r["T"] == T or m in ("d", "e")))
            if not pts:
                continue
            axes[0][j].plot([p[0] for p in pts], [p[1] for p in pts], marks[m], label=m)
            axes[1][j].plot([p[0] for p in pts], [p[2] for p in pts], marks[m], label=m)
        b = [r for r in keyed if r["n"] == n and r["T"] == T and r["method"] == "b"]
        if b:
            axes[0][j].axhline(np.median(b[0]["log_error"]), color="k", ls=":", label="b (non-private)")
            axes[1][j].axhline(np.median(b[0]["risk"]), color="k", ls=":", label="b (non-private)")
        axes[1][j].axhline(ref[n]["risk_star"], color="gray", lw=0.8, label="risk(omega*)")
        for i in range(2):
            axes[i][j].set_xscale("log")
            axes[i][j].set_xlabel("epsilon")
            axes[i][j].legend(fontsize=7)
        axes[0][j].set_ylabel("|ln omega_out - ln omega*|")
        axes[1][j].set_ylabel("population risk")
        axes[1][j].set_yscale("log")
        axes[0][j].set_title(f"n = {n}, T = {T}")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e3_ridge_tuning.png"), dpi=110)
    plt.close(fig)
    return lines


def adult_report(d, out):
    rows = d["rows"]
    lines = ["## E3 on Adult (logistic, tuned L2, delta 1e-6, test accuracy on a9a.t)", "",
             "Median [IQR] over seeds; every job charged the same epsilon. "
             "dp_tune_regularization: 10 outer steps, 30 + 30 inner steps, weights in "
             "[1e-4, 1] from 1e-2; dp_grid_search: 10 log-spaced weights in [1e-4, 1], "
             "30 steps each; fixed: dp_gd, 30 steps, all rows.", "",
             "| epsilon | method | test accuracy | test loss | chosen weight |",
             "|---|---|---|---|---|"]
    for r in rows:
        w = fmt(r["weights"]) if r["weights"] else "-"
        lines.append(f"| {r['epsilon']} | {r['method']} | {fmt(r['accuracy'], 4)} | "
                     f"{fmt(r['loss'], 4)} | {w} |")
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for m in dict.fromkeys(r["method"] for r in rows):
        pts = sorted((r["epsilon"], np.median(r["accuracy"])) for r in rows if r["method"] == m)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=m)
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("test accuracy (a9a.t)")
    ax.legend(fontsize=8)
    ax.set_title("Adult: private L2 tuning vs grid search vs fixed weight")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e3_adult.png"), dpi=110)
    plt.close(fig)
    return lines


def mean_2se(v):
    v = np.asarray(v, dtype=float)
    se = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
    return float(np.mean(v)), 2 * se


def fmt_2se(v, digits=4):
    m, e = mean_2se(v)
    return f"{m:.{digits}f} ± {e:.{digits}f}"


def e4_report(d, out):
    rows = d["rows"]
    meta = d["meta"]
    syn = d.get("datasets", {}).get("synthetic", {})
    lines = ["## E4: one L2 weight per feature group (logistic, delta 1e-6)", "",
             f"Mean ± 2 standard errors over {meta['seeds']} runs per cell (every run a "
             "separate job with fresh server-side noise and split); every job charged the "
             "same epsilon. Adult: ten groups of a9a's attribute blocks, test set a9a.t. "
             "Synthetic: 5,000 private rows, 100 features in ten groups of ten, groups 0-1 "
             "informative (coefficients ±5), groups 2-9 pure noise; 20,000 public test rows "
             f"(Bayes test accuracy {syn.get('bayes_test_accuracy', float('nan')):.4f}). "
             "Tuning jobs: 10 outer steps, 30 + 30 inner steps, weights in [1e-4, 1] from "
             "1e-2, budget split (1/2, 1/2); E3 settings lambda 10, eta 0.05; adjusted "
             "lambda 1, eta 0.2. Grid search: 10 "
             "log-spaced weights, 30 warm-started steps each. Fixed: dp_gd, 30 steps, all "
             "rows. Chosen weights: median over runs of log10 of the released weights "
             "(per group for group tuning).", "",
             "| data | epsilon | method | test accuracy | test loss | log10 chosen weight(s) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if r["weights"]:
            lw = np.median(np.log10(np.asarray(r["weights"], dtype=float)), axis=0)
            w = " ".join(f"{x:.1f}" for x in np.atleast_1d(lw))
        else:
            w = "-"
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['method']} | "
                     f"{fmt_2se(r['accuracy'])} | {fmt_2se(r['loss'])} | {w} |")
    lines.append("")
    # Best fixed weight in hindsight (not a private method: it picks by test
    # accuracy after the fact).
    lines += ["Best fixed weight in hindsight (by mean test accuracy; an upper bound "
              "for any single-weight choice among them, not a private method):", "",
              "| data | epsilon | weight | test accuracy | test loss |", "|---|---|---|---|---|"]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        for e in sorted({r["epsilon"] for r in rows if r["dataset"] == ds}):
            fx = [r for r in rows if r["dataset"] == ds and r["epsilon"] == e
                  and r["method"].startswith("fixed")]
            if fx:
                b = max(fx, key=lambda r: np.mean(r["accuracy"]))
                lines.append(f"| {ds} | {e:g} | {b['method']} | {fmt_2se(b['accuracy'])} | "
                             f"{fmt_2se(b['loss'])} |")
    diag = d.get("direction_diagnostic", [])
    if diag:
        lines += ["", "Synthetic data, the first outer direction d_0 = lambda (R_k(theta^lam_0) - "
                  "R_k(theta_0)) at w_0 = 1e-2 for every group (one outer step, 300 + 300 inner "
                  "steps; d_0 > 0 lowers the weight): mean ± 2 se over runs, averaged over the "
                  "two informative groups and over the eight noise groups; 'sd' is the spread "
                  "of one run's value (mean over the groups of each kind).", "",
                  "| epsilon | lambda | informative: mean d_0 | sd | noise groups: mean d_0 | sd |",
                  "|---|---|---|---|---|---|"]
        for r in diag:
            D = np.asarray(r["directions"], dtype=float)
            inf, noi = D[:, :2].mean(axis=1), D[:, 2:].mean(axis=1)
            sd_inf = float(np.mean(D[:, :2].std(axis=0, ddof=1)))
            sd_noi = float(np.mean(D[:, 2:].std(axis=0, ddof=1)))
            lines.append(f"| {r['epsilon']:g} | {r['penalty']:g} | {fmt_2se(inf, 3)} | "
                         f"{sd_inf:.3f} | {fmt_2se(noi, 3)} | {sd_noi:.3f} |")
    dss = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(dss), figsize=(6.5 * len(dss), 5), squeeze=False)
    for ax, ds in zip(axes[0], dss):
        sub = [r for r in rows if r["dataset"] == ds and not r["method"].startswith("fixed")]
        fx = [r for r in rows if r["dataset"] == ds and r["method"].startswith("fixed")]
        epss = sorted({r["epsilon"] for r in sub})
        names = list(dict.fromkeys(r["method"] for r in sub))
        if fx:
            names.append("best fixed weight (hindsight)")
        width = 0.8 / len(names)
        for k, m in enumerate(names):
            ys, es = [], []
            for e in epss:
                if m.startswith("best fixed"):
                    cand = [r for r in fx if r["epsilon"] == e]
                    r = max(cand, key=lambda r: np.mean(r["accuracy"]))
                else:
                    r = [r for r in sub if r["method"] == m and r["epsilon"] == e][0]
                mu, se2 = mean_2se(r["accuracy"])
                ys.append(mu)
                es.append(se2)
            xs = np.arange(len(epss)) + (k - (len(names) - 1) / 2) * width
            ax.bar(xs, ys, width, yerr=es, capsize=2, label=m)
        ax.set_xticks(np.arange(len(epss)))
        ax.set_xticklabels([f"epsilon = {e:g}" for e in epss])
        lo = min(np.mean(r["accuracy"]) for r in rows if r["dataset"] == ds)
        ax.set_ylim(max(0.0, lo - 0.03), None)
        ax.set_ylabel("test accuracy (mean ± 2 se)")
        ax.set_title(f"E4 {ds}: group weights vs one weight")
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e4_groups.png"), dpi=110)
    plt.close(fig)
    return lines


def main():
    out = sys.argv[1]
    lines = ["# Bilevel experiments: tables", "",
             "Generated by experiments/bilevel/report.py from results/*.json.", ""]
    for name, fn in (("e1", lambda d: e1_table(d)), ("e2", lambda d: e2_report(d, out)),
                     ("e3", lambda d: e3_report(d, out)), ("adult", lambda d: adult_report(d, out)),
                     ("e4", lambda d: e4_report(d, out))):
        d = load(out, name)
        if d is None:
            continue
        lines += fn(d)
        lines += ["", f"({name}: {d['meta']['seconds']:.0f} s)", ""]
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
