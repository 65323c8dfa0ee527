"""Tasks on lost nodes: which, since when, what Kubernetes does next, and how to finish it
(pure: pod and Node dicts in, facts and one message out).

A node that dies without a drain (kernel panic, a VM reclaimed without notice, a hung kubelet,
a partition) stops reporting; after the node monitor's grace (about 40-50 s) its Ready condition
turns Unknown and it is tainted node.kubernetes.io/unreachable (not-ready when the kubelet says
NotReady). Its pods are deleted when their NoExecute toleration of that taint runs out (300 s,
added to every pod by the DefaultTolerationSeconds admission plugin), but no kubelet confirms
they stopped, so they stay Terminating for as long as the Node object exists. Our Jobs use
podReplacementPolicy: Failed (never two chiefs), so nothing replaces them until the Node is
deleted, tainted node.kubernetes.io/out-of-service (non-graceful node shutdown, GA in 1.28), or
the pod force-deleted. Left alone, `status` would say Running and `--wait` wait forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from launcher import k8s_contract
from launcher.k8s_contract import NOT_READY_TAINT, UNREACHABLE_TAINT
from launcher.status.status import ClusterStatus, Phase

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
DEFAULT_TOLERATION_SECONDS = 300  # kube-apiserver's DefaultTolerationSeconds admission plugin
# `submit --wait` / `status -w` exit code when a task stays on a lost node past --stuck-timeout
# (sysexits' EX_UNAVAILABLE: none of the chief's own codes, 0-5 and 143, and not Stuck's 1).
EXIT_NODE_LOST = 69
# providerID schemes of clouds whose controller deletes the Node once its VM is gone. Anything
# else (none, kind://, metal3://...) is treated as bare metal: nobody deletes the Node for you.
CLOUD_PROVIDERS = (
    "gce",
    "aws",
    "azure",
    "openstack",
    "digitalocean",
    "linode",
    "hcloud",
    "oci",
    "ibm",
    "alicloud",
    "vsphere",
    "exoscale",
    "scaleway",
    "equinixmetal",
    "huaweicloud",
)


@dataclass(frozen=True)
class LostTask:
    task: str  # chief-0
    pod: str
    namespace: str
    terminating: bool  # already deleted (evicted): waits for a kubelet that will not answer
    evicted_at: datetime | None  # when Kubernetes deletes it (None: tolerates forever)


@dataclass
class LostNode:
    node: str
    why: str
    since: datetime | None
    cloud: bool
    gone: bool = False  # the Node object is deleted: the pod garbage collector takes its pods
    out_of_service: bool = False  # already tainted: Kubernetes force-deletes its pods
    tasks: list[LostTask] = field(default_factory=list)


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _clock(t: datetime | None) -> str:
    return t.astimezone(timezone.utc).strftime("%H:%M:%SZ") if t else "an unknown time"


def _taints(node: dict) -> dict[str, dict]:
    """key -> taint; of a key's NoSchedule and NoExecute taints the NoExecute one (it evicts)."""
    taints: dict[str, dict] = {}
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") not in taints or t.get("effect") == "NoExecute":
            taints[t.get("key")] = t
    return taints


