"""Server address, bearer token and TLS discovery (the CLI's rules)."""

import dataclasses
import ipaddress
import os
import stat
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


def is_loopback(server):
    """True only for a literal loopback address (127.0.0.0/8, ::1), with or
    without a port and an ``ipv4:``/``ipv6:``/``dns:`` scheme, and for Unix
    sockets (``unix:``). Host names, ``localhost`` included, are not: a
    name can resolve anywhere. Decides from the text alone (no lookup)."""
    a = str(server)
    if a.startswith("unix:") or a.startswith("unix-abstract:"):
        return True
    if a.startswith("dns:"):
        a = a[4:]
        if a.startswith("//"):
            slash = a.find("/", 2)
            if slash < 0:
                return False
            a = a[slash + 1:]
    elif a.startswith("ipv4:") or a.startswith("ipv6:"):
        a = a[5:]
    host = a
    if host.startswith("["):
        close = host.find("]")
        if close < 0 or (host[close + 1:] and not host[close + 1:].startswith(":")):
            return False
        host = host[1:close]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if ip.version == 4:
        # ipaddress accepts only dotted quads here, like inet_pton.
        return ip.is_loopback
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def choose_tls(server, tls, insecure):
    """What a channel to ``server`` uses; opens nothing. Returns False for
    plaintext, True for TLS with the system's trusted roots, or ``tls`` as
    given (a CA path, a dict, a :class:`TLS`).

    ``tls=None`` (the default): plaintext to a literal loopback address or a
    Unix socket, or with ``insecure=True``; TLS with the system's roots to
    anything else. ``tls=False`` asks for plaintext: refused (ValueError) off
    loopback unless ``insecure=True``. Plaintext never reaches another host
    unless ``insecure=True`` says so."""
    if tls is None:
        return False if (insecure or is_loopback(server)) else True
    if tls is False:
        if insecure or is_loopback(server):
            return False
        raise ValueError(
            f"refusing plaintext to {server}: the bearer token would cross the "
            "network in clear text. Leave tls unset (TLS with the system's roots) "
            "or pass tls='ca.pem', or insecure=True if the network path is trusted")
    if insecure:
        raise ValueError("insecure=True (plaintext) and tls contradict each other")
    return tls


def check_token_file(path, mode=None):
    """Raises PermissionError if the token file at ``path`` (or ``mode``, its
    st_mode) gives group or others any access."""
    if mode is None:
        mode = os.stat(path).st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(
            f"the token file {path} has mode {stat.S_IMODE(mode):04o}: other users may "
            f"read the token. Make it private with: chmod 600 {path}")


def resolve_token(token=None, token_file=None):
    """The bearer token: ``token``, else the file ``token_file``, else
    ``$DPOPT_TOKEN``, else ``~/.config/dpopt/token``; None when none is set.
    Returns (token, where it came from)."""
    if token:
        return token.strip(), "token="
    if token_file:
        check_token_file(token_file)
        with open(token_file) as f:
            return f.read().strip(), str(token_file)
    env = os.environ.get("DPOPT_TOKEN", "").strip()
    if env:
        return env, "$DPOPT_TOKEN"
    home = os.path.expanduser("~")
    path = os.path.join(home, ".config", "dpopt", "token")
    if os.path.isfile(path):
        check_token_file(path)
        with open(path) as f:
            text = f.read().strip()
        if text:
            return text, path
    return None, None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


_MAX_REPLY_BYTES = 256 << 20


def make_channel(server, tls, insecure=False):
    """A channel to `server`, over what :func:`choose_tls` decides (TLS
    True: system roots; a path: that CA file; a :class:`TLS`)."""
    tls = choose_tls(server, tls, insecure)
    # Results with traced iterates can exceed gRPC's default 4 MiB reply
    # limit; the server bounds what it sends.
    options = [("grpc.max_receive_message_length", _MAX_REPLY_BYTES)]
    if tls is False:
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
