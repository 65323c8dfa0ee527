"""worker/metrics.py: the progress events as Prometheus series, served by the official client
and read back with its official parser (no TensorFlow: the events are fed as the worker emits
them). A real local PS run's series, every task's scraped from its start to the final
evaluation, are checked on the one observed PS run of test_progress_view.py (with `scrape`)."""

from __future__ import annotations

import os
import threading
import time
import urllib.request

import pytest
from local_clusters import free_port
from prometheus_client.parser import text_string_to_metric_families

from worker import contract, metrics, progress
from worker.context import TaskContext
from worker.contract import Role, Strategy

TASK_LABELS = {"training": "demo", "training_namespace": "team-a", "sweep": "", "role": "chief", "index": "0"}


def chief() -> TaskContext:
    return TaskContext(
        strategy=Strategy.PARAMETER_SERVER,
        role=Role.CHIEF,
        index=0,
        cluster={},
        model_dir="/m",
        program_module="worker.examples.digits",
        peer_timeout_seconds=1.0,
        cluster_name="demo",
        namespace="team-a",
    )


@pytest.fixture
def served(monkeypatch):
    """The chief's endpoint on a free localhost port; the module's state reset afterwards."""
    monkeypatch.setattr(metrics, "_metrics", None)
    port = free_port()
    address = metrics.start(
        chief(),
        progress.PROCESS_START,
        global_batch_size=64,
        environ={contract.METRICS_PORT: str(port), contract.METRICS_HOST: "127.0.0.1"},
    )
    assert address == f"http://127.0.0.1:{port}/metrics"
    return address


def scrape(address: str, task_labels: dict | None = TASK_LABELS) -> dict[tuple[str, tuple], float]:
    """(sample name, its labels other than the task's) -> value, from one scrape; every tfk8s
    series must carry task_labels, when given."""
    text = urllib.request.urlopen(address, timeout=10).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if task_labels and sample.name.startswith("tfk8s_"):
                assert {k: sample.labels[k] for k in task_labels} == task_labels, sample
            extra = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in TASK_LABELS))
            samples[(sample.name, extra)] = sample.value
    return samples


def test_a_sweeps_trial_says_its_sweep_on_every_series(monkeypatch):
    monkeypatch.setattr(metrics, "_metrics", None)
    port = free_port()
    environ = {contract.METRICS_PORT: str(port), contract.METRICS_HOST: "127.0.0.1", contract.SWEEP: "lr-search"}
    address = metrics.start(chief(), progress.PROCESS_START, environ=environ)
    assert scrape(address, {**TASK_LABELS, "sweep": "lr-search"})


def test_the_events_of_a_training_become_its_series(served):
    events = [
        ("tensorflow_imported", {}),
        ("peers_ready", {}),
        ("start", {"step": 100, "target": 400, "restored_from": "/m/checkpoints/ckpt-100"}),
        ("first_step", {"step": 110, "loss": 0.9}),
        ("block", {"step": 150, "steps": 40, "steps_per_s": 20.0, "loss": 0.5}),
        ("checkpoint", {"step": 150, "path": "/m/checkpoints/ckpt-150"}),
        ("step", {"step": 180, "target": 400, "loss": 0.4, "steps_per_s": 25.0}),
        ("preempted", {"step": 180, "checkpoint": "/m/checkpoints/ckpt-180"}),
    ]
    before = int(time.time() * 1000) / 1000  # the events' wall clock is in whole ms, rounded
    for event, fields in events:
        progress.report(event, **fields)
    got = scrape(served)

    assert got[("tfk8s_task_info", (("program", "worker.examples.digits"), ("strategy", "parameter_server")))] == 1
    assert got[("tfk8s_task_start_timestamp_seconds", ())] == pytest.approx(progress.PROCESS_START)
    phases = {dict(k[1])["phase"] for k in got if k[0] == "tfk8s_startup_seconds"}
    assert phases == {"tensorflow_imported", "peers_ready", "restored", "first_step"}
    assert got[("tfk8s_global_step", ())] == 180
    assert got[("tfk8s_target_steps", ())] == 400
    assert got[("tfk8s_restored_step", ())] == 100
    assert got[("tfk8s_loss", ())] == 0.4
    assert got[("tfk8s_steps_per_second", ())] == 25.0
    assert got[("tfk8s_examples_per_second", ())] == 25.0 * 64
    assert got[("tfk8s_checkpoint_step", ())] == 180  # the preemption's save
    assert got[("tfk8s_checkpoint_timestamp_seconds", ())] >= before
    assert got[("tfk8s_progress_timestamp_seconds", ())] >= before
    assert got[("tfk8s_preemption_saves_total", ())] == 1
    assert got[("tfk8s_training_finished", ())] == 0
    assert got[("process_resident_memory_bytes", ())] > 0


