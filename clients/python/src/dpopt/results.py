"""Typed views of the server's replies.

Each class is a frozen dataclass with the message's fields (proto field
names), plus ``proto``: the message itself, for anything not surfaced here.
Timestamps are timezone-aware ``datetime`` objects (UTC) or None.
Everything here is what the API releases: privatized outputs and public
metadata (docs/architecture.md, invariant "nothing unprivatized leaves the
server"); nothing is computed from private rows client-side.
"""

import dataclasses
import datetime
import enum
import json
from typing import Any, Dict, List, Optional

import numpy as np

from dpopt.v1 import dpopt_pb2


class JobState(str, enum.Enum):
    """A job's state; compares equal to its name (``state == "SUCCEEDED"``)."""

    UNSPECIFIED = "UNSPECIFIED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    # Waiting for a curator's approval (the grant's approval threshold);
    # not charged.
    PENDING_APPROVAL = "PENDING_APPROVAL"
    # Rejected by a curator, or expired while waiting; nothing charged.
    REJECTED = "REJECTED"

    @classmethod
    def from_proto(cls, value):
        return cls(dpopt_pb2.JobState.Name(value).replace("JOB_STATE_", ""))

    @property
    def terminal(self):
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED,
                        JobState.REJECTED)

    def __str__(self):
        return self.value


def _time(ts):
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return datetime.datetime.fromtimestamp(ts.seconds + ts.nanos * 1e-9,
                                           tz=datetime.timezone.utc)


def _event(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _enum_name(enum_type, value, prefix):
    return enum_type.Name(value).replace(prefix, "").lower()


@dataclasses.dataclass(frozen=True)
class Budget:
    """A dataset's privacy budget under its filter, at its delta.

    ``caller_epsilon_cap``/``caller_epsilon_spent``: an analyst's cap on this
    dataset and its own spend (0 without a cap).
    """

    dataset: str
    epsilon_total: float
    delta_total: float
    epsilon_spent: float
    epsilon_remaining: float
    filter: str  # "rdp" or "basic"
    accounting: str
    charges: int
    caller_epsilon_cap: float
    caller_epsilon_spent: float
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, b):
        flt = "basic" if b.filter == dpopt_pb2.BUDGET_FILTER_BASIC else "rdp"
        return cls(b.dataset, b.epsilon_total, b.delta_total, b.epsilon_spent,
                   b.epsilon_remaining, flt, b.accounting, b.charges,
                   b.caller_epsilon_cap, b.caller_epsilon_spent, b)


