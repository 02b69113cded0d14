#!/usr/bin/env bash
# Reproduces the experiments of piecewise-affine family (Han, Topcu & Pappas
# 2014, Sec. 5: Figs. 1-3, plus an epsilon sweep) through dpopt's gRPC API.
#
# Usage: experiments/piecewise_affine/run.sh [--build-dir DIR] [--runs N] [--quick]
#   --build-dir DIR  CMake build dir (default: build of the repo, as
#                    scripts/build.sh makes it; configured and built with
#                    ninja -j2 if the binaries are missing)
#   --runs N         runs per point (default 400, which fits the 30-minute
#                    budget on 2 shared cores; the paper used 1000)
#   --quick          tiny smoke grid (5 runs); writes to a temp dir, not to the
#                    committed results
#
# Starts dpopt-server on a temp DB and a free loopback port, generates the
# instance (fixed seed; see README.md), imports it with the CLI as private
# max-affine datasets (one per (m, c), basic-composition budget large enough
# for the grid) and public copies for the non-private baselines, runs every
# point as jobs through the Python client, and writes results.json,
# results.md and the figures here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build_dir="$repo/build"
runs=400
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "piecewise_affine: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "piecewise_affine: $*" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c 'import grpc, google.protobuf, numpy, matplotlib' 2>/dev/null ||
  die "$py needs python3-grpcio python3-protobuf python3-numpy python3-matplotlib"
command -v grpc_python_plugin >/dev/null ||
  die "grpc_python_plugin not found (protobuf-compiler-grpc)"

server_bin="$build_dir/server/dpopt-server"
cli_bin="$build_dir/client/dpopt"
if [[ ! -x "$server_bin" || ! -x "$cli_bin" ]]; then
  echo "piecewise_affine: building dpopt-server and dpopt in $build_dir"
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build_dir" -j2 dpopt-server dpopt
fi

tmp="$(mktemp -d /tmp/dpopt-piecewise_affine.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The dpopt Python client, built offline from clients/python.
"$repo/clients/python/build_wheel.sh" "$tmp/py" >/dev/null
export PYTHONPATH="$tmp/py/site${PYTHONPATH:+:$PYTHONPATH}"

port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$server_bin" --db="$tmp/dpopt.db" --listen="127.0.0.1:$port" --max-jobs-per-principal=0 --max-estimates-per-second=0 --workers=2 \
  --queue=256 >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do [[ -s "$tmp/dpopt.db.curator-token" ]] && break; sleep 0.1; done
export DPOPT_TOKEN="$(cat "$tmp/dpopt.db.curator-token")"
export DPOPT_SERVER="127.0.0.1:$port"

out="$here"
extra=()
if [[ $quick -eq 1 ]]; then
  out="$tmp/out"; mkdir -p "$out"; extra=(--quick); runs=5
fi
"$py" "$here/repro.py" --server "127.0.0.1:$port" --cli "$cli_bin" --tmp "$tmp" \
  --runs "$runs" --out "$out" "${extra[@]}" || {
    echo "---- server log (last 30 lines) ----" >&2; tail -n 30 "$tmp/server.log" >&2; exit 1; }
"$py" "$here/report.py" "$out"
if [[ $quick -eq 1 ]]; then cat "$out/results.md"; fi
