#!/usr/bin/env bash
# The sanitizer and fuzzing stage: builds everything with clang,
# AddressSanitizer and UBSan (and libFuzzer instrumentation) into
# BUILD_DIR (default build-san), runs the unit and integration tests under
# the sanitizers, then runs each libFuzzer target for a short fixed time
# from its committed seed corpus.
#   scripts/sanitize.sh [--fuzz-seconds N] [--no-tests] [--no-fuzz]
# Defaults: 20 s per fuzz target (CI). The documented long runs use
# scripts/fuzz.sh directly (docs/fuzzing.md).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build-san}"
seconds=20
tests=1
fuzz=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --fuzz-seconds) seconds="$2"; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --no-fuzz) fuzz=0; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v clang++ >/dev/null || { echo "sanitize.sh: clang++ missing (scripts/install-deps.sh)" >&2; exit 1; }
launcher=()
# The test targets share a precompiled header: ccache caches their
# compiles only with these sloppiness settings (its manual, "Precompiled
# headers").
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
fi
# -O1 and line tables only: what ASan's reports need (file:line stacks), and
# about a quarter less compile time than -O2 -g. Test sources stay at -O1:
# at -O0 (a fifth less compile time) the linker keeps the test objects'
# unoptimised copies of Eigen's templates, which clang's -O1 library code
# calls out of line: a statistical test (the pa_exponential audit) had not
# finished after 13 minutes.
# Each part's elapsed time goes to the log, as in scripts/test.sh.
part_start=$SECONDS
part_took() {
  echo "== sanitize: $1 took $((SECONDS - part_start)) s"
  part_start=$SECONDS
}
CXX=clang++ cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DDPOPT_FUZZ=ON "${launcher[@]}" \
  -DDPOPT_TEST_COMPILE_OPTIONS="${DPOPT_TEST_COMPILE_OPTIONS-}" >/dev/null
# By default the five long numerical suites (minutes each under ASan; the
# same kernels run under the sanitizers in the other tests), the
# pa_exponential timing test (a run-time distribution measured under ASan
# measures the sanitizer; its sampler runs under ASan in the mechanisms and
# examples tests) and the benchmark smoke run (it measures speed) are left
# to the full run, and so are not built here either:
# DPOPT_SANITIZE_EXCLUDE= scripts/sanitize.sh
exclude="${DPOPT_SANITIZE_EXCLUDE-^(optim_bilevel_test|optim_accelerated_properties_test|optim_line_search_test|optim_distributed_dda_test|optim_a9a_test|optim_piecewise_affine_timing_test|bench_smoke)\$}"
if [[ -z "$exclude" ]]; then
  ninja -C "$build" -j"${JOBS:-$(nproc)}"
else
  # Every target (ninja's phony aliases of CMake's targets) except the
  # excluded tests and the benchmark binaries (tests/bench: scripts/bench.sh
  # builds and runs them; none runs under the sanitizers).
  mapfile -t targets < <(ninja -C "$build" -t targets |
    sed -n 's/^\([^/:]*\): phony$/\1/p' |
    grep -Ev '^(all|test|install|edit_cache|rebuild_cache|list_install_components|.*\.a|dpopt_bench|noise_bench|dda_stream_memory|pool_bench)$' |
    grep -Ev "$exclude")
  ninja -C "$build" -j"${JOBS:-$(nproc)}" "${targets[@]}"
fi
part_took build
# Abort on the first report; leak checking on; UBSan prints a stack.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$repo/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if [[ $tests -eq 1 ]]; then
  echo "== sanitizers: unit and integration tests (ASan + UBSan)"
  ctest --test-dir "$build" --output-on-failure -j"${JOBS:-2}" ${exclude:+-E "$exclude"}
  part_took tests
fi
if [[ $fuzz -eq 1 ]]; then
  echo "== fuzzing: ${seconds} s per target from the committed corpus"
  # One target per core at a time: each still fuzzes for its full time.
  "$repo/scripts/fuzz.sh" --build-dir "$build" --seconds "$seconds" \
    --jobs "${JOBS:-$(nproc)}"
  part_took fuzzing
fi
echo "SANITIZERS AND FUZZING CLEAN"
