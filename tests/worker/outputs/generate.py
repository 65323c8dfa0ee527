"""Writes the real outputs tests/worker/test_exit_cause.py reads: each snippet below run once in
the task Python (`python tests/worker/outputs/generate.py [NAME...]` with TFK8S_TASK_PYTHON or
the cached task environment), stdout and stderr in one file, as a pod's log has them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A model for 28x28x1 images fed flat rows: Keras' shape check fails in fit().
SHAPE_MISMATCH = """
import numpy as np, tensorflow as tf
model = tf.keras.Sequential([tf.keras.Input((28, 28, 1)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
model.compile("adam", "sparse_categorical_crossentropy")
print("epoch 1/1", flush=True)
model.fit(np.zeros((64, 784), "float32"), np.zeros((64,), "int32"), batch_size=32, epochs=1, verbose=0)
"""
# A custom loop's step (tf.function) calls a Keras 3 model on rows of the wrong width; run from
# a file, as a program is: autograph then repeats the exception after "in user code:".
LAYER_IN_STEP = """
import numpy as np, tensorflow as tf, keras
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
@tf.function
def step(x):
    return model(x, training=True)
step(np.zeros((16, 9), "float32"))
"""
FROM_A_FILE = (
    "import pathlib, runpy, tempfile\n"
    "program = pathlib.Path(tempfile.mkdtemp()) / 'train.py'\n"
    "program.write_text({code!r})\n"
    "runpy.run_path(str(program))\n"
)
SNIPPETS = {
    "chained": (
        "def load():\n"
        "    raise FileNotFoundError(2, 'No such file or directory', '/data/shard-7.npz')\n"
        "try:\n    load()\n"
        "except OSError as exc:\n    raise RuntimeError('cannot read shard 7 of 10') from exc\n",
        {},
    ),
    "during_handling": (
        "config = {}\ntry:\n    config['lr']\nexcept KeyError:\n    print(undefined_name)\n",
        {},
    ),
    "sys_exit_message": ("print('step 10 loss 0.5', flush=True)\nimport sys\nsys.exit('no GPU found: need 1')\n", {}),
    "killed": ("import os, signal\nprint('step 10 loss 0.5', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n", {}),
    # absl.app.run turns faulthandler on: a crash in C code dumps the stacks and the modules
    "faulthandler_segfault": (
        "import ctypes, faulthandler, numpy\n"
        "faulthandler.enable()\n"
        "print('step 3 loss 0.4', flush=True)\n"
        "ctypes.string_at(0)\n",
        {},
    ),
    # absl's FATAL under absl.app.run (TF's C++ CHECK writes the same `F... file:line]` line):
    # it aborts, and the faulthandler absl.app.run turned on dumps the stacks after it
    "absl_fatal": (
        FROM_A_FILE.format(
            code="from absl import app, logging\n"
            "def main(argv):\n"
            "    print('step 3 loss 0.4', flush=True)\n"
            "    logging.fatal('Check failed: num_shards > 0 (0 vs. 0)')\n"
            "app.run(main)\n"
        ),
        {},
    ),
    # absl's ERROR under absl.app.run, then the program's own exit
    "absl_error": (
        FROM_A_FILE.format(
            code="from absl import app, logging\n"
            "def main(argv):\n"
            "    logging.error('cannot open /data/train-00003: permission denied')\n"
            "    return 1\n"
            "app.run(main)\n"
        ),
        {},
    ),
    # the error, then a cleanup line
    "error_then_cleanup": (
        "import sys\n"
        "print('loading /data/train.npz', flush=True)\n"
        "print('error: /data/train.npz has no key \"x\"', file=sys.stderr, flush=True)\n"
        "print('removing /tmp/run-1234', flush=True)\n"
        "sys.exit(1)\n",
        {},
    ),
    "keras3_shape": (SHAPE_MISMATCH, {}),
    "tf_keras_shape": (SHAPE_MISMATCH, {"TF_USE_LEGACY_KERAS": "1"}),
    "keras3_layer_in_step": (FROM_A_FILE.format(code=LAYER_IN_STEP), {}),
    "per_replica": (
        "import tensorflow as tf\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])\n"
        "per_replica = strategy.run(lambda: tf.ones((2, 3)))\n"
        "tf.constant(per_replica)\n",
        {},
    ),
    "graph_execution": (
        "import tensorflow as tf\n"
        "@tf.function(input_signature=[tf.TensorSpec([None])])\n"
        "def step(x):\n    return tf.reshape(x, (4, 3))\n"
        "step(tf.zeros((10,)))\n",
        {},
    ),
}


def task_python() -> str:
    configured = os.environ.get("TFK8S_TASK_PYTHON")
    if configured:
        return configured
    cached = Path.home() / ".cache/tfk8s/task-python"
    return cached.read_text().strip() if cached.exists() else sys.executable


def main(names: list[str]) -> None:
    for name in names or SNIPPETS:
        code, env = SNIPPETS[name]
        done = subprocess.run(
            [task_python(), "-c", code],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        (HERE / f"{name}.log").write_text(done.stdout)
        print(f"{name}: exit {done.returncode}, {len(done.stdout)} chars")


if __name__ == "__main__":
    main(sys.argv[1:])
