"""Progress lines -> what status and the views show (launcher/status/progress.py, lines.py;
launcher/backends/view.py; launcher/live_view.py)."""

from __future__ import annotations

import io
import json

import pytest

from launcher.backends.view import LineView, NoteStream
from launcher.live_view import render
from launcher.status.lines import status_line
from launcher.status.progress import eta_seconds, format_seconds, read_progress
from launcher.status.status import ClusterStatus, Phase, RoleStatus
from worker.contract import parse_progress_line
from worker.progress import StepReporter


def line(event: str, prefix: str = "", **fields) -> str:
    return prefix + "tfk8s-progress " + json.dumps({"event": event, **fields})


def test_parse_accepts_a_task_prefix_and_skips_what_is_not_a_record():
    assert parse_progress_line(line("step", "[chief-0] ", step=3)) == {"event": "step", "step": 3}
    assert parse_progress_line("I0000 port.cc:153] oneDNN custom operations are on") is None
    # A user's script may print anything after the prefix: never an error.
    assert parse_progress_line("tfk8s-progress {not json") is None
    assert parse_progress_line("tfk8s-progress [1, 2]") is None
    assert parse_progress_line('tfk8s-progress {"step": 1}') is None  # no event name


def test_latest_step_event_wins_and_carries_the_rate_and_eta():
    progress = read_progress(
        [
            line("start", step=0, target=1000),
            "some TensorFlow noise",
            line("step", step=100, target=1000, loss=2.0, steps_per_s=10.0, wall=1.0),
            line("step", step=300, target=1000, loss=1.25, steps_per_s=20.0, wall=2.0),
        ]
    )
    assert (progress.step, progress.target, progress.loss) == (300, 1000, 1.25)
    assert progress.steps_per_s == 20.0 and progress.updated_at == 2.0
    assert progress.eta_seconds == pytest.approx(35.0)
    assert progress.fraction == pytest.approx(0.3)
    assert not progress.finished and progress.evaluation is None
    assert progress.summary() == "step 300/1000 (30%), 20 steps/s, ETA 0:00:35, loss 1.25"


def test_a_restarted_task_forgets_the_old_rate_until_it_reports_again():
    progress = read_progress(
        [
            line("step", step=300, target=1000, steps_per_s=20.0),
            line("start", step=200, target=1000, restored_from="ckpt-200"),
        ]
    )
    assert progress.step == 200 and progress.steps_per_s is None and progress.eta_seconds is None


def test_finished_run_reports_the_final_step_and_the_evaluation_of_its_checkpoint():
    progress = read_progress(
        [
            line("step", step=1000, target=1000, loss=0.3, steps_per_s=50.0),
            line("final", step=1000, checkpoint="/ckpt/model/checkpoints/ckpt-1000"),
        ],
        [
            line(
                "evaluated",
                step=900,
                checkpoint="ckpt-900",
                loss=0.41,
                accuracy=0.87,
                examples=360,
                final=False,
                seconds=1.5,
            ),
            line(
                "evaluated",
                step=1000,
                checkpoint="ckpt-1000",
                loss=0.35,
                accuracy=0.9,
                examples=360,
                final=False,
                seconds=1.4,
            ),
        ],
    )
    assert progress.finished and progress.eta_seconds is None
    assert progress.final_checkpoint.endswith("ckpt-1000")
    evaluation = progress.evaluation
    assert (evaluation.step, evaluation.checkpoint, evaluation.final) == (1000, "ckpt-1000", True)
    # Only measurements are metrics; the record's bookkeeping fields are not.
    assert evaluation.metrics == {"loss": 0.35, "accuracy": 0.9}
    assert [e.final for e in progress.history] == [False, True]
    data = progress.to_dict()
    assert data["evaluation"]["metrics"]["accuracy"] == 0.9 and data["etaSeconds"] is None
    assert "final eval ckpt-1000: accuracy 0.9 loss 0.35" in progress.summary()


def test_bring_your_own_minimal_lines_are_enough():
    progress = read_progress([line("step", step=7)], [line("evaluated", step=5, auc=0.7)])
    assert progress.step == 7 and progress.target is None and progress.eta_seconds is None
    assert progress.evaluation.metrics == {"auc": 0.7}
    assert progress.summary() == "step 7; eval step 5: auc 0.7"


