#!/usr/bin/env bash
# systemd-analyze verify of deploy/dpopt.service, with ExecStart pointing at
# the built server (verify checks that the program exists). Exit 77 (ctest:
# skipped) with a message when systemd-analyze is not installed.
#   tests/ops/verify_unit.sh deploy/dpopt.service build/server/dpopt-server
set -euo pipefail
unit="$1"
server="$(realpath "$2")"
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed (apt-get install systemd)"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=/usr/local/bin/dpopt-server|ExecStart=$server|" "$unit" \
  >"$work/dpopt.service"
grep -q "^ExecStart=$server" "$work/dpopt.service" || {
  echo "ExecStart not found in $unit"
  exit 1
}
# Hardening the unit must keep (a regression test of the file itself).
for key in NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes \
  ReadWritePaths=/var/lib/dpopt Restart=on-failure UMask=0077; do
  grep -qx "$key" "$unit" || { echo "missing $key in $unit"; exit 1; }
done
grep -qE "^(DynamicUser=yes|User=)" "$unit" || { echo "no dedicated user"; exit 1; }
out="$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$work/dpopt.service" 2>&1)" || {
  echo "$out"
  exit 1
}
# verify prints warnings without failing; the unit must produce none about
# itself.
if grep -q "dpopt.service" <<<"$out"; then
  echo "$out"
  exit 1
fi
echo "systemd-analyze verify: ok"
