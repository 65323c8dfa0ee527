"""A kubeflow.org/v1 TFJob as a cluster.yaml mapping (pure): the roles from tfReplicaSpecs, the
strategy they imply, the `tensorflow` container, each replica's pod template through the role's
pod fields (launcher/cluster_spec/pod_fields.py), runPolicy, successPolicy, restartPolicy, port.

Every field whose meaning changes is a Note (a comment in the written YAML, a line on stderr);
every field that cannot be mapped is a Refusal naming its path in the TFJob and why.
docs/migrating-from-tfjob.md is the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from launcher import k8s_contract
from launcher.cluster_spec import pod_fields
from launcher.cluster_spec.role_spec import KNOWN_RESOURCES
from worker.contract import Role, Strategy

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
ROLE_OF = {"chief": Role.CHIEF, "master": Role.CHIEF, "worker": Role.WORKER, "ps": Role.PS, "evaluator": Role.EVALUATOR}
TFJOB_PORT_NAME = "tfjob-port"
KUEUE_QUEUE_LABEL = k8s_contract.QUEUE_LABEL  # how a TFJob is queued by Kueue too
JOBSET = k8s_contract.Workload.JOBSET.value
# ExitCode: TFJob retries 128 and up (a signal), fails at once on 1-127; tfk8s's reserved codes
# (the supervisor's 7) keep their own meaning.
PERMANENT_EXIT_CODES = [c for c in range(1, 128) if c not in k8s_contract.RESERVED_EXIT_CODES]
# Read-back fields of `kubectl get -o yaml`: not part of the job.
READ_BACK = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
_OURS = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
_RUNTIME_DEFAULT = {"type": "RuntimeDefault"}


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


def is_tfjob(document: object) -> bool:
    return isinstance(document, dict) and document.get("kind") == KIND


def convert(job: dict) -> Conversion:
    """The cluster.yaml of `job`; check `refused` before using `spec`."""
    out = Conversion()
    note = lambda source, text, target="": out.notes.append(Note(source, text, target))  # noqa: E731
    refuse = lambda source, why: out.refused.append(Refusal(source, why))  # noqa: E731
    if job.get("apiVersion") != API_VERSION:
        refuse("apiVersion", f"{job.get('apiVersion')!r} is not {API_VERSION}, the TFJob this reads")
        return out
    meta, body = job.get("metadata") or {}, job.get("spec") or {}
    spec = out.spec
    spec["name"] = meta.get("name")
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
    for key in body:
        if key not in ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker"):
            refuse(f"spec.{key}", "not a TFJob v1 field tfk8s knows: remove it or map it by hand")
    if body.get("enableDynamicWorker"):
        refuse("spec.enableDynamicWorker", "tfk8s runs a fixed set of workers (TF_CONFIG lists every task)")
    roles = _roles(body.get("tfReplicaSpecs") or {}, note, refuse)
    if out.refused or not roles:
        if not roles and not out.refused:
            refuse("spec.tfReplicaSpecs", "no replica: give a Chief, Master, Worker, PS or Evaluator")
        return out
    strategy = _strategy(roles, note, refuse)
    if strategy is None:
        return out
    spec["strategy"] = strategy.value
    _run_policy(body.get("runPolicy") or {}, queue, spec, note, refuse)
    if body.get("successPolicy") == "AllWorkers":
        note(
            "spec.successPolicy",
            "AllWorkers: the cluster succeeds when the chief (multi_worker_mirrored: worker 0) does, and "
            "the other workers end with it",
            "strategy",
        )
    _common(roles, strategy, spec, note, refuse)
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
        _pod(replica.get("template") or {}, f"{at}.template", role, fields, note, refuse)
        roles[role] = fields
    return roles


def _pod(template: dict, at: str, role: Role, fields: dict, note, refuse) -> None:
    meta, pod = template.get("metadata") or {}, template.get("spec") or {}
    for key, value in meta.items():
        if key in ("labels", "annotations"):
            fields[key] = dict(value)
        else:
            refuse(f"{at}.metadata.{key}", "a pod template's name and namespace are tfk8s's")
    over: dict = {}
    containers = pod.get("containers") or []
    tensorflow = [c for c in containers if c.get("name") == k8s_contract.CONTAINER]
    if not tensorflow:
        refuse(f"{at}.spec.containers", "no container named tensorflow: TFJob's task container is the one tfk8s runs")
        return
    for i, container in enumerate(containers):
        if container.get("name") == k8s_contract.CONTAINER:
            _task(container, f"{at}.spec.containers.{i}", role, fields, over, note, refuse)
        elif container.get("ports"):
            refuse(
                f"{at}.spec.containers.{i}",
                f"{container.get('name')} serves ports the program may talk to: tfk8s runs one task "
                "container and sidecars beside it; run it as a Service of its own",
            )
        else:
            sidecar = {**container, "restartPolicy": "Always"}
            over.setdefault("initContainers", []).append(sidecar)
            note(
                f"{at}.spec.containers.{i}",
                f"{container.get('name')} runs as a native sidecar (Kubernetes >= 1.29): it no longer keeps "
                "the pod from completing",
                f"roles.{role.value}.podTemplate",
            )
    role_keys = ("volumes", "affinity", "topologySpreadConstraints", "nodeSelector", "tolerations")
    for key, value in pod.items():
        here = f"{at}.spec.{key}"
        if key == "containers":
            continue
        if key in role_keys:
            fields[key] = value
        elif key in ("serviceAccountName", "serviceAccount"):
            fields["serviceAccountName"] = value
        elif key in ("imagePullSecrets", "priorityClassName", "terminationGracePeriodSeconds"):
            fields["_" + key] = value
        elif key == "restartPolicy":
            note(here, "the replica's restartPolicy decides, as in a TFJob")
        elif key == "securityContext":
            _pod_security(value, here, role, fields, over, note, refuse)
        elif key == "initContainers":
            over["initContainers"] = [*value, *over.get("initContainers", [])]
        elif key in pod_fields.POD_SPEC_HOMES:
            refuse(here, pod_fields.POD_SPEC_HOMES[key].format(role=role.value, key=key))
        else:
            over.setdefault("spec", {})[key] = value
    spec_over = over.pop("spec", {})
    init = over.pop("initContainers", None)
    spec_over.update({"initContainers": init} if init else {})
    spec_over.update(over)
    if spec_over:
        fields.setdefault("podTemplate", {})["spec"] = {**fields.get("podTemplate", {}).get("spec", {}), **spec_over}


def _pod_security(value: dict, at: str, role: Role, fields: dict, over: dict, note, refuse) -> None:
    for key, item in value.items():
        if key in ("runAsUser", "runAsGroup", "fsGroup"):
            fields.setdefault("_securityContext", {})[key] = item
        elif (key, item) in (("runAsNonRoot", True), ("seccompProfile", _RUNTIME_DEFAULT)):
            note(f"{at}.{key}", "tfk8s sets it for every pod")
        elif key in pod_fields.POD_SECURITY_SET:
            refuse(f"{at}.{key}", "tfk8s's pods are Pod Security restricted: non-root, seccomp RuntimeDefault")
        else:
            over.setdefault("securityContext", {})[key] = item


def _task(container: dict, at: str, role: Role, fields: dict, over: dict, note, refuse) -> None:
    own: dict = {"name": k8s_contract.CONTAINER}
    for key, value in container.items():
        here = f"{at}.{key}"
        if key == "name":
            continue
        if key in ("image", "command", "args", "volumeMounts"):
            fields[key] = value
        elif key == "imagePullPolicy":
            fields["_imagePullPolicy"] = value
        elif key == "env":
            _env(value, here, fields, own, refuse)
        elif key == "resources":
            _resources(value, here, fields, refuse)
        elif key == "ports":
            for i, port in enumerate(value):
                if port.get("name") == TFJOB_PORT_NAME:
                    fields["_port"] = port.get("containerPort")
                else:
                    refuse(f"{here}.{i}", "tfk8s declares the task's ports (gRPC: port, metrics: metrics.port)")
        elif key == "securityContext":
            for name, item in value.items():
                if name in pod_fields.TASK_SECURITY_MAY_SET:
                    own.setdefault("securityContext", {})[name] = item
                elif _OURS.get(name, _RUNTIME_DEFAULT if name == "seccompProfile" else None) == item:
                    note(f"{here}.{name}", "tfk8s sets it for every task")
                elif name in ("runAsUser", "runAsGroup"):
                    fields.setdefault("_securityContext", {})[name] = item
                else:
                    refuse(f"{here}.{name}", "tfk8s's tasks are Pod Security restricted")
        elif key == "terminationMessagePolicy":
            note(here, "tfk8s uses FallbackToLogsOnError: the cause is the last log lines when none is written")
        elif key in pod_fields.TASK_CONTAINER_MAY_SET:
            own[key] = value
        elif key == "workingDir":
            refuse(here, "tfk8s sets the working dir only for shipped code (code:): use absolute paths in command")
        else:
            refuse(here, f"{key} of the task container is not mapped: remove it or map it by hand")
    if len(own) > 1:
        fields.setdefault("podTemplate", {}).setdefault("spec", {})["containers"] = [own]


def _env(entries: list, at: str, fields: dict, own: dict, refuse) -> None:
    for i, entry in enumerate(entries):
        name = entry.get("name", "")
        if name in k8s_contract.RESERVED_ENV:
            refuse(f"{at}.{i}", f"{name} is set by tfk8s for every task")
        elif "valueFrom" in entry:
            own.setdefault("env", []).append(entry)
        else:
            fields.setdefault("env", {})[name] = str(entry.get("value", ""))


def _resources(value: dict, at: str, fields: dict, refuse) -> None:
    for kind in ("requests", "limits"):
        for name in value.get(kind) or {}:
            if name not in KNOWN_RESOURCES:
                refuse(f"{at}.{kind}.{name}", f"tfk8s asks only for {', '.join(KNOWN_RESOURCES)}")
    extra = [k for k in value if k not in ("requests", "limits")]
    for key in extra:
        refuse(f"{at}.{key}", "only requests and limits are mapped")
    fields["resources"] = {k: v for k, v in value.items() if k in ("requests", "limits")}


def _strategy(roles: dict[Role, dict], note, refuse) -> Strategy | None:
    """The strategy the roles imply; roles rewritten where tfk8s's strategy names them otherwise."""
    count = {role: fields["replicas"] for role, fields in roles.items()}
    if count.get(Role.PS):
        if Role.CHIEF not in roles:
            worker = roles.get(Role.WORKER)
            if not worker or worker["replicas"] < 2:
                refuse("spec.tfReplicaSpecs", "parameter servers need a chief and a worker: give a Chief")
                return None
            roles[Role.CHIEF] = {**worker, "replicas": 1}
            worker["replicas"] -= 1
            note(
                worker["_src"],
                "worker 0 is the chief now (parameter_server needs one): the workers are one fewer",
                "roles.chief",
            )
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
        if key not in (
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
            "cleanPodPolicy",
            "suspend",
            "schedulingPolicy",
        ):
            refuse(f"{at}.{key}", "not a runPolicy field tfk8s maps")


