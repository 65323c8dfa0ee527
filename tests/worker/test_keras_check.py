"""The Keras check's start-up side (worker/keras_check.py through worker/startup/sitecustomize.py),
without TensorFlow: it imports neither TensorFlow nor Keras, costs a task's start nothing
measurable, stays out of the built-in worker and of processes that are no task, can be turned
off, and still runs a sitecustomize it hides."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys

import pytest
from support import REPO

from launcher.backends.local.tasks import STARTUP_DIR, plan_tasks
from launcher.cluster_spec.loader import load_text
from launcher.plan.plan import plan as make_plan
from worker import contract, keras_check

TASK = {"TF_CONFIG": '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}'}
REPORT = (
    "import sys; from worker import keras_check as k; "
    "print(any(isinstance(f, k._KerasImports) for f in sys.meta_path), "
    "sorted(m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules))"
)


def python(code: str, env: dict, pythonpath: list[str] | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", contract.PROGRAM, keras_check.OPT_OUT)}
    path = [STARTUP_DIR, *(pythonpath or []), str(REPO)]
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env, "PYTHONPATH": os.pathsep.join(path)},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_the_check_is_the_contracts_names():
    assert (keras_check.TF_CONFIG, keras_check.PROGRAM, keras_check.EXIT_REFUSED) == (
        contract.TF_CONFIG,
        contract.PROGRAM,
        contract.EXIT_KERAS_REFUSED,
    )


def test_a_task_of_a_program_of_your_own_is_watched_without_importing_tensorflow_or_keras():
    assert python(REPORT, TASK) == "True []"


def test_the_built_in_worker_a_process_that_is_no_task_and_the_opt_out_are_not_watched():
    assert python(REPORT, {**TASK, contract.PROGRAM: "worker.examples.digits"}) == "False []"
    assert python(REPORT, {}) == "False []"
    assert python(REPORT, {**TASK, keras_check.OPT_OUT: "0"}) == "False []"


def test_a_sitecustomize_of_your_own_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.MINE = 'ran'\n")
    assert python("print(MINE)", TASK, [str(tmp_path)]) == "ran"


def test_the_check_imports_nothing_heavy_at_a_tasks_start(tmp_path):
    """The start-up hook (sitecustomize and the check, from bytecode as in the worker image)
    imports no TensorFlow, Keras or NumPy of its own at a task's start: it waits for the
    program's import. Its share of an empty interpreter's start, by Python's own -X importtime,
    is printed (a measure, not a bound: a loaded machine is slower)."""
    env = {**TASK, "PYTHONPYCACHEPREFIX": str(tmp_path)}

    def imports() -> list[tuple[int, int, str]]:
        """(cumulative microseconds, depth, module) of each import, as -X importtime says."""
        report = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "pass"],
            env={
                **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                **env,
                "PYTHONPATH": os.pathsep.join([STARTUP_DIR, str(REPO)]),
            },
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        out = []
        for line in report.splitlines()[1:]:
            _, cumulative, name = line.split("|")
            out.append((int(cumulative), len(name) - len(name.lstrip()), name.strip()))
        return out

    imports()  # writes the bytecode
    runs = [imports() for _ in range(5)]
    heavy = {"tensorflow", "keras", "tf_keras", "numpy"}
    for run in runs:
        assert not {name.split(".")[0] for _, _, name in run} & heavy, sorted({n for _, _, n in run})
    hook = statistics.median(next(c for c, _, name in run if name == "sitecustomize") for run in runs)
    total = statistics.median(sum(c for c, depth, _ in run if depth == 1) for run in runs)
    print(f"the start-up hook: {hook / 1000:.2f} ms, {hook / total:.0%} of the imports of an empty interpreter")


def test_the_worker_images_pth_file_starts_the_check(tmp_path):
    """The .pth file the Dockerfile writes into the image's site-packages, with this checkout in
    place of /opt/tfk8s, read as Python reads a site dir's .pth files."""
    [pth] = re.findall(r"tfk8s-worker\.pth', 'w'\)\.write\('(.*?)'\)", (REPO / "Dockerfile").read_text())
    (tmp_path / "tfk8s-worker.pth").write_text(pth.replace("\\n", "\n").replace("/opt/tfk8s", str(REPO)))
    code = f"import site; site.addsitedir({str(tmp_path)!r}); " + REPORT
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **TASK}, capture_output=True, text=True)
    assert done.stdout.strip() == "True []", done.stderr


