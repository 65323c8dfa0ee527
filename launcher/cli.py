"""`python -m launcher` / `tfk8s`: render, submit, status, logs, delete, list, tensorboard,
completion.

Flags follow kubectl: --kubeconfig, --context, -n/--namespace, --dry-run=client|server. Each
command turns its flags into typed options (a backend config, view options) and calls the
Python API (launcher.api.TFK8sClient); printing and exit codes are what is left here.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher import completion
from launcher.api.client import TFK8sClient, holds_experiment, import_experiment, import_tfjob, load_packed
from launcher.api.config import (
    DEFAULT_STUCK_SECONDS,
    DEFAULT_WORKDIR,
    BackendConfig,
    KubernetesBackendConfig,
    LocalProcessBackendConfig,
)
from launcher.api.sweeps import sweep_dir
from launcher.backends.local.files import RunFiles
from launcher.backends.view import DEFAULT_LINE_SECONDS, LineView
from launcher.chart import chart_values
from launcher.cluster_spec.spec import ClusterSpec
from launcher.code_shipping import code_bundle
from launcher.errors import ClusterNotFound, LauncherError, SpecError
from launcher.live_view import make_view
from launcher.monitoring import alerts, dashboard
from launcher.plan import storage
from launcher.plan.plan import plan
from launcher.render import render
from launcher.status.lines import printable
from launcher.status.node_loss import EXIT_NODE_LOST
from launcher.status.status import ClusterStatus
from worker.contract import ROLES, Role

DEFAULT_SPEC = "embedded default (launcher/default-cluster.yaml)"
STATUS_FORMATS = ["text", "json", "yaml"]


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("-n", "--namespace", help="namespace (default: the spec's, or the context's)")
    p.add_argument(
        "--local",
        action="store_true",
        help="use local processes instead of Kubernetes (after submit --local: found without it, see docs/local.md)",
    )
    p.add_argument("--workdir", help=f"where --local keeps runs (default: {DEFAULT_WORKDIR})")
    p.add_argument(
        "--python",
        metavar="PATH",
        help="the Python that runs --local's built-in "
        "worker tasks, e.g. a virtualenv's with TensorFlow (default: this one)",
    )


def _add_view_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--raw",
        action="store_true",
        help="no live view: with --local every task's output as it comes; on Kubernetes a status line at each change",
    )
    p.add_argument(
        "--every",
        type=float,
        default=DEFAULT_LINE_SECONDS,
        metavar="SECONDS",
        help=f"when not on a terminal, print the progress line this often (default {DEFAULT_LINE_SECONDS:g})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfk8s", description="Launch multi-worker TensorFlow training on Kubernetes.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {completion.version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("render", help="print the Kubernetes objects for a spec")
    p.add_argument("spec", nargs="?", help=f"cluster.yaml (default: {DEFAULT_SPEC})")
    p.add_argument("-n", "--namespace")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--tf-config", action="store_true", help="print every pod's TF_CONFIG")
    group.add_argument("--helm-values", action="store_true", help="print values for charts/tfk8s")

    p = sub.add_parser(
        "import",
        help="write a kubeflow.org/v1 TFJob file as cluster.yaml, or a Katib Experiment as sweep.yaml "
        "(stdout; notes on stderr)",
    )
    p.add_argument("tfjob", help="a TFJob YAML file (several documents, or a List), or a Katib Experiment")

    p = sub.add_parser("submit", help="create the training cluster")
    p.add_argument("spec", nargs="?", help=f"cluster.yaml, or a file of one TFJob (default: {DEFAULT_SPEC})")
    _add_cluster_flags(p)
    p.add_argument(
        "--wait",
        action="store_true",
        help="show progress and exit with the chief's exit code (always on with "
        "--local); after --stuck-timeout: 1 if Stuck, "
        f"{EXIT_NODE_LOST} if a task is on a lost node (NodeLost)",
    )
    p.add_argument("--replace", action="store_true", help="delete and recreate a cluster whose spec changed")
    p.add_argument(
        "--dry-run",
        choices=["none", "client", "server"],
        default="none",
        help="client: print the objects; server: have the API server validate them",
    )
    p.add_argument(
        "--stuck-timeout",
        type=float,
        default=DEFAULT_STUCK_SECONDS,
        help="with --wait, give up after a pod is stuck this many seconds "
        "(image pull error, unschedulable: exit 1) or a task sits on a lost "
        f"node this long (exit {EXIT_NODE_LOST}); the cluster is left in place",
    )
    _add_view_flags(p)

    p = sub.add_parser("status", help="phase, per-role counts and training progress of a cluster")
    p.add_argument("name")
    _add_cluster_flags(p)
    p.add_argument("-o", "--output", choices=STATUS_FORMATS, default="text")
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="show the live view until the cluster ends; exit with the chief's code",
    )
    _add_view_flags(p)

    p = sub.add_parser("logs", help="print a task's log, or every task's")
    p.add_argument("name")
    _add_cluster_flags(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--role", choices=[r.value for r in ROLES], help="whose log (default: the chief's, MWMS: worker 0's)"
    )
    which.add_argument("--all", action="store_true", help="every task's log, each line behind its task's name")
    p.add_argument("--index", type=int, default=0)
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="until the task ends: wait for a task that has not started, go on "
        "with a restarted task's log (after a marker line)",
    )
    p.add_argument("--tail", type=int, metavar="N", help="only the last N lines (of each task's log with --all)")
    p.add_argument(
        "--raw",
        action="store_true",
        help="the log as the task wrote it, terminal escape sequences and control characters included "
        "(without it they are removed: a program's output cannot move the cursor or write the clipboard)",
    )

    p = sub.add_parser(
        "delete",
        help="delete a cluster and wait until everything is gone "
        f"(exit {EXIT_NODE_LOST} with the commands to finish when only pods on "
        "lost nodes are left)",
    )
    p.add_argument("name")
    _add_cluster_flags(p)

    p = sub.add_parser(
        "sweep",
        help="run a hyperparameter sweep of trainings (docs/sweeps.md): sweep SWEEP.yaml; sweep status NAME; "
        "sweep logs NAME; sweep plot NAME; sweep delete NAME",
    )
    p.add_argument(
        "target",
        metavar="SWEEP.yaml|status|logs|plot|delete",
        help="a sweep file to run (or resume), or status, logs, plot, delete",
    )
    p.add_argument("name", nargs="?", help="with status, logs, plot and delete: the sweep's name")
    _add_cluster_flags(p)
    p.add_argument("-o", "--output", choices=STATUS_FORMATS, default="text", help="status: json, yaml")
    p.add_argument(
        "--dry-run",
        choices=["none", "client"],
        default="none",
        help="client: print the objects of the first parallelTrials trials, submit nothing",
    )
    p.add_argument("--poll", type=float, metavar="SECONDS", help="how often the trials are looked at")
    p.add_argument(
        "--role", choices=[r.value for r in ROLES], help="logs: whose log (default: the chief's, MWMS: worker 0's)"
    )
    p.add_argument("--index", type=int, default=0, help="logs: the task's index")
    p.add_argument("--tail", type=int, metavar="N", help="logs: only the last N lines of each trial's log")
    p.add_argument("--file", metavar="PATH", help="plot: the HTML file to write (default: NAME.html here)")

    p = sub.add_parser("list", help="list clusters")
    _add_cluster_flags(p)
    p.add_argument("-o", "--output", choices=STATUS_FORMATS, default="text", help="json, yaml: each cluster's status")

    p = sub.add_parser(
        "tensorboard",
        help="serve TensorBoard on a cluster's model dir at "
        "127.0.0.1:PORT until Ctrl-C (Kubernetes: a pod, port-forwarded)",
    )
    p.add_argument("name")
    _add_cluster_flags(p)
    p.add_argument("--port", type=int, default=6006, help="local port (default: 6006)")

    p = sub.add_parser(
        "code-archive",
        help="print a code dir's archive in base64, for helm install --set-file codeArchive= "
        "(refused when Helm could not keep it)",
    )
    p.add_argument("dir")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help=".gitignore-style; repeatable")

    p = sub.add_parser(
        "monitoring",
        help="print Prometheus alerting rules (alerts) or a Grafana dashboard (dashboard) for trainings",
    )
    p.add_argument("what", choices=("alerts", "dashboard"))
    defaults = alerts.Thresholds()
    p.add_argument(
        "--stalled-seconds", type=int, default=defaults.stalled_seconds, help="up this long, no step or save in it"
    )
    p.add_argument(
        "--stalled-intervals",
        type=int,
        default=defaults.stalled_intervals,
        help="... nor in this many of the training's own progress intervals (default 3)",
    )
    p.add_argument(
        "--checkpoint-age-seconds", type=int, default=defaults.checkpoint_age_seconds, help="last checkpoint older"
    )
    p.add_argument("--restarts", type=int, default=defaults.restarts, help="more restarts than this in the window")
    p.add_argument("--restarts-window", default=defaults.restarts_window, help="PromQL duration (default: 1h)")
    p.add_argument(
        "--evaluation-lag-seconds", type=int, default=defaults.evaluation_lag_seconds, help="evaluator behind by"
    )
    p.add_argument("--for", dest="hold", default=defaults.hold, help="how long a condition holds first (default 2m)")

    p = sub.add_parser(
        "completion", help='print a shell completion script: eval "$(tfk8s completion bash)" (in ~/.bashrc), or zsh'
    )
    p.add_argument("shell", choices=completion.SHELLS)
    return parser


@dataclass(frozen=True)
class ViewOptions:
    """What a command that blocks until the cluster ends shows while it waits."""

    raw: bool = False  # status lines (Kubernetes) or every task's output (--local), no panel
    every: float = DEFAULT_LINE_SECONDS  # the line's period when not on a terminal


def view_options(args) -> ViewOptions:
    return ViewOptions(raw=args.raw, every=args.every)


def kubernetes_configured() -> bool:
    """Whether kubectl would find a cluster: a kubeconfig ($KUBECONFIG, else ~/.kube/config)
    or a pod's service account."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or ["~/.kube/config"]
    return any(Path(p).expanduser().is_file() for p in paths) or "KUBERNETES_SERVICE_HOST" in os.environ


