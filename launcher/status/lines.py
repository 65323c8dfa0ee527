"""A ClusterStatus as one line of text: what `status`, the API's events and the plain-line view
print."""

from __future__ import annotations

from launcher.status.status import ClusterStatus


def tasks_summary(status: ClusterStatus) -> str:
    """`chief 1/1, worker 2/2, evaluator 0/1 (1 done)`: running of replicas per role."""

    def one(r) -> str:
        extra = [f"{n} {what}" for n, what in ((r.succeeded, "done"), (r.failed, "failed")) if n]
        return f"{r.role} {r.active}/{r.replicas}" + (f" ({', '.join(extra)})" if extra else "")

    return ", ".join(one(r) for r in status.roles)


def state_line(status: ClusterStatus) -> str:
    """`[Running] chief 1/1, worker 2/2, ps 1/1 - message`: what changes rarely."""
    line = f"[{status.phase}] {tasks_summary(status)}".rstrip()
    return line + (f" - {status.message}" if status.message else "")


def status_line(status: ClusterStatus) -> str:
    """The state line, then `| step 420/1000 (42%), 35 steps/s, ETA 0:00:16, loss 0.51; ...`"""
    line = state_line(status)
    if status.training is not None and (summary := status.training.summary()):
        line += " | " + summary
    return line
