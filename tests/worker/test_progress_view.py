"""What a user sees of a real local PS run, every way there is to follow one, all on the same
run: the view on the terminal, the training fields of `status -o json` while it trains and
after it ended, every task's raw log behind `logs --all`, the Python API's progress events and
its list/logs/delete, every task's Prometheus series (scraped as Prometheus would), and the
evaluator's scalars in TensorBoard.

One observed run (the module's `observed` fixture), not one per observer: each observer only
reads the run (status files, logs, HTTP endpoints, the finished model dir), so a cluster of its
own per observer would start the same five TensorFlow processes again to show the same training.
The observers that must watch it while it trains do so inside the fixture; each test then checks
what one of them saw. The last test deletes the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from local_clusters import REPO_ROOT, assert_no_task_processes, final_marker, make_spec, measure, wait_until
from tensorboard_client import TensorBoardSession, connection_refused, free_port
from test_metrics import scrape

from launcher.api import ClusterNotFound, JobEvent, LocalProcessBackendConfig, Phase, TFK8sClient
from launcher.backends.local import LocalBackend
from launcher.backends.local.files import RunFiles

pytestmark = pytest.mark.process

STEPS = 600
NAME = "view"
TASKS = ("chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0")


def launcher(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT
    )


def status_json(name: str, workdir) -> dict:
    done = launcher("status", name, "--local", "--workdir", str(workdir), "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Prometheus:
    """Scrapes every task's endpoint every 0.5 s, as Prometheus would, while the run lasts."""

    def __init__(self, addresses: dict[str, str]):
        self.addresses = addresses
        self.seen: dict[str, list[dict]] = {task: [] for task in addresses}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scrape, daemon=True)
        self._thread.start()

    def _scrape(self) -> None:
        while not self._stop.is_set():
            for task, address in self.addresses.items():
                try:
                    self.seen[task].append(scrape(address, task_labels=None))
                except OSError:
                    pass  # not serving yet, or ended
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@dataclass
class ObservedRun:
    """A finished PS run and what each observer saw of it while it trained."""

    dir: Path  # the test's own files: the spec, the terminal's output, TensorBoard's log
    workdir: Path
    client: TFK8sClient
    addresses: dict[str, str] = field(default_factory=dict)  # task -> its metrics URL
    status_while_training: list[dict] = field(default_factory=list)  # `status -o json`'s training
    api_events: list[JobEvent] = field(default_factory=list)
    api_final: list = field(default_factory=list)  # wait_for_job_status's answer
    scraped: dict[str, list[dict]] = field(default_factory=dict)  # task -> its scrapes

    @property
    def terminal(self) -> str:
        return (self.dir / "terminal.txt").read_text()


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> ObservedRun:
    """`submit --local --every 2` of a PS cluster with an evaluator, in the foreground as a user
    runs it; meanwhile `status -o json` polled, the Python API following it, and every task's
    endpoint scraped from the start."""
    here = tmp_path_factory.mktemp("observed")
    workdir = here / "work"
    run = ObservedRun(dir=here, workdir=workdir, client=TFK8sClient(LocalProcessBackendConfig(workdir=workdir)))
    spec = make_spec(
        NAME,
        "parameter_server",
        ["--steps", str(STEPS), "--checkpoint-every", "100", "--global-batch-size", "64", "--data", "digits"],
        env={"TFK8S_PROGRESS_SECONDS": "1"},
    )
    data = spec.model_dump(mode="json", by_alias=True)
    data["checkpoint"] = {}  # locally the evaluator shares the chief's disk: no volume needed
    spec_file = here / "cluster.yaml"
    spec_file.write_text(json.dumps(data))
    terminal = (here / "terminal.txt").open("w")
    submit = subprocess.Popen(
        [sys.executable, "-m", "launcher", "submit", str(spec_file), "--local", "--workdir", str(run.workdir)]
        + ["--every", "2"],
        stdout=terminal,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
    )
    api_errors: list[BaseException] = []
    prometheus = None
    try:
        # Every task's endpoint, scraped from the start: the supervisor writes the ports it chose
        # before it starts the tasks.
        run.addresses = wait_until(lambda: RunFiles(run.workdir, NAME).read_metrics(), 60, "metrics.json")
        prometheus = Prometheus(run.addresses)

        # The Python API follows the same run (a notebook beside the terminal) in a thread.
        wait_until(lambda: (run.workdir / NAME / "status.json").exists(), 60, "status.json")

        def follow() -> None:
            try:
                run.api_final.append(run.client.wait_for_job_status(NAME, timeout=400, callback=run.api_events.append))
            except BaseException as exc:  # re-raised below, in the test's thread
                api_errors.append(exc)

        api = threading.Thread(target=follow, daemon=True)
        api.start()

        deadline = time.monotonic() + 400
        seen = run.status_while_training
        # Polled until two steps were seen: each `status` costs about a second of CPU, which
        # the training shares.
        while submit.poll() is None and time.monotonic() < deadline and len(seen) < 2:
            training = status_json(NAME, run.workdir)["training"]
            if training and training["step"] and training["step"] < STEPS and training.get("stepsPerSecond"):
                if not seen or training["step"] > seen[-1]["step"]:
                    seen.append(training)
            time.sleep(1.0)
        assert submit.wait(timeout=max(deadline - time.monotonic(), 1)) == 0, run.terminal[-3000:]
        api.join(60)
    finally:
        if prometheus is not None:
            prometheus.stop()
            run.scraped = prometheus.seen
        if submit.poll() is None:
            submit.kill()
        terminal.close()
    assert not api_errors, api_errors
    assert_no_task_processes(run.workdir)  # the foreground submit took every task along
    return run


