"""`logs -f` on Kubernetes across a task's life (launcher/backends/kubernetes/logs.py): pods as
the API server reports them, one after the other, and the log each container wrote."""

from __future__ import annotations

import pytest

from launcher.backends.kubernetes.logs import RESTART_MARKER, follow_task, lines_of
from launcher.errors import LauncherError


def pod(name: str, phase: str, state: str | None, restarts: int = 0, reason: str = "") -> dict:
    status = {"phase": phase, "containerStatuses": []}
    if state is not None:
        detail = {"reason": reason} if state == "waiting" else {}
        status["containerStatuses"] = [{"name": "tensorflow", "restartCount": restarts, "state": {state: detail}}]
    return {"metadata": {"name": name}, "status": status}


def follow(
    timeline: list[dict | None],
    logs: dict[tuple[str, int], list[str]],
    finished_after: int | None = None,
    tail: int | None = None,
):
    """Runs follow_task over `timeline` (the newest pod at each look); returns the lines, what
    it said meanwhile, and the (pod, tail) of every stream it opened."""
    looks, said, opened = iter(timeline), [], []
    current = {"pod": None, "count": 0}

    def newest_pod():
        current["count"] += 1
        current["pod"] = next(looks, timeline[-1])
        return current["pod"]

    def stream(name: str, lines: int | None):
        opened.append((name, lines))
        restarts = current["pod"]["status"]["containerStatuses"][0]["restartCount"]
        return iter(logs.get((name, restarts), []))

    def cluster_finished():
        return finished_after is not None and current["count"] >= finished_after

    out = list(follow_task(newest_pod, stream, cluster_finished, said.append, "chief-0", tail=tail, poll_seconds=0))
    return out, said, opened


def test_waits_for_a_pending_pod_saying_for_what_then_follows_it_to_its_end():
    out, said, opened = follow(
        [
            None,
            pod("c-1", "Pending", "waiting", reason="ContainerCreating"),
            pod("c-1", "Running", "running"),
            pod("c-1", "Succeeded", "terminated"),
        ],
        {("c-1", 0): ["a\n", "b\n"]},
        tail=5,
    )
    assert out == ["a\n", "b\n"]
    assert said == [
        "waiting for chief-0: no pod yet (its Job has not created it, or Kueue has not admitted it)",
        "waiting for chief-0: pod c-1 is ContainerCreating",
    ]
    assert opened == [("c-1", 5)]


def test_goes_on_after_a_restart_in_place_with_a_marker():
    out, said, _ = follow(
        [
            pod("c-1", "Running", "running"),
            pod("c-1", "Running", "waiting", restarts=1, reason="CrashLoopBackOff"),
            pod("c-1", "Running", "running", restarts=1),
            pod("c-1", "Succeeded", "terminated", restarts=1),
        ],
        {("c-1", 0): ["first\n"], ("c-1", 1): ["second\n"]},
    )
    assert out == [
        "first\n",
        f"{RESTART_MARKER} chief-0: container restarted in pod c-1 (restart 1); its log follows ---\n",
        "second\n",
    ]
    assert said == ["waiting for chief-0: its container ended; waiting for a restart or a new pod"]


def test_goes_on_with_a_replacement_pod_with_a_marker():
    out, _, opened = follow(
        [
            pod("c-1", "Running", "running"),
            pod("c-1", "Failed", "terminated"),
            pod("c-2", "Running", "running"),
            pod("c-2", "Succeeded", "terminated"),
        ],
        {("c-1", 0): ["old\n"], ("c-2", 0): ["new\n"]},
        tail=1,
    )
    assert out == ["old\n", f"{RESTART_MARKER} chief-0: pod c-1 replaced by c-2; its log follows ---\n", "new\n"]
    assert opened == [("c-1", 1), ("c-2", None)]  # a new pod's log from its start


def test_ends_when_the_cluster_ends_and_says_so_if_the_task_never_started():
    with pytest.raises(LauncherError, match="chief-0 never started, and its cluster has finished"):
        follow([pod("c-1", "Pending", None)], {}, finished_after=2)
    out, _, _ = follow([pod("p-1", "Running", "running"), None], {("p-1", 0): ["ps\n"]}, finished_after=2)
    assert out == ["ps\n"]


def test_log_chunks_become_whole_lines():
    chunks = [b"a\nb", b"c\n\nd\xc3", b"\xa9\n", b"tail without newline"]
    assert list(lines_of(chunks)) == ["a\n", "bc\n", "\n", "d\u00e9\n", "tail without newline"]


def test_task_of_reads_role_label_and_index_annotation():
    from launcher import k8s_contract
    from launcher.backends.kubernetes.logs import task_of

    def labelled(role: str | None, index: str | None) -> dict:
        labels = {k8s_contract.LABEL_COMPONENT: role} if role else {}
        annotations = {k8s_contract.INDEX_ANNOTATION: index} if index is not None else {}
        return {"metadata": {"labels": labels, "annotations": annotations}}

    assert task_of(labelled("worker", "2")) == ("worker", 2)
    assert task_of(labelled("evaluator", "0")) == ("evaluator", 0)
    assert task_of(labelled("tensorboard", "0")) is None  # not a task of the cluster
    assert task_of(labelled("chief", None)) is None
    assert task_of(labelled(None, "0")) is None
