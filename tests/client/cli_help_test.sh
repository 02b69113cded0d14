#!/usr/bin/env bash
# The dpopt CLI's parsing and help, without a server:
#  * every group's --help lists each of its commands; a group without a
#    command exits 2 and shows the same list;
#  * every command's --help exits 0 and lists its own flags and the globals;
#  * unknown commands, unknown flags and missing flag values exit 2 with an
#    error naming them; --version prints the version.
# Usage: cli_help_test.sh PATH/TO/dpopt
set -uo pipefail
cli="${1:?usage: cli_help_test.sh DPOPT}"
fail=0
check() {  # check DESCRIPTION EXPECTED_RC PATTERN -- ARGS...
  local what="$1" want_rc="$2" pattern="$3"; shift 4
  local out rc
  out="$("$cli" "$@" 2>&1)"; rc=$?
  if [[ $rc -ne $want_rc ]]; then
    echo "FAIL: $what: exit $rc, want $want_rc"; echo "$out" | head -5; fail=1; return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: output lacks /$pattern/"; echo "$out" | head -5; fail=1; return
  fi
  echo "ok   $what"
}
declare -A groups=(
  [dataset]="import list show delete"
  [job]="estimate submit get watch list cancel result"
  [budget]="show"
  [privacy]="epsilon calibrate"
  [principal]="create list revoke"
  [token]="create revoke list"
  [grant]="add revoke list"
)
for g in "${!groups[@]}"; do
  for c in ${groups[$g]}; do
    check "dpopt $g --help lists $c" 0 "^  $c " -- "$g" --help
    check "dpopt $g (no command) lists $c" 2 "^  $c " -- "$g"
    check "dpopt $g $c --help shows the global flags" 0 "--server HOST:PORT" -- "$g" "$c" --help
  done
done
check "top-level help lists the groups" 0 "job commands: estimate, submit" -- --help
check "job submit --help shows --wait" 0 "--wait" -- job submit --help
check "dataset import --help shows --epsilon-budget" 0 "--epsilon-budget" -- dataset import --help
check "unknown command" 2 "unknown command 'frobnicate'" -- frobnicate
check "unknown flag" 2 "--bogus" -- job list --bogus
check "missing flag value" 2 "--dataset" -- job list --dataset
check "version" 0 "^dpopt [0-9]" -- --version
check "bad --timeout" 2 "timeout" -- job list --timeout=-1
check "local command works without a server" 0 "epsilon = " -- privacy epsilon \
  --noise-multiplier=1.1 --sampling-rate=0.01 --steps=100 --delta=1e-6
check "global flag before the command" 0 "\"epsilon\": " -- --json privacy epsilon \
  --noise-multiplier=1.1 --steps=10 --delta=1e-6
exit $fail
