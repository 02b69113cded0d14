"""Python client of dpopt, the differentially private optimization service.

Quick start::

    import dpopt
    client = dpopt.Client("127.0.0.1:50051")        # token: $DPOPT_TOKEN, ...
    print(client.datasets())
    print(client.budget("adult"))
    spec = dpopt.spec("adult",
                      model=dpopt.models.logistic_regression(l2=1e-4),
                      algorithm=dpopt.algorithms.dp_sgd(
                          sampling_rate=0.01, steps=2000, clip_norm=1.0, learning_rate=0.5),
                      epsilon=1.0, delta=1e-6, evaluate_on="adult-test")
    print(client.estimate(spec))                     # charges nothing
    job = client.submit(spec)                        # waits, with a progress bar
    result = job.result()                            # numpy weights, trace DataFrame
    print(client.ledger("adult").to_pandas())

Errors are subclasses of :class:`DpoptError` (see :mod:`dpopt.errors`).
The wire code is generated from proto/ when the package is built (dpopt.v1).
"""

from dpopt._connection import TLS
from dpopt.client import Client, Job
from dpopt.errors import (AuthenticationError, BudgetExhaustedError, DpoptError,
                          InvalidRequestError, JobFailedError, NotFoundError,
                          PermissionDeniedError, UnavailableError)
from dpopt.results import (Budget, Calibration, Cost, Dataset, Estimate, Evaluation, Grant,
                           JobState, Ledger, LedgerEntry, Placement, Principal, RankShard,
                           Result, TRACE_COLUMNS)
from dpopt.specs import algorithms, models, spec

__version__ = "0.1.0"

__all__ = [
    "Client", "Job", "TLS", "spec", "algorithms", "models",
    "DpoptError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "BudgetExhaustedError", "InvalidRequestError", "UnavailableError", "JobFailedError",
    "Budget", "Calibration", "Cost", "Dataset", "Estimate", "Evaluation", "Grant",
    "JobState", "Ledger", "LedgerEntry", "Placement", "Principal", "RankShard", "Result",
    "TRACE_COLUMNS",
]
