#!/usr/bin/env bash
# Quick start #2: set everything up and run the whole test suite.
#   unit + integration tests (ctest), the CLI end-to-end user flow with real
#   processes (incl. SIGKILL + restart), the Python/Node interop clients, and
#   the Docker end-to-end test (skipped, with a message, when no Docker
#   engine is running), then the sanitizer stage: a clang ASan+UBSan build,
#   the tests under it and a 20 s libFuzzer run per target
#   (scripts/sanitize.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
cd "$repo"

# Each stage's elapsed time goes to the log ("== stage NAME took N s"), so
# that a CI log shows where the time went; the running stage's line is also
# printed when a stage fails.
stage_name=""
stage_start=$SECONDS
stage() {
  if [[ -n "$stage_name" ]]; then
    echo "== stage $stage_name took $((SECONDS - stage_start)) s"
  fi
  stage_name="$1"
  stage_start=$SECONDS
}
trap 'stage ""; echo "== total $SECONDS s"' EXIT

stage install-deps
"$repo/scripts/install-deps.sh"
stage build
BUILD_DIR="$build" "$repo/scripts/build.sh"

stage ctest
echo "== unit and integration tests"
ctest --test-dir "$build" --output-on-failure -j"${JOBS:-2}"

stage e2e-cli
echo "== end-to-end: CLI user flow"
"$repo/tests/e2e/cli/user_flow.sh" "$build"

stage e2e-interop
echo "== end-to-end: external clients (Python, Node)"
"$repo/tests/e2e/interop/run.sh" --build-dir "$build"

stage e2e-docker
echo "== end-to-end: Docker image"
"$repo/tests/e2e/docker/run.sh" "$build/client/dpopt"

stage sanitizers
echo "== sanitizers (ASan + UBSan) and fuzzing"
BUILD_DIR="${SANITIZE_BUILD_DIR:-$repo/build-san}" "$repo/scripts/sanitize.sh"

stage ""
echo "ALL TESTS PASSED"
