"""Bearer-token channel for the reproduction drivers (issue 14).

authorized_channel(server) returns an insecure loopback channel whose calls
carry 'authorization: Bearer $DPOPT_TOKEN' (run.sh exports the token the
server wrote beside its database on first start).
"""
import collections
import os

import grpc


class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials",
                     "wait_for_ready", "compression")),
        grpc.ClientCallDetails):
    pass


class _Bearer(grpc.UnaryUnaryClientInterceptor,
              grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor):
    def __init__(self, token):
        self._md = ("authorization", "Bearer " + token)

    def _details(self, d):
        return _Details(d.method, d.timeout, list(d.metadata or []) + [self._md],
                        d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_unary_stream(self, cont, d, req):
        return cont(self._details(d), req)

    def intercept_stream_unary(self, cont, d, it):
        return cont(self._details(d), it)


def authorized_channel(server):
    channel = grpc.insecure_channel(server)
    token = os.environ.get("DPOPT_TOKEN", "")
    return grpc.intercept_channel(channel, _Bearer(token)) if token else channel
