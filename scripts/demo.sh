#!/usr/bin/env bash
# Quick start #1: set everything up and run the main job end to end:
# dpopt-server on its embedded SQLite, the Adult dataset (a9a) imported as a
# private dataset with budget (epsilon 3, delta 1e-6), a DP-SGD job at
# (epsilon 1, delta 1e-6) evaluated on the public a9a.t, and the result.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
cd "$repo"

"$repo/scripts/install-deps.sh"
BUILD_DIR="$build" "$repo/scripts/build.sh" dpopt-server dpopt

work="$(mktemp -d /tmp/dpopt-demo-XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
addr="127.0.0.1:$port"
"$build/server/dpopt-server" --db="$work/dpopt.db" --listen="$addr" 2>"$work/server.log" &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; wait 2>/dev/null; echo "(demo files in $work)"' EXIT
dp() { echo "\$ dpopt $*" >&2; "$build/client/dpopt" --server="$addr" "$@"; }
for _ in $(seq 1 100); do "$build/client/dpopt" --server="$addr" health >/dev/null 2>&1 && break; sleep 0.1; done
# The first start created the curator principal and wrote its bearer token
# (mode 0600) beside the database; the CLI reads it from DPOPT_TOKEN.
export DPOPT_TOKEN="$(cat "$work/dpopt.db.curator-token")"

dp dataset import adult data/adult/a9a --format=libsvm --dimension=123 \
  --epsilon-budget=3 --delta-budget=1e-6
dp dataset import adult-test data/adult/a9a.t --format=libsvm --dimension=123 --public
dp dataset list
cat >"$work/spec.json" <<'JSON'
{"dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
 "privacy": {"epsilon": 1.0, "delta": 1e-6},
 "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": 2000, "clip_norm": 1.0, "learning_rate": 0.5}},
 "evaluate_on": "adult-test"}
JSON
cat "$work/spec.json"
dp job estimate "$work/spec.json"
dp job submit "$work/spec.json" --wait
job_id="$("$build/client/dpopt" --server="$addr" job list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')"
dp job result "$job_id" --output "$work/model.json"
dp ledger adult
"$repo/scripts/plot-trace.py" "$work/model.json" "$work/trace.png"
