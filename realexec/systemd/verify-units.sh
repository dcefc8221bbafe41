#!/usr/bin/env bash
# Fills the unit templates in with BINDIR and has systemd check them offline
# (`systemd-analyze verify`): any complaint (an unknown key, a bad value, a binary that is
# not executable) fails. Then checks the choices the units document: a controller whose
# policy ended the run (exit 3) or whose config is bad (exit 2) is never restarted.
# usage: verify-units.sh SOURCE_DIR BINDIR WORK_DIR
set -euo pipefail
src=$1; bindir=$2; work=$3
command -v systemd-analyze >/dev/null || { echo "systemd-analyze not found (Debian package systemd)"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
for t in "$src"/*.service.in; do
  sed "s#@FAULTLINE_BINDIR@#$bindir#g" "$t" > "$work/$(basename "${t%.in}")"
done
cp "$work/faultline-agent@.service" "$work/faultline-agent@m0.service"
cd "$work"
out=$(systemd-analyze verify ./faultline-controller.service ./faultline-agent@m0.service 2>&1) || {
  echo "systemd-analyze verify failed: $out"; exit 1; }
[ -z "$out" ] || { echo "systemd-analyze verify complained: $out"; exit 1; }
grep -qx 'RestartPreventExitStatus=2 3' faultline-controller.service || {
  echo "faultline-controller.service: a run ended by its policy (exit 3) must not be restarted"; exit 1; }
grep -qx 'RestartPreventExitStatus=2' 'faultline-agent@.service' || {
  echo "faultline-agent@.service: a bad config (exit 2) must not be restarted"; exit 1; }
echo "units verified: faultline-controller.service, faultline-agent@.service"
