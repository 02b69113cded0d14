#!/usr/bin/env bash
# Bilevel experiments (Kornowski 2024; see README.md): one command. Builds
# dpopt-server if needed, starts it on a temp DB and a free loopback port,
# runs reproduce.py through the gRPC API with the dpopt Python client
# (clients/python, built offline; it generates the stubs from proto/),
# then report.py writes tables and figures into experiments/bilevel/results/.
#   experiments/bilevel/run.sh [--quick] [--build-dir DIR] [--only e1,e2,e3,adult]
# Full run: about 20-25 minutes on 2 cores (run it with nice -n 10); --quick:
# a few minutes, reduced grids, written to results-quick/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build"
out="$here/results"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --quick) extra+=(--quick --seeds 2 --e1-runs 150); out="$here/results-quick"; shift ;;
    --only) extra+=(--only "$2"); shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
server_bin="$build_dir/server/dpopt-server"
if [[ ! -x "$server_bin" ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build_dir" -j2 dpopt-server
fi
tmp="$(mktemp -d /tmp/dpopt-bilevel.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
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
start=$SECONDS
"$py" "$here/reproduce.py" --server "127.0.0.1:$port" \
  --token-file "$tmp/dpopt.db.curator-token" --out "$out" "${extra[@]}"
"$py" "$here/report.py" "$out"
echo "bilevel: done in $((SECONDS - start)) s; see $out/"
