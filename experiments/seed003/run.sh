#!/usr/bin/env bash
# Seed 003 reproduction: one command. Builds dpopt-server if needed, starts it
# on a temp DB, runs experiments/seed003/reproduce.py through the gRPC API
# (Python stubs generated from proto/ with grpc_python_plugin), then writes
# tables and figures into experiments/seed003/results/.
#   experiments/seed003/run.sh [--build-dir DIR] [--reps N] [--quick]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build-seed003"
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
tmp="$(mktemp -d /tmp/dpopt-seed003.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/stubs"
protoc -I "$repo/proto" --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  --python_out="$tmp/stubs" --grpc_python_out="$tmp/stubs" "$repo"/proto/dpopt/v1/*.proto
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" --db="$tmp/dpopt.db" --listen="127.0.0.1:$port" --workers=2 --queue=64 \
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
# (mode 0600); the driver sends it (experiments/common/bearer.py).
for _ in $(seq 1 200); do [[ -s "$tmp/dpopt.db.curator-token" ]] && break; sleep 0.1; done
export DPOPT_TOKEN="$(cat "$tmp/dpopt.db.curator-token")"
start=$SECONDS
"$py" "$here/reproduce.py" --stubs "$tmp/stubs" --server "127.0.0.1:$port" \
  --out "${out_dir:-$tmp/results}" "${extra[@]}"
"$py" "$here/report.py" "${out_dir:-$tmp/results}"
echo "seed003: done in $((SECONDS - start)) s; see ${out_dir:-$tmp/results (removed on exit)}/"
