#!/bin/sh
# Entrypoint of the dpopt image (runs under tini as PID 1's child).
#   docker run IMAGE                 -> dpopt-server with $DPOPT_DB, $DPOPT_LISTEN
#   docker run IMAGE --flag=value    -> same, extra server flags appended
#   docker run IMAGE dpopt ...       -> any other command (e.g. the CLI)
set -e
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  exec /usr/local/bin/dpopt-server --db="${DPOPT_DB}" --listen="${DPOPT_LISTEN}" "$@"
fi
exec "$@"
