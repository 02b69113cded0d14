#!/usr/bin/env bash
# The benchmark suite. Builds dpopt in Release (build-release/),
# runs the Google Benchmark suite (tests/bench/dpopt_bench.cc: samplers,
# accountants, kernels, steps), then tests/bench/bench.py: end-to-end jobs
# through dpopt-server (DP-SGD and DP-GD on a9a, DP-SGD on generated dense
# datasets of 1e4..1e6 rows, CLI import of the 1M x 100 CSV, consecutive
# pa_exponential jobs by job worker, budget queries), the server's memory for
# an MPI dp_dda job stream (tests/bench/dda_stream_memory)
# and the PyTorch peer (tests/bench/torch_peer.py), and writes
# docs/performance.md, docs/performance.json and docs/performance-steps.png.
#
#   scripts/bench.sh                         # full run (~10 min on 2 cores)
#   scripts/bench.sh --smoke [--build-dir B] [--out DIR]
#                                            # a few seconds, on an existing
#                                            # build (ctest bench_smoke)
# Needs: libbenchmark-dev, python3-torch, python3-numpy, python3-matplotlib,
# python3-grpcio (scripts/install-deps.sh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke=0
build=""
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=1; shift ;;
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The machine's load before this script runs anything (bench.py reports it;
# later load averages count the benchmark itself).
export DPOPT_BENCH_LOADAVG="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo nan)"
if [[ $smoke -eq 1 ]]; then
  build="${build:-$repo/build}"
  out="${out:-$(mktemp -d)}"
  for f in server/dpopt-server client/dpopt tests/bench/dpopt_bench; do
    [[ -x "$build/$f" ]] || { echo "bench.sh --smoke: $build/$f missing (build first)" >&2; exit 1; }
  done
  gbench_args=(--benchmark_min_time=0.001)
  export DPOPT_BENCH_MAX_ROWS=10000
else
  build="${build:-$repo/build-release}"
  out="${out:-$repo/docs}"
  echo "== building Release into $build"
  BUILD_DIR="$build" BUILD_TYPE=Release JOBS="${JOBS:-2}" "$repo/scripts/build.sh" \
    dpopt-server dpopt dpopt_bench dpopt_python
  # The MPI job-stream memory tool, when Open MPI was found at configure time.
  if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^dda_stream_memory:'; then
    ninja -C "$build" -j"${JOBS:-2}" dda_stream_memory dpopt-dda-worker-testing
  fi
  # Medians of 5 repetitions run in random order across benchmarks: single
  # runs on a shared 2-core VM vary by 30%, and the VM drifts over minutes, so
  # benchmarks compared with each other (the DP-GD and GD kernels) must be
  # interleaved; back to back, their ratio swung between 1.0x and 1.3x.
  gbench_args=(--benchmark_min_time=0.3 --benchmark_repetitions=5
               --benchmark_enable_random_interleaving=true
               --benchmark_report_aggregates_only=true)
fi
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== Google Benchmark suite (dpopt_bench)"
"$build/tests/bench/dpopt_bench" "${gbench_args[@]}" \
  --benchmark_out="$work/gbench.json" --benchmark_out_format=json

echo "== end to end through dpopt-server, and the PyTorch peer"
smoke_flag=()
[[ $smoke -eq 1 ]] && smoke_flag=(--smoke --data-dir "$work/data")
/usr/bin/python3 "$repo/tests/bench/bench.py" --build-dir "$build" \
  --gbench-json "$work/gbench.json" --out "$out" "${smoke_flag[@]}"
echo "bench.sh: wrote $out/performance.md"
