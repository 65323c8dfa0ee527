#!/usr/bin/env bash
# Set up everything: Python packages (launcher, worker, tests) and, unless --python-only, the
# offline kind/helm toolchain with the worker image (cached under ~/.cache/tfk8s, keyed by version).
# --toolchain-in-background (CI): return once the Python side is ready and leave the toolchain
# building; the tests that need it (kind, scale, helm) wait for it (tests/support.py), the
# process tier runs meanwhile (scripts/toolchain_background.sh: the build holds a lock in the
# cache dir). Its log: ~/.cache/tfk8s/logs/toolchain-background.log.
# --python-only touches nothing of the toolchain: it can run beside a build of it.
set -euo pipefail
cd "$(dirname "$0")/.."
python_only=0 background=0
case "${1:-}" in
  --python-only) python_only=1 ;;
  --toolchain-in-background) background=1 ;;
  "") ;;
  *) echo "usage: bash scripts/setup.sh [--python-only | --toolchain-in-background]" >&2; exit 2 ;;
esac
cache=${TFK8S_CACHE:-$HOME/.cache/tfk8s}

start=$(date +%s)
if [[ $python_only == 0 ]]; then
  # Side by side: pip waits on PyPI while the toolchain's first steps wait on the Go proxy and
  # the Debian mirror; the toolchain needs no Python package before its addon step (PyYAML),
  # twenty minutes in when cold, seconds when warm, and then only one that pip already has.
  if [[ $background == 1 ]]; then
    bash scripts/toolchain_background.sh
  else
    # The same lock as a background build's, held by this script until it exits: the tests
    # wait for this build too, and two builds never share the cache. Its outcome is this
    # script's exit status, not an earlier background build's.
    mkdir -p "$cache"
    exec 9>>"$cache/toolchain.lock"
    flock -n 9 || { echo "[setup] another toolchain build holds $cache/toolchain.lock; waiting"; flock 9; }
    rm -f "$cache/toolchain-background.exit"
    bash tests/kind/toolchain.sh 9>&- &
    toolchain=$!
    trap 'kill "$toolchain" 2>/dev/null || true' EXIT  # pip failed: stop the toolchain too
  fi
fi
python -m pip install --disable-pip-version-check -q -e '.[worker,test,sweep]'
# tf-keras depends on `tensorflow`; without --no-deps pip replaces tensorflow-cpu with the full
# 572 MB wheel. Keras 2 is what ParameterServerStrategy + Model.fit needs under TF 2.21.
python -m pip install --disable-pip-version-check -q --no-deps 'tf-keras~=2.21.0'
echo "[setup] python packages: $(( $(date +%s) - start ))s"

if [[ $python_only == 0 ]]; then
  bash scripts/task_env.sh  # the process tier's task interpreter: the image's packages only
  if [[ $background == 0 ]]; then
    wait "$toolchain"  # its exit status is the script's (set -e)
    trap - EXIT
  fi
fi
