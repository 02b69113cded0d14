#!/usr/bin/env bash
# Docker end-to-end test: builds the server image (deploy/Dockerfile), runs it
# with a fresh volume and walks the README's user flow against it with the
# host-built CLI; then restarts the container and checks that the ledger
# persisted on the volume; finally brings the compose file up and down.
#
# Usage: tests/e2e/docker/run.sh [CLI] [options]
#   CLI             path of the host-built `dpopt` CLI (default: build/client/dpopt,
#                   or $DPOPT_CLI)
#   --image TAG     image to build and test (default: dpopt-server:e2e)
#   --no-build      test an existing image instead of building it
#   --no-compose    skip the docker-compose check
#   --min-accuracy A   required public test accuracy of the DP-SGD job
#                   (default 0.80: the target at epsilon = 1)
#   --keep          keep container, volume and temp dir for debugging
#
# Without a Docker engine it prints "SKIP: no Docker engine" and exits 0.
# Image builds need the network of the host (apt mirror): they run with
# `DOCKER_BUILDKIT=0 docker build --network host`. The container uses the
# host network (--network host) and listens on a free loopback port only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cli="${DPOPT_CLI:-$repo/build/client/dpopt}"
image="dpopt-server:e2e"
build=1
compose=1
keep=0
min_accuracy=0.80
while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) image="$2"; shift 2 ;;
    --image=*) image="${1#*=}"; shift ;;
    --no-build) build=0; shift ;;
    --no-compose) compose=0; shift ;;
    --min-accuracy) min_accuracy="$2"; shift 2 ;;
    --min-accuracy=*) min_accuracy="${1#*=}"; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "docker e2e: unknown option $1" >&2; exit 2 ;;
    *) cli="$1"; shift ;;
  esac
done

if ! docker info >/dev/null 2>&1; then
  echo "SKIP: no Docker engine"
  exit 0
fi

[[ -x "$cli" ]] || { echo "docker e2e: no CLI at $cli (build it or pass its path)" >&2; exit 1; }
cli="$(cd "$(dirname "$cli")" && pwd)/$(basename "$cli")"
data="$repo/data/adult"
[[ -f "$data/a9a" && -f "$data/a9a.t" ]] || { echo "docker e2e: missing $data/a9a(.t)" >&2; exit 1; }
py="$(command -v python3)"

run_id="dpopt-e2e-$$"
container="$run_id"
volume="$run_id-data"
compose_project="${run_id//-/}"
tmp="$(mktemp -d /tmp/dpopt-docker-e2e.XXXXXX)"
passed=0
failed=0

cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]] && docker container inspect "$container" >/dev/null 2>&1; then
    echo "---- container logs (last 40 lines) ----" >&2
    docker logs --tail 40 "$container" >&2 2>&1 || true
  fi
  if [[ $keep -eq 1 ]]; then
    echo "docker e2e: kept container $container, volume $volume, dir $tmp"
    return
  fi
  docker rm -f "$container" >/dev/null 2>&1 || true
  docker volume rm -f "$volume" >/dev/null 2>&1 || true
  if [[ $compose -eq 1 ]] && command -v docker-compose >/dev/null; then
    DPOPT_IMAGE="$image" docker-compose -p "$compose_project" -f "$repo/deploy/docker-compose.yml" \
      down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

ok() { passed=$((passed + 1)); echo "ok   $*"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $*"
  echo "docker e2e: $passed passed, $failed failed"
  exit 1
}
# check NAME PYTHON-EXPR FILE...: evaluates a Python expression over the
# parsed JSON documents j[0], j[1], ... (a file of JSON lines gives a list).
check() {
  local name="$1" expr="$2"; shift 2
  if "$py" - "$expr" "$@" <<'PY'
import json, math, sys
def load(path):
    text = open(path).read().strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
j = [load(p) for p in sys.argv[2:]]
num = lambda v: float(v or 0)  # proto3 JSON: int64 as strings, defaults omitted
ok = eval(sys.argv[1], {"j": j, "num": num, "math": math, "len": len, "all": all,
                        "any": any, "abs": abs})
if not ok:
    print("  failed: " + sys.argv[1], file=sys.stderr)
    for p in sys.argv[2:]:
        print("  --- " + p + ":\n" + open(p).read()[:2000], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
  then ok "$name"; else fail "$name"; fi
}
# run NAME OUT -- CMD...: runs CMD with stdout to $tmp/OUT; must exit 0.
run() {
  local name="$1" out="$2"; shift 3
  if ! "$@" >"$tmp/$out" 2>"$tmp/$out.err"; then
    cat "$tmp/$out" "$tmp/$out.err" >&2
    fail "$name: command failed: $*"
  fi
}
wait_healthy() {
  local deadline=$((SECONDS + ${2:-120})) status
  while [[ $SECONDS -lt $deadline ]]; do
    status="$(docker inspect --format '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$1" 2>/dev/null || echo missing)"
    case "$status" in
      "running healthy") return 0 ;;
      running*) sleep 1 ;;
      *) echo "container $1: $status" >&2; return 1 ;;
    esac
  done
  echo "container $1 not healthy after ${2:-120} s: $status" >&2
  return 1
}

