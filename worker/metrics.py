"""Prometheus metrics of this task, served on TFK8S_METRICS_PORT (off when it is unset).

They are derived from the progress events (worker/progress.py calls observe() for each), so
`status`, the live view and a Prometheus dashboard read one source: a number shown in one place
is the number shown in the other. The official prometheus_client writes the exposition format;
it is imported only when the port is set, so a task without metrics pays nothing.

Every series carries the task's labels (training, training_namespace, role, index), so one query
works on a Kubernetes scrape and on a `--local` one alike. What the series are, and the PromQL of
the dashboard and the alerts built on them: docs/metrics.md.

A task that ends (the chief after its final checkpoint, the evaluator after the final
evaluation) would take its last values with it if it exited between two scrapes: before exiting
it waits for one more scrape, bounded (wait_for_last_scrape), if anything has scraped it at all.
"""

from __future__ import annotations

import os
import time

from worker import contract

# Seconds since the process started at which each start-up phase was reached (progress events).
STARTUP_PHASES = {
    "tensorflow_imported": "tensorflow_imported",
    "peers_ready": "peers_ready",
    "start": "restored",
    "first_step": "first_step",
    "first_epoch": "first_step",
}
# Events that mean training moved: the "no progress" alert reads the last one's time.
PROGRESS_EVENTS = ("first_step", "step", "block", "epoch", "first_epoch", "checkpoint")
LAST_SCRAPE_CAP_SECONDS = 15.0  # the longest an ending task waits for its last scrape
# After the last scrape's collection, for its response (a few KB) to be sent before os._exit.
RESPONSE_SECONDS = 0.25
LABELS = ("training", "training_namespace", "sweep", "role", "index")  # sweep: "" outside a sweep
METRICS_PATH = contract.METRICS_PATH
# A connection that sends no request for this long is closed, freeing its thread; at most
# MAX_CONNECTIONS are served at once, more are closed unanswered: a scraper needs one, and
# idle connections must not pile threads up in a training process.
IDLE_SECONDS = 10.0
MAX_CONNECTIONS = 8

_metrics: "TaskMetrics | None" = None


