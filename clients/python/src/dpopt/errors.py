"""Exceptions raised by the dpopt client.

Every failed call raises a subclass of :class:`DpoptError` that carries the
server's message (``str(e)`` / ``e.message``) and its gRPC status code
(``e.code``, a :class:`grpc.StatusCode`). The server's messages never contain
private data (docs/architecture.md, invariant "nothing unprivatized leaves
the server"), so they are safe to print and log.

===============================  ============================================
gRPC status                      exception
===============================  ============================================
UNAUTHENTICATED                  :class:`AuthenticationError`
PERMISSION_DENIED                :class:`PermissionDeniedError`
NOT_FOUND                        :class:`NotFoundError` (also datasets and
                                 jobs you may not see: no existence leak)
RESOURCE_EXHAUSTED               :class:`BudgetExhaustedError` (nothing was
                                 charged; the message says what is left)
INVALID_ARGUMENT, OUT_OF_RANGE,  :class:`InvalidRequestError`
FAILED_PRECONDITION,
ALREADY_EXISTS
UNAVAILABLE, DEADLINE_EXCEEDED   :class:`UnavailableError`
anything else                    :class:`DpoptError`
===============================  ============================================

:class:`JobFailedError` is raised client-side when the result of a job that
ended FAILED or CANCELLED is requested.
"""

import grpc


class DpoptError(Exception):
    """Base class: a call to the dpopt server failed.

    Attributes:
        code: the :class:`grpc.StatusCode` of the reply (None for errors
            detected by the client).
        message: the server's message.
    """

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code

    @property
    def code_name(self):
        """The status code's name, e.g. ``"NOT_FOUND"`` (or ``""``)."""
        return self.code.name if self.code is not None else ""

    def __str__(self):
        return f"{self.code_name}: {self.message}" if self.code is not None else self.message


class AuthenticationError(DpoptError):
    """No valid bearer token (missing, unknown, revoked or expired)."""


class PermissionDeniedError(DpoptError):
    """The token is valid but its role may not do this (e.g. an analyst
    importing a dataset, or a non-private job on private data)."""


class NotFoundError(DpoptError):
    """No such dataset or job, or one the caller may not see."""


class BudgetExhaustedError(DpoptError):
    """The job would exceed the dataset's remaining budget or the caller's
    cap, or the server's queue is full. Nothing was charged."""


class InvalidRequestError(DpoptError):
    """Bad input: malformed spec, out-of-range parameter, wrong state."""


class UnavailableError(DpoptError):
    """The server could not be reached or did not answer in time."""


class JobFailedError(DpoptError):
    """The job ended FAILED or CANCELLED; ``message`` is the server's reason.
    Its privacy cost stays charged (a job's outcome is never refunded)."""

    def __init__(self, message, job=None):
        super().__init__(message)
        self.job = job


_BY_CODE = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: BudgetExhaustedError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidRequestError,
    grpc.StatusCode.ALREADY_EXISTS: InvalidRequestError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: UnavailableError,
}


def from_rpc_error(err, hint=""):
    """Maps a :class:`grpc.RpcError` to the matching :class:`DpoptError`."""
    code = err.code() if hasattr(err, "code") else None
    message = (err.details() if hasattr(err, "details") else None) or str(err)
    if hint:
        message = f"{message} ({hint})"
    return _BY_CODE.get(code, DpoptError)(message, code)
