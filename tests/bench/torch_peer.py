#!/usr/bin/python3
"""PyTorch peer of dpopt's DP-SGD for the benchmark (scripts/bench.sh).

DP-SGD the way Opacus runs it, written out in plain PyTorch (Opacus is not in
Debian): Poisson sampling of each batch (one uniform per row and step, as
Opacus's UniformWithReplacementSampler does), a forward pass through
nn.Linear, per-sample gradients from the hooked activations and backprops
(Opacus's grad sampler for nn.Linear: einsum("n...i,n...j->nij", backprops,
activations)), per-sample L2 clipping with factor min(1, C / (||g_i|| +
1e-6)), the clipped sum plus N(0, (z C)^2) noise, divided by the expected
batch size q n, and an SGD step. The model is dpopt's: logistic regression
without bias, L2 weight 1e-4 added to the gradient. float32 (PyTorch's
default, what Opacus users run). `--mode nonprivate` is the plain minibatch
loop (shuffled batches of the expected batch size, autograd mean loss).

Prints one JSON object: seconds per step and per epoch (1/q steps) of the
timed loop (data loading excluded), and the final training loss.

    torch_peer.py --libsvm data/adult/a9a --dimension 123 --q 0.01 --steps 2000
    torch_peer.py --npy /tmp/dense.npy --q 0.001 --steps 1000
"""
import argparse
import json
import time

import numpy as np
import torch


def load_libsvm(path, d):
    rows, labels = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            labels.append(1.0 if float(parts[0]) > 0 else -1.0)
            x = np.zeros(d, dtype=np.float32)
            for tok in parts[1:]:
                j, v = tok.split(":")
                j = int(j) - 1
                if 0 <= j < d:
                    x[j] = float(v)
            rows.append(x)
    return np.stack(rows), np.array(labels, dtype=np.float32)


def load(args):
    if args.libsvm:
        x, y = load_libsvm(args.libsvm, args.dimension)
    else:
        data = np.load(args.npy, mmap_mode="r")
        n = args.rows or data.shape[0]
        x = np.ascontiguousarray(data[:n, :-1], dtype=np.float32)
        y = np.where(data[:n, -1] > 0, 1.0, -1.0).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


def logistic_loss(scores, y):
    # log(1 + exp(-y s)), numerically stable.
    return torch.nn.functional.softplus(-y * scores)


def run_dp(x, y, args):
    n, d = x.shape
    model = torch.nn.Linear(d, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    captured = {}
    model.register_forward_hook(lambda m, inp, out: captured.__setitem__("a", inp[0].detach()))
    model.register_full_backward_hook(
        lambda m, gin, gout: captured.__setitem__("b", gout[0].detach()))
    expected_batch = args.q * n
    gen = torch.Generator().manual_seed(args.seed)
    start = time.perf_counter()
    for _ in range(args.steps):
        mask = torch.rand(n, generator=gen) < args.q  # Poisson sampling
        idx = mask.nonzero(as_tuple=True)[0]
        xb, yb = x[idx], y[idx]
        model.zero_grad(set_to_none=True)
        if len(idx) > 0:
            scores = model(xb).squeeze(1)
            logistic_loss(scores, yb).sum().backward()
            a, b = captured["a"], captured["b"]
            grad_sample = torch.einsum("n...i,n...j->nij", b, a)  # n x 1 x d
            norms = grad_sample.reshape(len(idx), -1).norm(2, dim=1)
            factor = (args.clip / (norms + 1e-6)).clamp(max=1.0)
            summed = torch.einsum("i,i...", factor, grad_sample)
        else:
            summed = torch.zeros_like(model.weight)
        noise = torch.normal(0.0, args.z * args.clip, size=summed.shape, generator=gen)
        grad = (summed + noise) / expected_batch + 1e-4 * model.weight.detach()
        with torch.no_grad():
            model.weight -= args.lr * grad
    elapsed = time.perf_counter() - start
    return elapsed, model


def run_nonprivate(x, y, args):
    n, d = x.shape
    model = torch.nn.Linear(d, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=1e-4)
    batch = max(1, int(round(args.q * n)))
    gen = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(n, generator=gen)
    pos = 0
    start = time.perf_counter()
    for _ in range(args.steps):
        if pos + batch > n:
            perm = torch.randperm(n, generator=gen)
            pos = 0
        idx = perm[pos:pos + batch]
        pos += batch
        opt.zero_grad(set_to_none=True)
        logistic_loss(model(x[idx]).squeeze(1), y[idx]).mean().backward()
        opt.step()
    elapsed = time.perf_counter() - start
    return elapsed, model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--libsvm", help="LIBSVM file (labels -1/+1 or 0/1)")
    src.add_argument("--npy", help="n x (d+1) float array, label last")
    ap.add_argument("--rows", type=int, default=0, help="use the first ROWS rows of --npy")
    ap.add_argument("--dimension", type=int, default=123)
    ap.add_argument("--q", type=float, default=0.01, help="sampling rate")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--z", type=float, default=1.0, help="noise multiplier")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=("dp", "nonprivate"), default="dp")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x, y = load(args)
    run = run_dp if args.mode == "dp" else run_nonprivate
    elapsed, model = run(x, y, args)
    with torch.no_grad():
        loss = float(logistic_loss(model(x).squeeze(1), y).mean())
    step = elapsed / args.steps
    print(json.dumps({
        "mode": args.mode, "rows": int(x.shape[0]), "dimension": int(x.shape[1]),
        "q": args.q, "steps": args.steps, "threads": args.threads,
        "torch": torch.__version__, "seconds": elapsed, "step_seconds": step,
        "epoch_seconds": step / args.q, "train_loss": loss}))


if __name__ == "__main__":
    main()