def test_the_rhythm_is_the_time_between_records_that_moved_the_step(served):
    """What the stalled alert judges a silence by: a save at the step just reported (the custom
    loop's checkpoint after its block, Model.fit's step line after its epoch) is no new beat."""
    assert ("tfk8s_progress_interval_seconds", ()) not in scrape(served)  # no beat before a first step
    records = [
        ("first_step", 1, 1000.0),
        ("block", 50, 1070.0),
        ("checkpoint", 50, 1071.5),
    ]
    for event, step, wall in records:
        metrics.observe({"event": event, "step": step, "wall": wall})
    got = scrape(served)
    assert got[("tfk8s_progress_interval_seconds", ())] == 70.0
    assert got[("tfk8s_progress_timestamp_seconds", ())] == 1071.5  # the save is progress all the same
    metrics.observe({"event": "block", "step": 100, "wall": 1150.0})
    assert scrape(served)[("tfk8s_progress_interval_seconds", ())] == 80.0
    metrics.observe({"event": contract.EVENT_FINAL, "step": 100, "wall": 1160.0})
    got = scrape(served)
    assert got[("tfk8s_training_finished", ())] == 1
    assert got[("tfk8s_training_finished_timestamp_seconds", ())] == 1160.0


def test_an_evaluation_reports_every_metric_it_measured(served):
    progress.report(
        contract.EVENT_EVALUATED,
        checkpoint="ckpt-400",
        step=400,
        loss=0.25,
        accuracy=0.93,
        examples=360,
        final=True,
        evaluated_at=1234.5,
        seconds=0.4,
    )
    progress.report("evaluator_done", final="ckpt-400", step=400)
    got = scrape(served)
    evaluation = {dict(k[1])["metric"]: v for k, v in got.items() if k[0] == "tfk8s_evaluation"}
    assert evaluation == {"loss": 0.25, "accuracy": 0.93}  # not its step, examples or timing
    assert got[("tfk8s_evaluation_step", ())] == 400
    assert got[("tfk8s_evaluation_timestamp_seconds", ())] == 1234.5
    assert got[("tfk8s_evaluation_final", ())] == 1
    assert ("tfk8s_global_step", ()) not in got  # an evaluated step is not the training's step


def test_no_port_no_server_and_nothing_to_wait_for(monkeypatch):
    monkeypatch.setattr(metrics, "_metrics", None)
    assert metrics.start(chief(), progress.PROCESS_START, environ={}) is None
    assert metrics.start(chief(), progress.PROCESS_START, environ={contract.METRICS_PORT: "0"}) is None
    progress.report("step", step=1, target=2)  # observed by nobody, no error
    assert metrics.wait_for_last_scrape() == 0.0


