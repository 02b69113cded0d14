#!/usr/bin/env bash
# Distributed-DDA reproduction (Liu, Johansson & Shi 2023, Sec. 5):
# one command. Builds dpopt-server and the MPI worker if needed, starts the
# server (simulation by default; Open MPI for the one MPI configuration) on a
# temp DB and a free loopback port, runs reproduce.py through the gRPC API
# with the dpopt Python client (clients/python, built offline), then
# report.py writes tables and figures into experiments/distributed_dda/results/.
#   experiments/distributed_dda/run.sh [--quick] [--build-dir DIR] [--seeds N]
# Full run: 29.5 min measured on 2 cores (2026-11-26, partly shared with a
# build; F* from the committed results/fstar.json, as in a fresh clone); the
# first run, which computed F*, took 43 min under load ~12. --quick: a9a only, 1 seed,
# into results-quick/.
# Needs python3-scipy (F* of the l1-SVM by HiGHS) besides the client's
# packages; all are in scripts/install-deps.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build"
out="$here/results"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --quick) extra+=(--datasets a9a --seeds 1); out="$here/results-quick"; shift ;;
    --seeds) extra+=(--seeds "$2"); shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
server_bin="$build_dir/server/dpopt-server"
if [[ ! -x "$server_bin" || ! -x "$build_dir/server/dpopt-dda-worker" ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build_dir" -j2 dpopt-server dpopt-dda-worker
fi
mpi=()
if command -v mpirun >/dev/null && [[ -x "$build_dir/server/dpopt-dda-worker" ]]; then
  mpi=(--mpirun=mpirun --mpi-args=--oversubscribe)
else
  extra+=(--no-mpi)
  echo "run.sh: no Open MPI (mpirun / dpopt-dda-worker): the MPI configuration is skipped" >&2
fi
tmp="$(mktemp -d /tmp/dpopt-distributed_dda.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
"$repo/clients/python/build_wheel.sh" "$tmp/py" >/dev/null
export PYTHONPATH="$tmp/py/site:$here${PYTHONPATH:+:$PYTHONPATH}"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" --db="$tmp/dpopt.db" --listen="127.0.0.1:$port" --max-jobs-per-principal=0 --max-estimates-per-second=0 --workers=2 --queue=1024 \
  "${mpi[@]}" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 120); do [[ -s "$tmp/dpopt.db.curator-token" ]] && break; sleep 0.5; done
start=$SECONDS
"$py" "$here/reproduce.py" --server "127.0.0.1:$port" \
  --token-file "$tmp/dpopt.db.curator-token" --out "$out" \
  --data-dir "$repo/data" "${extra[@]}"
"$py" "$here/report.py" "$out"
echo "distributed_dda: done in $((SECONDS - start)) s; see $out/"
