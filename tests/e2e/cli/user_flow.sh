#!/usr/bin/env bash
# End-to-end user flow with real processes: dpopt-server on its embedded SQLite,
# the dpopt CLI, the vendored Adult data (the README's user flow), plus a
# SIGKILL of the server mid-job and a restart (the job comes back FAILED and
# stays charged; the ledger is consistent).
#
# Usage: tests/e2e/cli/user_flow.sh [BUILD_DIR]   (default: build)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
server_bin="$build/server/dpopt-server"
cli="$build/client/dpopt"
data="$repo/data/adult"
work="$(mktemp -d /tmp/dpopt-e2e-XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
addr="127.0.0.1:$port"
server_pid=""

cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; [[ -f "$work/server.log" ]] && tail -20 "$work/server.log" >&2; exit 1; }
step() { echo "== $*"; }
dp() { "$cli" --server="$addr" "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }

start_server() {
  "$server_bin" --db="$work/dpopt.db" --listen="$addr" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    if dp health >/dev/null 2>&1; then
      # The first start wrote the bootstrap curator's token (0600).
      export DPOPT_TOKEN="$(cat "$work/dpopt.db.curator-token")"
      return 0
    fi
    sleep 0.1
  done
  fail "server did not become healthy"
}

step "1. curator starts the server (database created and migrated)"
start_server
[[ -f "$work/dpopt.db" ]] || fail "database file not created"

step "2. curator imports a private and a public dataset"
dp dataset import adult "$data/a9a" --format=libsvm --dimension=123 \
  --epsilon-budget=3 --delta-budget=1e-6
dp dataset import adult-test "$data/a9a.t" --format=libsvm --dimension=123 --public

step "3. analyst lists and inspects datasets (public metadata only)"
dp dataset list
dp dataset show adult
rows="$(dp dataset show adult --json | json "['rows']")"
[[ "$rows" == "32561" ]] || fail "adult rows: $rows"

step "4. budget"
dp budget show adult
remaining="$(dp budget show adult --json | json "['epsilon_remaining']")"
python3 -c "assert abs($remaining - 3) < 1e-9" || fail "fresh budget is $remaining"

cat >"$work/spec.json" <<'JSON'
{"dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
 "privacy": {"epsilon": 1.0, "delta": 1e-6},
 "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": 2000, "clip_norm": 1.0, "learning_rate": 0.5}},
 "evaluate_on": "adult-test"}
JSON

step "5. estimate (nothing charged)"
dp job estimate "$work/spec.json"
est_eps="$(dp job estimate "$work/spec.json" --json | json "['cost']['epsilon']")"
python3 -c "assert 0 < $est_eps <= 1.0 + 1e-9" || fail "estimated epsilon $est_eps"
[[ "$(dp ledger adult --json | json "['budget'].get('charges', 0)")" == "0" ]] || fail "estimate charged"

step "5b. dry runs: synthetic data, then a curator's public dummy; nothing charged"
dp job submit "$work/spec.json" --dry-run --wait | tee "$work/dry.out"
grep -q "DRY RUN    SYNTHETIC DATA (generated from the public schema of dataset adult)" \
  "$work/dry.out" || fail "dry run not marked synthetic"
grep -q "none charged (dry run); the real job: epsilon" "$work/dry.out" ||
  fail "dry run does not show the real job's cost"
grep -q "run time" "$work/dry.out" || fail "dry run does not show its run time"
dp job list | grep -q "dry-run" || fail "job list does not mark the dry run"
dp dataset import adult-dummy "$data/a9a.t" --format=libsvm --dimension=123 --public \
  --dummy-for=adult | tee "$work/dummy.out"
grep -q "dummy for  adult" "$work/dummy.out" || fail "dummy import: $(cat "$work/dummy.out")"
dp dataset show adult | grep -q "dummy      adult-dummy" || fail "adult does not name its dummy"
if dp dataset import adult-dummy2 "$data/a9a.t" --format=libsvm --dimension=122 --public \
  --dummy-for=adult 2>"$work/dummy2.err"; then fail "a dummy of another dimension was accepted"; fi
grep -q FAILED_PRECONDITION "$work/dummy2.err" || fail "wrong dummy: $(cat "$work/dummy2.err")"
dry_id="$(dp job submit "$work/spec.json" --dry-run --json | json "['id']")"
dp job watch "$dry_id" | grep -q "SYNTHETIC DATA (public dummy dataset adult-dummy)" ||
  fail "dry run did not use the dummy"