def _common(roles: dict[Role, dict], strategy: Strategy, spec: dict, note, refuse) -> None:
    """The fields one cluster.yaml has once (image, command, restartPolicy, ...) from the roles'."""
    order = [r for r in (Role.CHIEF, Role.WORKER, Role.PS, Role.EVALUATOR) if r in roles]
    first = roles[order[0]]
    if any("command" not in roles[r] for r in order):
        missing = next(r for r in order if "command" not in roles[r])
        refuse(
            f"{roles[missing]['_src']}.template.spec.containers",
            "the tensorflow container has no command (the image's entrypoint ran): write it as command",
        )
        return
    for key in ("image", "command"):
        if key in first:
            spec[key] = first[key]
    if "args" in first:
        spec["args"] = first["args"]
    for key in ("_imagePullPolicy", "_priorityClassName", "_port"):
        values = {str(roles[r].get(key)) for r in order if key in roles[r]}
        if len(values) > 1:
            refuse(roles[order[0]]["_src"], f"the replicas differ in {key[1:]}: tfk8s has one for the cluster")
        elif values:
            name = {"_port": "port"}.get(key, key[1:])
            spec[name] = next(roles[r][key] for r in order if key in roles[r])
    secrets = [s for r in order for s in roles[r].get("_imagePullSecrets", [])]
    if secrets:
        spec["imagePullSecrets"] = [dict(t) for t in {tuple(sorted(s.items())) for s in secrets}]
        spec["imagePullSecrets"].sort(key=lambda s: s.get("name", ""))
    graces = {roles[r]["_terminationGracePeriodSeconds"] for r in order if "_terminationGracePeriodSeconds" in roles[r]}
    if graces:
        spec["terminationGracePeriodSeconds"] = max(graces)
    security = [roles[r].get("_securityContext") for r in order if roles[r].get("_securityContext")]
    if security:
        if any(s != security[0] for s in security):
            refuse(first["_src"], "the replicas run as different users: tfk8s has one securityContext")
        spec["securityContext"] = security[0]
    _restart(roles, order, spec, note)
    _checkpoint_claim(roles, order, spec, note)
    accounts = {roles[r].get("serviceAccountName") for r in order}
    if len(accounts) == 1 and None not in accounts:
        spec["serviceAccountName"] = accounts.pop()
        for r in order:
            roles[r].pop("serviceAccountName")
    else:
        has_evaluator = Role.EVALUATOR in roles
        supervised = k8s_contract.supervised_roles(
            strategy, has_evaluator, k8s_contract.Workload(spec.get("workload", "jobs"))
        )
        for r in order:
            if roles[r].get("serviceAccountName") and r in supervised:
                refuse(
                    f"{roles[r]['_src']}.template.spec.serviceAccountName",
                    "the replicas' service accounts differ, and tfk8s's supervised roles use the cluster's",
                )
    spec["roles"] = {}
    for r in order:
        fields = {k: v for k, v in roles[r].items() if not k.startswith("_")}
        for key in ("image", "command", "args"):
            if key in fields and fields[key] == spec.get(key):
                fields.pop(key)
        if "command" in fields and "args" not in fields and "args" in spec:
            fields["args"] = []
        spec["roles"][r.value] = fields


