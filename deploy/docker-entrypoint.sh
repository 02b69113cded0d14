#!/bin/sh
# Entrypoint of the dpopt image (runs under tini as PID 1's child).
#   docker run IMAGE                 -> dpopt-server with $DPOPT_DB, $DPOPT_LISTEN
#   docker run IMAGE --flag=value    -> same, extra server flags appended
#   docker run IMAGE backup|restore --to=/--from=FILE
#                                    -> dpopt-server backup/restore on $DPOPT_DB
#                                       (docs/backup.md; restore with the
#                                       server container stopped)
#   docker run IMAGE dpopt ...       -> any other command (e.g. the CLI)
# TLS: mount PEM files and set DPOPT_TLS_CERT and DPOPT_TLS_KEY
# (and DPOPT_TLS_CLIENT_CA for mutual TLS). Without TLS the server refuses a
# non-loopback DPOPT_LISTEN; DPOPT_INSECURE=1 overrides that (only behind a
# TLS-terminating proxy). On the first start the curator's token is written
# to $DPOPT_DB.curator-token (mode 0600) on the volume.
set -e
if [ "${1:-}" = "backup" ] || [ "${1:-}" = "restore" ]; then
  mode="$1"
  shift
  exec /usr/local/bin/dpopt-server "$mode" --db="${DPOPT_DB}" "$@"
fi
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  set -- --db="${DPOPT_DB}" --listen="${DPOPT_LISTEN}" "$@"
  if [ -n "${DPOPT_TLS_CERT:-}" ]; then
    set -- "$@" --tls-cert="${DPOPT_TLS_CERT}" --tls-key="${DPOPT_TLS_KEY}"
  fi
  if [ -n "${DPOPT_TLS_CLIENT_CA:-}" ]; then
    set -- "$@" --tls-client-ca="${DPOPT_TLS_CLIENT_CA}"
  fi
  if [ -n "${DPOPT_METRICS_LISTEN:-}" ]; then
    set -- "$@" --metrics-listen="${DPOPT_METRICS_LISTEN}"
  fi
  if [ "${DPOPT_INSECURE:-0}" = "1" ]; then
    set -- "$@" --insecure
  fi
  exec /usr/local/bin/dpopt-server "$@"
fi
exec "$@"