def test_a_keras_3_whose_classes_moved_is_trained_unchecked_with_a_warning(tmp_path):
    """A stand-in `keras` package whose watched optimizer module lacks BaseOptimizer: its import
    still works (the program runs), and the task's log says the check is off."""
    module = tmp_path / "keras" / "src" / "optimizers"
    module.mkdir(parents=True)
    for package in (tmp_path / "keras", tmp_path / "keras" / "src", module):
        (package / "__init__.py").write_text("")
    (module / "base_optimizer.py").write_text("VERSION = 'moved'\n")
    done = subprocess.run(
        [sys.executable, "-c", "import keras.src.optimizers.base_optimizer as m; print(m.VERSION)"],
        env={**os.environ, **TASK, "PYTHONPATH": os.pathsep.join([STARTUP_DIR, str(tmp_path), str(REPO)])},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "moved"
    assert done.stderr.strip() == (
        "tfk8s worker-0: warning: the Keras check does not know this Keras "
        "(keras.src.optimizers.base_optimizer changed): not checked; see docs/keras.md"
    )


def test_local_tasks_of_a_command_start_the_check_and_the_built_in_workers_do_not():
    """--local puts worker/startup first on a command's tasks' PYTHONPATH, before its code dir,
    as the worker image's .pth file starts the check in a pod; the built-in worker gets none."""
    roles = "roles:\n  chief: {replicas: 1}\n  worker: {replicas: 2}\n  ps: {replicas: 1}\n"
    command = load_text(f"name: c\nstrategy: parameter_server\ncommand: [python, t.py]\n{roles}")
    built_in = load_text(f"name: b\nstrategy: parameter_server\n{roles}")
    for spec, first in ((command, STARTUP_DIR), (built_in, str(REPO))):
        held, tasks = plan_tasks(make_plan(spec, model_dir="/tmp/model"), sys.executable)
        held.close()
        assert {t.env["PYTHONPATH"].split(os.pathsep)[0] for t in tasks} == {first}, spec.name


# A tiny tf_keras fit of a program of your own: no tfk8s import, no progress lines of its own;
# its own callbacks list is printed after fit, to show it unchanged.
FIT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf
x = np.random.rand(256, 4).astype("float32"); y = x.sum(axis=1)
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
mine = [tf.keras.callbacks.History()]
model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=mine)
print("callbacks after fit:", len(mine), flush=True)
"""


def fit_as(task: str, index: int, **env) -> list[dict]:
    cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    if task == "worker" and env.pop("no_chief", False):
        cluster.pop("chief")
    tf_config = json.dumps({"cluster": cluster, "task": {"type": task, "index": index}})
    done = subprocess.run(
        [sys.executable, "-c", FIT],
        env={**os.environ, "TF_CONFIG": tf_config, "PYTHONPATH": os.pathsep.join([STARTUP_DIR, str(REPO)]), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "callbacks after fit: 1" in done.stdout
    return [r for line in done.stdout.splitlines() if (r := contract.parse_progress_line(line))]


@pytest.mark.process
def test_a_tf_keras_fit_of_your_own_prints_progress_lines_on_the_task_status_reads():
    events = fit_as("chief", 0, TFK8S_PROGRESS_SECONDS="60")
    # the first batch, then (60 s apart: none) the end: 3 epochs of 8 batches
    assert [(e["event"], e["step"], e["target"]) for e in events] == [("step", 1, 24), ("step", 24, 24)]
    assert all(isinstance(e["loss"], float) for e in events)
    assert "steps_per_s" not in events[0] and events[1]["steps_per_s"] > 0
    assert len(fit_as("worker", 0, no_chief=True)) == 2  # MWMS: worker 0 is the chief
    assert fit_as("worker", 1) == []  # not the log status reads
    assert fit_as("chief", 0, TFK8S_KERAS_PROGRESS="0") == []