def runs_locally(args) -> bool:
    """Which backend a command uses: submit's is --local. Any other's: --local, or a flag only
    local runs have (--workdir, --python); kubectl's flags (--kubeconfig, --context, -n) pick
    Kubernetes. Without either, a command after submit finds the cluster where it is: a name
    with a local run in the workdir (submit --local records it there) is local, and with no
    Kubernetes configured every command is. ClusterNotFound, in one line naming the flags, for
    a name that is neither a local run nor anywhere to look on Kubernetes."""
    if args.command == "submit":  # the spec goes where it is told
        return args.local
    if args.local or args.workdir is not None or args.python is not None:
        return True
    if args.kubeconfig or args.context or args.namespace:
        return False
    workdir = Path(DEFAULT_WORKDIR).resolve()
    name = getattr(args, "name", None)
    if name is not None and RunFiles(workdir, name).has_status():
        if kubernetes_configured():
            print(
                f"note: {name!r} is the local run in {workdir}; for a cluster of that name on Kubernetes "
                "pass --context or -n",
                file=sys.stderr,
                flush=True,
            )
        return True
    if kubernetes_configured():
        # said if Kubernetes has none either (main)
        args.not_found_hint = f"; no local run of it in {workdir} either (elsewhere: --workdir DIR)"
        return False
    if name is None:
        return True  # `list`: the local runs, the only ones there can be
    raise ClusterNotFound(
        f"no cluster {name!r}: no local run of it in {workdir} and no Kubernetes configured ($KUBECONFIG, "
        "~/.kube/config); for a local run elsewhere pass --workdir DIR, for a cluster --kubeconfig or --context"
    )


