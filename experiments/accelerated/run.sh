#!/usr/bin/env bash
# Reproduces the experiment of accelerated family (Kuru et al. 2022, Sec. 5,
# Figs. 3-4) through dpopt's gRPC API with the dpopt Python client
# (clients/python).
#
# Usage: experiments/accelerated/run.sh [--build-dir DIR] [--runs N] [--quick]
#   --build-dir DIR  CMake build dir (default: build-accelerated of the repo;
#                    configured and built with ninja -j2 if binaries are missing)
#   --runs N         runs per cell (default 20, the paper's)
#   --quick          tiny smoke grid (2 runs, T in {100, 200}); writes to a
#                    temp dir, not to the committed results
#
# Starts dpopt-server on a temp DB and a free loopback port, generates the
# synthetic data of the paper's Sec. 5 (fixed seed), imports it as a private
# dataset (add/remove, basic-composition budget large enough for the grid), runs
# the grid, and writes results.md and fig3_m100000.png / fig4_m1000.png here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build-accelerated"
runs=20
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "accelerated: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "accelerated: $*" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c 'import grpc, google.protobuf, numpy, matplotlib' 2>/dev/null ||
  die "$py needs python3-grpcio python3-protobuf python3-numpy python3-matplotlib"
plugin="$(command -v grpc_python_plugin || true)"
[[ -n "$plugin" ]] || die "grpc_python_plugin not found (protobuf-compiler-grpc)"

server_bin="$build_dir/server/dpopt-server"
if [[ ! -x "$server_bin" ]]; then
  echo "accelerated: building dpopt-server in $build_dir"
  cmake -S "$repo" -B "$build_dir" -G Ninja >/dev/null
  ninja -C "$build_dir" -j2 dpopt-server
fi

tmp="$(mktemp -d /tmp/dpopt-accelerated.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The dpopt Python client, built offline from clients/python (its wheel
# generates the stubs from proto/), used in place from $tmp/py/site.
"$repo/clients/python/build_wheel.sh" "$tmp/py" >/dev/null
export PYTHONPATH="$tmp/py/site${PYTHONPATH:+:$PYTHONPATH}"

port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" --db="$tmp/dpopt.db" --listen="127.0.0.1:$port" --max-jobs-per-principal=0 --max-estimates-per-second=0 --workers=2 \
  --queue=256 >"$tmp/server.log" 2>&1 &
server_pid=$!
# The first start writes the curator's bearer token beside the database
# (mode 0600); the client reads it from $DPOPT_TOKEN.
for _ in $(seq 1 200); do [[ -s "$tmp/dpopt.db.curator-token" ]] && break; sleep 0.1; done
export DPOPT_TOKEN="$(cat "$tmp/dpopt.db.curator-token")"

out="$here"
extra=()
if [[ $quick -eq 1 ]]; then
  out="$tmp/out"; mkdir -p "$out"; extra=(--quick); runs=2
fi
"$py" "$here/repro.py" --server "127.0.0.1:$port" \
  --runs "$runs" --out "$out" "${extra[@]}" || {
    echo "---- server log (last 30 lines) ----" >&2; tail -n 30 "$tmp/server.log" >&2; exit 1; }
if [[ $quick -eq 1 ]]; then cat "$out/results.md"; fi
