"""A run's evaluator evaluates that run: after `--replace` onto a kept model dir, the evaluator
ends on a FINAL.json of its own run (TFK8S_RUN, one id per submission), never on the one the
previous run left (worker/model_dir/layout.py). Real TF clusters through LocalBackend."""

from __future__ import annotations

import pytest
from local_clusters import Submission, events, final_marker, make_spec, worker_args

pytestmark = pytest.mark.process

TIMEOUT = 300
NAME = "rerun-eval"


def spec(**env):
    return make_spec(NAME, "mirrored", worker_args(20, 10), env=env)


def test_a_replaced_runs_evaluator_ends_on_its_own_runs_final(backend):
    assert Submission(backend, spec()).wait(TIMEOUT) == 0
    first = final_marker(backend, NAME)
    [first_done] = events(backend, NAME, "evaluator", 0, "evaluator_done")
    assert first["run"] and first_done["run"] == first["run"], (first, first_done)

    # The same training again (another env: --replace): nothing left to train; the writer
    # re-stamps the marker with this run, and this run's evaluator ends on that one.
    assert Submission(backend, spec(RERUN="1"), replace=True).wait(TIMEOUT) == 0
    [final] = events(backend, NAME, "chief", 0, "final")
    assert final["already_finished"] is True, final
    second = final_marker(backend, NAME)
    assert second["run"] and second["run"] != first["run"], (first, second)
    assert second["checkpoint"] == first["checkpoint"] and second["step"] == first["step"] == 20
    [second_done] = events(backend, NAME, "evaluator", 0, "evaluator_done")
    assert second_done["run"] == second["run"], (second, second_done)
    assert second_done["final"] == second["checkpoint"]