def backend_config(
    args, *, dry_run: bool = False, stuck_seconds: float = DEFAULT_STUCK_SECONDS, echo_tasks: bool = False
) -> BackendConfig:
    """The one place that knows which backend (runs_locally), from the cluster flags every
    command has; the rest are the command's own (submit's --dry-run, --stuck-timeout, --raw)."""
    if runs_locally(args):
        if dry_run:
            raise LauncherError("--dry-run=server needs a cluster; drop --local")
        # The CLI runs a local cluster in its own process: Ctrl-C stops every task.
        return LocalProcessBackendConfig(
            workdir=args.workdir or DEFAULT_WORKDIR, foreground=True, echo_tasks=echo_tasks, python=args.python
        )
    return KubernetesBackendConfig(
        namespace=args.namespace,
        context=args.context,
        kubeconfig=args.kubeconfig,
        dry_run=dry_run,
        stuck_seconds=stuck_seconds,
    )


def client_for(config: BackendConfig, view: ViewOptions | None = None) -> TFK8sClient:
    """A client; with `view`, one whose follow() shows the cluster (a live panel on a terminal
    starts drawing at once, so only commands that wait get one)."""
    local = isinstance(config, LocalProcessBackendConfig)
    out = sys.stdout if local else sys.stderr
    shown = None
    if view is not None:
        shown = LineView(out, None) if view.raw else make_view(out, view.every)
    return TFK8sClient(config, view=shown, out=out)


