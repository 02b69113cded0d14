#!/usr/bin/env bash
# Backup and restore with the real binaries (docs/backup.md):
# `dpopt-server backup` while the server runs a job, more charges, SIGTERM,
# `dpopt-server restore` of the old backup, the refusal to start on the
# rolled-back ledger, and the forced start with
# --allow-ledger-rollback-respending-budget. A dataset deleted after the
# backup stays deleted (erased from the restored copy, audited), and the
# replaced database files are removed unless --keep-old. Flags are spelled
# with dashes and with underscores (server/main.cc accepts both).
#
# Usage: tests/e2e/backup/backup_restore.sh SERVER_BIN CLI_BIN
set -euo pipefail
server_bin="$1"
cli="$2"
work="$(mktemp -d /tmp/dpopt-backup-e2e-XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
addr="127.0.0.1:$port"
db="$work/dpopt.db"
server_pid=""

cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -20 "$work/server.log" >&2 || true; exit 1; }
dp() { timeout 60 "$cli" --server="$addr" "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }

start_server() {
  "$server_bin" --db="$db" --listen="$addr" "$@" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    if dp health >/dev/null 2>&1; then
      export DPOPT_TOKEN="$(cat "$db.curator-token")"
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || { server_pid=""; return 1; }
    sleep 0.1
  done
  fail "server did not become healthy"
}
stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}
charges() { dp ledger census --json | json "['budget']['charges']"; }

python3 - "$work/census.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(300):
        a, b = (i % 10) / 10, (i % 7) / 7
        f.write(f"{a},{b},{1 if a + b > 0.9 else -1}\n")
PY
spec() {  # spec EPSILON STEPS
  echo "{\"dataset\": \"census\", \"model\": {\"logistic_regression\": {\"l2\": 0.01}},
 \"privacy\": {\"epsilon\": $1, \"delta\": 1e-6},
 \"algorithm\": {\"dp_gd\": {\"steps\": $2, \"clip_norm\": 1, \"learning_rate\": 0.5}}}"
}
spec 0.5 5 >"$work/small.json"
spec 0.5 1000000 >"$work/long.json"

echo "== server, a dataset, one finished job and one running job"
start_server || fail "server did not start"
dp dataset import census "$work/census.csv" --format=csv --dimension=2 \
  --epsilon-budget=10 --delta-budget=1e-6 >/dev/null
dp dataset import doomed "$work/census.csv" --format=csv --dimension=2 \
  --epsilon-budget=10 --delta-budget=1e-6 >/dev/null
dp job submit "$work/small.json" --wait >/dev/null
long_id="$(dp job submit "$work/long.json" --json | json "['id']")"

echo "== online backup while the job runs (dashed flags, space-separated values)"
"$server_bin" backup --db "$db" --to "$work/old.backup" | tee "$work/backup.out"
grep -q "ledger at charge #2 (2 charges)" "$work/backup.out" || fail "backup summary"
grep -q "integrity_check ok" "$work/backup.out" || fail "backup not verified"
if "$server_bin" backup --db="$db" --to="$work/old.backup" 2>"$work/again.err"; then
  fail "backup overwrote an existing file"
fi
grep -q "already exists" "$work/again.err" || fail "overwrite message"
dp job cancel "$long_id" >/dev/null

echo "== a deletion and two more charges after the backup"
dp dataset delete doomed --yes >/dev/null
grep -q "name=$(printf doomed | od -An -tx1 | tr -d ' \n')$" "$db.deletions" ||
  fail "deletion not recorded: $(cat "$db.deletions")"
dp job submit "$work/small.json" --wait >/dev/null
dp job submit "$work/small.json" --wait >/dev/null
[[ "$(charges)" == "4" ]] || fail "expected 4 charges"
grep -q "seq=4$" "$db.ledger-mark" || fail "mark is $(cat "$db.ledger-mark")"

echo "== restore refuses to run under the live server"
if "$server_bin" restore --from="$work/old.backup" --db="$db" 2>"$work/locked.err"; then
  fail "restore ran under a live server"
fi
grep -q "is locked" "$work/locked.err" || fail "lock message: $(cat "$work/locked.err")"
stop_server

echo "== restore, then the server refuses the rolled-back ledger"
"$server_bin" restore --from="$work/old.backup" --db="$db" | tee "$work/restore.out"
grep -q "2 charge(s) behind" "$work/restore.out" || fail "restore did not warn"
grep -q 'dataset "doomed" was deleted after this backup' "$work/restore.out" ||
  fail "restore did not erase the deleted dataset"
if ls "$db".pre-restore-* >/dev/null 2>&1; then fail "previous database kept without --keep-old"; fi
ls "$work" | grep -q "restore-tmp" && fail "restore left a temporary file"
if start_server; then fail "server started on a rolled-back ledger"; fi
grep -q "forget 2 charge(s) and let their privacy budget be spent again" \
  "$work/server.log" || fail "refusal message"

echo "== forced start"
start_server --allow_ledger_rollback_respending_budget || fail "forced start failed"
grep -q "WARNING: started on a ledger ROLLED BACK to charge #2" "$work/server.log" ||
  fail "no warning on forced start"
[[ "$(charges)" == "2" ]] || fail "restored ledger has $(charges) charges"
dp audit --json | grep -q "Server/AllowLedgerRollback" || fail "rollback not audited"
dp audit --json | grep -q "Server/ReapplyDeletion" || fail "erasure not audited"
if dp dataset show doomed >/dev/null 2>&1; then fail "deleted dataset is back"; fi
grep -q "seq=2$" "$db.ledger-mark" || fail "mark not reset: $(cat "$db.ledger-mark")"
dp job submit "$work/small.json" --wait >/dev/null
stop_server
start_server || fail "normal restart after the forced one failed"
[[ "$(charges)" == "3" ]] || fail "expected 3 charges after restart"
stop_server

echo "== restore --keep-old keeps the replaced files (owner-only)"
"$server_bin" restore --from="$work/old.backup" --db="$db" --keep-old >/dev/null
ls "$db".pre-restore-* >/dev/null || fail "previous database not kept with --keep-old"
for f in "$db".pre-restore-*; do
  [[ "$(stat -c %a "$f")" == "600" ]] || fail "$f has mode $(stat -c %a "$f")"
done
echo "backup/restore e2e: OK"
