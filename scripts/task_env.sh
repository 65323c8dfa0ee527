#!/usr/bin/env bash
# The tests' task environment: a virtualenv with the worker image's packages and nothing else,
# so the process tier's TensorFlow tasks run in what a pod runs (LocalProcessBackendConfig.python,
# tests/conftest.py), not in this machine's Python with whatever else it has installed.
#
# Why: with scikit-learn and IPython installed (this VM's Python has both), TensorFlow's import
# of Keras 3 imports them too (Keras's optional sklearn wrapper and notebook editor), and
# tf_keras imports scipy: 0.6 to 1.4 CPU-s more per task start, on each of the tier's ~150
# task starts. The image leaves them out (Dockerfile); so does this environment, carrying the
# digits file the way the image does (worker/examples/fashion_mnist.py ENV_DIGITS_CSV).
#
# Cached under ${TFK8S_CACHE:-~/.cache/tfk8s}/task-env-<key>, the key from the Python version,
# pyproject's `worker` extra and this script; the interpreter's path goes to
# $TFK8S_CACHE/task-python, which the tests read. Run by scripts/setup.sh after pip, beside
# the toolchain (it downloads TensorFlow again where pip keeps no cache, as on the CI VMs).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${TFK8S_CACHE:-$HOME/.cache/tfk8s}
PYTHON=${PYTHON:-python}
mkdir -p "$CACHE"

# the `worker` extra without scikit-learn (its digits file is copied instead, as in the image)
requirements=$("$PYTHON" - <<'EOF'
import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["worker"]
print("\n".join(d for d in extra if not d.lower().startswith("scikit-learn")))
EOF
)
key=$( { "$PYTHON" -c 'import sys; print(sys.version, sys.executable)'; echo "$requirements";
         cat "$0"; } | sha256sum | cut -c1-12)
env_dir="$CACHE/task-env-$key"
start=$(date +%s)
if [[ ! -f "$env_dir/.complete" ]]; then
  rm -rf "$env_dir"
  "$PYTHON" -m venv "$env_dir"
  mapfile -t packages <<<"$requirements"
  "$env_dir/bin/python" -m pip install --disable-pip-version-check -q "${packages[@]}"
  # tf-keras with --no-deps, matching the TensorFlow just installed (as the Dockerfile does)
  tf_minor=$("$env_dir/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu").rsplit(".", 1)[0])')
  "$env_dir/bin/python" -m pip install --disable-pip-version-check -q --no-deps "tf-keras==$tf_minor.*"
  digits=$("$PYTHON" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("sklearn").origin).parent / "datasets" / "data" / "digits.csv.gz")')
  mkdir -p "$env_dir/share/tfk8s"
  cp "$digits" "$env_dir/share/tfk8s/digits.csv.gz"
  touch "$env_dir/.complete"
  echo "[task-env] built $env_dir in $(( $(date +%s) - start ))s"
  # older keys' environments (1.6 GB each) are not kept
  find "$CACHE" -maxdepth 1 -name 'task-env-*' ! -name "task-env-$key" -exec rm -rf {} +
else
  echo "[task-env] cached: $env_dir"
fi
echo "$env_dir/bin/python" > "$CACHE/task-python"