def node_loss(node: dict) -> tuple[str, datetime | None] | None:
    """(why, since) when this Node is lost: its Ready condition is not True, or it carries the
    node controller's unreachable/not-ready taint; None for a healthy node."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    taints = _taints(node)
    if ready is not None and ready.get("status") != "True":
        state = "NotReady" if ready.get("status") == "False" else "Ready Unknown"
        detail = ": ".join(x for x in (ready.get("reason"), ready.get("message")) if x)
        return (f"{state} ({detail})" if detail else state), parse_time(ready.get("lastTransitionTime"))
    for key in (UNREACHABLE_TAINT, NOT_READY_TAINT):
        if key in taints:
            return f"tainted {key}", parse_time(taints[key].get("timeAdded"))
    return None


def toleration_seconds(pod: dict, taint_key: str) -> int | None:
    """How long the pod stays on a node with this NoExecute taint (None: forever)."""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") not in (None, "", "NoExecute"):
            continue
        if t.get("key") == taint_key or (not t.get("key") and t.get("operator") == "Exists"):
            return t.get("tolerationSeconds")
    return DEFAULT_TOLERATION_SECONDS  # no toleration at all: the admission plugin's default


def is_cloud(node: dict) -> bool:
    scheme = ((node.get("spec") or {}).get("providerID") or "").split("://", 1)[0]
    return scheme in CLOUD_PROVIDERS


def task_name(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    role = (meta.get("labels") or {}).get(k8s_contract.LABEL_COMPONENT, "?")
    index = (meta.get("annotations") or {}).get(k8s_contract.INDEX_ANNOTATION, "0")
    return f"{role}-{index}"


def lost_nodes(pods: list[dict], nodes: dict[str, dict | None]) -> list[LostNode]:
    """The lost nodes under the cluster's unfinished pods (nodes: name -> Node, None when the
    Node object no longer exists), each with its tasks."""
    found: dict[str, LostNode] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or node_name not in nodes:
            continue
        node = nodes[node_name]
        if node is None:
            lost = found.get(node_name) or LostNode(node_name, "deleted", None, False, gone=True)
            taint, tainted = UNREACHABLE_TAINT, None
        else:
            loss = node_loss(node)
            if loss is None:
                continue
            lost = found.get(node_name) or LostNode(
                node_name, loss[0], loss[1], is_cloud(node), out_of_service=OUT_OF_SERVICE_TAINT in _taints(node)
            )
            taint = NOT_READY_TAINT if loss[0].startswith("NotReady") else UNREACHABLE_TAINT
            tainted = _taints(node).get(taint)
        found[node_name] = lost
        meta = pod.get("metadata") or {}
        seconds = toleration_seconds(pod, taint)
        # Eviction counts from the taint's timeAdded (the node controller's), else from Ready's change.
        start = parse_time(tainted.get("timeAdded")) if tainted else lost.since
        evicted_at = (start.timestamp() + seconds) if start is not None and seconds is not None else None
        lost.tasks.append(
            LostTask(
                task_name(pod),
                meta.get("name", "?"),
                meta.get("namespace", ""),
                terminating=bool(meta.get("deletionTimestamp")),
                evicted_at=datetime.fromtimestamp(evicted_at, timezone.utc) if evicted_at else None,
            )
        )
    return sorted(found.values(), key=lambda n: n.node)


def remedy(lost: LostNode) -> str:
    """The commands that let Kubernetes replace the node's tasks, for this kind of cluster."""
    if lost.gone:
        return "nothing to do: the pod garbage collector removes its pods, then the Jobs replace them"
    if lost.out_of_service:
        return (
            "it is tainted out-of-service: Kubernetes force-deletes its pods and the Jobs "
            f"replace them; remove the taint once the machine is back: kubectl taint nodes "
            f"{lost.node} {OUT_OF_SERVICE_TAINT}-"
        )
    pods = " ".join(sorted({t.pod for t in lost.tasks}))
    namespace = lost.tasks[0].namespace if lost.tasks else ""
    force = f"kubectl delete pod {pods} -n {namespace} --force --grace-period=0"
    if lost.cloud:
        return (
            f"the cloud's node controller deletes Node {lost.node} once its VM is gone; if the "
            f"VM still exists (hung, partitioned), make sure it is stopped, then: kubectl "
            f"delete node {lost.node}"
        )
    return (
        f"make sure the machine is really off (a partitioned node may still run the task: "
        f"two chiefs would write one model dir), then: kubectl taint nodes {lost.node} "
        f"{OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute (remove it when the machine is back), "
        f"or: {force}"
    )


