#!/usr/bin/env bash
# Set up everything: Python packages (launcher, worker, tests) and, unless --python-only, the
# offline kind/helm toolchain with the worker image (cached under ~/.cache/tfk8s, keyed by version).
set -euo pipefail
cd "$(dirname "$0")/.."
python_only=0
[[ "${1:-}" == "--python-only" ]] && python_only=1

start=$(date +%s)
if [[ $python_only == 0 ]]; then
  # Side by side: pip waits on PyPI while the toolchain's first steps wait on the Go proxy and
  # the Debian mirror; the toolchain needs no Python package before its addon step (PyYAML),
  # twenty minutes in when cold, seconds when warm, and then only one that pip already has.
  bash tests/kind/toolchain.sh &
  toolchain=$!
  trap 'kill "$toolchain" 2>/dev/null || true' EXIT  # pip failed: stop the toolchain too
fi
python -m pip install --disable-pip-version-check -q -e '.[worker,test]'
# tf-keras depends on `tensorflow`; without --no-deps pip replaces tensorflow-cpu with the full
# 572 MB wheel. Keras 2 is what ParameterServerStrategy + Model.fit needs under TF 2.21.
python -m pip install --disable-pip-version-check -q --no-deps 'tf-keras~=2.21.0'
echo "[setup] python packages: $(( $(date +%s) - start ))s"

if [[ $python_only == 0 ]]; then
  bash scripts/task_env.sh  # the process tier's task interpreter: the image's packages only
  wait "$toolchain"  # its exit status is the script's (set -e)
  trap - EXIT
fi
