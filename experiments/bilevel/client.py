"""The bilevel experiments' view of dpopt: a batch runner over the dpopt
Python package (clients/python, imported as `dpopt`).

Everything goes through the public API via `dpopt.Client` (token, channel,
stubs, error mapping); this module only adds what the experiments need on
top: importing numpy arrays with the experiments' defaults, and running
many jobs with a bounded number in flight, returning plain records.
"""
import time

import dpopt


class Client:
    def __init__(self, server, token_file=None):
        # Large released traces: dpopt.Client's channel already allows
        # large messages.
        self.api = dpopt.Client(server, token_file=token_file or None, timeout=300)
        self.api.wait_ready(timeout=60)

    def import_dense(self, name, x, y, public, label_type="real",
                     relation="add_remove", epsilon_budget=1e9, delta_budget=0.5,
                     row_norm_bound=0.0):
        """Curator: imports rows x (n x d) with labels y (CSV, exact doubles)."""
        header = dict(public=public, label_type=label_type,
                      description="bilevel experiment data")
        if row_norm_bound > 0:
            header["bounds"] = {"row_norm_bound": row_norm_bound}
        if not public:
            header.update(epsilon_budget=epsilon_budget, delta_budget=delta_budget,
                          relation=relation)
        return self.api.import_arrays(name, x, y, **header)

    def import_libsvm(self, name, path, dimension, public, epsilon_budget=1e9,
                      delta_budget=0.5):
        header = dict(format="libsvm", dimension=dimension, public=public,
                      label_type="binary")
        if not public:
            header.update(epsilon_budget=epsilon_budget, delta_budget=delta_budget)
        return self.api.import_dataset(name, path, **header)

    def estimate(self, spec_dict):
        return self.api.estimate(spec_dict)

    def run(self, specs, inflight_max=40, progress=None):
        """Submits every spec (dicts), keeps <= inflight_max queued, waits,
        returns one record per spec (same order). A refused submission gives
        {"state": "REFUSED:<gRPC code>", "message": ...}."""
        out = [None] * len(specs)
        pending = list(range(len(specs)))
        inflight = []
        done = 0
        while pending or inflight:
            while pending and len(inflight) < inflight_max:
                k = pending.pop(0)
                try:
                    job = self.api.submit(specs[k], wait=False)
                except dpopt.DpoptError as e:
                    out[k] = {"state": "REFUSED:" + e.code_name, "message": e.message}
                    done += 1
                    continue
                inflight.append((k, job))
            still = []
            for k, job in inflight:
                job.refresh()
                if not job.done:
                    still.append((k, job))
                    continue
                state = "JOB_STATE_" + job.state.name
                rec = {"state": state, "message": job.message, "job_id": job.id}
                if state == "JOB_STATE_SUCCEEDED":
                    r = job.result()
                    rec["weights"] = [float(v) for v in r.weights.ravel()]
                    rec["released"] = {k2: [float(v) for v in vals]
                                       for k2, vals in r.released.items()}
                    rec["cost_epsilon"] = r.cost.epsilon
                    rec["charged"] = r.cost.charged
                    if r.evaluation is not None and r.proto.HasField("evaluation"):
                        rec["accuracy"] = r.evaluation.accuracy
                        rec["loss"] = r.evaluation.loss
                out[k] = rec
                done += 1
                if progress:
                    progress(done, len(specs))
            inflight = still
            if inflight:
                time.sleep(0.02)
        return out