def warn_about_storage(spec: ClusterSpec) -> None:
    """On stderr, so a rendered manifest on stdout stays clean (Kubernetes only: a local run's
    model dir is on the local disk and survives its restarts)."""
    warning = storage.ephemeral_warning(spec)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)


def note_code(spec: ClusterSpec, code: code_bundle.Bundle | None) -> None:
    """What `code:` ships (launcher/code_shipping/code_bundle.py), on stderr (a submit notes its own)."""
    if code is not None:
        print(f"note: {code_bundle.note(spec, code)}", file=sys.stderr, flush=True)


def cmd_render(args) -> int:
    spec, code = load_packed(args.spec, args.namespace)
    warn_about_storage(spec)
    note_code(spec, code)
    if args.helm_values:
        sys.stdout.write(chart_values.helm_values_yaml(spec, code))
        return 0
    objects = render.render(plan(spec, code))
    if args.tf_config:
        configs = render.pod_tf_configs(spec, objects)
        if args.output == "json":
            print(json.dumps(configs, indent=2))
        else:
            for pod, cfg in configs.items():
                print(f"{pod}: {json.dumps(cfg)}")
        return 0
    sys.stdout.write(render.to_json(objects) + "\n" if args.output == "json" else render.to_yaml(objects))
    return 0


def cmd_submit(args) -> int:
    server_dry_run = args.dry_run == "server"
    # --local always shows the run: its tasks run in this process, until they end.
    waits = (args.wait or args.local) and not server_dry_run
    config = backend_config(args, dry_run=server_dry_run, stuck_seconds=args.stuck_timeout, echo_tasks=args.raw)
    client = client_for(config, view_options(args) if waits else None)
    loaded = client.load_packed(args.spec)
    spec = loaded.spec
    if not args.local:
        warn_about_storage(spec)
    if args.dry_run == "client":
        note_code(spec, loaded.code)
        sys.stdout.write(render.to_yaml(render.render(plan(spec, loaded.code))))
        return 0
    client.submit(loaded, replace=args.replace)
    return client.follow(spec.name) if waits else 0


def cmd_import(args) -> int:
    if holds_experiment(args.tfjob):  # a Katib Experiment: a sweep.yaml
        sweep = import_experiment(args.tfjob)
        for note in sweep.notes:
            print(f"note: {note}", file=sys.stderr)
        sys.stdout.write(sweep.text)
        return 0
    imported = import_tfjob(args.tfjob)
    for one in imported:
        for note in one.notes:
            print(f"note: {note}", file=sys.stderr)
    sys.stdout.write("---\n".join(one.text for one in imported))
    return 0


def cmd_status(args) -> int:
    client = client_for(backend_config(args), view_options(args) if args.watch else None)
    if args.watch:
        return client.follow(args.name)
    status = client.get_job(args.name)
    if args.output != "text":
        print_structured(status.to_dict(), args.output)
        return 0
    # The message, reasons and notes carry task output (a failed task's last line, its
    # termination message): printed without terminal control.
    lines = [
        f"cluster {status.namespace}/{status.name}: {status.phase}" + (f" - {status.message}" if status.message else "")
    ]
    if status.exit_code is not None:
        lines.append(f"exit code: {status.exit_code}")
    if status.training is not None:
        lines.append(f"training: {status.training.summary()}")
    lines += [f"note: {note}" for note in status.notes]
    lines.append(f"{'ROLE':<10} {'REPLICAS':>8} {'ACTIVE':>6} {'SUCCEEDED':>9} {'FAILED':>6} {'LAST EXIT':>9}  REASON")
    for r in status.roles:
        code = "-" if r.last_exit_code is None else str(r.last_exit_code)
        lines.append(
            f"{r.role:<10} {r.replicas:>8} {r.active:>6} {r.succeeded:>9} {r.failed:>6} {code:>9}  {r.reason or ''}"
        )
    print(printable("\n".join(lines)))
    return 0


