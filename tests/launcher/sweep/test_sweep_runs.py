"""Sweeps run through the local backend with trials of plain Python (no TensorFlow): each trial
a detached local cluster whose chief and evaluator print the progress lines the built-in worker
prints, its accuracy the trial's X. The median rule, the goal, maxFailedTrials with the failed
trial's cause, `sweep status`/`delete`, and a launcher killed mid-sweep resuming it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from local_clusters import REPO_ROOT, assert_no_task_processes

from launcher import cli
from launcher.api import ClusterNotFound, LocalProcessBackendConfig, TFK8sClient
from launcher.sweep.search import Search

# Local runs of real processes (detached supervisors, tasks, launchers): seconds each on 2 cores,
# so the process tier's, with the local backend's other process tests.
pytestmark = pytest.mark.process

# X < 0: the chief fails (exit 3); X < 0.3: a trial too slow to end unless it is stopped.
TRIAL = """
import json, os, sys, time
role = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
x = float(os.environ["X"])
def report(**record): print("tfk8s-progress " + json.dumps(record), flush=True)
if x < 0:
    if role == "chief":
        print("ValueError: X must not be negative", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(60)
slow = 60 if x < 0.3 else 0
if role == "chief":
    report(event="step", step=10, target=20, loss=1 - x)
    time.sleep(slow + 0.5)
    report(event="step", step=20, target=20, loss=1 - x)
    report(event="final", step=20, checkpoint="ckpt-20")
else:
    report(event="evaluated", step=10, checkpoint="ckpt-10", accuracy=x / 2)
    time.sleep(slow + 1)
    report(event="evaluated", step=20, checkpoint="ckpt-20", accuracy=x)
"""


def sweep_file(tmp_path: Path, xs: list[float], **fields) -> Path:
    data = {
        "name": "sw",
        "cluster": {
            "name": "base",
            "strategy": "mirrored",
            "image": "example.com/byo:1",
            "command": [sys.executable, "-c", TRIAL],
            "env": {"X": "0"},
            "restartPolicy": "Never",
            "backoffLimit": 0,
            "roles": {"chief": {"replicas": 1}, "evaluator": {"replicas": 1}},
        },
        "parameters": [{"name": "x", "env": "X", "values": xs}],
        "objective": {"metric": "accuracy", "direction": "maximize"},
        "algorithm": "grid",
        **fields,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def client(workdir):
    client = TFK8sClient(LocalProcessBackendConfig(workdir=workdir))
    yield client
    if client.sweep_dir("sw").exists():
        client.delete_sweep("sw")
    assert_no_task_processes(workdir)


def test_the_median_rule_stops_a_trial_and_the_best_is_marked(client, workdir, tmp_path, capsys):
    path = sweep_file(tmp_path, [0.9, 0.7, 0.1], earlyStopping={"rule": "median", "minTrials": 2})
    events = []
    status = client.sweep(path, on_event=events.append, poll_seconds=0.2)
    assert status.phase == "Succeeded", status
    rows = {t.cluster: t for t in status.trials}
    assert [rows[c].phase for c in ("sw-t0", "sw-t1", "sw-t2")] == ["Succeeded", "Succeeded", "Stopped"]
    assert rows["sw-t0"].value == 0.9 and rows["sw-t1"].value == 0.7 and rows["sw-t2"].value is None
    assert rows["sw-t0"].best and not rows["sw-t1"].best
    assert rows["sw-t2"].message.startswith("stopped early at step 10: its best accuracy 0.05 is worse than the median")
    assert "sw-t2 Stopped: stopped early at step 10" in "\n".join(events)
    # the stopped trial's cluster was deleted (its tasks would have slept a minute)
    with pytest.raises(ClusterNotFound):
        client.get_job("sw-t2")

    flags = ["--workdir", str(workdir)]
    assert cli.main(["sweep", "status", "sw", "-o", "json", *flags]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best"] == {"trial": 0, "cluster": "sw-t0", "value": 0.9}
    assert [(t["cluster"], t["parameters"], t["phase"]) for t in data["trials"]] == [
        ("sw-t0", {"x": 0.9}, "Succeeded"),
        ("sw-t1", {"x": 0.7}, "Succeeded"),
        ("sw-t2", {"x": 0.1}, "Stopped"),
    ]
    assert cli.main(["sweep", "status", "sw", *flags]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "sweep sw: Succeeded - best: sw-t0, accuracy 0.9"
    assert table[1].split() == ["TRIAL", "X", "PHASE", "ACCURACY", "CAUSE"]
    assert table[2].split() == ["*sw-t0", "0.9", "Succeeded", "0.9"]

    assert table[4].split()[:6] == ["sw-t2", "0.1", "Stopped", "0.05", "@10", "stopped"]  # where it was stopped

    # each trial's chief log, under a line naming it; the stopped trial's cluster is gone
    assert cli.main(["sweep", "logs", "sw", "--tail", "1", *flags]) == 0
    logs = capsys.readouterr().out.splitlines()
    assert logs[0] == "==> sw-t0 (x=0.9) Succeeded: chief-0 <==" and "tfk8s-progress" in logs[1], logs
    assert logs[-2:] == ["==> sw-t2 (x=0.1) Stopped: chief-0 <==", "(no log: cluster sw-t2 is gone)"], logs

    # the plot: a chart by trial and one by x, a point per trial, the best marked, the stopped
    # trial at its last evaluation (hollow)
    page = tmp_path / "sw.html"
    assert cli.main(["sweep", "plot", "sw", "--file", str(page), *flags]) == 0
    assert capsys.readouterr().out.strip().endswith(f"in {page} (open it in a browser)")
    text = page.read_text()
    assert text.count("<svg") == 2 and "accuracy by trial" in text and "accuracy by x" in text
    assert text.count('class="trial best"') == 2 and text.count('class="trial Stopped"') == 2
    assert text.count('class="trial Succeeded"') == 2  # sw-t1 in each chart
    assert "sw-t2: x=0.1; Stopped; accuracy 0.05" in text

    assert cli.main(["sweep", "delete", "sw", *flags]) == 0
    assert capsys.readouterr().out.strip() == "sweep sw deleted, with its trials sw-t0, sw-t1, sw-t2"
    assert not client.sweep_dir("sw").exists()
    assert cli.main(["sweep", "status", "sw", *flags]) == 1
    assert f"no sweep 'sw' in {workdir.resolve() / '.sweeps'}" in capsys.readouterr().err


def test_the_goal_ends_the_sweep(client, tmp_path):
    goal = sweep_file(
        tmp_path, [0.5, 0.95, 0.6], objective={"metric": "accuracy", "direction": "maximize", "goal": 0.9}
    )
    status = client.sweep(goal, poll_seconds=0.2)
    assert status.phase == "Succeeded" and status.message == "trial sw-t1 reached the goal 0.9 (accuracy 0.95)"
    assert [t.cluster for t in status.trials] == ["sw-t0", "sw-t1"]  # the third never ran


def test_too_many_failed_trials_fail_the_sweep_each_with_its_cause(client, tmp_path):
    path = sweep_file(tmp_path, [-1.0, -2.0, 0.9], maxFailedTrials=1)
    status = client.sweep(path, poll_seconds=0.2)
    assert status.phase == "Failed"
    assert status.message.startswith("2 trials failed, more than maxFailedTrials 1; the last, sw-t1: ")
    for trial in status.trials:
        cause = client.get_job(trial.cluster).message
        assert trial.phase == "Failed" and trial.message == cause and "\n" not in cause and "exited 3" in cause


def test_a_killed_launcher_resumes_the_sweep_without_running_a_trial_twice(client, workdir, tmp_path):
    path = sweep_file(tmp_path, [0.9, 0.8, 0.7], parallelTrials=2)
    command = [
        sys.executable,
        "-m",
        "launcher",
        "sweep",
        str(path),
        "--local",
        "--workdir",
        str(workdir),
        "--poll",
        "0.2",
    ]
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    seen = []
    for line in first.stdout:
        seen.append(line)
        if line.startswith("sw-t1 submitted"):
            break
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert client.sweep_status("sw").phase == "Stopped"
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "sweep sw: resuming with 2 trials" in second.stdout
    submitted = [line.split()[0] for line in [*seen, *second.stdout.splitlines()] if " submitted: " in line]
    assert sorted(submitted) == ["sw-t0", "sw-t1", "sw-t2"]
    status = client.sweep_status("sw")
    assert [t.phase for t in status.trials] == ["Succeeded"] * 3 and status.best.cluster == "sw-t0"
    for trial in ("sw-t0", "sw-t1"):  # each ran once: one attempt of its chief
        log = (workdir / trial / "logs" / "chief-0.log").read_text()
        assert log.count("=== tfk8s: chief-0 attempt") == 1


def test_a_submitted_trial_whose_cluster_is_gone_fails_and_a_named_one_is_submitted(client, tmp_path):
    """As a restarted launcher finds them: trial 0 submitted, its cluster since deleted; trial 1
    named in the study, its launcher stopped before the submit."""
    path = sweep_file(tmp_path, [0.9, 0.8], maxFailedTrials=1)
    loaded = client.load_sweep(path)
    client.sweep_dir("sw").mkdir(parents=True)
    study = Search.open(loaded.sweep, client.sweep_dir("sw"))
    gone = study.ask(lambda n: f"sw-t{n}")
    study.ask(lambda n: f"sw-t{n}")  # named, never submitted
    study.submitted(gone.number)
    events = []
    status = client.sweep(loaded, on_event=events.append, poll_seconds=0.2)
    assert [(t.cluster, t.phase) for t in status.trials] == [("sw-t0", "Failed"), ("sw-t1", "Succeeded")]
    assert status.trials[0].message.startswith("its cluster is gone: deleted, or removed after its ttlSeconds")
    assert [e.split(":")[0] for e in events if " submitted: " in e] == ["sw-t1 submitted"]
    assert status.best.cluster == "sw-t1" and status.phase == "Succeeded"
