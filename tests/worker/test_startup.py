"""What a task's start-up costs: real TF processes through LocalBackend."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_clusters import Submission, make_spec, run_files

pytestmark = pytest.mark.process

PROBES = Path(__file__).parent / "probes"
ARGS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "64", "--data", "digits"]


def test_training_runs_with_the_gc_and_start_up_objects_frozen(backend, workdir, monkeypatch):
    """Importing TensorFlow runs without the cyclic GC (13% of its CPU); the training that
    follows must not: a task that trains for days would never collect a cycle."""
    monkeypatch.syspath_prepend(str(PROBES))
    monkeypatch.setenv("PYTHONPATH", str(PROBES))
    spec = make_spec("gc", "mirrored", ARGS, evaluator=False, backoffLimit=0,
                     program={"module": "gc_probe_program", "args": ARGS})
    assert Submission(backend, spec).wait(300) == 0, backend.status("gc")
    log = run_files(backend, "gc").log_path("chief", 0).read_text()
    states = [json.loads(line.split("gc-probe ", 1)[1]) for line in log.splitlines()
              if "gc-probe " in line]
    assert states, log[-3000:]
    for state in states:
        assert state["enabled"] is True, state
        assert state["frozen"] > 100_000, state  # TensorFlow's modules, classes and functions