class TaskMetrics:
    """One task's series (a registry of its own), fed by observe()."""

    def __init__(self, task_labels: dict[str, str], global_batch_size: int | None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector

        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes
        self.task_labels = task_labels
        self.global_batch_size = global_batch_size
        self.scrapes: list[float] = []  # when the endpoint was last read (two are kept)
        self.moved: tuple[int, float] | None = None  # (step, when) of the last progress record that moved the step

        def gauge(name: str, doc: str, *extra: str):
            return Gauge(name, doc, (*LABELS, *extra), registry=self.registry)

        self.info = gauge("tfk8s_task_info", "1 per task, with its strategy and program", "strategy", "program")
        self.started = gauge("tfk8s_task_start_timestamp_seconds", "When this process started (each start a new value)")
        self.startup = gauge("tfk8s_startup_seconds", "Seconds from the process start to each phase", "phase")
        self.step = gauge("tfk8s_global_step", "The training's global step as this task last saw it")
        self.target = gauge("tfk8s_target_steps", "The step training ends at (--steps)")
        self.loss = gauge("tfk8s_loss", "Mean training loss over the last reported interval")
        self.steps_per_second = gauge("tfk8s_steps_per_second", "Optimizer steps per second over the last interval")
        self.examples_per_second = gauge("tfk8s_examples_per_second", "Examples per second (steps/s x global batch)")
        self.progressed = gauge("tfk8s_progress_timestamp_seconds", "When training last moved (a step or a save)")
        self.progress_interval = gauge(
            "tfk8s_progress_interval_seconds", "Seconds between the last two progress records that moved the step"
        )
        self.restored = gauge("tfk8s_restored_step", "The step this attempt restored (0: started fresh)")
        self.checkpoint_step = gauge("tfk8s_checkpoint_step", "The step of the last checkpoint this task saved")
        self.checkpoint_time = gauge("tfk8s_checkpoint_timestamp_seconds", "When this task last saved a checkpoint")
        self.preemption_saves = Counter(
            "tfk8s_preemption_saves", "Checkpoints saved on a SIGTERM", LABELS, registry=self.registry
        )
        self.finished = gauge("tfk8s_training_finished", "1 once the final checkpoint and SavedModel are written")
        self.finished_time = gauge("tfk8s_training_finished_timestamp_seconds", "When the final checkpoint was written")
        self.evaluation = gauge("tfk8s_evaluation", "The last evaluation's metrics", "metric")
        self.evaluation_step = gauge("tfk8s_evaluation_step", "The step of the last evaluated checkpoint")
        self.evaluation_time = gauge("tfk8s_evaluation_timestamp_seconds", "When the last evaluation ended")
        self.evaluated_final = gauge("tfk8s_evaluation_final", "1 once the final checkpoint is evaluated")
        # Last: a scrape is noted once every series above has been collected for it.
        self.registry.register(_ScrapeClock(self.scrapes))

    def labelled(self, series, **extra):
        return series.labels(**self.task_labels, **extra)

    def begin(self, strategy: str, program: str, process_start: float) -> None:
        """The series a task has from its start."""
        self.labelled(self.info, strategy=strategy, program=program).set(1)
        self.labelled(self.started).set(process_start)
        # Present from the start, so a query tells "not yet" (0) from "no such task" (no series).
        self.labelled(self.finished).set(0)
        self.labelled(self.preemption_saves)

    def observe(self, record: dict) -> None:
        event, now = record.get("event"), record.get("wall") or time.time()
        if event in STARTUP_PHASES and record.get("t") is not None:
            self.labelled(self.startup, phase=STARTUP_PHASES[event]).set(record["t"])
        if record.get("step") is not None and event not in ("evaluated", "evaluator_done"):
            self.labelled(self.step).set(record["step"])
        if record.get("target") is not None:
            self.labelled(self.target).set(record["target"])
        if event in PROGRESS_EVENTS:
            self.labelled(self.progressed).set(now)
            self._moved(record.get("step"), now)
            if record.get("loss") is not None:
                self.labelled(self.loss).set(record["loss"])
            rate = record.get("steps_per_s")
            if rate is not None:
                self.labelled(self.steps_per_second).set(rate)
                if self.global_batch_size:
                    self.labelled(self.examples_per_second).set(rate * self.global_batch_size)
        if event == "start":
            self.labelled(self.restored).set(record.get("step") or 0)
        if event in ("checkpoint", "epoch") or (event == "preempted" and record.get("checkpoint")):
            self.labelled(self.checkpoint_step).set(record.get("step") or 0)
            self.labelled(self.checkpoint_time).set(now)
        if event == "preempted" and record.get("checkpoint"):
            self.labelled(self.preemption_saves).inc()
        if event == contract.EVENT_FINAL:
            self.labelled(self.finished).set(1)
            self.labelled(self.finished_time).set(now)
        if event == contract.EVENT_EVALUATED:
            for metric, value in record.items():
                if metric not in contract.EVALUATION_META_FIELDS and isinstance(value, (int, float)):
                    self.labelled(self.evaluation, metric=metric).set(value)
            self.labelled(self.evaluation_step).set(record.get("step") or 0)
            self.labelled(self.evaluation_time).set(record.get("evaluated_at") or now)
        if event == "evaluator_done":
            self.labelled(self.evaluated_final).set(1)

    def _moved(self, step: int | None, now: float) -> None:
        """The training's rhythm, which the stalled alert judges a silence by: the time between
        two records that moved the step (a save at the step just reported, as the custom loop's
        checkpoint after its block and Model.fit's step line after its epoch, is no new beat).
        None before a second one: the start-up is no beat (the alert's fixed threshold applies)."""
        if step is None or (self.moved is not None and step <= self.moved[0]):
            return
        if self.moved is not None:
            self.labelled(self.progress_interval).set(now - self.moved[1])
        self.moved = (step, now)


class _ScrapeClock:
    """A collector with no series: it notes when the endpoint is read."""

    def __init__(self, scrapes: list[float]):
        self.scrapes = scrapes

    def collect(self):
        self.scrapes[:] = [*self.scrapes[-1:], time.monotonic()]
        return []

    def describe(self):
        return []  # nothing to describe; keeps auto_describe from calling collect() at register


def start(task, process_start: float, global_batch_size: int | None = None, environ=None) -> str | None:
    """Serve this task's metrics if TFK8S_METRICS_PORT is set; returns the address served.
    process_start: when the process started (progress.PROCESS_START)."""
    global _metrics
    env = os.environ if environ is None else environ
    port_text = env.get(contract.METRICS_PORT, "").strip()
    if not port_text or port_text == "0":
        return None
    host = env.get(contract.METRICS_HOST, "0.0.0.0")
    labels = {
        "training": task.cluster_name or "",
        "training_namespace": task.namespace or "",
        "sweep": env.get(contract.SWEEP, ""),
        "role": task.role.value,
        "index": str(task.index),
    }
    metrics = TaskMetrics(labels, global_batch_size)
    metrics.begin(str(task.strategy), task.program_module, process_start)
    _serve(host, int(port_text), metrics.registry)
    _metrics = metrics
    return f"http://{host}:{port_text}{METRICS_PATH}"


def _serve(host: str, port: int, registry) -> None:
    """The exposition of `registry` on host:port, METRICS_PATH only, in daemon threads (the
    official client's own server serves every path and keeps each idle connection's thread)."""
    import http.server
    import socket
    import threading
    from urllib.parse import urlsplit

    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = IDLE_SECONDS  # socket timeout: an idle keep-alive connection ends

        def do_GET(self):
            if urlsplit(self.path).path != METRICS_PATH:
                self.send_error(404, f"only {METRICS_PATH} is served")
                return
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # the task's log is for the task
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def process_request(self, request, client_address):
            if not slots.acquire(blocking=False):
                self.shutdown_request(request)  # closed unanswered: MAX_CONNECTIONS are in use
                return
            super().process_request(request, client_address)

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                slots.release()

        def handle_error(self, request, client_address):
            # The stdlib prints a traceback into the task's log, whose last lines are its cause
            # when it fails. A scraper gone mid-answer (a probe, a restarted Prometheus) is
            # nothing to say; anything else is one line.
            import sys

            error = sys.exc_info()[1]
            if isinstance(error, ConnectionError):
                return
            print(f"tfk8s metrics: a scrape from {client_address[0]} failed: {error!r}", file=sys.stderr, flush=True)

    if ":" in host:  # an IPv6 address
        Server.address_family = socket.AF_INET6
    server = Server((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="tfk8s-metrics", daemon=True).start()


def observe(record: dict) -> None:
    if _metrics is not None:
        _metrics.observe(record)


def wait_for_last_scrape(cap_seconds: float = LAST_SCRAPE_CAP_SECONDS) -> float:
    """Before the process exits: if the endpoint has been scraped, wait for the next scrape (so
    the last values reach Prometheus), at most two of the intervals seen, and at most
    cap_seconds. Returns the seconds waited."""
    metrics = _metrics
    if metrics is None or not metrics.scrapes:
        return 0.0
    started = time.monotonic()
    last = metrics.scrapes[-1]
    interval = metrics.scrapes[-1] - metrics.scrapes[0] if len(metrics.scrapes) == 2 else cap_seconds
    deadline = started + min(cap_seconds, 2 * interval if interval > 0 else cap_seconds)
    while time.monotonic() < deadline and metrics.scrapes[-1] == last:
        time.sleep(0.05)
    if metrics.scrapes[-1] != last:
        time.sleep(RESPONSE_SECONDS)
    return time.monotonic() - started