dp job result "$dry_id" | grep -q "DRY RUN" || fail "dry run result not marked"
dp audit --principal=curator >"$work/audit-dry.out"
grep -q "JobService/SubmitJob .*(dry run)" "$work/audit-dry.out" || fail "audit does not record the dry run"
[[ "$(dp ledger adult --json | json "['budget'].get('charges', 0)")" == "0" ]] || fail "a dry run charged"

step "6. submit --wait, then the result"
dp job submit "$work/spec.json" --wait | tee "$work/submit.out"
job_id="$(dp job list --newest-first --json | json "['jobs'][0]['id']")"
dp job get "$job_id"
acc="$(dp job get "$job_id" --json | json "['evaluation']['accuracy']")"
echo "test accuracy on a9a.t: $acc"
python3 -c "assert $acc >= 0.80" || fail "accuracy $acc < 0.80"
dp job result "$job_id" --output "$work/model.json"
python3 -c "import json; m=json.load(open('$work/model.json')); assert len(m['model']['weights']) == 123" ||
  fail "model.json has no 123 weights"

step "6b. a trace longer than one reply: job result fetches every page"
cat >"$work/traced.json" <<'JSON'
{"dataset": "adult-test", "model": {"logistic_regression": {"l2": 0.001}},
 "algorithm": {"gd": {"steps": 1500, "learning_rate": 0.5}},
 "trace_every": 1, "trace_iterates": true}
JSON
traced_id="$(dp job submit "$work/traced.json" --json | json "['id']")"
dp job watch "$traced_id" >/dev/null
points="$(dp job result "$traced_id" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["trace"]))')"
[[ "$points" == "1500" ]] || fail "job result returned $points of 1500 trace points"

step "7. watch, list, cancel, ledger"
dp job watch "$job_id" >/dev/null
dp job list
long_spec="$work/long.json"
# A long full-batch DP-GD job (cancelled / killed below).
cat >"$long_spec" <<'JSON'
{"dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
 "privacy": {"epsilon": 0.3, "delta": 1e-6},
 "algorithm": {"dp_gd": {"steps": 1000000, "clip_norm": 1.0, "learning_rate": 0.5}}}
JSON
long_id="$(dp job submit "$long_spec" --json | json "['id']")"
dp job cancel "$long_id"
for _ in $(seq 1 100); do
  state="$(dp job get "$long_id" --json | json "['state']")"
  [[ "$state" == "JOB_STATE_CANCELLED" ]] && break
  sleep 0.1
done
[[ "$state" == "JOB_STATE_CANCELLED" ]] || fail "cancelled job is $state"
dp ledger adult
charges="$(dp ledger adult --json | json "['budget']['charges']")"
[[ "$charges" == "2" ]] || fail "expected 2 charges, got $charges"

step "8. a job beyond the remaining budget is refused, nothing charged"
big="$work/big.json"
sed 's/"epsilon": 1.0/"epsilon": 50/' "$work/spec.json" >"$big"
if dp job submit "$big" 2>"$work/refused.err"; then fail "over-budget job admitted"; fi
cat "$work/refused.err"
grep -q RESOURCE_EXHAUSTED "$work/refused.err" || fail "no RESOURCE_EXHAUSTED"
grep -qi "remain" "$work/refused.err" || fail "message does not say what remains"
[[ "$(dp ledger adult --json | json "['budget']['charges']")" == "2" ]] || fail "refused job charged"

step "9. malformed spec, unknown dataset, bad file: clear errors, nothing charged"
echo '{"dataset": "adult", "model": ' >"$work/bad.json"
if dp job submit "$work/bad.json" 2>"$work/bad.err"; then fail "malformed spec accepted"; fi
grep -q "not a valid JobSpec" "$work/bad.err" || fail "malformed spec message"
sed 's/"dataset": "adult"/"dataset": "nope"/' "$work/spec.json" >"$work/nope.json"
if dp job submit "$work/nope.json" 2>"$work/nope.err"; then fail "unknown dataset accepted"; fi
grep -q NOT_FOUND "$work/nope.err" || fail "unknown dataset is not NOT_FOUND"
printf '+1 1:1 2:nan\n' >"$work/nan.libsvm"
if dp dataset import bad "$work/nan.libsvm" --dimension=3 --epsilon-budget=1 --delta-budget=1e-6 2>"$work/nan.err"; then
  fail "NaN file imported"
fi
grep -q INVALID_ARGUMENT "$work/nan.err" || fail "NaN import is not INVALID_ARGUMENT"
# LIBSVM needs --dimension; a CSV file gives it by its first line, and every
# row is checked against it.
if dp dataset import bad "$work/nan.libsvm" --epsilon-budget=1 --delta-budget=1e-6 \
    2>"$work/nodim.err"; then
  fail "LIBSVM import without --dimension accepted"
