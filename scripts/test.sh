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

"$repo/scripts/install-deps.sh"
BUILD_DIR="$build" "$repo/scripts/build.sh"

echo "== unit and integration tests"
ctest --test-dir "$build" --output-on-failure -j"${JOBS:-2}"

echo "== end-to-end: CLI user flow"
"$repo/tests/e2e/cli/user_flow.sh" "$build"

echo "== end-to-end: external clients (Python, Node)"
"$repo/tests/e2e/interop/run.sh" --build-dir "$build"

echo "== end-to-end: Docker image"
"$repo/tests/e2e/docker/run.sh" "$build/client/dpopt"

echo "== sanitizers (ASan + UBSan) and fuzzing"
BUILD_DIR="${SANITIZE_BUILD_DIR:-$repo/build-san}" "$repo/scripts/sanitize.sh"

echo "ALL TESTS PASSED"
