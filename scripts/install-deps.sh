#!/usr/bin/env bash
# Installs everything dpopt needs to build, test and demo, from Debian 12
# packages only (no other registry is needed, except npm for the optional
# Node interop client). Safe to run again.
set -euo pipefail

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates
  # lld: links the test binaries about 5x faster than bfd (CMakeLists.txt)
  lld
  # libraries (see docs/architecture.md, "Dependencies")
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libsqlite3-dev libgtest-dev libgmock-dev
  libbenchmark-dev libssl-dev nlohmann-json3-dev libcli11-dev
  # exact samplers: MPFR certifies the Poisson skip sampler's brackets
  libmpfr-dev libgmp-dev
  # dataset import: correctly rounded number parsing (header-only)
  libfast-float-dev
  # the web console's HTTP(S) listener (server/console)
  libcpp-httplib-dev
  # Prometheus metrics (server/metrics.cc); the real Prometheus server and
  # systemd-analyze for the operations tests (tests/ops)
  prometheus-cpp-dev prometheus systemd
  # dp_dda's MPI execution (distributed-DDA family): Open MPI's headers and library for
  # dpopt-dda-worker, and mpirun for the server and the tests (optional at
  # build time: without it the worker and its tests are skipped)
  libopenmpi-dev openmpi-bin
  # sanitizer and fuzzing stage (scripts/sanitize.sh): clang, libFuzzer,
  # ASan/UBSan runtimes; openssl makes the test certificates
  clang libclang-rt-14-dev openssl
  # piecewise-affine family: GLPK (LP solver) and GMP (exact vector Laplace noise)
  libglpk-dev libgmp-dev
  # tests, interop clients and plots; scipy: the distributed-DDA reproduction's
  # reference optimum of the l1-SVM (HiGHS linear program)
  python3 python3-grpcio python3-protobuf python3-numpy python3-matplotlib
  python3-scipy
  sqlite3 procps
  # the Python client package (clients/python): offline wheel build, tests,
  # DataFrames and progress bars
  python3-build python3-setuptools python3-wheel python3-pytest python3-pandas
  python3-tqdm
  # the benchmark suite's PyTorch peer (scripts/bench.sh, ctest bench_smoke)
  python3-torch
  # the web console's browser test (tests/e2e/console): headless Chromium
  # driven over the DevTools protocol
  chromium python3-websocket
)
# Node.js for the Node interop client: Debian's, unless one is installed.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