fi
grep -q "needs --dimension" "$work/nodim.err" || fail "LIBSVM without --dimension: $(cat "$work/nodim.err")"
printf 'x1,x2,x3,y\n0.5,1,2,1\n3,4,5,-1\n' >"$work/inferred.csv"
dp dataset import inferred "$work/inferred.csv" --format=csv --header --public \
  --feature-bounds=-10:10
[[ "$(dp dataset show inferred --json | json "['dimension']")" == "3" ]] ||
  fail "CSV dimension not inferred"
[[ "$(dp dataset show inferred --json | json "['bounds']['lower'].count(-10)")" == "3" ]] ||
  fail "--feature-bounds not one per inferred feature"
if dp dataset import inferred2 "$work/inferred.csv" --format=csv --header --public \
    --dimension=2 2>"$work/dim.err"; then
  fail "CSV import with a disagreeing --dimension accepted"
fi
grep -q INVALID_ARGUMENT "$work/dim.err" || fail "disagreeing --dimension is not INVALID_ARGUMENT"
grep -q "the file has 4 columns (dimension 3 + 1 label) but the declared dimension is 2" \
  "$work/dim.err" || fail "disagreeing --dimension message: $(cat "$work/dim.err")"
printf '0.5,1,2,1\n3,4,-1\n' >"$work/short.csv"
if dp dataset import short "$work/short.csv" --format=csv --public 2>"$work/short.err"; then
  fail "CSV with a short row imported"
fi
grep -q "line 2: expected 4 columns (dimension 3 + 1 label, as on line 1), found 3" \
  "$work/short.err" || fail "short CSV row message: $(cat "$work/short.err")"
[[ "$(dp ledger adult --json | json "['budget']['charges']")" == "2" ]] || fail "bad input charged"

step "10. SIGKILL mid-job, restart: the job is FAILED and stays charged"
before="$(dp budget show adult --json | json "['epsilon_remaining']")"
kill_id="$(dp job submit "$long_spec" --json | json "['id']")"
for _ in $(seq 1 100); do
  state="$(dp job get "$kill_id" --json | json "['state']")"
  [[ "$state" == "JOB_STATE_RUNNING" ]] && break
  sleep 0.1
done
[[ "$state" == "JOB_STATE_RUNNING" ]] || fail "job never ran ($state)"
after_charge="$(dp budget show adult --json | json "['epsilon_remaining']")"
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
# While it is down, the curator replaces the bootstrap token (old one revoked).
old_token="$DPOPT_TOKEN"
"$server_bin" rotate-curator-token --db="$work/dpopt.db" >"$work/rotate.out" ||
  fail "rotate-curator-token failed"
grep -q "revoked $(echo "$old_token" | cut -c1-16)" "$work/rotate.out" || fail "rotation: $(cat "$work/rotate.out")"
[[ "$(stat -c %a "$work/dpopt.db.curator-token")" == "600" ]] || fail "rotated token file is not 0600"
start_server
if DPOPT_TOKEN="$old_token" dp whoami >/dev/null 2>&1; then fail "the old curator token works after rotation"; fi
state="$(dp job get "$kill_id" --json | json "['state']")"
[[ "$state" == "JOB_STATE_FAILED" ]] || fail "killed job is $state after restart"
dp job get "$kill_id"
charges="$(dp ledger adult --json | json "['budget']['charges']")"
[[ "$charges" == "3" ]] || fail "expected 3 charges after the crash, got $charges"
after_restart="$(dp budget show adult --json | json "['epsilon_remaining']")"
python3 -c "assert $after_restart == $after_charge < $before" ||
  fail "budget before=$before after-charge=$after_charge after-restart=$after_restart"

