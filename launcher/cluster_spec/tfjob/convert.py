"""A kubeflow.org/v1 TFJob as a cluster.yaml mapping (pure): the roles from tfReplicaSpecs, the
strategy they imply, each replica's pod template (pod.py), runPolicy, successPolicy,
restartPolicy, the port.

Every field whose meaning changes is a Note (a comment in the written YAML, a line on stderr);
every field that cannot be mapped is a Refusal naming its path in the TFJob and why.
docs/migrating-from-tfjob.md is the reference.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from launcher import k8s_contract
from launcher.cluster_spec.tfjob import cluster, pod
from worker.contract import Role, Strategy

API_VERSION = "kubeflow.org/v1"
# The TFJob versions before v1, read as v1: their tfReplicaSpecs are v1's; what moved is said.
OLD_API_VERSIONS = ("kubeflow.org/v1beta2", "kubeflow.org/v1beta1", "kubeflow.org/v1alpha2", "kubeflow.org/v1alpha1")
# v1alpha1 (tf-operator 0.1-0.2) listed its replicas (replicaSpecs) instead of naming them.
V1ALPHA1 = "kubeflow.org/v1alpha1"
KIND = "TFJob"
ROLE_OF = {"chief": Role.CHIEF, "master": Role.CHIEF, "worker": Role.WORKER, "ps": Role.PS, "evaluator": Role.EVALUATOR}
KUEUE_QUEUE_LABEL = k8s_contract.QUEUE_LABEL  # how a TFJob is queued by Kueue too
JOBSET = k8s_contract.Workload.JOBSET.value
# Read-back fields of `kubectl get -o yaml`: not part of the job.
READ_BACK = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
# runPolicy's keys (the ones tfk8s maps), which v1beta1/v1beta2 and early v1 TFJobs
# (tf-operator's types before runPolicy) kept at spec level.
RUN_POLICY_KEYS = (
    "backoffLimit",
    "activeDeadlineSeconds",
    "ttlSecondsAfterFinished",
    "cleanPodPolicy",
    "suspend",
    "schedulingPolicy",
)
# kubectl create's generateName suffix: 5 characters of these (k8s.io/apiserver's names.go).
GENERATED_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX_LENGTH = 5


@dataclass(frozen=True)
class Note:
    source: str  # the TFJob field's path
    text: str
    target: str = ""  # the written key the comment goes above ("" : the file's head)


@dataclass(frozen=True)
class Refusal:
    source: str
    why: str


@dataclass
class Conversion:
    spec: dict = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    # each written role's TFJob replica ("worker": "spec.tfReplicaSpecs.Worker"): where a
    # problem the cluster.yaml loader finds with that role is in the TFJob
    role_sources: dict[str, str] = field(default_factory=dict)

    def source_of(self, written: str) -> str:
        """The TFJob path a cluster.yaml path came from (the nearest one known)."""
        parts = written.split(".")
        if parts[0] == "roles" and len(parts) > 1 and parts[1] in self.role_sources:
            return self.role_sources[parts[1]]
        if parts[0] in ("name", "namespace", "labels", "annotations"):
            return "metadata"
        if parts[0] == "checkpoint" or parts[0] == "evaluatorGraceSeconds":
            return self.role_sources.get("evaluator", self.role_sources.get("chief", "spec.tfReplicaSpecs"))
        if parts[0] in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "queue"):
            return "spec.runPolicy"
        return "spec.tfReplicaSpecs"


def is_tfjob(document: object) -> bool:
    return isinstance(document, dict) and document.get("kind") == KIND


def generated_name(prefix: str) -> str:
    """A name from metadata.generateName as the API server makes one (prefix + 5 characters)."""
    return prefix + "".join(secrets.choice(GENERATED_SUFFIX_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))


def convert(
    job: dict, make_name: Callable[[str], str] = generated_name, image_command: cluster.ImageCommand | None = None
) -> Conversion:
    """The cluster.yaml of `job`; check `refused` before using `spec`. make_name: the name
    for a TFJob with metadata.generateName and no name (tests give a fixed one); image_command:
    what an image runs, for a container without a command (image_config.py; None: not known)."""
    out = Conversion()

    def note(source: str, text: str, target: str = "") -> None:
        if Note(source, text, target) not in out.notes:
            out.notes.append(Note(source, text, target))

    refuse = lambda source, why: out.refused.append(Refusal(source, why))  # noqa: E731
    version = job.get("apiVersion")
    if version in OLD_API_VERSIONS:
        note("apiVersion", f"{version} read as {API_VERSION}: the same tfReplicaSpecs; what moved is noted below")
    elif version != API_VERSION:
        refuse(
            "apiVersion",
            f"{version!r} is no TFJob version this reads ({API_VERSION}, {', '.join(OLD_API_VERSIONS)})",
        )
        return out
    meta, body = job.get("metadata") or {}, dict(job.get("spec") or {})
    if version == V1ALPHA1:
        body = _from_v1alpha1(body, note, refuse)
    spec = out.spec
    spec["name"] = meta.get("name")
    if not spec["name"] and meta.get("generateName"):
        spec["name"] = make_name(meta["generateName"])
        note(
            "metadata.generateName",
            f"the name {spec['name']} was made from it as `kubectl create` does; a resubmission makes "
            "another (a model dir per name)",
            "name",
        )
    if meta.get("namespace"):
        spec["namespace"] = meta["namespace"]
    labels = dict(meta.get("labels") or {})
    queue = labels.pop(KUEUE_QUEUE_LABEL, None)
    if labels:
        spec["labels"] = labels
    if meta.get("annotations"):
        spec["annotations"] = dict(meta["annotations"])
    read_back = [f"metadata.{k}" for k in READ_BACK if k in meta] + (["status"] if "status" in job else [])
    if read_back:
        note(", ".join(read_back), "read back from a cluster, not part of the job: left out")
    hoisted = [key for key in RUN_POLICY_KEYS if key in body]
    if hoisted:  # the layout before runPolicy: the same keys one level up
        run_policy = dict(body.get("runPolicy") or {})
        for key in hoisted:
            if key in run_policy:
                refuse(f"spec.{key}", f"set both here and in spec.runPolicy.{key}: keep one")
            run_policy[key] = body.pop(key)
        body["runPolicy"] = run_policy
        note(
            ", ".join(f"spec.{key}" for key in hoisted),
            "read as spec.runPolicy's (the TFJob layout before runPolicy)",
        )
    for key in body:
        if key not in ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker"):
            refuse(f"spec.{key}", "not a TFJob field tfk8s knows: remove it or map it by hand")
    if body.get("enableDynamicWorker"):
        refuse("spec.enableDynamicWorker", "tfk8s runs a fixed set of workers (TF_CONFIG lists every task)")
    roles = _roles(body.get("tfReplicaSpecs") or {}, note, refuse)
    if not roles:
        refuse("spec.tfReplicaSpecs", "no replica: give a Chief, Master, Worker, PS or Evaluator")
        return out
    strategy = _strategy(roles, note, refuse)
    if strategy is None:
        return out
    out.role_sources = {role.value: fields["_src"] for role, fields in roles.items()}
    spec["strategy"] = strategy.value
    _run_policy(body.get("runPolicy") or {}, queue, spec, note, refuse)
    if body.get("successPolicy") == "AllWorkers":
        note(
            "spec.successPolicy",
            "AllWorkers: the cluster succeeds when the chief (multi_worker_mirrored: worker 0) does, and "
            "the other workers end with it",
            "strategy",
        )
    cluster.common(roles, strategy, spec, note, refuse, image_command)
    return out


def _from_v1alpha1(body: dict, note, refuse) -> dict:
    """v1alpha1's spec as v1's: replicaSpecs (a list, each with tfReplicaType, default MASTER,
    and tfPort) as tfReplicaSpecs; tfImage the image of a container without one;
    cleanupPodPolicy as runPolicy's cleanPodPolicy; terminationPolicy (the chief: MASTER 0) kept
    as v1's rule."""
    out = {
        k: v for k, v in body.items() if k not in ("replicaSpecs", "tfImage", "cleanupPodPolicy", "terminationPolicy")
    }
    if "cleanupPodPolicy" in body:
        out["runPolicy"] = {**(out.get("runPolicy") or {}), "cleanPodPolicy": body["cleanupPodPolicy"]}
    chief = (body.get("terminationPolicy") or {}).get("chief") or {}
    if chief and (str(chief.get("replicaName", "MASTER")).upper(), chief.get("replicaIndex", 0)) != ("MASTER", 0):
        refuse("spec.terminationPolicy.chief", "the chief is MASTER 0 here (TFJob v1's rule): remove it")
    replicas: dict = {}
    for i, replica in enumerate(body.get("replicaSpecs") or []):
        kind = str(replica.get("tfReplicaType") or "MASTER")
        if kind in replicas:
            refuse(f"spec.replicaSpecs.{i}.tfReplicaType", f"{kind} is listed twice: give one entry per type")
            continue
        template = dict(replica.get("template") or {})
        pod = dict(template.get("spec") or {})
        containers = []
        for container in pod.get("containers") or []:
            container = dict(container)
            if container.get("name") == "tensorflow":
                if body.get("tfImage") and not container.get("image"):
                    container["image"] = body["tfImage"]
                if replica.get("tfPort") is not None and not container.get("ports"):
                    container["ports"] = [{"name": "tfjob-port", "containerPort": replica["tfPort"]}]
            containers.append(container)
        pod["containers"] = containers
        policy = pod.pop("restartPolicy", None)
        template["spec"] = pod
        replicas[kind] = {"replicas": replica.get("replicas", 1), "template": template}
        if policy:
            replicas[kind]["restartPolicy"] = policy
    out["tfReplicaSpecs"] = replicas
    note("spec.replicaSpecs", "v1alpha1's list read as tfReplicaSpecs (tfReplicaType: the replica's key)")
    return out