# ---------------------------------------------------------------- image
start=$SECONDS
"$repo/deploy/make-base-image.sh" || fail "base image (deploy/make-base-image.sh)"
ok "base image debian:bookworm-slim present ($((SECONDS - start)) s)"
if [[ $build -eq 1 ]]; then
  start=$SECONDS
  if ! DOCKER_BUILDKIT=0 docker build --network host -f "$repo/deploy/Dockerfile" \
       -t "$image" "$repo" >"$tmp/build.log" 2>&1; then
    tail -n 60 "$tmp/build.log" >&2
    fail "docker build"
  fi
  ok "image $image built ($((SECONDS - start)) s)"
fi
docker image inspect "$image" >/dev/null 2>&1 || fail "image $image missing"

# ---------------------------------------------------------------- start
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
server="--server=127.0.0.1:$port"
docker volume create "$volume" >/dev/null
start=$SECONDS
docker run -d --name "$container" --network host \
  -v "$volume:/var/lib/dpopt" -e DPOPT_LISTEN="127.0.0.1:$port" \
  --health-interval=2s --health-start-period=60s "$image" >/dev/null
wait_healthy "$container" || fail "container healthy"
ok "container healthy on 127.0.0.1:$port ($((SECONDS - start)) s)"
# The first start wrote the bootstrap curator's token on the volume (0600).
DPOPT_TOKEN="$(docker exec "$container" cat /var/lib/dpopt/dpopt.db.curator-token)"
export DPOPT_TOKEN
[[ -n "$DPOPT_TOKEN" ]] || fail "no curator token on the volume"
ok "curator token written on the volume"
[[ "$(docker exec "$container" id -u)" != 0 ]] || fail "server runs as root"
docker exec "$container" test -f /var/lib/dpopt/dpopt.db || fail "database not on the volume"
ok "server runs as non-root user $(docker exec "$container" id -un), database on the volume"
run "health" health.json -- "$cli" health "$server" --json
check "dpopt health: SERVING" 'j[0]["status"] == "SERVING"' "$tmp/health.json"

# ---------------------------------------------------------------- datasets
rows_train="$(grep -c . "$data/a9a")"
rows_test="$(grep -c . "$data/a9a.t")"
run "import private" import1.json -- "$cli" dataset import adult "$data/a9a" --format=libsvm \
  --dimension=123 --epsilon-budget=3 --delta-budget=1e-6 "$server" --json
check "dataset import adult (private, $rows_train rows)" \
  "num(j[0]['rows']) == $rows_train and num(j[0]['dimension']) == 123 and not j[0].get('public')" \
  "$tmp/import1.json"
run "import public" import2.json -- "$cli" dataset import adult-test "$data/a9a.t" --format=libsvm \
  --dimension=123 --public "$server" --json
check "dataset import adult-test (public, $rows_test rows)" \
  "num(j[0]['rows']) == $rows_test and j[0].get('public') is True and 'budget' not in j[0]" \
  "$tmp/import2.json"
run "dataset list" list.json -- "$cli" dataset list "$server" --json
check "dataset list shows both" \
  "sorted(d['name'] for d in j[0]['datasets']) == ['adult', 'adult-test']" "$tmp/list.json"
