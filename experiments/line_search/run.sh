#!/usr/bin/env bash
# Line-search reproduction: one command. Builds dpopt-server if needed, starts it
# on a temp DB, runs experiments/line_search/reproduce.py through the gRPC API
# (the dpopt Python client of clients/python, built here), then writes
# tables and figures into experiments/line_search/results/.
#   experiments/line_search/run.sh [--build-dir DIR] [--reps N] [--quick]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build-line_search"
extra=()
out_dir="$here/results"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --reps) extra+=(--reps "$2"); shift 2 ;;
    # --quick checks the pipeline; its results go to a temp dir, never over
    # the committed ones.
    --quick) extra+=(--reps 1 --epsilons 0.1,0.8 --datasets bank); out_dir=""; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
server_bin="$build_dir/server/dpopt-server"
if [[ ! -x "$server_bin" ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja >/dev/null
  ninja -C "$build_dir" -j2 dpopt-server
fi
tmp="$(mktemp -d /tmp/dpopt-line_search.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# The dpopt Python client, built offline from clients/python (its wheel
# generates the stubs from proto/), used in place from $tmp/py/site.
"$repo/clients/python/build_wheel.sh" "$tmp/py" >/dev/null
export PYTHONPATH="$tmp/py/site${PYTHONPATH:+:$PYTHONPATH}"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" --db="$tmp/dpopt.db" --listen="127.0.0.1:$port" --max-jobs-per-principal=0 --max-estimates-per-second=0 --workers=2 --queue=64 \
  >"$tmp/server.log" 2>&1 &
server_pid=$!
"$py" - "$port" <<'PY'
import socket, sys, time
for _ in range(120):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close(); sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit("server did not start")
PY
# The first start writes the curator's bearer token beside the database
# (mode 0600); the client reads it from $DPOPT_TOKEN.
for _ in $(seq 1 200); do [[ -s "$tmp/dpopt.db.curator-token" ]] && break; sleep 0.1; done
export DPOPT_TOKEN="$(cat "$tmp/dpopt.db.curator-token")"
start=$SECONDS
"$py" "$here/reproduce.py" --server "127.0.0.1:$port" \
  --out "${out_dir:-$tmp/results}" "${extra[@]}"
"$py" "$here/report.py" "${out_dir:-$tmp/results}"
echo "line_search: done in $((SECONDS - start)) s; see ${out_dir:-$tmp/results (removed on exit)}/"