def cmd_logs(args) -> int:
    client = client_for(backend_config(args))
    role = args.role
    if role is None and not args.all:  # as `kubectl logs job/NAME` shows one pod: the one that decides
        role = log_role(client.get_job(args.name))
        chief = "the chief" if role == Role.CHIEF.value else "the chief under multi_worker_mirrored"
        chief = chief if args.index == 0 else f"{chief}'s role"
        print(
            f"{role}-{args.index}'s log ({chief}; --role ROLE --index N for another task's, --all for every task's)",
            file=sys.stderr,
            flush=True,
        )
    lines = client.get_job_logs(args.name, None if args.all else role, args.index, follow=args.follow, tail=args.tail)
    for line in lines:
        sys.stdout.write(line if args.raw else printable(line))
        sys.stdout.flush()
    return 0


def log_role(status: ClusterStatus) -> str:
    """Whose log `logs NAME` shows: the chief's, or worker 0's where there is no chief (MWMS)."""
    roles = [r.role for r in status.roles]
    return Role.WORKER.value if roles and Role.CHIEF.value not in roles else Role.CHIEF.value


def cmd_delete(args) -> int:
    client_for(backend_config(args)).delete_job(args.name)
    return 0


def print_structured(data, output: str) -> None:
    """`-o json` or `-o yaml` of `status` and `list`, in the order ClusterStatus.to_dict gives."""
    if output == "json":
        print(json.dumps(data, indent=2))
    else:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


SWEEP_COMMANDS = ("status", "logs", "plot", "delete")


def sweep_backend(args) -> BackendConfig:
    """A sweep's backend: its run's is --local or Kubernetes (kubectl's flags); status and
    delete take the one the sweep was run on (kept in its files: local, or the context and
    namespace it was given), unless flags say otherwise.
    Local trials run under detached supervisors, so they outlive an interrupted sweep."""
    local = args.local or args.workdir is not None or args.python is not None
    recorded: dict = {}
    if args.target in SWEEP_COMMANDS and not local and not (args.kubeconfig or args.context or args.namespace):
        directory = sweep_dir(DEFAULT_WORKDIR, args.name)
        if (directory / "sweep.json").is_file():
            recorded = json.loads((directory / "sweep.json").read_text())["backend"]
            local = recorded.get("local", False)
    if local:
        return LocalProcessBackendConfig(workdir=args.workdir or DEFAULT_WORKDIR, foreground=False, python=args.python)
    return KubernetesBackendConfig(
        namespace=args.namespace or recorded.get("namespace"),
        context=args.context or recorded.get("context"),
        kubeconfig=args.kubeconfig,
    )


def cmd_sweep(args) -> int:
    if args.target in SWEEP_COMMANDS and not args.name:
        raise LauncherError(f"sweep {args.target} needs the sweep's name: python -m launcher sweep {args.target} NAME")
    client = TFK8sClient(sweep_backend(args), out=sys.stderr)
    if args.target == "delete":
        deleted = client.delete_sweep(args.name)
        print(f"sweep {args.name} deleted" + (f", with its trials {', '.join(deleted)}" if deleted else ""))
        return 0
    if args.target == "logs":
        for line in client.sweep_logs(args.name, args.role, args.index, tail=args.tail):
            sys.stdout.write(printable(line))
            sys.stdout.flush()
        return 0
    if args.target == "plot":
        path = Path(args.file or f"{args.name}.html")
        path.write_text(client.sweep_plot(args.name))
        print(f"sweep {args.name}: the objective by trial and by parameter in {path} (open it in a browser)")
        return 0
    if args.target == "status":
        status = client.sweep_status(args.name)
    elif args.dry_run == "client":
        loaded = client.load_sweep(args.target)
        for spec in client.sweep_trials(loaded, loaded.sweep.parallel_trials):
            print(f"# trial {spec.name}", flush=True)
            sys.stdout.write(render.to_yaml(render.render(plan(spec, loaded.base.code))))
        return 0
    else:
        try:
            status = client.sweep(args.target, on_event=lambda line: print(line, flush=True), poll_seconds=args.poll)
        except KeyboardInterrupt:
            print(
                "interrupted: the trials go on; run the same command again to resume the sweep, "
                "or `python -m launcher sweep delete NAME` to end it",
                file=sys.stderr,
            )
            return 130
    if args.output != "text":
        print_structured(status.to_dict(), args.output)
    else:  # a sweep run has said its end line already, as its last event
        print_sweep(status, heading=args.target == "status")
    return 0 if status.phase in ("Succeeded", "Running", "Stopped") else 1


