"""Thin dpopt gRPC client for the seed-000 experiments (analyst + curator).

Talks only to the public API (proto/dpopt/v1). If the server wrote a curator
token next to its database (<db>.curator-token, access control of issue 14),
every call sends it as `authorization: Bearer <token>`.
"""
import os
import sys
import time

import grpc


class Client:
    def __init__(self, stubs, server, token_file=None):
        sys.path.insert(0, stubs)
        from dpopt.v1 import dpopt_pb2, dpopt_pb2_grpc, job_spec_pb2  # noqa
        from google.protobuf import json_format
        self.pb = dpopt_pb2
        self.spec_pb = job_spec_pb2
        self.json_format = json_format
        self.channel = grpc.insecure_channel(
            server, options=[("grpc.max_receive_message_length", 1 << 28)])
        self.datasets = dpopt_pb2_grpc.DatasetServiceStub(self.channel)
        self.jobs = dpopt_pb2_grpc.JobServiceStub(self.channel)
        self.budget = dpopt_pb2_grpc.BudgetServiceStub(self.channel)
        self.metadata = ()
        if token_file and os.path.exists(token_file):
            with open(token_file) as f:
                self.metadata = (("authorization", "Bearer " + f.read().strip()),)

    def import_dense(self, name, x, y, public, label_type="REAL",
                     relation="ADD_REMOVE", epsilon_budget=1e9, delta_budget=0.5,
                     row_norm_bound=0.0):
        """Curator: imports rows x (n x d) with labels y as CSV."""
        pb = self.pb
        lines = []
        for row, lab in zip(x, y):
            lines.append(",".join(repr(float(v)) for v in row) + "," + repr(float(lab)))
        data = ("\n".join(lines) + "\n").encode()
        header = pb.ImportHeader(
            name=name, format=pb.DATASET_FORMAT_CSV, dimension=x.shape[1],
            public=public, label_last=True,
            label_type=getattr(pb, "LABEL_TYPE_" + label_type),
            description="seed-000 experiment data")
        if row_norm_bound > 0:
            header.bounds.row_norm_bound = row_norm_bound
        if not public:
            header.epsilon_budget = epsilon_budget
            header.delta_budget = delta_budget
            header.relation = getattr(pb, relation)

        def reqs():
            yield pb.ImportDatasetRequest(header=header)
            for i in range(0, len(data), 1 << 20):
                yield pb.ImportDatasetRequest(chunk=data[i:i + (1 << 20)])
        return self.datasets.ImportDataset(reqs(), timeout=900,
                                           metadata=self.metadata)

    def import_libsvm(self, name, path, dimension, public, epsilon_budget=1e9,
                      delta_budget=0.5):
        pb = self.pb
        with open(path, "rb") as f:
            data = f.read()
        header = pb.ImportHeader(name=name, format=pb.DATASET_FORMAT_LIBSVM,
                                 dimension=dimension, public=public,
                                 label_type=pb.LABEL_TYPE_BINARY)
        if not public:
            header.epsilon_budget = epsilon_budget
            header.delta_budget = delta_budget

        def reqs():
            yield pb.ImportDatasetRequest(header=header)
            for i in range(0, len(data), 1 << 20):
                yield pb.ImportDatasetRequest(chunk=data[i:i + (1 << 20)])
        return self.datasets.ImportDataset(reqs(), timeout=900,
                                           metadata=self.metadata)

    def spec(self, d):
        return self.json_format.ParseDict(d, self.spec_pb.JobSpec())

    def estimate(self, spec_dict):
        return self.jobs.EstimateJob(self.pb.EstimateJobRequest(
            spec=self.spec(spec_dict)), timeout=120, metadata=self.metadata)

    def run(self, specs, inflight_max=40, progress=None):
        """Submits every spec (dicts), keeps <= inflight_max queued, waits,
        returns one record per spec (same order)."""
        pb = self.pb
        out = [None] * len(specs)
        pending = list(range(len(specs)))
        inflight = []
        done = 0
        while pending or inflight:
            while pending and len(inflight) < inflight_max:
                k = pending.pop(0)
                try:
                    job = self.jobs.SubmitJob(
                        pb.SubmitJobRequest(spec=self.spec(specs[k])),
                        timeout=300, metadata=self.metadata)
                except grpc.RpcError as e:
                    out[k] = {"state": "REFUSED:" + e.code().name,
                              "message": e.details()}
                    done += 1
                    continue
                inflight.append((k, job.id))
            still = []
            for k, jid in inflight:
                j = self.jobs.GetJob(pb.GetJobRequest(id=jid), timeout=60,
                                     metadata=self.metadata)
                state = pb.JobState.Name(j.state)
                if state in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING"):
                    still.append((k, jid))
                    continue
                rec = {"state": state, "message": j.message, "job_id": jid}
                if state == "JOB_STATE_SUCCEEDED":
                    r = self.jobs.GetJobResult(pb.GetJobResultRequest(id=jid),
                                               timeout=120,
                                               metadata=self.metadata)
                    rec["weights"] = list(r.model.weights)
                    rec["released"] = {o.name: list(o.values) for o in r.released}
                    rec["cost_epsilon"] = r.cost.epsilon
                    rec["charged"] = r.cost.charged
                    if r.HasField("evaluation"):
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