run "dataset list (text)" list.txt -- "$cli" dataset list "$server"
grep -q adult-test "$tmp/list.txt" || fail "dataset list (text) lacks adult-test"
ok "dataset list (text)"
run "dataset show" show.json -- "$cli" dataset show adult "$server" --json
check "dataset show adult: public metadata and budget" \
  "num(j[0]['rows']) == $rows_train and num(j[0]['dimension']) == 123 and abs(num(j[0]['budget']['epsilon_total']) - 3) < 1e-12 and abs(num(j[0]['budget']['delta_total']) - 1e-6) < 1e-18" \
  "$tmp/show.json"
run "budget show" budget0.json -- "$cli" budget show adult "$server" --json
check "budget show adult: nothing spent" \
  "num(j[0].get('epsilon_spent')) == 0 and num(j[0].get('charges')) == 0 and abs(num(j[0]['epsilon_remaining']) - 3) < 1e-9 and j[0].get('accounting')" \
  "$tmp/budget0.json"

# ---------------------------------------------------------------- jobs
cat >"$tmp/spec.json" <<'EOF'
{"dataset": "adult", "model": {"logistic_regression": {"l2": 0.0001}},
 "privacy": {"epsilon": 1.0, "delta": 1e-6},
 "algorithm": {"dp_sgd": {"sampling_rate": 0.01, "steps": 2000, "clip_norm": 1.0, "learning_rate": 0.5}},
 "evaluate_on": "adult-test"}
EOF
run "job estimate" estimate.json -- "$cli" job estimate "$tmp/spec.json" "$server" --json
check "job estimate: calibrated, cost <= 1, admissible" \
  "num(j[0]['calibration']['noise_multiplier']) > 0 and num(j[0]['calibration']['steps']) == 2000 and 0 < num(j[0]['cost']['epsilon']) <= 1 + 1e-9 and j[0].get('admissible') is True and num(j[0]['budget_after']['epsilon_remaining']) < num(j[0]['budget_before']['epsilon_remaining'])" \
  "$tmp/estimate.json"
run "budget after estimate" budget1.json -- "$cli" budget show adult "$server" --json
check "job estimate charged nothing" "num(j[0].get('charges')) == 0" "$tmp/budget1.json"

start=$SECONDS
run "job submit --wait" submit.jsonl -- "$cli" job submit "$tmp/spec.json" --wait "$server" --json
check "job submit --wait: SUCCEEDED with public evaluation >= $min_accuracy ($((SECONDS - start)) s)" \
  "[e['job']['state'] for e in j[0][1:] if 'job' in e][-1] == 'JOB_STATE_SUCCEEDED' and num([e['job'] for e in j[0][1:] if 'job' in e][-1]['evaluation']['accuracy']) >= $min_accuracy and any('trace' in e for e in j[0])" \
  "$tmp/submit.jsonl"
job_id="$("$py" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["id"])' "$tmp/submit.jsonl")"
accuracy="$("$py" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([e["job"] for e in ev[1:] if "job" in e][-1]["evaluation"]["accuracy"])' "$tmp/submit.jsonl")"
echo "     job $job_id: test accuracy $accuracy on adult-test"
run "job result" result.json -- "$cli" job result "$job_id" --output "$tmp/model.json" "$server"
check "job result --output model.json: 123 finite weights" \
  "len(j[0]['model']['weights']) == 123 and all(math.isfinite(float(w)) for w in j[0]['model']['weights']) and j[0]['job_id'] == '$job_id'" \
  "$tmp/model.json"
run "job list" jobs.json -- "$cli" job list "$server" --json
check "job list shows the job SUCCEEDED" \
  "[x['state'] for x in j[0]['jobs'] if x['id'] == '$job_id'] == ['JOB_STATE_SUCCEEDED']" "$tmp/jobs.json"
run "ledger" ledger1.json -- "$cli" ledger adult "$server" --json
check "ledger adult: one charge for the job, with its DP event" \
  "len(j[0]['entries']) == 1 and j[0]['entries'][0]['job_id'] == '$job_id' and 0 < num(j[0]['entries'][0]['epsilon']) <= 1 + 1e-9 and j[0]['entries'][0].get('event_json')" \
  "$tmp/ledger1.json"
run "budget after job" budget2.json -- "$cli" budget show adult "$server" --json
check "budget show: one charge, remaining < 3" \
  "num(j[0]['charges']) == 1 and num(j[0]['epsilon_remaining']) < 3 and num(j[0]['epsilon_spent']) > 0" \
  "$tmp/budget2.json"

