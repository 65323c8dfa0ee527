"""Why a task exited, in one line, from what it printed (worker/exit_cause.py): checked against
real outputs (tests/worker/outputs/*.log, written once by generate.py beside them) of programs
that fail the ways users' programs do."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.exit_cause import MAX_CAUSE_CHARS, TRACEBACK_HEADER, exit_cause

OUTPUTS = Path(__file__).resolve().parent / "outputs"


def output(name: str) -> str:
    return (OUTPUTS / f"{name}.log").read_text()


KERAS_3_SHAPE = (
    'ValueError: Invalid input shape for input Tensor("data:0", shape=(32, 784), dtype=float32) with name '
    "'keras_tensor' and path ''. Expected shape (None, 28, 28, 1), but input has incompatible shape (32, 784)"
)
TF_KERAS_SHAPE = (
    'ValueError: Input 0 of layer "sequential" is incompatible with the layer: expected shape=(None, 28, 28, 1), '
    "found shape=(32, 784)"
)
PER_REPLICA = (
    "ValueError: Attempt to convert a value (PerReplica:{...}) with an unsupported type "
    "(<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor."
)
KERAS_3_LAYER_IN_STEP = (
    "ValueError: Input 0 with name 'None' of layer 'dense' is incompatible with the layer: expected axis -1 "
    "of input shape to have value 8, but received input with shape (16, 9)"
)
GRAPH_EXECUTION = "InvalidArgumentError: Input to reshape is a tensor with 10 values, but the requested shape has 12"


@pytest.mark.parametrize(
    "name, exit_code, cause",
    [
        # Keras 3: a wrapper line, the cause in bold, then the call's arguments (`• kwargs=...`)
        ("keras3_shape", 1, KERAS_3_SHAPE),
        # tf_keras: "in user code:", the frames, then the real exception, indented
        ("tf_keras_shape", 1, TF_KERAS_SHAPE),
        # a custom loop's step: "in user code:", then Keras 3's wrapper line, then the cause in bold
        ("keras3_layer_in_step", 1, KERAS_3_LAYER_IN_STEP),
        # a value printout across lines, closed on the line that says what is wrong
        ("per_replica", 1, PER_REPLICA),
        # TF's "Graph execution error:" and the frames that defined the op
        ("graph_execution", 1, GRAPH_EXECUTION),
        # `raise ... from exc` and an exception while handling another: the last traceback's
        ("chained", 1, "RuntimeError: cannot read shard 7 of 10"),
        ("during_handling", 1, "NameError: name 'undefined_name' is not defined"),
        # no traceback: the last line, unless a signal ended the task (Popen's -9, a pod's 137)
        ("sys_exit_message", 1, "no GPU found: need 1"),
        ("killed", -9, "killed by SIGKILL (signal 9)"),
        ("killed", 137, "killed by SIGKILL (signal 9)"),
        # faulthandler's dump: the fatal error, not its `Extension modules: numpy...` line
        ("faulthandler_segfault", -11, "Fatal Python error: Segmentation fault"),
        ("faulthandler_segfault", 139, "Fatal Python error: Segmentation fault"),
        # a FATAL log line (then faulthandler's `Fatal Python error: Aborted`): the FATAL line, not the signal
        ("absl_fatal", 134, "train.py:4: Check failed: num_shards > 0 (0 vs. 0)"),
        # absl's own E line is the program's error, not TF's log noise
        ("absl_error", 1, "train.py:3: cannot open /data/train-00003: permission denied"),
        # the error, then a cleanup line
        ("error_then_cleanup", 1, 'error: /data/train.npz has no key "x"'),
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


@pytest.mark.parametrize(
    "name, cause",
    [("tf_keras_shape", TF_KERAS_SHAPE), ("per_replica", PER_REPLICA), ("graph_execution", GRAPH_EXECUTION)],
)
def test_a_tail_that_lost_the_traceback_header_still_gives_the_exception(name, cause):
    """A pod's termination message keeps only its log's last 2048 bytes: a long traceback's
    header is cut off, its last frames and the exception remain."""
    lines = output(name).splitlines(keepends=True)
    header = lines.index(TRACEBACK_HEADER + "\n")
    tail = "".join(lines[header + 3 :])  # from inside the first frame on
    assert TRACEBACK_HEADER not in tail
    assert exit_cause(tail, 1) == cause


# TF's C++ logging as TF 2.21 writes it (the W line from a real run; its CHECK's F line alike).
TF_CPP_WARNING = (
    "W0000 00:00:1795886098.073243   23230 local_rendezvous.cc:412] Local rendezvous is aborting with status: "
    "ABORTED: Shutdown"
)
TF_CUINIT = (
    "E0000 00:00:1795886098.073243   23230 cuda_driver.cc:152] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)"
)
TF_CHECK = "F0000 00:00:1795886098.073243   23230 tensor_shape.cc:201] Check failed: size >= 0 (-1 vs. 0)"


def test_tfs_check_failed_is_the_cause_and_its_warnings_and_cuinit_error_are_not():
    text = "\n".join([TF_CUINIT, "step 3 loss 0.4", TF_CHECK, TF_CPP_WARNING, "Fatal Python error: Aborted", ""])
    assert exit_cause(text, 134) == "tensor_shape.cc:201: Check failed: size >= 0 (-1 vs. 0)"
    assert exit_cause("\n".join([TF_CUINIT, TF_CPP_WARNING]), 134) == "killed by SIGABRT (signal 6)"


def test_a_traceback_handled_before_a_crash_is_not_blamed():
    handled = output("during_handling") + "step 40 loss 0.3\n" + output("faulthandler_segfault")
    assert exit_cause(handled, 139) == "Fatal Python error: Segmentation fault"