def _roles(replicas: dict, note, refuse) -> dict[Role, dict]:
    """Each replica type's role fields (camelCase, as in cluster.yaml), with `_restart` and `_src`."""
    roles: dict[Role, dict] = {}
    for key, replica in replicas.items():
        at = f"spec.tfReplicaSpecs.{key}"
        role = ROLE_OF.get(str(key).lower())
        if role is None:
            refuse(at, f"{key} is no TFJob replica type: Chief, Master, Worker, PS or Evaluator")
            continue
        if role in roles:
            refuse(at, "Chief and Master are one role: keep one")
            continue
        if str(key).lower() == "master":
            note(at, "Master is the chief", f"roles.{role.value}")
        fields = {"replicas": replica.get("replicas", 1), "_restart": replica.get("restartPolicy", "Never"), "_src": at}
        pod.pod(replica.get("template") or {}, f"{at}.template", role, fields, note, refuse)
        roles[role] = fields
    return roles


def _strategy(roles: dict[Role, dict], note, refuse) -> Strategy | None:
    """The strategy the roles imply; roles rewritten where tfk8s's strategy names them otherwise."""
    count = {role: fields["replicas"] for role, fields in roles.items()}
    if count.get(Role.PS):
        if Role.CHIEF not in roles:
            worker = roles.get(Role.WORKER)
            if not worker:
                refuse("spec.tfReplicaSpecs", "parameter servers need a chief or a worker: give a Chief")
                return None
            roles[Role.CHIEF] = {**worker, "replicas": 1}
            worker["replicas"] -= 1
            note(
                worker["_src"],
                "worker 0 is the chief now (parameter_server needs one): the workers are one fewer"
                + (" (none: the chief trains itself, as TFJob's worker 0 did)" if worker["replicas"] == 0 else ""),
                "roles.chief",
            )
            if worker["replicas"] == 0:
                roles.pop(Role.WORKER)
        note(roles[Role.PS]["_src"], "the ps are ended when the chief succeeds: no cleanPodPolicy needed", "roles.ps")
        strategy = Strategy.PARAMETER_SERVER
    elif Role.WORKER in roles:
        if Role.CHIEF in roles:
            chief, worker = roles.pop(Role.CHIEF), roles[Role.WORKER]
            same = {k: v for k, v in chief.items() if k not in ("replicas", "_restart", "_src")} == {
                k: v for k, v in worker.items() if k not in ("replicas", "_restart", "_src")
            }
            if not same:
                refuse(chief["_src"], "multi_worker_mirrored runs the chief as worker 0: give it the workers' template")
                return None
            worker["replicas"] += chief["replicas"]
            note(
                chief["_src"],
                "the chief is worker 0 now: multi_worker_mirrored's TF_CONFIG has no chief",
                "roles.worker",
            )
        strategy = Strategy.MULTI_WORKER_MIRRORED
    elif Role.CHIEF in roles:
        strategy = Strategy.MIRRORED
    else:
        refuse("spec.tfReplicaSpecs", "an Evaluator alone trains nothing: give a Chief or Workers")
        return None
    note("spec.tfReplicaSpecs", f"strategy {strategy.value}, from the replica types", "strategy")
    note(
        "metadata.name",
        "a task's host is <name>-<role>-<index>.<name>.<namespace>.svc, not TFJob's <name>-<role>-<index>"
        ".<namespace>.svc: read the addresses from TF_CONFIG",
        "name",
    )
    if Role.EVALUATOR in roles:
        note(
            roles[Role.EVALUATOR]["_src"],
            "the evaluator is no longer in the training cluster's TF_CONFIG (its own cluster is empty); it "
            "may run on for evaluatorGraceSeconds after the chief succeeds, to evaluate the final checkpoint",
            "roles.evaluator",
        )
    return strategy