def test_status_reports_training_while_it_runs_and_after_it_ended(observed):
    name, workdir, seen = NAME, observed.workdir, observed.status_while_training
    # While training: the step advanced, with the target, the loss, a rate and an ETA.
    assert len(seen) >= 2, seen
    running = seen[0]
    print("status -o json while training:", json.dumps(running))
    assert running["target"] == STEPS and running["loss"] > 0
    assert running["stepsPerSecond"] > 0 and running["etaSeconds"] > 0
    assert not running["finished"]
    assert seen[-1]["step"] > running["step"]

    # After the end: the final step, the final evaluation and the checkpoint it came from.
    final = status_json(name, workdir)
    assert final["phase"] == "Succeeded"
    training = final["training"]
    print("status -o json after the end:", json.dumps(training))
    assert training["finished"] and training["step"] == training["target"] == STEPS
    assert training["finalCheckpoint"].endswith(f"ckpt-{STEPS}")
    evaluation = training["evaluation"]
    assert evaluation["final"] and evaluation["checkpoint"] == f"ckpt-{STEPS}"
    assert evaluation["step"] == STEPS and evaluation["metrics"]["accuracy"] > 0.8
    text = launcher("status", name, "--local", "--workdir", str(workdir)).stdout
    assert f"training: step {STEPS}/{STEPS} (100%)" in text
    assert f"final eval ckpt-{STEPS}: accuracy" in text

    # status --watch of a cluster that has ended shows its last state and exits with its code.
    watched = launcher("status", name, "--local", "--workdir", str(workdir), "--watch")
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.startswith("[Succeeded]") and f"step {STEPS}/{STEPS}" in watched.stdout


def test_the_terminal_gets_the_view_and_logs_all_the_raw_output(observed):
    # The terminal got the view; the raw output, TensorFlow's C++ logging included, went to
    # the logs, where `logs --all` shows it behind each task's name.
    shown = observed.terminal.splitlines()
    raw = launcher("logs", NAME, "--all", "--local", "--workdir", str(observed.workdir)).stdout.splitlines()
    measure(
        f"MEASURE local PS run ({STEPS} steps): {len(shown)} lines on the terminal, "
        f"{len(raw)} in logs --all; {len(observed.status_while_training)} distinct steps seen by status "
        "while training"
    )
    assert not [x for x in shown if "tfk8s-progress" in x or "oneDNN" in x], shown
    assert any(x.startswith("[Running]") and f"/{STEPS}" in x for x in shown), shown
    assert shown[-1].startswith("[Succeeded]") or "[Succeeded]" in "\n".join(shown[-3:])
    for task in TASKS:
        assert any(x.startswith(f"[{task}] ") for x in raw), task
    assert any("tfk8s-progress" in x for x in raw)


