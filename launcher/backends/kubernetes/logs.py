"""One task's log on Kubernetes, followed across what happens to its pods: `logs -f` waits for
a pod that has not started (saying what it waits for), and goes on with the log of a container
restarted in place (restartPolicy OnFailure) or of a replacement pod (Never), after a marker
line, until the task ends or the cluster has finished.

The decisions are pure functions of pod objects (tested without a cluster); `follow_task`
drives them with the API.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from launcher import k8s_contract
from launcher.errors import LauncherError
from launcher.status import lifecycle
from worker import contract

RESTART_MARKER = "[tfk8s] ---"  # the marker lines start with this


def lines_of(chunks: Iterable[bytes]) -> Iterator[str]:
    """Whole lines (each ending in a newline but the last) from a log stream's chunks, which
    urllib3 cuts anywhere: several lines, or part of one."""
    partial = b""
    for chunk in chunks:
        *lines, partial = (partial + chunk).split(b"\n")
        for line in lines:
            yield (line + b"\n").decode(errors="replace")
    if partial:
        yield partial.decode(errors="replace")


@dataclass(frozen=True)
class Container:
    """Which run of a task's container a log belongs to: a pod, and its restart count."""

    pod: str
    restarts: int


def container_status(pod: dict) -> dict:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == k8s_contract.CONTAINER:
            return cs
    return {}


def container_of(pod: dict) -> Container:
    return Container(pod["metadata"]["name"], int(container_status(pod).get("restartCount") or 0))


def has_log(pod: dict) -> bool:
    """The current container has started (running, or ended): the kubelet has its log."""
    state = container_status(pod).get("state") or {}
    return "running" in state or "terminated" in state


def running(pod: dict) -> bool:
    return "running" in (container_status(pod).get("state") or {})


def waiting_for(pod: dict | None, task: str) -> str:
    """What a task without a log yet waits for, in words."""
    if pod is None:
        return f"{task}: no pod yet (its Job has not created it, or Kueue has not admitted it)"
    name = pod["metadata"]["name"]
    problem = lifecycle.pod_problem(pod) or lifecycle.pod_waits(pod)
    if problem:
        return f"{task}: {problem}"
    waiting = (container_status(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason"):
        return f"{task}: pod {name} is {waiting['reason']}"
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            return f"{task}: pod {name} is not scheduled yet"
    return f"{task}: pod {name} is {(pod.get('status') or {}).get('phase', 'Pending')}"


def marker(task: str, before: Container, now: Container) -> str:
    """The line between two containers' logs of one task."""
    if now.pod == before.pod:
        what = f"container restarted in pod {now.pod} (restart {now.restarts})"
    else:
        what = f"pod {before.pod} replaced by {now.pod}"
    return f"{RESTART_MARKER} {task}: {what}; its log follows ---\n"


def follow_task(
    newest_pod: Callable[[], dict | None],
    stream: Callable[[str, int | None], Iterator[str]],
    cluster_finished: Callable[[], bool],
    say: Callable[[str], None],
    task: str,
    tail: int | None = None,
    *,
    poll_seconds: float,
) -> Iterator[str]:
    """The task's log lines as they come, across restarts and replacements. newest_pod: the
    task's current pod; stream(pod, tail): its container's log, followed; say: where the
    waiting is reported (not the log's stream)."""
    shown: Container | None = None  # whose log was streamed last
    said = None
    while True:
        pod = newest_pod()
        now = container_of(pod) if pod is not None and has_log(pod) else None
        if now is not None and now != shown:
            if shown is not None:
                yield marker(task, shown, now)
            # the first container: the asked-for tail; a restarted or new one: all of it
            lines, shown, said = (tail if shown is None else None), now, None
            yield from stream(now.pod, lines)
            continue
        if now is not None and running(pod):
            # the stream ended while the container runs: it dropped, or the container has just
            # ended and the kubelet has not said so yet; only what comes from now on
            time.sleep(poll_seconds)
            yield from stream(now.pod, 0)
            continue
        if now is not None and (pod.get("status") or {}).get("phase") == "Succeeded":
            return  # the task is done
        if cluster_finished():
            if shown is None:
                raise LauncherError(f"{task} never started, and its cluster has finished (see `status`)")
            return
        reason = (
            waiting_for(pod, task)
            if shown is None or pod is None or shown.pod != pod["metadata"]["name"]
            else f"{task}: its container ended; waiting for a restart or a new pod"
        )
        if reason != said:
            say(f"waiting for {reason}")
            said = reason
        time.sleep(poll_seconds)


def task_of(pod: dict) -> tuple[str, int] | None:
    """(role, index) of one of our pods, None for anything else."""
    role = (pod["metadata"].get("labels") or {}).get(k8s_contract.LABEL_COMPONENT)
    index = (pod["metadata"].get("annotations") or {}).get(k8s_contract.INDEX_ANNOTATION)
    if role not in {r.value for r in contract.ROLES} or index is None:
        return None
    return role, int(index)


def log_time(line: str) -> tuple[str, int]:
    """The sort key of a `timestamps=true` log line: RFC 3339 with a fraction of up to 9 digits
    whose trailing zeros are trimmed, so the text alone does not sort."""
    stamp = line.split(" ", 1)[0].rstrip("Z")
    seconds, _, fraction = stamp.partition(".")
    return seconds, int(fraction.ljust(9, "0")[:9] or 0) if fraction.isdigit() else 0


def follow_logs(streams: dict[str, Iterator[str]]) -> Iterator[str]:
    """Lines of several endless streams as they arrive, each behind its prefix; until all end."""
    lines: queue.Queue = queue.Queue()
    done = object()

    def pump(prefix: str, stream: Iterator[str]) -> None:
        try:
            for line in stream:
                lines.put(prefix + line)
        finally:
            lines.put(done)

    for prefix, stream in streams.items():
        threading.Thread(target=pump, args=(prefix, stream), daemon=True).start()
    open_streams = len(streams)
    while open_streams:
        item = lines.get()
        if item is done:
            open_streams -= 1
        else:
            yield item


def newest_pod(pods: list[dict], role: str, index: int) -> dict | None:
    """A task's current pod: a replaced task's newest one."""
    mine = [
        p
        for p in pods
        if (p["metadata"].get("labels") or {}).get(k8s_contract.LABEL_COMPONENT) == role
        and (p["metadata"].get("annotations") or {}).get(k8s_contract.INDEX_ANNOTATION) == str(index)
    ]
    return max(mine, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)
