"""What a task's start-up costs: real TF processes through LocalBackend."""

from __future__ import annotations

import json

import pytest
from local_clusters import Submission, make_spec, run_files

pytestmark = pytest.mark.process

GC_LINE = "gc-probe "  # what probes/gc_probe_program.py prints before its JSON
ARGS = ["--steps", "20", "--checkpoint-every", "10", "--global-batch-size", "64", "--data", "digits"]


@pytest.mark.usefixtures("probe_programs_importable")
def test_training_runs_with_the_gc_and_start_up_objects_frozen(backend, workdir):
    """Importing TensorFlow runs without the cyclic GC (13% of its CPU); the training that
    follows must not: a task that trains for days would never collect a cycle."""
    spec = make_spec(
        "gc", "mirrored", ARGS, evaluator=False, backoffLimit=0, program={"module": "gc_probe_program", "args": ARGS}
    )
    assert Submission(backend, spec).wait(300) == 0, backend.status("gc")
    log = run_files(backend, "gc").log_path("chief", 0).read_text()
    states = [json.loads(line.split(GC_LINE, 1)[1]) for line in log.splitlines() if GC_LINE in line]
    assert states, log[-3000:]
    for state in states:
        assert state["enabled"] is True, state
        assert state["frozen"] > 100_000, state  # TensorFlow's modules, classes and functions