step "11. access control: an analyst with a capped grant, isolation, revocation"
[[ "$(dp whoami --json | json "['role']")" == "ROLE_CURATOR" ]] || fail "whoami is not the curator"
dp principal create alice --json >"$work/alice.json"
alice_token="$(json "['token']" <"$work/alice.json")"
# Analyst tokens expire (the server's default lifetime) unless the server says otherwise.
json "['info']['expires_at']" <"$work/alice.json" >/dev/null || fail "alice's token has no expiry"
if dp token create alice --ttl=0 2>"$work/ttl0.err"; then fail "--ttl=0 accepted"; fi
grep -q -- "--no-expiry" "$work/ttl0.err" || fail "--ttl=0 message: $(cat "$work/ttl0.err")"
if dp token create alice --no-expiry 2>"$work/noexp.err"; then fail "a never-expiring analyst token was issued"; fi
grep -q "INVALID_ARGUMENT" "$work/noexp.err" || fail "--no-expiry for an analyst: $(cat "$work/noexp.err")"
dp grant add alice adult --epsilon-cap=0.5
as_alice() { DPOPT_TOKEN="$alice_token" "$cli" --server="$addr" "$@"; }
[[ "$(as_alice dataset list --json | json "[\"datasets\"][0][\"name\"]")" == "adult" ]] ||
  fail "alice does not see her granted dataset"
as_alice job list --json | python3 -c 'import json,sys; assert json.load(sys.stdin).get("jobs", []) == []' ||
  fail "alice sees the curator's jobs"
small_spec="$work/small.json"
sed -e 's/"epsilon": [0-9.e-]*/"epsilon": 0.25/' -e 's/"steps": [0-9]*/"steps": 100/' \
  "$work/spec.json" >"$small_spec"
admitted=0
for _ in 1 2 3 4 5; do
  if as_alice job submit "$small_spec" --wait >/dev/null 2>"$work/cap.err"; then
    admitted=$((admitted + 1))
  else
    break
  fi
done
[[ $admitted -ge 1 ]] || fail "alice's first job within her cap was refused: $(cat "$work/cap.err")"
grep -q "RESOURCE_EXHAUSTED" "$work/cap.err" && grep -q "cap of 0.5" "$work/cap.err" ||
  fail "alice was never stopped by her cap ($admitted jobs)"
as_alice budget show adult --json |
  python3 -c 'import json,sys; b=json.load(sys.stdin); assert 0 < b["caller_epsilon_spent"] <= b["caller_epsilon_cap"] == 0.5, b' ||
  fail "alice's cap view"
if as_alice principal list 2>"$work/pd.err"; then fail "an analyst listed principals"; fi
grep -q PERMISSION_DENIED "$work/pd.err" || fail "principal list as analyst is not PERMISSION_DENIED"
dp audit --principal=alice | grep -q "JobService/SubmitJob" || fail "audit log lacks alice's submit"

step "9b. costly jobs wait for a curator's approval"
dp grant add alice adult --epsilon-cap=0.5 --approval-above=0.1 --approval-timeout=2d |
  grep -q "wait for a curator's approval (at most 172800 s)" || fail "grant add --approval-above"
charges_before="$(dp ledger adult --json | json "['budget']['charges']")"
pend_id="$(as_alice job submit "$small_spec" --json | json "['id']")"
[[ "$(as_alice job get "$pend_id" --json | json "['state']")" == "JOB_STATE_PENDING_APPROVAL" ]] ||
  fail "a job above the approval threshold did not wait"
as_alice job get "$pend_id" | grep -q "charged only if a curator approves" || fail "pending job's cost line"
dp job pending | grep -q "$pend_id" || fail "job pending does not list the waiting job"
if as_alice job approve "$pend_id" 2>"$work/appr-alice.err"; then fail "an analyst approved a job"; fi
grep -q PERMISSION_DENIED "$work/appr-alice.err" || fail "analyst approval is not PERMISSION_DENIED"
# alice's cap is spent: the approval's admission refuses it and charges nothing.
if dp job approve "$pend_id" 2>"$work/appr.err"; then fail "an approval over alice's cap was admitted"; fi
grep -q RESOURCE_EXHAUSTED "$work/appr.err" || fail "approval over the cap: $(cat "$work/appr.err")"
dp job reject "$pend_id" --reason="over your cap this month" | grep -q "rejected job" || fail "reject"
as_alice job get "$pend_id" | grep -q "REJECTED" || fail "alice does not see the rejection"
as_alice job get "$pend_id" | grep -q "over your cap this month" || fail "alice does not see the reason"
[[ "$(dp ledger adult --json | json "['budget']['charges']")" == "$charges_before" ]] ||
  fail "a waiting or rejected job was charged"
dp audit --principal=curator >"$work/audit-reject.out"
grep -q "JobService/RejectJob .*(rejected: over your cap this month)" "$work/audit-reject.out" ||
  fail "the rejection is not audited"
dp principal revoke alice
if as_alice dataset list 2>"$work/rev.err"; then fail "revoked token still works"; fi
grep -q UNAUTHENTICATED "$work/rev.err" || fail "revoked token is not UNAUTHENTICATED"

step "12. dataset deletion: rows erased, ledger kept"
if dp dataset delete adult 2>/dev/null; then fail "delete without --yes"; fi
dp dataset delete adult --yes
if dp dataset show adult 2>/dev/null; then fail "deleted dataset still shown"; fi
[[ "$(dp ledger adult --json | json "['budget']['charges']")" == "$((3 + admitted))" ]] ||
  fail "ledger not kept after deletion"

step "13. piecewise-affine family: a max-affine problem from CSV + polytope, estimate every example, run"
ex="$repo/examples"
dp dataset import max-affine "$ex/data/max_affine.csv" --format=csv --dimension=5 --header \
  --polytope="$ex/data/max_affine_polytope.json" --b-max=1 --epsilon-budget=3 \
  --budget-filter=basic
# (Without --dimension: the CSV's first line gives it.)
dp dataset import max-affine-public "$ex/data/max_affine.csv" --format=csv \
  --header --polytope="$ex/data/max_affine_polytope.json" --b-max=1 --public
dp dataset show max-affine | tee "$work/pa_show.out"
grep -q "l-infinity on the offsets" "$work/pa_show.out" || fail "max-affine relation not shown"
grep -q "max-affine: 20 pieces" "$work/pa_show.out" || fail "max-affine problem not shown"
# The private offsets (the CSV's last column) appear nowhere in show.
dp dataset show max-affine --json >"$work/pa_show.json"
python3 - "$ex/data/max_affine.csv" "$work/pa_show.out" "$work/pa_show.json" <<'PY' ||
import sys
offsets = [l.strip().split(",")[-1] for l in open(sys.argv[1]).readlines()[1:]]
text = open(sys.argv[2]).read() + open(sys.argv[3]).read()
leaked = [b for b in offsets if b.lstrip("-") in text]
assert not leaked, leaked
PY
  fail "dataset show leaks private offsets"
for t in pa_perturb_problem pa_perturb_solution pa_exponential pa_subgradient; do
  e="$(dp job estimate "$ex/$t.json" --json | json "['cost']['epsilon']")"
  python3 -c "assert abs($e - 0.5) < 1e-12" || fail "$t estimated at epsilon $e, not 0.5"
done
[[ "$(dp ledger max-affine --json | json "['budget'].get('charges', 0)")" == "0" ]] ||
  fail "piecewise-affine family estimates charged"
# Under an RDP filter pa_subgradient's selections are charged through zCDP:
# the estimate shows the job's pure epsilon and the lower charge.
dp dataset import max-affine-rdp "$ex/data/max_affine.csv" --format=csv --dimension=5 \
  --header --polytope="$ex/data/max_affine_polytope.json" --b-max=1 --epsilon-budget=3 \
  --delta-budget=1e-6 --budget-filter=rdp
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); s['dataset']='max-affine-rdp'; \
json.dump(s, open(sys.argv[2], 'w'))" "$ex/pa_subgradient.json" "$work/pa_rdp.json"
dp job estimate "$work/pa_rdp.json" | tee "$work/pa_rdp.out"
grep -q "guarantee  pure epsilon 0.5 (delta 0)" "$work/pa_rdp.out" ||
  fail "pa_subgradient estimate under RDP does not show its pure epsilon"
dp job estimate "$work/pa_rdp.json" --json >"$work/pa_rdp.json.out"
python3 - "$work/pa_rdp.json.out" <<'PY' || fail "pa_subgradient not charged below its epsilon under RDP"
import json, sys
c = json.load(open(sys.argv[1]))["cost"]
assert c["guarantee_epsilon"] == 0.5 and c["epsilon"] < 0.5 and c["delta"] == 1e-6, c
PY
dp job submit "$ex/pa_subgradient.json" --wait >/dev/null
dp job submit "$ex/pa_exponential.json" --wait >/dev/null
dp job submit "$ex/pa_solve.json" --wait >/dev/null
spent="$(dp budget show max-affine --json | json "['epsilon_spent']")"
python3 -c "assert abs($spent - 1.0) < 1e-12" || fail "max-affine spent $spent, not 1.0"

step "14. tokens appear in no log and no error message"
# A token is ID.SECRET; the secret part must not be in the server's log (all
# of it, across the restarts above) or in any error the CLI printed.
for tok in "$DPOPT_TOKEN" "$alice_token"; do
  secret="${tok#*.}"
  [[ -n "$secret" && "$secret" != "$tok" ]] || fail "unexpected token format"
  if grep -rqF -- "$secret" "$work/server.log" "$work"/*.err; then
    fail "a token secret appears in the server log or a CLI error"
  fi
done

echo "PASS: user flow (accuracy $acc)"
