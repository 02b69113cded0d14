#!/usr/bin/env python3
"""Tables (mean/std of accuracy and objective) and Figs. 3/4-style plots."""
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

out = sys.argv[1]
d = json.load(open(os.path.join(out, "results.json")))
res, ref = d["results"], d["summary"]["reference"]
algos = ["dp_blsgd", "dp_blsgd_ac", "dp_blgd", "dp_sgd", "dp_gd"]
names = {"dp_blsgd": "DP-BLSGD", "dp_blsgd_ac": "DP-BLSGD-AC", "dp_blgd": "DP-BLGD",
         "dp_sgd": "DP-SGD", "dp_gd": "DP-GD"}
datasets = sorted({r["dataset"] for r in res}, key=["adult", "bank", "ipums-br"].index)
epsilons = sorted({r["epsilon"] for r in res})
lines = ["# Line-search reproduction: mean (std) over repetitions", ""]
for metric in ("accuracy", "objective"):
    for kind in ("logistic", "svm"):
        for ds in datasets:
            lines.append(f"## {metric}, {ds}, {kind}")
            lines.append("")
            lines.append("| algorithm | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |")
            lines.append("|---" * (len(epsilons) + 1) + "|")
            for a in algos:
                cells = []
                for e in epsilons:
                    rs = [r for r in res if r["dataset"] == ds and r["model"] == kind
                          and r["algo"] == a and r["epsilon"] == e]
                    ok = [r[metric] for r in rs if metric in r]
                    if ok:
                        cells.append(f"{np.mean(ok):.4f} ({np.std(ok):.4f})"
                                     + ("" if len(ok) == len(rs) else f" [{len(ok)}/{len(rs)}]"))
                    elif rs:
                        cells.append("refused")
                    else:
                        cells.append("-")
                lines.append(f"| {names[a]} | " + " | ".join(cells) + " |")
            rf = ref[f"{ds}/{kind}"]
            key = "nonprivate_accuracy" if metric == "accuracy" else "nonprivate_objective"
            lines.append(f"| NON-PRIVATE | {rf[key]:.4f} (all eps) |")
            if metric == "accuracy":
                lines.append(f"| MAJORITY | {rf['majority_accuracy_test']:.4f} on the test split "
                             f"({rf['majority_accuracy_full']:.4f} on all rows) |")
            lines.append("")
refused = [r for r in res if r["state"] != "JOB_STATE_SUCCEEDED"]
lines.append(f"Jobs: {len(res)}, not succeeded: {len(refused)}")
for r in refused[:5]:
    lines.append(f"- {r['dataset']} {r['model']} {r['algo']} eps={r['epsilon']}: {r['state']} {r['message']}")
steps = {}
for r in res:
    if r["state"] == "JOB_STATE_SUCCEEDED":
        steps.setdefault(r["algo"], []).append(r["steps_done"])
lines.append("")
lines.append("Mean outer iterations run (line-search methods: budget-determined): " +
             ", ".join(f"{names[a]} {np.mean(v):.1f}" for a, v in steps.items()))
open(os.path.join(out, "tables.md"), "w").write("\n".join(lines) + "\n")

for kind, fig in (("logistic", "fig3_logistic"), ("svm", "fig4_svm")):
    for metric in ("accuracy", "objective"):
        f, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4))
        axes = np.atleast_1d(axes)
        for ax, ds in zip(axes, datasets):
            for a in algos:
                xs, ys, es = [], [], []
                for e in epsilons:
                    ok = [r[metric] for r in res if r["dataset"] == ds and r["model"] == kind
                          and r["algo"] == a and r["epsilon"] == e and metric in r]
                    if ok:
                        xs.append(e); ys.append(np.mean(ok)); es.append(np.std(ok))
                if xs:
                    ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=names[a])
            rf = ref[f"{ds}/{kind}"]
            if metric == "accuracy":
                ax.axhline(rf["nonprivate_accuracy"], color="k", ls="--", label="NON-PRIVATE")
                ax.axhline(rf["majority_accuracy_test"], color="gray", ls=":", label="MAJORITY")
            else:
                ax.axhline(rf["nonprivate_objective"], color="k", ls="--", label="NON-PRIVATE")
            ax.set_xscale("log")
            ax.set_xticks(epsilons)
            ax.set_xticklabels([f"{e:g}" for e in epsilons])
            ax.set_xlabel("epsilon (delta = 1e-8)")
            ax.set_ylabel(metric)
            ax.set_title(f"{ds}, {'logistic regression' if kind == 'logistic' else 'SVM'}")
        axes[0].legend(fontsize=8)
        f.tight_layout()
        f.savefig(os.path.join(out, f"{fig}_{metric}.png"), dpi=100)
        plt.close(f)
print(open(os.path.join(out, "tables.md")).read()[:3000])
