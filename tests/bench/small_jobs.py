#!/usr/bin/python3
"""Small jobs end to end from one Python client process (run by bench.py).

Submits --jobs 10-step `dp_gd` jobs on --dataset one after the other, each
waited for (`wait=True`) and its result fetched (`result()`), and prints one
JSON line: the submit-to-result seconds of every job and the wall time.
bench.py runs one such process for the latency figures and several at once
for the throughput figure (processes, so the Python client is not the limit).
The token comes from the DPOPT_TOKEN environment variable.
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--server", required=True, help="loopback address:port")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build_dir), "python", "site"))
    import dpopt

    client = dpopt.Client(args.server, os.environ["DPOPT_TOKEN"])
    client.wait_ready()
    spec = dpopt.spec(args.dataset, model=dpopt.models.logistic_regression(l2=1e-4),
                      algorithm=dpopt.algorithms.dp_gd(steps=10, clip_norm=1.0,
                                                       learning_rate=0.5),
                      epsilon=0.1, delta=1e-7, label="bench small job")
    seconds = []
    start = None
    for i in range(args.warmup + args.jobs):
        if i == args.warmup:
            start = time.perf_counter()
        t0 = time.perf_counter()
        job = client.submit(spec, wait=True, progress=False, timeout=600)
        job.result(timeout=600)
        if i >= args.warmup:
            seconds.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": seconds, "wall": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
