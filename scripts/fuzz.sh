#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz.
#   scripts/fuzz.sh [--build-dir DIR] [--seconds N] [--target NAME] [--jobs N] [--merge]
# --build-dir: a DPOPT_FUZZ=ON build (default build-san; scripts/sanitize.sh
#   --no-tests --no-fuzz makes one). --seconds: per target (default 60).
# --target: one of libsvm, csv, job_spec, dp_event (default: all).
# --jobs: how many targets fuzz at once (default 1; each is one process on
#   one core, so up to the number of cores each still gets its full time).
# --merge: add the new interesting inputs to the committed corpus.
# The corpus is copied to a scratch directory first, so a run never changes
# the repository unless --merge is given. A crash leaves its input in
# tests/fuzz/crashes/ (commit it to tests/fuzz/corpus/<target>/ once fixed:
# the normal build replays the corpus as a ctest regression test).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo/build-san"
seconds=60
targets=(libsvm csv job_spec dp_event)
jobs=1
merge=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --target) targets=("$2"); shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
crashes="$repo/tests/fuzz/crashes"
mkdir -p "$crashes"
scratch="$(mktemp -d /tmp/dpopt-fuzz.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
  [[ -x "$build/tests/fuzz/fuzz_$t" ]] ||
    { echo "fuzz.sh: no $build/tests/fuzz/fuzz_$t (build with -DDPOPT_FUZZ=ON)" >&2; exit 1; }
done
# Fuzzes target $1 for $seconds; its report goes to $scratch/$1.report.
fuzz_one() {
  local t="$1" bin="$build/tests/fuzz/fuzz_$1"
  mkdir -p "$scratch/$t"
  cp "$repo/tests/fuzz/corpus/$t/"* "$scratch/$t/"
  {
    echo "-- fuzz_$t: ${seconds} s"
    if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$crashes/${t}-" "$scratch/$t" \
        >"$scratch/$t.log" 2>&1; then
      echo "fuzz_$t: FAILED (artifacts in $crashes)"; tail -n 40 "$scratch/$t.log"
      return 1
    fi
    grep -E "^stat::(number_of_executed_units|peak_rss_mb|new_units_added)" "$scratch/$t.log" || true
  } >"$scratch/$t.report"
}
status=0
# Up to $jobs targets at a time, reported in the order given.
pids=()
for i in "${!targets[@]}"; do
  fuzz_one "${targets[$i]}" &
  pids[$i]=$!
  if (( i + 1 >= jobs )); then
    j=$(( i + 1 - jobs ))
    wait "${pids[$j]}" || status=1
    cat "$scratch/${targets[$j]}.report" || true
  fi
done
for (( j = ${#targets[@]} - jobs + 1; j < ${#targets[@]}; ++j )); do
  (( j >= 0 )) || continue
  wait "${pids[$j]}" || status=1
  cat "$scratch/${targets[$j]}.report" || true
done
if [[ $merge -eq 1 ]]; then
  for t in "${targets[@]}"; do
    "$build/tests/fuzz/fuzz_$t" -merge=1 "$repo/tests/fuzz/corpus/$t" "$scratch/$t" >/dev/null 2>&1
  done
fi
exit $status
