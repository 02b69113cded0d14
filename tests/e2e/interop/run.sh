#!/usr/bin/env bash
# External-client interop test: a Python (python3-grpcio) and a Node.js
# (@grpc/grpc-js + @grpc/proto-loader) client talk to a real dpopt-server
# through stubs made from proto/ at test time.
#
# Usage: tests/e2e/interop/run.sh [--build-dir DIR] [--server-bin PATH] [--cli PATH]
#   --build-dir DIR   CMake build dir holding server/dpopt-server and
#                     client/dpopt (default: build/ of the repository)
#   --server-bin, --cli   the binaries, if elsewhere
#   --keep            keep the temp dir (DB, logs, stubs) for debugging
#
# Starts dpopt-server on a fresh temp DB and a free loopback port, imports
# a9a (private, epsilon budget 3) and a9a.t (public) with the CLI, runs both
# clients, stops the server. Exits non-zero on any failure.
# Needs: python3-grpcio, python3-protobuf, protobuf-compiler-grpc (for
# grpc_python_plugin), nodejs + npm (node_modules installed here with `npm ci`
# when missing).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
build_dir="$repo/build"
server_bin=""
cli=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --server-bin) server_bin="$2"; shift 2 ;;
    --server-bin=*) server_bin="${1#*=}"; shift ;;
    --cli) cli="$2"; shift 2 ;;
    --cli=*) cli="${1#*=}"; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "interop: unknown argument $1" >&2; exit 2 ;;
  esac
done
server_bin="${server_bin:-$build_dir/server/dpopt-server}"
cli="${cli:-$build_dir/client/dpopt}"

die() { echo "interop: $*" >&2; exit 1; }
[[ -x "$server_bin" ]] || die "no server binary at $server_bin (build first or pass --server-bin)"
[[ -x "$cli" ]] || die "no CLI at $cli (build first or pass --cli)"
# Debian's python3 is the one with python3-grpcio, whatever python3 is on PATH.
py=/usr/bin/python3
"$py" -c 'import grpc, google.protobuf' 2>/dev/null ||
  die "$py lacks grpc/protobuf (apt-get install python3-grpcio python3-protobuf)"
command -v protoc >/dev/null || die "protoc not found (apt-get install protobuf-compiler)"
plugin="$(command -v grpc_python_plugin || true)"
[[ -n "$plugin" ]] || die "grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)"
command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
data="$repo/data/adult"
[[ -f "$data/a9a" && -f "$data/a9a.t" ]] || die "missing $data/a9a or a9a.t"

if [[ ! -d "$here/node/node_modules/@grpc/grpc-js" || ! -d "$here/node/node_modules/@grpc/proto-loader" ]]; then
  echo "interop: installing node dependencies (npm ci)"
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
fi

tmp="$(mktemp -d /tmp/dpopt-interop.XXXXXX)"
server_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -f "$tmp/server.log" ]]; then
    echo "---- server log (last 40 lines) ----" >&2
    tail -n 40 "$tmp/server.log" >&2 || true
  fi
  if [[ $keep -eq 1 ]]; then echo "interop: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
addr="127.0.0.1:$port"

# Stubs for the Python client, generated from the contract.
mkdir -p "$tmp/stubs"
protoc -I "$repo/proto" --plugin=protoc-gen-grpc_python="$plugin" \
  --python_out="$tmp/stubs" --grpc_python_out="$tmp/stubs" \
  "$repo"/proto/dpopt/v1/*.proto "$repo/proto/grpc/health/v1/health.proto"

# Mutual TLS end to end: a throw-away CA, server and client
# certificates; the server requires client certificates, and the CLI and
# both clients present one.
"$repo/tests/common/make-test-certs.sh" "$tmp/tls"
tls_client=(--tls-ca="$tmp/tls/ca.crt" --tls-cert="$tmp/tls/client.crt" --tls-key="$tmp/tls/client.key")
echo "interop: starting $server_bin on $addr (mutual TLS)"
"$server_bin" --db="$tmp/dpopt.db" --listen="$addr" --tls-cert="$tmp/tls/server.crt" \
  --tls-key="$tmp/tls/server.key" --tls-client-ca="$tmp/tls/ca.crt" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 60); do
  kill -0 "$server_pid" 2>/dev/null || die "server exited during start-up"
  "$cli" health --server="$addr" "${tls_client[@]}" >/dev/null 2>&1 && break
  sleep 0.5
done
"$cli" health --server="$addr" "${tls_client[@]}" >/dev/null || die "server not SERVING after 30 s"
# The bootstrap curator's token (written 0600 on the first start); the CLI
# and both clients send it as "authorization: Bearer ...".
export DPOPT_TOKEN="$(cat "$tmp/dpopt.db.curator-token")"

echo "interop: importing a9a (private) and a9a.t (public)"
"$cli" dataset import adult "$data/a9a" --format=libsvm --dimension=123 \
  --epsilon-budget=3 --delta-budget=1e-6 --server="$addr" "${tls_client[@]}" >/dev/null
"$cli" dataset import adult-test "$data/a9a.t" --format=libsvm --dimension=123 \
  --public --server="$addr" "${tls_client[@]}" >/dev/null

passed=0
failed=0
run_client() {
  local name="$1"; shift
  local start=$SECONDS
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1)); echo "== $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1)); echo "== $name: FAILED ($((SECONDS - start)) s)"
  fi
}
run_client "python client" "$py" "$here/python/interop_client.py" --stubs "$tmp/stubs" \
  --server "$addr" --dataset adult --eval-dataset adult-test "${tls_client[@]}"
run_client "node client" node "$here/node/interop_client.js" --proto-dir "$repo/proto" \
  --server "$addr" --dataset adult --eval-dataset adult-test "${tls_client[@]}"

# Both clients' jobs are on the ledger (cross-client consistency).
ledger_json="$("$cli" ledger adult --json --server="$addr" "${tls_client[@]}")"
if "$py" -c '
import json, sys
d = json.loads(sys.argv[1])
entries = d.get("entries", d if isinstance(d, list) else [])
sys.exit(0 if len(entries) >= int(sys.argv[2]) else 1)' "$ledger_json" "$passed"; then
  echo "interop: the CLI's ledger shows at least the $passed charge(s) of the passing clients"
else
  failed=$((failed + 1)); echo "interop: FAILED: the ledger has fewer than $passed charge(s)"
fi

# Graceful shutdown: SIGTERM must stop the server promptly.
kill -TERM "$server_pid"
for _ in $(seq 1 30); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$server_pid" 2>/dev/null; then
  failed=$((failed + 1)); echo "interop: FAILED: server still running 15 s after SIGTERM"
else
  set +e; wait "$server_pid"; rc=$?; set -e
  server_pid=""
  [[ $rc -eq 0 ]] || echo "interop: note: server exited with status $rc after SIGTERM"
fi

echo "interop: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
