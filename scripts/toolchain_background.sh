#!/usr/bin/env bash
# Starts the kind/helm toolchain build (tests/kind/toolchain.sh) in the background and returns:
# `scripts/setup.sh --toolchain-in-background`, CI's cold path. The build holds an exclusive
# flock on $TFK8S_CACHE/toolchain.lock for its whole life, and the tests that need the toolchain
# (kind, scale, helm; tests/support.py wait_for_the_toolchain) take it shared, so they wait for
# it. A lock is held by the live build itself: another setup (`--python-only` beside a CI run)
# cannot erase it, as it could erase a pid file. toolchain-background.exit says how the build
# ended: `running` while it runs (left so if it was killed), then its exit status.
# TFK8S_TOOLCHAIN_SCRIPT replaces tests/kind/toolchain.sh (tests/test_toolchain_lock.py runs a
# short fake one).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${TFK8S_CACHE:-$HOME/.cache/tfk8s}
toolchain=${TFK8S_TOOLCHAIN_SCRIPT:-tests/kind/toolchain.sh}
lock=$cache/toolchain.lock state=$cache/toolchain-background.exit log=$cache/logs/toolchain-background.log
mkdir -p "$cache/logs"
exec 9>>"$lock"
if ! flock -n 9; then
  echo "[setup] another toolchain build holds $lock; waiting for it to end"
  flock 9
fi
echo running >"$state"
# setsid: not killed with setup's process group; its output to the log, none to setup's pipes.
# The wrapper shell keeps fd 9, and with it the lock, until it has written the exit status; the
# build itself gets no fd 9, so nothing it leaves running (dockerd) holds the lock on.
setsid bash -c 'bash "$1" 9>&-; echo $? >"$2"' _ "$toolchain" "$state" </dev/null >"$log" 2>&1 &
echo "[setup] toolchain building in the background (pid $!, log: $log; it holds $lock until it ends)"