def describe(lost: LostNode) -> str:
    """One sentence per lost node: which tasks, since when, what happens next, the remedy."""
    tasks = ", ".join(f"{t.task} (pod {t.pod})" for t in lost.tasks)
    if lost.gone:
        return f"{tasks} on node {lost.node}, which was deleted: {remedy(lost)}"
    # No "N s ago": the plain view prints a line whenever the message changes.
    head = f"{tasks} on lost node {lost.node}: {lost.why} since {_clock(lost.since)}"
    if all(t.terminating for t in lost.tasks):
        nxt = (
            "evicted, but stays Terminating while the Node exists (no kubelet confirms it "
            "stopped) and nothing replaces it"
        )
    else:
        evictions = [t.evicted_at for t in lost.tasks if not t.terminating]
        when = (
            "never (tolerates the taint forever)"
            if any(e is None for e in evictions)
            else f"at {_clock(max(evictions))}"
        )
        nxt = f"Kubernetes evicts it {when}, then it stays Terminating while the Node exists and nothing replaces it"
    if lost.out_of_service:
        nxt = "being force-deleted (out-of-service taint)"
    return f"{head}; {nxt}; to let the Job replace it: {remedy(lost)}"


def to_dict(lost: LostNode) -> dict:
    """For `status -o json` (lostNodes)."""

    def stamp(t: datetime | None) -> str | None:
        return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None

    return {
        "node": lost.node,
        "why": lost.why,
        "since": stamp(lost.since),
        "cloud": lost.cloud,
        "deleted": lost.gone,
        "outOfService": lost.out_of_service,
        "remedy": remedy(lost),
        "tasks": [
            {"task": t.task, "pod": t.pod, "terminating": t.terminating, "evictedAt": stamp(t.evicted_at)}
            for t in lost.tasks
        ],
    }


def apply(
    status: ClusterStatus, pods: list[dict], nodes: dict[str, dict | None] | None, unknown_because: str | None = None
) -> ClusterStatus:
    """The status with its lost nodes: phase NodeLost (unless it has ended) and the message
    leading with them. nodes None: node state could not be read, and unknown_because says why
    (in the message: never a silent Running)."""
    if status.finished:
        return status
    if nodes is None:
        if unknown_because:
            status.message = "; ".join(m for m in (status.message, f"node state unknown: {unknown_because}") if m)
        return status
    lost = lost_nodes(pods, nodes)
    if not lost:
        return status
    status.message = "; ".join([describe(n) for n in lost] + ([f"also: {status.message}"] if status.message else []))
    status.phase = Phase.NODE_LOST
    status.lost_nodes = [to_dict(n) for n in lost]
    on_lost = {t.task.rsplit("-", 1)[0]: n.node for n in lost for t in n.tasks}
    for role in status.roles:
        if role.role in on_lost:
            role.reason = f"on lost node {on_lost[role.role]}"
    return status


def delete_blocked(cluster: str, namespace: str, pods: list[dict], nodes: dict[str, dict | None]) -> str | None:
    """Why a delete cannot finish by itself, with the commands that finish it, when every pod
    left sits on a lost node that nobody is removing (not a deleted Node: the pod garbage
    collector takes those pods; not an out-of-service one: Kubernetes force-deletes them)."""
    lost = [n for n in lost_nodes(pods, nodes) if not n.gone and not n.out_of_service]
    stuck = sorted(t.pod for n in lost for t in n.tasks)
    if not stuck or len(stuck) < len(pods):
        return None  # some pods are still ending normally: wait for them first
    where = "; ".join(f"{', '.join(t.pod for t in n.tasks)} on node {n.node} ({n.why})" for n in lost)
    return (
        f"cluster {cluster}: everything is deleted but {len(stuck)} pod(s) on lost nodes, "
        f"which stay Terminating while their Node objects exist: {where}. Once the machine "
        "is really off (a partitioned node may still run the task), finish with: kubectl "
        f"delete pod {' '.join(stuck)} -n {namespace} --force --grace-period=0 (or delete "
        f"the Node, or taint it {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute)"
    )
