"""The dashboard's and the alerts' PromQL (launcher/monitoring) against a real Prometheus that
scrapes a real training: a `--local` run's tasks, found through the run's metrics.json as a
file_sd target list. Every panel query returns data while the training runs; the "stalled"
alert stays quiet while it trains and fires once the chief is SIGSTOPped (its endpoint stops
answering with it), and the last values stay queryable after the run is deleted, while the alert
stays quiet on the ended training.

The alerts on what Kubernetes does, where each retry of a task is a new pod and so a new series:
real `python -m worker` evaluators of trainings whose chief never comes wait for a first checkpoint
without TensorFlow, serving their metrics (a task stuck at start-up, a fraction of a CPU-second
each); a task retried as successive pods, each on an address of its own, fires
TFK8sRestartsRising, as does one restarted in place on one address (restartPolicy OnFailure,
`--local`); the stuck task fires TFK8sTrainingStalled and resolves once it is gone.

Histories that would take hours to live through are staged: endpoints serving the worker's own
series, fed progress records with chosen times, in the test's process (a slow progress rhythm,
a name resubmitted after its earlier run finished, a training whose tasks are gone).

The Prometheus binary is built by tests/kind/toolchain.sh (step `prometheus`; env.sh names it
TFK8S_PROMETHEUS)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import prometheus_client
import pytest
import yaml
from kind.conftest import _env_file_vars
from local_clusters import (
    LocalBackend,
    LocalProcessBackendConfig,
    assert_no_task_processes,
    free_port,
    make_spec,
    measure,
    run_files,
    wait_until,
)
from support import skip_unless_ci, wait_for_the_toolchain

from launcher import k8s_contract
from launcher.errors import ClusterNotFound
from launcher.monitoring import alerts, dashboard, queries
from worker import contract, metrics

pytestmark = pytest.mark.process

SCRAPE = "1s"
STALLED_SECONDS = 6  # the test's threshold; the shipped default is 600
RESTARTS = 2  # the test's threshold (more than this fires); the shipped default is 3
RESTARTS_WINDOW = "5m"
TIMEOUT = 180


def prometheus_binary() -> str:
    wait_for_the_toolchain()  # CI's cold path builds Prometheus beside the process tier
    found = os.environ.get("TFK8S_PROMETHEUS") or _env_file_vars().get("TFK8S_PROMETHEUS")
    if not found or not os.access(found, os.X_OK):
        why = f"no Prometheus binary ({found or 'TFK8S_PROMETHEUS unset'})"
        skip_unless_ci(f"{why}: run tests/kind/toolchain.sh prometheus")
    return found


class Prometheus:
    def __init__(self, binary: str, workdir, targets_file, rules_file):
        self.port = free_port()
        config = {
            "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE, "scrape_timeout": "900ms"},
            "rule_files": [str(rules_file)],
            "scrape_configs": [
                {"job_name": "tfk8s", "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "1s"}]}
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: self._ready(), 60, f"Prometheus ready (log: {self.log.name})", interval=0.5)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def query(self, expr: str) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        answer = json.load(urllib.request.urlopen(url, timeout=10))
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]["result"]

    def firing(self, alert: str, training: str) -> list[dict]:
        return self.query(f'ALERTS{{alertname="{alert}", alertstate="firing", training="{training}"}}')

    def active_at(self, alert: str, training: str) -> float:
        """When Prometheus first found the alert's condition true for `training` (Unix seconds)."""
        found = json.load(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/alerts", timeout=10))
        wanted = {"alertname": alert, "training": training}
        (when,) = [a["activeAt"] for a in found["data"]["alerts"] if wanted.items() <= a["labels"].items()]
        # RFC 3339 with nanoseconds: datetime reads microseconds at most.
        seconds, _, fraction = when.rstrip("Z").partition(".")
        whole = datetime.datetime.fromisoformat(seconds).replace(tzinfo=datetime.timezone.utc).timestamp()
        return whole + float(f"0.{fraction or 0}")

    def stop(self) -> None:
        """Always called (a Prometheus left behind scrapes and evaluates every second)."""
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def test_every_panel_and_alert_against_a_real_prometheus(backend, workdir, tmp_path, probe_programs_importable):
    binary = prometheus_binary()
    name = "watched"
    # Detached, as `submit --local` runs it: `delete` ends it whenever the test is done.
    backend = LocalBackend(LocalProcessBackendConfig(workdir=workdir, foreground=False, python=backend.config.python))
    with contextlib.ExitStack() as cleanup:
        # A mirrored chief and an evaluator, training long enough for the stall to be staged in it.
        # The queries and alerts are the subject, not the model: the paced probe program
        # (tests/worker/probes/paced_program.py) steps at a set 100 steps/s, so the built-in CNN
        # no longer takes a core for the whole test (it trained until the delete).
        args = ["--steps", "100000", "--checkpoint-every", "200", "--data", "digits"]
        program = {"module": "paced_program", "args": args}
        env = {"TFK8S_PROGRESS_SECONDS": "1", "PACED_STEP_SECONDS": "0.01"}
        # labelled as a sweep's trial (a sweep's clusters are: launcher/sweep/trials.py), for the sweep panel
        labels = {k8s_contract.LABEL_SWEEP: "watched-sweep"}
        backend.submit(make_spec(name, "mirrored", args, program=program, env=env, labels=labels))
        cleanup.callback(delete_if_there, backend, name)
        addresses = wait_until(lambda: run_files(backend, name).read_metrics(), 60, "metrics.json")
        targets = tmp_path / "targets.json"
        targets.write_text(json.dumps([{"targets": [a.split("/")[2] for a in addresses.values()]}]))
        rules = tmp_path / "rules.yaml"
        rules.write_text(alerts.rules_yaml(alerts.Thresholds(stalled_seconds=STALLED_SECONDS, hold="0s")))
        prometheus = Prometheus(binary, tmp_path, targets, rules)
        cleanup.callback(prometheus.stop)

        wait_until(lambda: prometheus.query('tfk8s_evaluation{metric="accuracy"}'), TIMEOUT, "a first evaluation")
        # Rates and changes need a second sample: up to a minute for every panel to answer.
        deadline = time.monotonic() + 60
        while (silent := [title for title, expr in dashboard.panel_queries() if not prometheus.query(expr)]) and (
            time.monotonic() < deadline
        ):
            time.sleep(1)
        assert not silent, f"panels with no data: {silent}"
        [(_, of_the_sweep)] = [q for q in dashboard.panel_queries(sweep="watched-sweep") if q[0].startswith("Sweep")]
        assert {r["metric"]["training"] for r in prometheus.query(of_the_sweep)} == {name}
        assert prometheus.query('ALERTS{alertname="TFK8sTrainingStalled"}') == []

        # The rule file itself loaded, every alert in it (Prometheus's own view of it).
        loaded = json.load(urllib.request.urlopen(f"http://127.0.0.1:{prometheus.port}/api/v1/rules", timeout=10))
        names = {r["name"] for g in loaded["data"]["groups"] for r in g["rules"]}
        assert names == {r["alert"] for r in alerts.rules()["groups"][0]["rules"]}
        assert all(r["health"] == "ok" for g in loaded["data"]["groups"] for r in g["rules"]), loaded

        chief = run_files(backend, name).read_pid("chief", 0)
        os.kill(chief, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            fired = wait_until(lambda: prometheus.firing("TFK8sTrainingStalled", name), 60, "the stalled alert")
            fired_after = time.monotonic() - stopped
        finally:
            os.kill(chief, signal.SIGCONT)
        step = float(prometheus.query(f'max_over_time(tfk8s_global_step{{training="{name}"}}[10m])')[0]["value"][1])
        wait_until(lambda: not prometheus.firing("TFK8sTrainingStalled", name), 60, "the alert resolved after SIGCONT")

        backend.delete(name)
        assert_no_task_processes(workdir)
        # Ended, not stalled: past the threshold since its last step, the alert stays quiet.
        quiet_until = time.monotonic() + STALLED_SECONDS + 4
        while time.monotonic() < quiet_until:
            assert not prometheus.firing("TFK8sTrainingStalled", name), "the stalled alert on a deleted training"
            time.sleep(0.5)
        # Ended: its last values are still there to read, through the window the dashboard uses.
        last = prometheus.query(f'max_over_time(tfk8s_global_step{{training="{name}"}}[10m])')
        assert last and float(last[0]["value"][1]) >= step
    measure(
        f"real Prometheus ({binary.rsplit('/', 2)[-2]}) scraping a local mirrored training every {SCRAPE}: "
        f"{len(dashboard.panel_queries())} panel queries all answered; TFK8sTrainingStalled (threshold "
        f"{STALLED_SECONDS} s) fired {fired_after:.1f} s after SIGSTOP of the chief at step {step:.0f}, "
        f"with labels {fired[0]['metric'].get('training_namespace')}/{fired[0]['metric'].get('training')}"
    )


def delete_if_there(backend: LocalBackend, name: str) -> None:
    """The test's cleanup: the run deleted, unless the test already did."""
    try:
        backend.delete(name)
    except ClusterNotFound:
        pass


class WaitingEvaluator:
    """One pod of a task: a real `python -m worker` evaluator of a training whose chief never
    comes. It serves its metrics on `port` and waits for a first checkpoint without TensorFlow."""

    def __init__(self, python: str, training: str, model_dir, port: int):
        self.address = f"127.0.0.1:{port}"
        env = {
            **os.environ,
            contract.STRATEGY: "mirrored",
            contract.MODEL_DIR: str(model_dir),
            contract.CLUSTER_NAME: training,
            contract.METRICS_PORT: str(port),
            contract.METRICS_HOST: "127.0.0.1",
            contract.TF_CONFIG: json.dumps(
                {"cluster": {"chief": [f"127.0.0.1:{free_port()}"]}, "task": {"type": "evaluator", "index": 0}}
            ),
        }
        self.process = subprocess.Popen(
            [python, "-m", "worker", "--steps", "10"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def kill(self) -> None:
        """As a crashed pod: gone at once, nothing saved."""
        self.process.kill()
        self.process.wait(30)


def test_each_alert_fires_on_tasks_retried_as_new_pods_and_on_a_start_up_that_never_ends(backend, tmp_path):
    binary = prometheus_binary()
    python = backend.config.python
    targets = tmp_path / "targets.json"
    pods: dict[str, WaitingEvaluator] = {}  # training -> its task's pod now

    def discover() -> None:
        """The pods there are now, as Kubernetes service discovery lists them."""
        targets.write_text(json.dumps([{"targets": [pod.address for pod in pods.values()]}]))

    def start(training: str, port: int | None = None) -> WaitingEvaluator:
        model_dir = tmp_path / training
        model_dir.mkdir(exist_ok=True)
        pod = pods[training] = WaitingEvaluator(python, training, model_dir, port or free_port())
        cleanup.callback(pod.kill)
        discover()
        return pod

    def scraped_since(pod: WaitingEvaluator, after: float) -> bool:
        series = prometheus.query(f'tfk8s_task_start_timestamp_seconds{{instance="{pod.address}"}}')
        return bool(series) and float(series[0]["value"][1]) > after

    def retry(training: str, in_place: bool) -> None:
        """The task's next pod: a new address (Kubernetes), or the same one (OnFailure, --local)."""
        before = pods[training]
        before.kill()
        retried_at = time.time()
        port = int(before.address.rsplit(":", 1)[1]) if in_place else None
        pod = start(training, port)
        wait_until(lambda: scraped_since(pod, retried_at), 30, f"{training}'s new pod scraped", interval=0.5)

    def restarts(training: str) -> float:
        found = prometheus.query(queries.restarts(RESTARTS_WINDOW, f'{{training="{training}"}}'))
        return float(found[0]["value"][1]) if found else None

    thresholds = alerts.Thresholds(
        stalled_seconds=STALLED_SECONDS, restarts=RESTARTS, restarts_window=RESTARTS_WINDOW, hold="0s"
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(alerts.rules_yaml(thresholds))
    with contextlib.ExitStack() as cleanup:
        for training in ("stuck", "new-pods", "in-place"):
            start(training)
        prometheus = Prometheus(binary, tmp_path, targets, rules)
        cleanup.callback(prometheus.stop)
        # Stuck at start-up: no step ever, so no progress series at all.
        wait_until(lambda: prometheus.firing("TFK8sTrainingStalled", "stuck"), 60, "the stalled alert at start-up")
        # Quiet until then: it became active only once the task had been up for the threshold.
        started = float(prometheus.query('tfk8s_task_start_timestamp_seconds{training="stuck"}')[0]["value"][1])
        stalled_after = prometheus.active_at("TFK8sTrainingStalled", "stuck") - started
        assert STALLED_SECONDS < stalled_after < STALLED_SECONDS + 15, stalled_after

        for training in ("new-pods", "in-place"):
            wait_until(lambda t=training: scraped_since(pods[t], 0), 30, f"{training} scraped", interval=0.5)
            for _ in range(RESTARTS):
                retry(training, in_place=training == "in-place")
        time.sleep(2)  # two rule evaluations on what was scraped
        assert [restarts(t) for t in ("stuck", "new-pods", "in-place")] == [0, RESTARTS, RESTARTS]
        assert prometheus.query('ALERTS{alertname="TFK8sRestartsRising"}') == []

        for training in ("new-pods", "in-place"):
            retry(training, in_place=training == "in-place")
            firing = lambda t=training: prometheus.firing("TFK8sRestartsRising", t)  # noqa: E731
            wait_until(firing, 30, f"{training}: the restarts alert")
        assert restarts("new-pods") == restarts("in-place") == RESTARTS + 1
        assert not prometheus.firing("TFK8sRestartsRising", "stuck")

        pods.pop("stuck").kill()
        discover()
        ended = time.monotonic()
        wait_until(lambda: not prometheus.firing("TFK8sTrainingStalled", "stuck"), 30, "resolved once it ended")
        resolved_after = time.monotonic() - ended
    measure(
        f"real Prometheus, real waiting evaluators as pods: TFK8sRestartsRising (more than {RESTARTS} in "
        f"{RESTARTS_WINDOW}) quiet at {RESTARTS} restarts, firing at {RESTARTS + 1}, retried as new pods and in "
        f"place; TFK8sTrainingStalled ({STALLED_SECONDS} s) became active {stalled_after:.1f} s after the start "
        f"of a task that never stepped, resolved {resolved_after:.1f} s after its task ended"
    )


class EmulatedTask:
    """One task's endpoint serving the worker's own series (worker/metrics.py's TaskMetrics),
    fed progress records with chosen times: a training's history staged at once, in this
    process, without TensorFlow."""

    def __init__(self, training: str, role: str, started: float, records: list[dict]):
        labels = {**dict.fromkeys(metrics.LABELS, ""), "training": training, "role": role, "index": "0"}
        self.metrics = metrics.TaskMetrics(labels, global_batch_size=None)
        self.metrics.begin("parameter_server", "emulated", started)
        for record in records:
            self.metrics.observe(record)
        port = free_port()
        self.server, _ = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=self.metrics.registry)
        self.address = f"127.0.0.1:{port}"

    def end(self) -> None:
        """As a pod that is gone: its endpoint stops answering."""
        self.server.shutdown()
        self.server.server_close()


RHYTHM_SECONDS = 8.0  # the slow training's progress interval: 3 of them (24 s) are well past STALLED_SECONDS
CHECKPOINT_AGE_SECONDS = EVALUATION_LAG_SECONDS = 20


def test_alerts_judge_a_training_by_its_own_rhythm_its_own_run_and_only_while_it_answers(tmp_path):
    """#60 item 9, on series staged with chosen times. A PS Model.fit that reports once an epoch
    (RHYTHM_SECONDS) is not stalled until silent for stalled_intervals of its epochs; a name
    resubmitted after its earlier run finished is a new training, stalled at start-up like any
    other; a training whose tasks are gone is silent at once, not for the 6 h lookback; one that
    finished is silent while a task still answers."""
    binary = prometheus_binary()
    targets = tmp_path / "targets.json"
    tasks: dict[str, EmulatedTask] = {}  # "training/role" -> its endpoint

    def discover() -> None:
        targets.write_text(json.dumps([{"targets": [task.address for task in tasks.values()]}]))

    def serve(training: str, role: str, started: float, records: list[dict]) -> EmulatedTask:
        task = tasks[f"{training}/{role}"] = EmulatedTask(training, role, started, records)
        cleanup.callback(task.end)
        discover()
        return task

    def end(training: str, role: str) -> None:
        tasks.pop(f"{training}/{role}").end()
        discover()

    def scraped(series: str, training: str) -> bool:
        return bool(prometheus.query(f'{series}{{training="{training}"}}'))

    thresholds = alerts.Thresholds(
        stalled_seconds=STALLED_SECONDS,
        checkpoint_age_seconds=CHECKPOINT_AGE_SECONDS,
        evaluation_lag_seconds=EVALUATION_LAG_SECONDS,
        hold="0s",
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(alerts.rules_yaml(thresholds))
    discover()
    with contextlib.ExitStack() as cleanup:
        prometheus = Prometheus(binary, tmp_path, targets, rules)
        cleanup.callback(prometheus.stop)
        now = time.time()
        # PS Model.fit: a progress record per epoch, RHYTHM_SECONDS apart, the last already
        # further back than STALLED_SECONDS (today's fixed window fires at once).
        last_epoch = now - STALLED_SECONDS - 1
        epochs = [last_epoch - RHYTHM_SECONDS, last_epoch]
        serve(
            "slow-epochs",
            "chief",
            now - 300,
            [{"event": "epoch", "step": 50 * (i + 1), "wall": w} for i, w in enumerate(epochs)],
        )
        # An earlier run of "resubmitted" that finished.
        serve(
            "resubmitted",
            "chief",
            now - 100,
            [
                {"event": "epoch", "step": 100, "wall": now - 90},
                {"event": contract.EVENT_FINAL, "step": 100, "wall": now - 80},
            ],
        )
        # Finished, its evaluator still answering (its final evaluation): silent though its
        # last progress and checkpoint are past every threshold.
        serve(
            "finished",
            "chief",
            now - 100,
            [
                {"event": "checkpoint", "step": 100, "wall": now - 90},
                {"event": contract.EVENT_FINAL, "step": 100, "wall": now - 89},
            ],
        )
        serve("finished", "evaluator", now - 100, [])
        # Its last checkpoint old and far ahead of its last evaluation, then deleted (or failed).
        serve("gone", "chief", now - 200, [{"event": "checkpoint", "step": 100, "wall": now - 60}])
        serve(
            "gone", "evaluator", now - 200, [{"event": contract.EVENT_EVALUATED, "step": 10, "evaluated_at": now - 150}]
        )

        # The resubmission: the earlier run scraped, gone, then the new run's task up.
        wait_until(lambda: scraped("tfk8s_training_finished_timestamp_seconds", "resubmitted"), 30, "the earlier run")
        end("resubmitted", "chief")
        resubmitted = time.time()
        serve("resubmitted", "chief", resubmitted, [])
        wait_until(lambda: prometheus.firing("TFK8sTrainingStalled", "resubmitted"), 30, "stalled: the new run")
        resubmitted_after = prometheus.active_at("TFK8sTrainingStalled", "resubmitted") - resubmitted
        assert STALLED_SECONDS < resubmitted_after < STALLED_SECONDS + 15, resubmitted_after

        for alert in ("TFK8sCheckpointOld", "TFK8sEvaluationStale"):
            wait_until(lambda a=alert: prometheus.firing(a, "gone"), 30, f"{alert} while its tasks answer")
        end("gone", "chief")
        end("gone", "evaluator")
        ended = time.monotonic()
        for alert in ("TFK8sCheckpointOld", "TFK8sEvaluationStale"):
            wait_until(lambda a=alert: not prometheus.firing(a, "gone"), 30, f"{alert} silent once its tasks are gone")
        gone_after = time.monotonic() - ended

        wait_until(lambda: prometheus.firing("TFK8sTrainingStalled", "slow-epochs"), 60, "stalled: the slow fit")
        slow_after = prometheus.active_at("TFK8sTrainingStalled", "slow-epochs") - last_epoch
        limit = thresholds.stalled_intervals * RHYTHM_SECONDS
        assert limit < slow_after < limit + 15, slow_after
        assert prometheus.query('ALERTS{training="finished"}') == []
    measure(
        f"real Prometheus, staged series: TFK8sTrainingStalled ({STALLED_SECONDS} s or "
        f"{thresholds.stalled_intervals} progress intervals) became active {slow_after:.1f} s after the last epoch "
        f"of a fit reporting every {RHYTHM_SECONDS:.0f} s, {resubmitted_after:.1f} s after a finished name's "
        f"resubmission started; TFK8sCheckpointOld and TFK8sEvaluationStale resolved {gone_after:.1f} s after a "
        f"training's tasks were gone; a finished training with a task answering: no alert"
    )