def _run_policy(policy: dict, queue: str | None, spec: dict, note, refuse) -> None:
    at = "spec.runPolicy"
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if key in policy:
            spec[key] = policy[key]
            note(f"{at}.{key}", "per Job (one per role), not for the whole TFJob", key)
    clean = policy.get("cleanPodPolicy")
    if clean is not None:
        note(
            f"{at}.cleanPodPolicy",
            f"{clean} is not needed: tfk8s ends every task when training is over (the ps when the chief "
            "succeeds); finished pods stay for ttlSecondsAfterFinished",
        )
    if policy.get("suspend"):
        refuse(f"{at}.suspend", "tfk8s has no suspended submit: submit when it should run, or queue it (Kueue)")
    scheduling = policy.get("schedulingPolicy") or {}
    if scheduling.get("queue"):
        queue = queue or scheduling["queue"]
        note(f"{at}.schedulingPolicy.queue", "a Kueue LocalQueue now (no Volcano)", "queue")
    if queue:
        spec["workload"] = JOBSET
        spec["queue"] = queue
        note("metadata.labels", "Kueue admits the cluster as one JobSet (workload: jobset)", "workload")
    if scheduling.get("priorityClass"):
        spec["priorityClassName"] = scheduling["priorityClass"]
    for key in ("minAvailable", "minResources", "scheduleTimeoutSeconds"):
        if key in scheduling and not queue:
            refuse(f"{at}.schedulingPolicy.{key}", "gang scheduling is Kueue's here: set a queue, or remove it")
        elif key in scheduling:
            note(f"{at}.schedulingPolicy.{key}", "Kueue admits every pod at once: no gang settings needed")
    for key in policy:
        if key not in RUN_POLICY_KEYS:
            refuse(f"{at}.{key}", "not a runPolicy field tfk8s maps")