def test_an_ending_task_waits_for_one_more_scrape_only_if_it_is_scraped(served):
    assert metrics.wait_for_last_scrape(cap_seconds=5) == 0.0  # never scraped: no wait
    scrape(served)
    time.sleep(0.5)
    scrape(served)  # Prometheus scrapes every 0.5 s
    progress.report("final", step=400, checkpoint="/m/checkpoints/ckpt-400")
    scraped_final = {}

    def prometheus_scrapes_again():
        time.sleep(0.5)
        scraped_final.update(scrape(served))

    prometheus = threading.Thread(target=prometheus_scrapes_again)
    prometheus.start()
    waited = metrics.wait_for_last_scrape(cap_seconds=5)
    assert 0.3 < waited < 4.5, waited
    prometheus.join(5)
    assert scraped_final[("tfk8s_training_finished", ())] == 1
    # Nobody scrapes again: bounded by twice the interval seen (0.5 s).
    waited = metrics.wait_for_last_scrape(cap_seconds=5)
    assert waited < 2.5, waited


def test_a_port_in_use_costs_the_metrics_not_the_training(monkeypatch, capsys):
    """Served by `python -m worker`'s start-up (worker/__main__.py): a bind failure is one line."""
    import socket

    from worker import __main__ as worker_main
    from worker import args

    monkeypatch.setattr(metrics, "_metrics", None)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setenv(contract.METRICS_PORT, str(port))
        monkeypatch.setenv(contract.METRICS_HOST, "127.0.0.1")
        worker_main._serve_metrics(chief(), args.parse(["--steps", "10"]))
    out = capsys.readouterr().out
    assert f"tfk8s chief-0: no Prometheus metrics: cannot serve on TFK8S_METRICS_PORT={port} (" in out, out
    assert f"Address already in use: pid {os.getpid()} (" in out and ") listens on it)" in out, out  # this test
    assert "training goes on without them" in out


def test_only_the_metrics_path_is_served_and_an_idle_connection_is_closed(served):
    """Before: every path answered with the metrics, and each idle connection kept a thread of
    the training process for as long as the client liked (security review, issue 61)."""
    import socket
    import urllib.error

    root = served.removesuffix(metrics.METRICS_PATH)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(root + "/", timeout=10)
    assert refused.value.code == 404
    assert scrape(served)  # the metrics path still answers
    host, port = root.removeprefix("http://").split(":")
    idle = socket.create_connection((host, int(port)), timeout=30)
    started = time.monotonic()
    assert idle.recv(1) == b""  # the server closed it: no request came
    closed_after = time.monotonic() - started
    assert metrics.IDLE_SECONDS - 1 <= closed_after <= metrics.IDLE_SECONDS + 5, closed_after


def test_connections_beyond_the_bound_are_closed_unanswered(served):
    import socket

    host, port = served.removeprefix("http://").removesuffix(metrics.METRICS_PATH).split(":")
    held = [socket.create_connection((host, int(port)), timeout=30) for _ in range(metrics.MAX_CONNECTIONS)]
    try:
        time.sleep(0.5)  # each of them is being served (its thread waits for a request)
        extra = socket.create_connection((host, int(port)), timeout=30)
        started = time.monotonic()
        assert extra.recv(1) == b""
        assert time.monotonic() - started < 5  # closed at once, not after the idle bound
        extra.close()
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.5)
    assert scrape(served)  # the slots came back


def test_a_scraper_gone_mid_answer_leaves_no_traceback_in_the_tasks_log(capfd):
    """Before: the stdlib's 'Exception occurred during processing of request' and a 20-line
    BrokenPipeError traceback in the training task's log (seen on kind when a probe pod closed
    its connection), where the last lines are read as the task's cause."""
    import socket
    import struct

    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

    class Slow:  # the answer is written well after the scraper has gone
        def collect(self):
            time.sleep(0.5)
            yield GaugeMetricFamily("slow", "answers late", value=1)

    registry = CollectorRegistry()
    registry.register(Slow())
    port = free_port()
    metrics._serve("127.0.0.1", port, registry)
    scraper = socket.create_connection(("127.0.0.1", port), timeout=10)
    scraper.sendall(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
    scraper.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # closed with a reset
    scraper.close()
    time.sleep(1.5)
    assert "slow 1.0" in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