def _checkpoint_claim(roles: dict[Role, dict], order: list[Role], spec: dict, note) -> None:
    """The claim every task but the ps mounts writable at one path is where the program keeps
    its checkpoints: tfk8s's checkpoint volume (the evaluator and MWMS workers need one)."""
    writers = [r for r in order if r is not Role.PS]
    shared = None
    for r in writers:
        volumes = {v.get("name"): v for v in roles[r].get("volumes", [])}
        claims = {
            (volumes[m["name"]]["persistentVolumeClaim"]["claimName"], m["mountPath"])
            for m in roles[r].get("volumeMounts", [])
            if "persistentVolumeClaim" in volumes.get(m.get("name"), {})
            and not m.get("readOnly")
            and not volumes[m["name"]]["persistentVolumeClaim"].get("readOnly")
            and "subPath" not in m
        }
        shared = claims if shared is None else shared & claims
    if len(shared or ()) != 1:
        return
    [(claim, mount_path)] = shared
    for r in order:  # the claim's writable mounts at that path and their volumes; a read-only one stays
        names = {
            m["name"]
            for m in roles[r].get("volumeMounts", [])
            if m.get("mountPath") == mount_path and not m.get("readOnly") and "subPath" not in m
        }
        for key in ("volumes", "volumeMounts"):
            kept = [item for item in roles[r].get(key, []) if item.get("name") not in names]
            roles[r].pop(key, None)
            roles[r].update({key: kept} if kept else {})
    spec["checkpoint"] = {"volume": {"persistentVolumeClaim": {"claimName": claim}, "mountPath": mount_path}}
    note(
        roles[writers[0]]["_src"] + ".template.spec.volumes",
        f"the claim {claim} every task writes is the checkpoint volume, at {mount_path} as before "
        f"(TFK8S_MODEL_DIR: {mount_path}/<namespace>/<name> on it; your program writes where it did)",
        "checkpoint",
    )


def _restart(roles: dict[Role, dict], order: list[Role], spec: dict, note) -> None:
    """One restartPolicy for the cluster from the replicas'."""
    policies = {r: roles[r]["_restart"] for r in order}
    if set(policies.values()) == {"OnFailure"}:
        spec["restartPolicy"] = "OnFailure"
        return
    for r, policy in policies.items():
        src = f"{roles[r]['_src']}.restartPolicy"
        if policy == "OnFailure":
            note(
                src,
                "OnFailure: a failed pod is replaced (restartPolicy Never) as the other roles' are",
                "restartPolicy",
            )
        elif policy == "Always":
            note(src, "Always: a failed pod is replaced; one that exits 0 is done", "restartPolicy")
    if "ExitCode" in policies.values():
        spec["fatalExitCodes"] = PERMANENT_EXIT_CODES
        roles_ = ", ".join(r.value for r, p in policies.items() if p == "ExitCode")
        note(
            "spec.tfReplicaSpecs",
            f"ExitCode ({roles_}): exit codes 1-127 fail the cluster at once for every role (7 is "
            "tfk8s's supervisor's), 128 and up are retried",
            "fatalExitCodes",
        )
