"""`python -m launcher` / `tfk8s`: render, submit, status, logs, delete, list, tensorboard.

Flags follow kubectl: --kubeconfig, --context, -n/--namespace, --dry-run=client|server.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from importlib import resources
from pathlib import Path

from launcher import checkpoints, code_bundle, loader, render
from launcher.backends.base import Backend
from launcher.errors import LauncherError, SpecError
from launcher.node_loss import EXIT_NODE_LOST
from launcher.spec import ClusterSpec
from launcher.view import DEFAULT_LINE_SECONDS, LineView, View, make_view
from worker.contract import ROLES

DEFAULT_SPEC = "embedded default (launcher/default-cluster.yaml)"


def load_spec(path: str | None, namespace: str | None = None) -> ClusterSpec:
    if path is None:
        text = resources.files("launcher").joinpath("default-cluster.yaml").read_text()
        spec = loader.load_text(text, filename="<embedded default>")
    else:
        spec = loader.load_file(path)
    if namespace and namespace != spec.namespace:
        data = spec.model_dump(by_alias=True)
        data["namespace"] = namespace
        spec = ClusterSpec.model_validate(data)
    return spec


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument("-n", "--namespace", help="namespace (default: the spec's, or the context's)")
    p.add_argument("--local", action="store_true", help="use local processes instead of Kubernetes")
    p.add_argument("--workdir", default=".tfk8s", help="where --local keeps runs (default: .tfk8s)")


def _add_view_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw", action="store_true",
                   help="no live view: with --local every task's output as it comes; on "
                        "Kubernetes a status line at each change")
    p.add_argument("--every", type=float, default=DEFAULT_LINE_SECONDS, metavar="SECONDS",
                   help="when not on a terminal, print the progress line this often "
                        f"(default {DEFAULT_LINE_SECONDS:g})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfk8s", description="Launch multi-worker TensorFlow training on Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("render", help="print the Kubernetes objects for a spec")
    p.add_argument("spec", nargs="?", help=f"cluster.yaml (default: {DEFAULT_SPEC})")
    p.add_argument("-n", "--namespace")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--tf-config", action="store_true", help="print every pod's TF_CONFIG")
    group.add_argument("--helm-values", action="store_true", help="print values for charts/tfk8s")

    p = sub.add_parser("submit", help="create the training cluster")
    p.add_argument("spec", nargs="?", help=f"cluster.yaml (default: {DEFAULT_SPEC})")
    _add_cluster_flags(p)
    p.add_argument("--wait", action="store_true",
                   help="show progress and exit with the chief's exit code (always on with "
                        "--local); after --stuck-timeout: 1 if Stuck, "
                        f"{EXIT_NODE_LOST} if a task is on a lost node (NodeLost)")
    p.add_argument("--replace", action="store_true",
                   help="delete and recreate a cluster whose spec changed")
    p.add_argument("--dry-run", choices=["none", "client", "server"], default="none",
                   help="client: print the objects; server: have the API server validate them")
    p.add_argument("--stuck-timeout", type=float, default=120.0,
                   help="with --wait, give up after a pod is stuck this many seconds "
                        "(image pull error, unschedulable: exit 1) or a task sits on a lost "
                        f"node this long (exit {EXIT_NODE_LOST}); the cluster is left in place")
    _add_view_flags(p)

    p = sub.add_parser("status", help="phase, per-role counts and training progress of a cluster")
    p.add_argument("name")
    _add_cluster_flags(p)
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.add_argument("-w", "--watch", action="store_true",
                   help="show the live view until the cluster ends; exit with the chief's code")
    _add_view_flags(p)

    p = sub.add_parser("logs", help="print a task's log, or every task's")
    p.add_argument("name")
    _add_cluster_flags(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--role", choices=[r.value for r in ROLES])
    which.add_argument("--all", action="store_true",
                       help="every task's log, each line behind its task's name")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("-f", "--follow", action="store_true")

    p = sub.add_parser("delete", help="delete a cluster and wait until everything is gone "
                       f"(exit {EXIT_NODE_LOST} with the commands to finish when only pods on "
                       "lost nodes are left)")
    p.add_argument("name")
    _add_cluster_flags(p)

    p = sub.add_parser("list", help="list clusters")
    _add_cluster_flags(p)

    p = sub.add_parser("tensorboard", help="serve TensorBoard on a cluster's model dir at "
                       "127.0.0.1:PORT until Ctrl-C (Kubernetes: a pod, port-forwarded)")
    p.add_argument("name")
    _add_cluster_flags(p)
    p.add_argument("--port", type=int, default=6006, help="local port (default: 6006)")
    return parser


def _backend(args, namespace: str | None = None) -> Backend:
    """The one place that knows which backend: everything after it calls the Backend API."""
    dry_run = getattr(args, "dry_run", "none") == "server"
    raw = getattr(args, "raw", False)
    if args.local:
        if dry_run:
            raise LauncherError("--dry-run=server needs a cluster; drop --local")
        from launcher.backends.local import LocalBackend

        return LocalBackend(workdir=Path(args.workdir), echo_tasks=raw,
                            view=_view(args, sys.stdout))
    from launcher.backends.kubernetes import KubernetesBackend

    return KubernetesBackend(kubeconfig=args.kubeconfig, context=args.context,
                             namespace=namespace or args.namespace, dry_run=dry_run,
                             stuck_seconds=getattr(args, "stuck_timeout", 120.0),
                             view=_view(args, sys.stderr))


def _view(args, out) -> View | None:
    """Lazily: only commands that wait show a view (a live one starts drawing at once)."""
    if not (getattr(args, "wait", False) or getattr(args, "watch", False)
            or (args.command == "submit" and args.local)):
        return None
    if getattr(args, "raw", False):
        return LineView(out, None)
    return make_view(out, args.every)


def warn_about_storage(spec: ClusterSpec) -> None:
    """On stderr, so a rendered manifest on stdout stays clean (Kubernetes only: a local run's
    model dir is on the local disk and survives its restarts)."""
    warning = checkpoints.ephemeral_warning(spec)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    if spec.code is not None:  # what `code:` ships (launcher/code_bundle.py)
        print(f"note: {code_bundle.note(spec)}", file=sys.stderr, flush=True)


def cmd_render(args) -> int:
    spec = load_spec(args.spec, args.namespace)
    warn_about_storage(spec)
    if args.helm_values:
        sys.stdout.write(render.helm_values_yaml(spec))
        return 0
    objects = render.render(spec)
    if args.tf_config:
        configs = render.pod_tf_configs(spec, objects)
        if args.output == "json":
            print(json.dumps(configs, indent=2))
        else:
            for pod, cfg in configs.items():
                print(f"{pod}: {json.dumps(cfg)}")
        return 0
    sys.stdout.write(render.to_json(objects) + "\n" if args.output == "json"
                     else render.to_yaml(objects))
    return 0


def cmd_submit(args) -> int:
    spec = load_spec(args.spec, args.namespace)
    if not args.local:
        warn_about_storage(spec)
    if args.dry_run == "client":
        sys.stdout.write(render.to_yaml(render.render(spec)))
        return 0
    backend = _backend(args, namespace=spec.namespace)
    backend.submit(spec, replace=args.replace)
    if args.dry_run == "server" or not (args.wait or backend.runs_in_foreground):
        return 0
    return backend.wait(spec.name)


def cmd_status(args) -> int:
    backend = _backend(args)
    if args.watch:
        return backend.watch(args.name)
    status = backend.status(args.name)
    if args.output == "json":
        print(json.dumps(status.to_dict(), indent=2))
        return 0
    print(f"cluster {status.namespace}/{status.name}: {status.phase}"
          + (f" - {status.message}" if status.message else ""))
    if status.exit_code is not None:
        print(f"exit code: {status.exit_code}")
    if status.training is not None:
        print(f"training: {status.training.summary()}")
    for note in status.notes:
        print(f"note: {note}")
    print(f"{'ROLE':<10} {'REPLICAS':>8} {'ACTIVE':>6} {'SUCCEEDED':>9} {'FAILED':>6} "
          f"{'LAST EXIT':>9}  REASON")
    for r in status.roles:
        code = "-" if r.last_exit_code is None else str(r.last_exit_code)
        print(f"{r.role:<10} {r.replicas:>8} {r.active:>6} {r.succeeded:>9} {r.failed:>6} "
              f"{code:>9}  {r.reason or ''}")
    return 0


def cmd_logs(args) -> int:
    backend = _backend(args)
    lines = (backend.all_logs(args.name, follow=args.follow) if args.all
             else backend.logs(args.name, args.role, args.index, follow=args.follow))
    for line in lines:
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def cmd_delete(args) -> int:
    _backend(args).delete(args.name)
    return 0


def cmd_list(args) -> int:
    clusters = _backend(args).list()
    print(f"{'NAME':<30} {'NAMESPACE':<20} PHASE")
    for c in clusters:
        print(f"{c.name:<30} {c.namespace:<20} {c.phase}")
    return 0


def cmd_tensorboard(args) -> int:
    """Serve until Ctrl-C (or SIGTERM), the normal end: leaving the `with` cleans up."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with _backend(args).tensorboard(args.name, args.port) as url:
        print(f"TensorBoard for {args.name}: {url} (Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


COMMANDS = {"render": cmd_render, "submit": cmd_submit, "status": cmd_status,
            "logs": cmd_logs, "delete": cmd_delete, "list": cmd_list,
            "tensorboard": cmd_tensorboard}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except SpecError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
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
