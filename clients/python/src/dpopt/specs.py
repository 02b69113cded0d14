"""Job specs: proto3 JSON dicts, ``JobSpec`` messages, or keyword helpers.

A job spec is the ``JobSpec`` message of ``proto/dpopt/v1/job_spec.proto``.
Every client method that takes a spec accepts any of:

* a dict in proto3 JSON form (the form of ``examples/*.json`` and of the
  CLI's ``dpopt job submit spec.json``; field names in snake_case or
  lowerCamelCase),
* a path to such a JSON file,
* a ``dpopt.v1.job_spec_pb2.JobSpec`` message,
* keyword arguments of :func:`spec`.

The keyword helpers are built from the proto's descriptor, so every job type
and loss the server knows has one, with the proto's field names::

    import dpopt
    s = dpopt.spec("adult",
                   model=dpopt.models.logistic_regression(l2=1e-4),
                   algorithm=dpopt.algorithms.dp_sgd(sampling_rate=0.01, steps=2000,
                                                     clip_norm=1.0, learning_rate=0.5),
                   epsilon=1.0, delta=1e-6, evaluate_on="adult-test")

An unknown field name raises ``TypeError`` at once, before anything reaches
the server. Field meanings and defaults are documented in job_spec.proto.
"""

import json
import os
import types

from google.protobuf import json_format

from dpopt.v1 import job_spec_pb2

_ACCOUNTANTS = {"rdp": "ACCOUNTANT_RDP", "pld": "ACCOUNTANT_PLD"}


def _oneof_helpers(message_cls, oneof_name, doc):
    """A namespace with one function per member of `oneof_name`."""
    ns = types.SimpleNamespace()
    ns.__doc__ = doc
    names = []
    for field in message_cls.DESCRIPTOR.oneofs_by_name[oneof_name].fields:
        ns_fn = _make_helper(field)
        setattr(ns, field.name, ns_fn)
        names.append(field.name)
    ns.names = tuple(names)
    return ns


def _make_helper(field):
    allowed = {f.name for f in field.message_type.fields}
    allowed |= {f.json_name for f in field.message_type.fields}

    def helper(**fields):
        unknown = sorted(set(fields) - allowed)
        if unknown:
            raise TypeError(
                f"{field.name}: unknown field(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(f.name for f in field.message_type.fields))}")
        return {field.name: {k: v for k, v in fields.items() if v is not None}}

    helper.__name__ = field.name
    helper.__qualname__ = field.name
    helper.__doc__ = (
        f"``{{'{field.name}': {{...}}}}`` for JobSpec ({field.message_type.full_name}).\n\n"
        "Keyword arguments (proto field names): "
        + ", ".join(f.name for f in field.message_type.fields)
        + ".\nMeanings and defaults: proto/dpopt/v1/job_spec.proto.")
    return helper


algorithms = _oneof_helpers(
    job_spec_pb2.AlgorithmSpec, "algorithm",
    "Keyword helpers for JobSpec.algorithm, one per job type "
    "(dpopt.algorithms.names lists them).")
models = _oneof_helpers(
    job_spec_pb2.ModelSpec, "loss",
    "Keyword helpers for JobSpec.model, one per loss (dpopt.models.names).")


_EXECUTIONS = {"in_process": "EXECUTION_IN_PROCESS", "mpi_pool": "EXECUTION_MPI_POOL"}


def spec(dataset, *, algorithm, model=None, epsilon=None, delta=None,
         accountant=None, evaluate_on=None, label=None, trace_every=None,
         trace_iterates=None, execution=None):
    """Builds a job spec dict (proto3 JSON form of ``JobSpec``).

    Args:
        dataset: the training dataset's name.
        algorithm: ``{job_type: {...}}``, e.g. from :data:`algorithms`.
        model: ``{loss: {...}}``, e.g. from :data:`models`.
        epsilon, delta: the job's privacy target (ignored on public data).
        accountant: ``"rdp"`` (server default) or ``"pld"``.
        evaluate_on: a public dataset for the trace's loss and accuracy.
        label: free text shown in job listings.
        trace_every: record a trace point every this many steps (default:
            about 100 points).
        trace_iterates: also return the privatized iterates in the trace.
        execution: ``"in_process"`` (the server's default) or ``"mpi_pool"``:
            read the rows on the server's worker pool (the dataset must be
            placed there, :meth:`dpopt.Client.place_dataset`).
    """
    out = {"dataset": dataset, "algorithm": algorithm}
    if model is not None:
        out["model"] = model
    privacy = {}
    if epsilon is not None:
        privacy["epsilon"] = float(epsilon)
    if delta is not None:
        privacy["delta"] = float(delta)
    if accountant is not None:
        if accountant.lower() not in _ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {sorted(_ACCOUNTANTS)}")
        privacy["accountant"] = _ACCOUNTANTS[accountant.lower()]
    if privacy:
        out["privacy"] = privacy
    if execution is not None:
        if execution.lower() not in _EXECUTIONS:
            raise ValueError(f"execution must be one of {sorted(_EXECUTIONS)}")
        out["execution"] = _EXECUTIONS[execution.lower()]
    for key, value in (("evaluate_on", evaluate_on), ("label", label),
                       ("trace_every", trace_every), ("trace_iterates", trace_iterates)):
        if value is not None:
            out[key] = value
    return out


def to_proto(job_spec=None, **fields):
    """Any accepted spec form -> ``JobSpec`` message.

    Raises:
        TypeError: unknown spec type, or both a spec and keywords.
        ValueError: the dict or JSON file is not a valid JobSpec (the
            parser's message names the offending field).
    """
    if job_spec is None:
        if not fields:
            raise TypeError("give a job spec (dict, path, JobSpec) or spec keywords")
        job_spec = spec(**fields)
    elif fields:
        raise TypeError("give either a job spec or spec keywords, not both")
    if isinstance(job_spec, job_spec_pb2.JobSpec):
        return job_spec
    if isinstance(job_spec, (str, os.PathLike)):
        with open(job_spec) as f:
            job_spec = json.load(f)
    if not isinstance(job_spec, dict):
        raise TypeError(f"unsupported job spec type {type(job_spec).__name__}")
    # A dict submitted again (a loop of small jobs) is looked up by its
    # JSON text instead of parsed again (parsing is most of a submit's
    # client time); a dict that is not plain JSON is parsed every time.
    try:
        key = json.dumps(job_spec, sort_keys=True)
    except (TypeError, ValueError):
        key = None
    parsed = _PARSED.get(key) if key is not None else None
    if parsed is not None:
        return job_spec_pb2.JobSpec.FromString(parsed)
    try:
        pb = json_format.ParseDict(job_spec, job_spec_pb2.JobSpec())
    except json_format.ParseError as e:
        raise ValueError(f"invalid job spec: {e}") from None
    if key is not None:
        if len(_PARSED) >= _MAX_PARSED:
            _PARSED.clear()
        _PARSED[key] = pb.SerializeToString()
    return pb


# JSON text of a spec dict -> its serialized JobSpec (to_proto).
_PARSED = {}
_MAX_PARSED = 64


def to_dict(message):
    """A proto message as a proto3 JSON dict with the proto's field names."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
