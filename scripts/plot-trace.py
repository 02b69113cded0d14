#!/usr/bin/python3
"""Plots a job's privatized trace from `dpopt job result ID --output FILE`.

usage: scripts/plot-trace.py RESULT.json [OUT.png]

Draws, against the step: the public-evaluation loss and accuracy of the
privatized iterates (when the job had `evaluate_on`), the norm of the
privatized iterate and of the noisy gradient. Everything plotted is
post-processing of privatized values or public data.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    with open(argv[1]) as f:
        result = json.load(f)
    out = argv[2] if len(argv) > 2 else argv[1].rsplit(".", 1)[0] + "-trace.png"
    trace = result.get("trace", [])
    if not trace:
        print("no trace points in", argv[1], file=sys.stderr)
        return 1
    steps = [int(t.get("step", 0)) for t in trace]
    has_eval = any(t.get("has_public_eval") for t in trace)
    panels = 2 if has_eval else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0][0]
    ax.plot(steps, [t.get("iterate_norm", 0) for t in trace], label="|w| (privatized)")
    ax.plot(steps, [t.get("noisy_gradient_norm", 0) for t in trace],
            label="|noisy gradient|", alpha=0.6)
    ax.set_xlabel("step")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("privatized iterates")
    if has_eval:
        ev = [t for t in trace if t.get("has_public_eval")]
        ax = axes[0][1]
        s = [int(t.get("step", 0)) for t in ev]
        ax.plot(s, [t.get("public_loss", 0) for t in ev], label="loss", color="C3")
        ax.set_xlabel("step")
        ax.set_ylabel("loss on public data", color="C3")
        ax2 = ax.twinx()
        ax2.plot(s, [t.get("public_accuracy", 0) for t in ev], label="accuracy",
                 color="C2")
        ax2.set_ylabel("accuracy on public data", color="C2")
        name = result.get("evaluation", {}).get("dataset", "public data")
        ax.set_title("evaluation on " + name)
    cost = result.get("cost", {})
    if cost.get("charged"):
        fig.suptitle("job %s: epsilon %.4g at delta %.3g (%s)" % (
            result.get("job_id", "?"), cost.get("epsilon", 0),
            cost.get("delta", 0), cost.get("accountant", "")))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
