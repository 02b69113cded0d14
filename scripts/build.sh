#!/usr/bin/env bash
# Configures and builds dpopt into BUILD_DIR (default: build). Extra
# arguments are ninja targets (default: everything).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$repo/build}"
jobs="${JOBS:-$(nproc)}"
launcher=()
# ccache, when installed, makes rebuilds in several worktrees cheap.
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  "${launcher[@]}" >/dev/null
ninja -C "$build" -j"$jobs" "$@"