@dataclasses.dataclass(frozen=True)
class RankShard:
    """One rank's shard of a dataset placed on the server's worker pool."""

    rank: int
    host: str
    rows: int
    ok: bool

    @classmethod
    def from_proto(cls, s):
        return cls(s.rank, s.host, s.rows, s.ok)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a dataset is placed on the server's MPI worker pool
    (:meth:`dpopt.Client.place_dataset`)."""

    name: str
    ranks: int
    shards: List[RankShard]
    placed_at: Optional[datetime.datetime]
    # Whether the server's pool has this many ranks now (jobs run on the
    # placement only then). Always True right after placing.
    current: bool
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_place_reply(cls, r):
        shards = [RankShard.from_proto(s) for s in r.shards]
        return cls(r.name, len(shards), shards, _time(r.placed_at), True, r)

    @classmethod
    def from_dataset(cls, name, p):
        return cls(name, p.ranks, [RankShard.from_proto(s) for s in p.shards],
                   _time(p.placed_at), p.current, p)


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Public metadata of a dataset (never row values)."""

    name: str
    rows: int
    dimension: int
    public: bool
    sparse: bool
    label_type: str
    num_classes: int
    relation: str
    description: str
    feature_names: List[str]
    created_at: Optional[datetime.datetime]
    budget: Optional[Budget]  # None for public datasets
    proto: Any = dataclasses.field(repr=False, compare=False)
    # A public dummy: the private dataset whose dry runs read it; a private
    # dataset: its dummy's name ("" when none).
    dummy_for: str = ""
    dummy_dataset: str = ""
    # Set when the dataset is placed on the server's worker pool.
    placement: Optional[Placement] = None

    @classmethod
    def from_proto(cls, d):
        return cls(
            d.name, d.rows, d.dimension, d.public, d.sparse,
            _enum_name(dpopt_pb2.LabelType, d.label_type, "LABEL_TYPE_"),
            d.num_classes,
            _enum_name(dpopt_pb2.NeighbouringRelation, d.relation, "NEIGHBOURING_RELATION_"),
            d.description, list(d.feature_names), _time(d.created_at),
            Budget.from_proto(d.budget) if d.HasField("budget") else None, d,
            d.dummy_for, d.dummy_dataset,
            Placement.from_dataset(d.name, d.placement) if d.HasField("placement") else None)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Public parameters the server calibrated for a job.

    ``noise_stddev`` is the standard deviation of the noise added to each
    coordinate of the vector the job privatizes, at its first noisy release
    and before any averaging: for gradient jobs the clipped gradient SUM
    (about ``noise_multiplier * clip_norm``; divide by ``expected_batch_size``
    for the averaged gradient's). 0 for jobs without additive noise
    (exponential mechanisms, non-private jobs). ``Calibration`` in
    proto/dpopt/v1/dpopt.proto states it for every job type.
    """

    noise_multiplier: float
    noise_stddev: float
    steps: int
    sampling_rate: float
    expected_batch_size: float
    clip_norm: float
    notes: List[str]
    proto: Any = dataclasses.field(repr=False, compare=False)
    # Public upper bound on the job's work (row-coordinate operations).
    work_units: float = 0.0

    @classmethod
    def from_proto(cls, c):
        return cls(c.noise_multiplier, c.noise_stddev, c.steps, c.sampling_rate,
                   c.expected_batch_size, c.clip_norm, list(c.notes), c,
                   c.work_units)


@dataclasses.dataclass(frozen=True)
class Cost:
    """A job's privacy cost. ``event`` is the charged DP event (a dict)."""

    epsilon: float
    delta: float
    accountant: str
    charged: bool
    event: Any
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, c):
        return cls(c.epsilon, c.delta, c.accountant, c.charged, _event(c.event_json), c)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What a job would cost; nothing is charged by estimating."""

    calibration: Calibration
    cost: Cost
    budget_before: Optional[Budget]
    budget_after: Optional[Budget]
    admissible: bool
    message: str
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, e):
        return cls(Calibration.from_proto(e.calibration), Cost.from_proto(e.cost),
                   Budget.from_proto(e.budget_before) if e.HasField("budget_before") else None,
                   Budget.from_proto(e.budget_after) if e.HasField("budget_after") else None,
                   e.admissible, e.message, e)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Loss and accuracy of the released model on a public dataset."""

    dataset: str
    rows: int
    loss: float
    accuracy: float

    @classmethod
    def from_proto(cls, e):
        return cls(e.dataset, e.rows, e.loss, e.accuracy) if e.dataset else None


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One charge: the DP event, its cost when charged, who and when."""

    sequence: int
    dataset: str
    job_id: str
    epsilon: float
    delta: float
    accountant: str
    principal: str
    created_at: Optional[datetime.datetime]
    note: str
    event: Any
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, e):
        return cls(e.sequence, e.dataset, e.job_id, e.epsilon, e.delta, e.accountant,
                   e.principal, _time(e.created_at), e.note, _event(e.event_json), e)


@dataclasses.dataclass(frozen=True)
class Ledger:
    """A dataset's charges, oldest first (analysts see their own only), and
    the budget after them."""

    entries: List[LedgerEntry]
    budget: Optional[Budget]

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def to_pandas(self):
        """The entries as a pandas DataFrame (needs pandas)."""
        import pandas as pd
        cols = ["sequence", "created_at", "principal", "job_id", "epsilon", "delta",
                "accountant", "note"]
        return pd.DataFrame([{c: getattr(e, c) for c in cols} for e in self.entries],
                            columns=cols)


TRACE_COLUMNS = ("step", "iterate_norm", "noisy_gradient_norm", "public_loss",
                 "public_accuracy")


def trace_table(points):
    """Trace points -> dict of numpy arrays (NaN where a point has no public
    evaluation)."""
    out = {c: [] for c in TRACE_COLUMNS}
    for p in points:
        out["step"].append(p.step)
        out["iterate_norm"].append(p.iterate_norm)
        out["noisy_gradient_norm"].append(p.noisy_gradient_norm)
        out["public_loss"].append(p.public_loss if p.has_public_eval else np.nan)
        out["public_accuracy"].append(p.public_accuracy if p.has_public_eval else np.nan)
    return {c: np.asarray(v, dtype=np.int64 if c == "step" else np.float64)
            for c, v in out.items()}


def _frame(table):
    try:
        import pandas as pd
    except ImportError:
        return table
    return pd.DataFrame(table)


@dataclasses.dataclass(frozen=True)
class Result:
    """The privatized output of a finished job.

    Attributes:
        weights: the model as a numpy array, shape ``(dimension,)``, or
            ``(num_classes, dimension)`` for softmax regression.
        trace: the privatized trace as a pandas DataFrame (columns
            :data:`TRACE_COLUMNS`) when pandas is installed, else a dict of
            numpy arrays with the same keys.
        iterates: the traced privatized iterates, shape ``(points,
            parameters)``, when the job asked for ``trace_iterates``; else None.
        released: algorithm-specific privatized outputs by name (e.g. the
            tuned weights of dp_tune_regularization).
        synthetic_data: True for a dry run's result: computed on SYNTHETIC
            data (``synthetic_source`` says which), it says nothing about
            the dataset, and nothing was charged.
    """

    job_id: str
    weights: np.ndarray
    loss: str
    evaluation: Optional[Evaluation]
    cost: Cost
    calibration: Calibration
    trace: Any
    iterates: Optional[np.ndarray]
    released: Dict[str, np.ndarray]
    synthetic_data: bool
    synthetic_source: str
    proto: Any = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, r):
        m = r.model
        w = np.asarray(m.weights, dtype=np.float64)
        if m.num_classes > 2 and m.dimension > 0 and w.size == m.num_classes * m.dimension:
            w = w.reshape(m.num_classes, m.dimension)
        iterates = None
        if any(len(p.iterate) for p in r.trace):
            iterates = np.asarray([list(p.iterate) for p in r.trace], dtype=np.float64)
        released = {o.name: np.asarray(o.values, dtype=np.float64) for o in r.released}
        return cls(r.job_id, w, m.loss, Evaluation.from_proto(r.evaluation),
                   Cost.from_proto(r.cost), Calibration.from_proto(r.calibration),
                   _frame(trace_table(r.trace)), iterates, released,
                   r.synthetic_data, r.synthetic_source, r)


@dataclasses.dataclass(frozen=True)
class Principal:
    name: str
    role: str  # "curator" or "analyst"
    created_at: Optional[datetime.datetime]
    revoked: bool

    @classmethod
    def from_proto(cls, p):
        return cls(p.name, _enum_name(dpopt_pb2.Role, p.role, "ROLE_"),
                   _time(p.created_at), p.revoked)


@dataclasses.dataclass(frozen=True)
class Grant:
    principal: str
    dataset: str
    epsilon_cap: float  # 0 = no cap
    created_at: Optional[datetime.datetime]
    approval_above_epsilon: float = 0.0  # 0 = no approval needed
    approval_timeout_seconds: int = 0

    @classmethod
    def from_proto(cls, g):
        return cls(g.principal, g.dataset, g.epsilon_cap, _time(g.created_at),
                   g.approval_above_epsilon, g.approval_timeout_seconds)