def print_sweep(status, heading: bool = True) -> None:
    """`sweep status`: the sweep's line, then a row per trial, the best marked with *."""
    if heading:
        print(f"sweep {status.name}: {status.phase}" + (f" - {status.message}" if status.message else ""))
    header = ["TRIAL", *(p.upper() for p in status.parameters), "PHASE", status.metric.upper(), "CAUSE"]
    rows = []
    for t in status.trials:
        if t.value is not None:
            metric = f"{t.value:.4g}"
        elif t.latest is not None:
            metric = f"{t.latest[1]:.4g} @{t.latest[0]}"
        else:
            metric = "-"
        values = [_value_text(t.values.get(p)) for p in status.parameters]
        mark = "*" if t.best else " "
        rows.append(
            [f"{mark}{t.cluster or t.number}", *values, t.phase, metric, t.message if t.phase != "Succeeded" else ""]
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths)]
        print("  ".join([*cells, str(row[-1])]).rstrip())


def _value_text(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def cmd_list(args) -> int:
    clusters = client_for(backend_config(args)).list_jobs()
    if args.output != "text":
        print_structured([c.to_dict() for c in clusters], args.output)
        return 0
    print(f"{'NAME':<30} {'NAMESPACE':<20} PHASE")
    for c in clusters:
        print(f"{c.name:<30} {c.namespace:<20} {c.phase}")
    return 0


def cmd_tensorboard(args) -> int:
    """Serve until Ctrl-C (or SIGTERM), the normal end: leaving the `with` cleans up."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with client_for(backend_config(args)).tensorboard(args.name, args.port) as url:
        print(f"TensorBoard for {args.name}: {url} (Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


def cmd_code_archive(args) -> int:
    try:
        bundle = chart_values.code_archive(args.dir, args.exclude)
    except chart_values.ArchiveRefused as exc:
        print(f"code: {exc}", file=sys.stderr)
        return 2
    left_out = code_bundle.left_out_note(bundle)
    print(f"{args.dir}: {bundle.summary()}" + (f"; {left_out}" if left_out else ""), file=sys.stderr)
    sys.stdout.write(base64.b64encode(bundle.archive).decode() + "\n")
    return 0


def cmd_monitoring(args) -> int:
    if args.what == "dashboard":
        sys.stdout.write(dashboard.dashboard_json())
        return 0
    # every option is a Thresholds field of the same name (build_parser)
    thresholds = {field.name: getattr(args, field.name) for field in dataclasses.fields(alerts.Thresholds)}
    sys.stdout.write(alerts.rules_yaml(alerts.Thresholds(**thresholds)))
    return 0


def cmd_completion(args) -> int:
    sys.stdout.write(completion.script(build_parser(), args.shell))
    return 0


COMMANDS = {
    "code-archive": cmd_code_archive,
    "completion": cmd_completion,
    "import": cmd_import,
    "monitoring": cmd_monitoring,
    "render": cmd_render,
    "submit": cmd_submit,
    "status": cmd_status,
    "logs": cmd_logs,
    "delete": cmd_delete,
    "list": cmd_list,
    "sweep": cmd_sweep,
    "tensorboard": cmd_tensorboard,
}


class _Stderr(logging.StreamHandler):
    """The library's log lines (launcher.api and the backends print nothing), as the CLI's own
    on whatever sys.stderr is at each line."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


def show_library_logs() -> None:
    logger = logging.getLogger("tfk8s")
    logger.setLevel(logging.INFO)
    if not any(isinstance(h, _Stderr) for h in logger.handlers):  # main() may run again (tests)
        logger.addHandler(_Stderr())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    show_library_logs()
    try:
        return COMMANDS[args.command](args)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return exc.exit_code
    except ClusterNotFound as exc:
        print(f"error: {exc}{getattr(args, 'not_found_hint', '')}", file=sys.stderr)
        return exc.exit_code
    except LauncherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
