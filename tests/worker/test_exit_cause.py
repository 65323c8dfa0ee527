"""Why a task exited, in one line, from what it printed (worker/exit_cause.py): checked against
real outputs (tests/worker/outputs/*.log, written once by generate.py beside them) of programs
that fail the ways users' programs do."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.exit_cause import MAX_CAUSE_CHARS, exit_cause

OUTPUTS = Path(__file__).resolve().parent / "outputs"


def output(name: str) -> str:
    return (OUTPUTS / f"{name}.log").read_text()


@pytest.mark.parametrize(
    "name, exit_code, cause",
    [
        # `raise ... from exc` and an exception while handling another: the last traceback's
        ("chained", 1, "RuntimeError: cannot read shard 7 of 10"),
        ("during_handling", 1, "NameError: name 'undefined_name' is not defined"),
        # no traceback: the last line, unless a signal ended the task (Popen's -9, a pod's 137)
        ("sys_exit_message", 1, "no GPU found: need 1"),
        ("killed", -9, "killed by SIGKILL (signal 9)"),
        ("killed", 137, "killed by SIGKILL (signal 9)"),
    ],
)
def test_the_cause_of_a_real_output(name, exit_code, cause):
    assert exit_cause(output(name), exit_code) == cause


@pytest.mark.parametrize(
    "text, cause",
    [
        ("", None),
        ("\n  \n", None),
        ("loading\ntfk8s chief-0: error: --steps: bad\n", "--steps: bad"),
        ('Traceback\nValueError: x\ntfk8s-progress {"event": "exit"}\n', "ValueError: x"),
        ("y" * 1000, "y" * (MAX_CAUSE_CHARS - 3) + "..."),
    ],
)
def test_without_a_traceback_the_cause_is_the_last_line_that_says_something(text, cause):
    assert exit_cause(text) == cause


def test_the_built_in_workers_own_line_wins_over_the_traceback_it_follows():
    built_in = output("chained") + "tfk8s chief-0: error: --data /data/shard-7.npz: no such file\n"
    assert exit_cause(built_in, 2) == "--data /data/shard-7.npz: no such file"
    # a traceback after it (a later failure) is the cause again
    assert exit_cause(built_in + output("during_handling"), 1) == "NameError: name 'undefined_name' is not defined"