# Over budget: refused with RESOURCE_EXHAUSTED, says what is left, charges nothing.
sed 's/"epsilon": 1.0/"epsilon": 5.0/' "$tmp/spec.json" >"$tmp/spec-big.json"
set +e
"$cli" job submit "$tmp/spec-big.json" --wait "$server" >"$tmp/big.out" 2>"$tmp/big.err"
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "over-budget job was accepted"
grep -q RESOURCE_EXHAUSTED "$tmp/big.err" || { cat "$tmp/big.err" >&2; fail "over-budget error lacks RESOURCE_EXHAUSTED"; }
grep -Eqi 'remain|left' "$tmp/big.err" || { cat "$tmp/big.err" >&2; fail "over-budget error does not say how much is left"; }
ok "over-budget job refused (exit $rc): $(head -n1 "$tmp/big.err")"
run "ledger" ledger2.json -- "$cli" ledger adult "$server" --json
check "refused job charged nothing" "j[0]['entries'] == j[1]['entries']" "$tmp/ledger2.json" "$tmp/ledger1.json"

# ---------------------------------------------------------------- restart
start=$SECONDS
docker restart -t 30 "$container" >/dev/null
stop_s=$((SECONDS - start))
wait_healthy "$container" || fail "container healthy after restart"
ok "container restarted (stop+start ${stop_s} s) and healthy again"
[[ $stop_s -lt 10 ]] || echo "     note: stopping took ${stop_s} s; does the server handle SIGTERM?"
run "ledger after restart" ledger3.json -- "$cli" ledger adult "$server" --json
check "ledger persisted on the volume" \
  "[(e['job_id'], e['epsilon'], e.get('event_json')) for e in j[0]['entries']] == [(e['job_id'], e['epsilon'], e.get('event_json')) for e in j[1]['entries']]" \
  "$tmp/ledger3.json" "$tmp/ledger1.json"
run "budget after restart" budget3.json -- "$cli" budget show adult "$server" --json
check "budget persisted" "j[0]['epsilon_remaining'] == j[1]['epsilon_remaining'] and j[0]['charges'] == j[1]['charges']" \
  "$tmp/budget3.json" "$tmp/budget2.json"
run "job result after restart" result2.json -- "$cli" job result "$job_id" "$server" --json
check "job and model persisted" "j[0]['model']['weights'] == j[1]['model']['weights']" \
  "$tmp/result2.json" "$tmp/model.json"

docker rm -f "$container" >/dev/null
docker volume rm "$volume" >/dev/null
ok "container and volume removed"

# ---------------------------------------------------------------- compose
if [[ $compose -eq 1 ]]; then
  if ! command -v docker-compose >/dev/null; then
    echo "     skip compose check: docker-compose not installed"
  else
    cport="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # The compose file's TLS setup with mounted certificate files.
    "$repo/tests/common/make-test-certs.sh" "$tmp/tls"
    export DPOPT_IMAGE="$image" DPOPT_LISTEN="127.0.0.1:$cport" DPOPT_TLS_DIR="$tmp/tls"
    dc=(docker-compose -p "$compose_project" -f "$repo/deploy/docker-compose.yml")
    "${dc[@]}" up -d --no-build >"$tmp/compose.log" 2>&1 || { cat "$tmp/compose.log" >&2; fail "docker-compose up"; }
    cid="$("${dc[@]}" ps -q dpopt)"
    wait_healthy "$cid" 180 || fail "compose service healthy"
    run "health (compose, TLS)" chealth.json -- "$cli" health --server="localhost:$cport" \
      --tls-ca="$tmp/tls/ca.crt" --json
    check "docker-compose up: service healthy, restart policy unless-stopped" \
      "j[0]['status'] == 'SERVING'" "$tmp/chealth.json"
    [[ "$(docker inspect --format '{{.HostConfig.RestartPolicy.Name}}' "$cid")" == unless-stopped ]] ||
      fail "compose restart policy"
    "${dc[@]}" down -v >>"$tmp/compose.log" 2>&1 || fail "docker-compose down"
    ok "docker-compose down -v"
  fi
fi

echo "docker e2e: $passed passed, $failed failed"
