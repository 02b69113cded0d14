#!/usr/bin/python3
"""DP-SGD on Adult with the dpopt Python client: fit, plot, compare two epsilons.

A notebook-style script (the `# %%` cells run one by one in Jupyter, VS Code
or Spyder). It needs a running dpopt-server holding the private dataset
`adult` (data/adult/a9a) and the public `adult-test` (a9a.t), as in the
README's user flow, and a token ($DPOPT_TOKEN, or ~/.config/dpopt/token).

    PYTHONPATH=build/python/site DPOPT_SERVER=127.0.0.1:50051 \
        examples/python/dpsgd_adult.py --out /tmp

Spends epsilon 0.25 and then 1 (delta 1e-6) of `adult`'s budget; prints the
estimate before each job, the accuracy on the public test set after it, the
caller's ledger, and writes dpsgd_adult_trace.png.
"""
# %% Setup
import argparse
import os

import dpopt

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--server", default=None, help="HOST:PORT (default $DPOPT_SERVER)")
ap.add_argument("--dataset", default="adult")
ap.add_argument("--eval-dataset", default="adult-test")
ap.add_argument("--epsilons", default="0.25,1", help="comma-separated (default 0.25,1)")
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--out", default=".", help="folder for dpsgd_adult_trace.png")
args = ap.parse_args()

client = dpopt.Client(args.server)
print(client.whoami())

# %% What is there, and how much budget is left
for d in client.datasets():
    print(f"{d.name:12s} rows={d.rows:6d} dim={d.dimension:4d} "
          + ("public" if d.public else
             f"epsilon spent {d.budget.epsilon_spent:.3f} of {d.budget.epsilon_total:g}"))

# %% One spec per epsilon, priced before anything is spent
def dpsgd_spec(epsilon):
    return dpopt.spec(
        args.dataset,
        model=dpopt.models.logistic_regression(l2=1e-4),
        algorithm=dpopt.algorithms.dp_sgd(sampling_rate=0.01, steps=args.steps,
                                          clip_norm=1.0, learning_rate=0.5),
        epsilon=epsilon, delta=1e-6, evaluate_on=args.eval_dataset,
        label=f"example dp-sgd eps={epsilon:g}")


epsilons = [float(e) for e in args.epsilons.split(",")]
for eps in epsilons:
    est = client.estimate(dpsgd_spec(eps))
    print(f"estimate epsilon = {eps:g}: noise multiplier {est.calibration.noise_multiplier:.3f}, "
          f"cost {est.cost.epsilon:.4f} ({est.cost.accountant}), remaining after "
          f"{est.budget_after.epsilon_remaining:.3f}, admissible {est.admissible}")

# %% Fit (a progress bar follows each job when tqdm is installed)
results = {}
for eps in epsilons:
    job = client.submit(dpsgd_spec(eps))
    results[eps] = job.result()
    ev = results[eps].evaluation
    print(f"epsilon = {eps:g}: job {job.id} {job.state}, accuracy on {ev.dataset} "
          f"{ev.accuracy:.4f}, loss {ev.loss:.4f}, |w| = {(results[eps].weights ** 2).sum() ** 0.5:.3f}")

# %% Plot the privatized traces side by side
import matplotlib  # noqa: E402

if not os.environ.get("DISPLAY"):
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
panels = [("public_accuracy", "accuracy on the public test set"),
          ("public_loss", "loss on the public test set"),
          ("iterate_norm", "iterate norm"),
          ("noisy_gradient_norm", "noisy gradient norm")]
for ax, (col, title) in zip(axes.flat, panels):
    for eps, res in results.items():
        ax.plot(res.trace["step"], res.trace[col], label=f"epsilon = {eps:g}")
    ax.set_title(title)
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("step")
axes[0][0].legend()
fig.suptitle(f"DP-SGD on {args.dataset} (delta = 1e-6), privatized traces")
fig.tight_layout()
path = os.path.join(args.out, "dpsgd_adult_trace.png")
fig.savefig(path, dpi=90)
print("wrote", path)

# %% The ledger: what was charged (analysts see their own charges)
ledger = client.ledger(args.dataset)
print(ledger.to_pandas().tail(len(epsilons)).to_string(index=False))
print(f"budget: spent {ledger.budget.epsilon_spent:.4f}, "
      f"remaining {ledger.budget.epsilon_remaining:.4f} of {ledger.budget.epsilon_total:g}")
client.close()
