#!/bin/sh
# Health check of the dpopt image: grpc.health.v1 through the CLI on the
# server's port (no token needed). With TLS it verifies the server with
# $DPOPT_TLS_CA (the certificate must name "localhost"), and presents
# $DPOPT_TLS_HEALTH_CERT/KEY when the server requires client certificates.
port="${DPOPT_LISTEN##*:}"
if [ -n "${DPOPT_TLS_CERT:-}" ]; then
  set -- --tls-ca="${DPOPT_TLS_CA:?set DPOPT_TLS_CA to check a TLS server}"
  if [ -n "${DPOPT_TLS_HEALTH_CERT:-}" ]; then
    set -- "$@" --tls-cert="${DPOPT_TLS_HEALTH_CERT}" --tls-key="${DPOPT_TLS_HEALTH_KEY}"
  fi
  exec dpopt health --timeout=3 --server="localhost:${port}" "$@"
fi
exec dpopt health --timeout=3 --server="127.0.0.1:${port}"