def test_nothing_reported_yet_is_none():
    assert read_progress(["starting", line("tensorflow_imported", task="chief-0")]) is None


@pytest.mark.parametrize(
    "step,target,rate,expected",
    [
        (0, 100, 10.0, 10.0),
        (100, 100, 10.0, 0.0),
        (120, 100, 10.0, 0.0),
        (None, 100, 10.0, None),
        (5, None, 10.0, None),
        (5, 100, None, None),
        (5, 100, 0.0, None),
    ],
)
def test_eta(step, target, rate, expected):
    assert eta_seconds(step, target, rate) == expected


def test_format_seconds():
    assert format_seconds(0) == "0:00:00"
    assert format_seconds(3725.4) == "1:02:05"


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_step_reporter_reports_when_due_with_the_mean_loss_and_rate(capsys):
    clock = FakeClock()
    reporter = StepReporter(step=9, target=100, every_seconds=5.0, clock=clock)
    clock.now = 30.0  # the first step traced the function and reached the ps: not timed
    reporter.add(9.0)
    reporter.maybe_report(10)
    assert capsys.readouterr().out == ""
    reporter.first_step(10)
    first = parse_progress_line(capsys.readouterr().out)
    assert (first["step"], first["loss"]) == (10, 9.0) and "steps_per_s" not in first
    for step, loss in ((11, 1.0), (12, 3.0)):
        reporter.add(loss)
        clock.now += 1.0
        reporter.maybe_report(step)
    assert capsys.readouterr().out == ""  # 2 s < 5 s
    clock.now = 35.0
    reporter.add(2.0)
    reporter.maybe_report(15)
    records = [parse_progress_line(x) for x in capsys.readouterr().out.splitlines()]
    assert len(records) == 1
    record = records[0]
    assert (record["event"], record["step"], record["target"]) == ("step", 15, 100)
    assert record["loss"] == 2.0 and record["steps_per_s"] == 1.0  # 5 steps in 5 s
    clock.now = 36.0
    reporter.report(16)  # forced (training ended): no loss since the last line
    record = parse_progress_line(capsys.readouterr().out)
    assert record["step"] == 16 and "loss" not in record and record["steps_per_s"] == 1.0


def test_step_reporter_rejects_a_bad_interval(monkeypatch):
    from worker.errors import ConfigError

    monkeypatch.setenv("TFK8S_PROGRESS_SECONDS", "0")
    with pytest.raises(ConfigError, match="TFK8S_PROGRESS_SECONDS"):
        StepReporter(step=0, target=10)


def status(phase=Phase.RUNNING, step=None, **fields) -> ClusterStatus:
    lines = [line("step", step=step, target=100, loss=0.5, steps_per_s=10.0)] if step else []
    return ClusterStatus(
        "demo",
        "ns",
        phase,
        roles=[RoleStatus("chief", 1, active=1), RoleStatus("evaluator", 1, succeeded=1)],
        training=read_progress(lines),
        **fields,
    )


def test_status_line_is_compact():
    assert status_line(status(step=40)) == (
        "[Running] chief 1/1, evaluator 0/1 (1 done) | step 40/100 (40%), 10 steps/s, ETA 0:00:06, loss 0.5"
    )


def test_line_view_prints_state_changes_at_once_and_progress_every_n_seconds():
    out, clock = io.StringIO(), FakeClock()
    view = LineView(out, every_seconds=10.0, clock=clock)
    view.show(status(step=10))
    clock.now = 3.0
    view.show(status(step=20))  # only progress changed, 3 s < 10 s: not shown
    clock.now = 4.0
    view.show(status(Phase.FINISHING, step=100))  # the phase changed: shown at once
    clock.now = 20.0
    view.show(status(Phase.FINISHING, step=100))  # due, but nothing changed
    lines = out.getvalue().splitlines()
    assert [x.split(" |")[0].split("]")[0] for x in lines] == ["[Running", "[Finishing"]
    assert "step 10/100" in lines[0] and "step 100/100" in lines[1]


