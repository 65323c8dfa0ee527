#!/usr/bin/env bash
# Set up everything: Python packages (launcher, worker, tests) and, unless --python-only, the
# offline kind/helm toolchain with the worker image (cached under ~/.cache/tfk8s, keyed by version).
set -euo pipefail
cd "$(dirname "$0")/.."
python_only=0
[[ "${1:-}" == "--python-only" ]] && python_only=1

start=$(date +%s)
python -m pip install --disable-pip-version-check -q -e '.[worker,test]'
# tf-keras depends on `tensorflow`; without --no-deps pip replaces tensorflow-cpu with the full
# 572 MB wheel. Keras 2 is what ParameterServerStrategy + Model.fit needs under TF 2.21.
python -m pip install --disable-pip-version-check -q --no-deps 'tf-keras~=2.21.0'
echo "[setup] python packages: $(( $(date +%s) - start ))s"

if [[ $python_only == 0 ]]; then
  bash tests/kind/toolchain.sh
fi
