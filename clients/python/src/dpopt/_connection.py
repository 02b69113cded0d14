"""Server address, bearer token and TLS discovery (the CLI's rules)."""

import dataclasses
import os
from typing import Optional

import grpc

DEFAULT_SERVER = "127.0.0.1:50051"


@dataclasses.dataclass(frozen=True)
class TLS:
    """TLS settings. ``ca``: PEM file of the CA that signed the server's
    certificate (None: the system's roots). ``cert``/``key``: a client
    certificate and key for mutual TLS. ``server_name``: override the name
    checked against the server's certificate."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    server_name: Optional[str] = None


def resolve_server(server):
    return server or os.environ.get("DPOPT_SERVER") or DEFAULT_SERVER


def resolve_token(token=None, token_file=None):
    """The bearer token: ``token``, else the file ``token_file``, else
    ``$DPOPT_TOKEN``, else ``~/.config/dpopt/token``; None when none is set.
    Returns (token, where it came from)."""
    if token:
        return token.strip(), "token="
    if token_file:
        with open(token_file) as f:
            return f.read().strip(), str(token_file)
    env = os.environ.get("DPOPT_TOKEN", "").strip()
    if env:
        return env, "$DPOPT_TOKEN"
    home = os.path.expanduser("~")
    path = os.path.join(home, ".config", "dpopt", "token")
    if os.path.isfile(path):
        with open(path) as f:
            text = f.read().strip()
        if text:
            return text, path
    return None, None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


_MAX_REPLY_BYTES = 256 << 20


def make_channel(server, tls):
    """A channel to `server`: plaintext when `tls` is None or False, else TLS
    (True: system roots; a path: that CA file; a :class:`TLS`)."""
    # Results with traced iterates can exceed gRPC's default 4 MiB reply
    # limit; the server bounds what it sends.
    options = [("grpc.max_receive_message_length", _MAX_REPLY_BYTES)]
    if tls is None or tls is False:
        return grpc.insecure_channel(server, options=options)
    if tls is True:
        tls = TLS()
    elif isinstance(tls, (str, os.PathLike)):
        tls = TLS(ca=str(tls))
    elif isinstance(tls, dict):
        tls = TLS(**tls)
    if not isinstance(tls, TLS):
        raise TypeError("tls must be None, True, a CA file path, a dict or dpopt.TLS")
    if bool(tls.cert) != bool(tls.key):
        raise ValueError("tls: cert and key must be given together")
    creds = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca) if tls.ca else None,
        private_key=_read(tls.key) if tls.key else None,
        certificate_chain=_read(tls.cert) if tls.cert else None)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(server, creds, options=options)