def test_the_api_follows_it_with_progress_events_to_succeeded(observed):
    """TFK8sClient.wait_for_job_status's callback: training progress with its loss, target and
    an ETA, ending in the final evaluation."""
    events = observed.api_events
    [final] = observed.api_final
    assert final.phase is Phase.SUCCEEDED and final.exit_code == 0
    training = [e for e in events if e.step is not None and not e.finished]
    assert training and training[-1].loss is not None and training[-1].target == STEPS
    assert any(e.eta_seconds is not None for e in training), [e.line for e in events]
    assert events[-1].finished and events[-1].evaluation.final


def test_every_task_served_its_prometheus_series_up_to_the_final_evaluation(observed):
    """worker/metrics.py on a real cluster: every task serves its metrics on the localhost port
    submit printed, scraped every 0.5 s and parsed with the official parser, up to the chief's
    final step and the evaluator's final evaluation (each waits for its last scrape before it
    exits)."""
    addresses, seen = observed.addresses, observed.scraped
    assert sorted(addresses) == sorted(TASKS), addresses
    chief_steps = [s[("tfk8s_global_step", ())] for s in seen["chief-0"] if ("tfk8s_global_step", ()) in s]
    assert chief_steps == sorted(chief_steps) and chief_steps[-1] == STEPS, chief_steps
    assert len(set(chief_steps)) >= 3, chief_steps  # seen rising, not only at the end
    last = seen["chief-0"][-1]
    assert last[("tfk8s_target_steps", ())] == STEPS
    assert last[("tfk8s_training_finished", ())] == 1
    assert last[("tfk8s_checkpoint_step", ())] == STEPS
    assert last[("tfk8s_loss", ())] > 0
    assert any(s.get(("tfk8s_steps_per_second", ()), 0) > 0 for s in seen["chief-0"])
    evaluator = seen["evaluator-0"][-1]
    assert evaluator[("tfk8s_evaluation_final", ())] == 1
    assert evaluator[("tfk8s_evaluation_step", ())] == STEPS
    assert evaluator[("tfk8s_evaluation", (("metric", "accuracy"),))] > 0.8
    for task in ("ps-0", "worker-0", "worker-1"):
        assert any(("process_cpu_seconds_total", ()) in s for s in seen[task]), task
    said = observed.terminal
    assert f"Prometheus metrics: chief-0 {addresses['chief-0']}" in said, said[-2000:]
    measure(
        f"local PS training scraped every 0.5 s: chief step seen at {len(set(chief_steps))} values up to "
        f"{chief_steps[-1]}, final accuracy {evaluator[('tfk8s_evaluation', (('metric', 'accuracy'),))]:.3f} "
        f"from the evaluator's endpoint"
    )


def test_tensorboard_serves_the_evaluators_scalars(observed):
    """`tensorboard NAME --local` after the run: TensorBoard serves the built-in evaluator's
    scalars over HTTP, and Ctrl-C stops it."""
    final_step = final_marker(LocalBackend(LocalProcessBackendConfig(workdir=observed.workdir)), NAME)["step"]
    session = TensorBoardSession(
        [NAME, "--local", "--workdir", str(observed.workdir), "--port", str(free_port())],
        observed.dir / "tensorboard.log",
        start_timeout=120,
    )
    try:
        assert session.url.startswith("http://127.0.0.1:")
        scalars = session.eval_scalars(timeout=60)
    finally:
        code = session.interrupt(timeout=30)
    measure(
        f"tensorboard --local: {session.line}\n  /data/runs: {scalars['runs_text']}\n"
        f"  /data/plugin/scalars/tags: {scalars['tags_text'][:400]}\n"
        f"  accuracy points: {scalars['points_text'][:400]}"
    )
    assert {"accuracy", "loss"} <= set(scalars["tags"])
    steps = [step for _, step, _ in scalars["points"]]
    assert final_step in steps and steps == sorted(steps)
    assert code == 0, session.output()
    assert connection_refused(session.url)


def test_the_api_lists_it_reads_its_logs_and_deletes_it_keeping_the_model(observed):
    """Last in this module: it deletes the observed run."""
    client = observed.client
    assert [j.name for j in client.list_jobs()] == [NAME]
    assert len(list(client.get_job_logs(NAME, "chief", tail=3))) == 3
    client.delete_job(NAME)
    with pytest.raises(ClusterNotFound):
        client.get_job(NAME)
    assert os.path.isdir(observed.workdir / NAME / "model")  # kept, like a claim