def test_note_stream_turns_writes_into_whole_lines():
    notes = []

    class Recorder:
        def note(self, text):
            notes.append(text)

    stream = NoteStream(Recorder())
    stream.write("[tfk8s] chief-0 exi")
    stream.write("ted 0\n[tfk8s] two\n")
    assert notes == ["[tfk8s] chief-0 exited 0", "[tfk8s] two"]


def test_live_panel_renders_the_bar_and_the_evaluation():
    from rich.console import Console

    console = Console(file=io.StringIO(), width=100, color_system=None)
    done = status(Phase.SUCCEEDED, step=100)
    done.training.evaluation = read_progress(
        [], [line("evaluated", step=100, checkpoint="ckpt-100", accuracy=0.93)]
    ).evaluation
    console.print(render(done))
    text = console.file.getvalue()
    assert "ns/demo [Succeeded]" in text
    assert "step 100/100" in text and "eval ckpt-100: accuracy 0.93" in text
    assert "━" in text  # the progress bar


def test_an_unreadable_log_is_said_not_hidden():
    progress = read_progress([line("step", step=5, target=10)])
    progress.unreadable = "demo-chief-0-x: the node does not answer"
    assert progress.summary().endswith("log unreadable: demo-chief-0-x: the node does not answer")
    assert progress.to_dict()["unreadable"].startswith("demo-chief-0-x")


# --- without progress lines, and a training that says nothing ------------------------------------


def test_a_checkpoints_step_is_read_from_its_name_and_the_state_file():
    from launcher.status.progress import checkpoint_step, state_file_checkpoint

    assert checkpoint_step("ckpt-120") == 120 and checkpoint_step("model.ckpt-7.index") == 7
    assert checkpoint_step("saved_model.pb") is None
    state = 'model_checkpoint_path: "ckpt-30"\nall_model_checkpoint_paths: "ckpt-20"\n'
    assert state_file_checkpoint(state) == "ckpt-30"
    assert state_file_checkpoint("garbage") is None


def test_the_step_of_a_checkpoint_is_said_as_such():
    from launcher.status.progress import from_checkpoint

    shown = from_checkpoint(30, "mounts/train/model/ckpt-30", 1.0)
    assert shown.summary() == "step 30 (its newest checkpoint, mounts/train/model/ckpt-30)"
    assert shown.to_dict()["fromCheckpoint"] == "mounts/train/model/ckpt-30"


STARTED = "I0000 00:00:1795889483.897816   28969 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:1"


def test_a_quiet_training_is_said_with_its_likely_cause():
    import time

    from launcher.status import progress

    since = 1_800_000_000.0
    at = time.strftime("%H:%M:%S", time.localtime(since))  # this machine's time of day
    later = since + progress.QUIET_SECONDS
    mwms = {"worker-0": "worker", "worker-1": "worker"}
    assert progress.quiet_note(since, later - 1, "multi_worker_mirrored", mwms, set(mwms)) is None
    assert progress.quiet_note(since, later, "multi_worker_mirrored", mwms, set(mwms)) == (
        f"no step and no checkpoint since {at} (over 5 min): every task alive (worker-0, worker-1) ends its log "
        "with TF's 'Started server with target' and waits as a server: no task drives training under "
        "multi_worker_mirrored. A parameter-server program (tf.distribute.Server(...).join() on its ps and workers) "
        "needs strategy: parameter_server with a chief"
    )
    servers = {"worker-0": "worker", "ps-0": "ps"}
    assert progress.quiet_note(since, later, "parameter_server", servers, set()) == (
        f"no step and no checkpoint since {at} (over 5 min): every task alive is a server (ps, worker) and the "
        "chief, which trains under parameter_server, is not running (see its reason)"
    )
    assert progress.quiet_note(since, later, "multi_worker_mirrored", mwms, {"worker-0"}) == (
        f"no step and no checkpoint since {at} (over 5 min) (a program of your own shows its step by progress "
        "lines, docs/watching.md)"
    )
    assert progress.waits_as_server(["x", STARTED, ""]) and not progress.waits_as_server([STARTED, "Epoch 1/3"])
