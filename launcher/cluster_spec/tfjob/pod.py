"""A TFJob replica's pod template as a role's fields of cluster.yaml (pure): the `tensorflow`
container's image, command, env, resources, mounts and port; the pod's volumes, placement,
account and security context; anything else into the role's podTemplate, what that may not set
refused (launcher/cluster_spec/pod_fields.py). convert.py maps the rest of the TFJob."""

from __future__ import annotations

from launcher import k8s_contract
from launcher.cluster_spec import pod_fields
from launcher.cluster_spec.role_spec import KNOWN_RESOURCES
from worker.contract import Role

# What `kubectl get -o yaml` and generators write into a pod template's metadata.
READ_BACK_TEMPLATE_METADATA = ("creationTimestamp", "uid", "resourceVersion", "generation", "managedFields")
TFJOB_PORT_NAME = "tfjob-port"  # the task container's port TFJob reads the gRPC port from
_RUNTIME_DEFAULT = {"type": "RuntimeDefault"}


def pod(template: dict, at: str, role: Role, fields: dict, note, refuse) -> None:
    meta, pod = template.get("metadata") or {}, template.get("spec") or {}
    for key, value in meta.items():
        if key in ("labels", "annotations"):
            fields[key] = dict(value or {})
        elif key in READ_BACK_TEMPLATE_METADATA:
            continue  # generated manifests carry `creationTimestamp: null`: not part of the job
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
        if key == "containers" or value is None:
            continue
        if key in role_keys:
            fields[key] = value
        elif key in ("serviceAccountName", "serviceAccount"):
            fields["serviceAccountName"] = value
        elif key in ("imagePullSecrets", "priorityClassName", "terminationGracePeriodSeconds"):
            fields["_" + key] = value
        elif key == "restartPolicy":
            note(here, "the replica's restartPolicy decides, as in a TFJob")
        elif key == "schedulerName":
            over.setdefault("spec", {})[key] = value
            note(
                here,
                f"{value} schedules the pods one by one: no PodGroup is made, so no gang; to admit every pod "
                "at once, set queue (a Kueue LocalQueue)",
                f"roles.{role.value}.podTemplate",
            )
        elif key == "securityContext":
            _pod_security(value, here, role, fields, over, note, refuse)
        elif key == "initContainers":
            over["initContainers"] = [*value, *over.get("initContainers", [])]
        elif key in pod_fields.POD_SPEC_HOMES:
            refuse(here, pod_fields.POD_SPEC_HOMES[key].format(role=role.value, key=key))
        else:
            over.setdefault("spec", {})[key] = value
    spec_over = over.pop("spec", {})
    spec_over.update(over)  # initContainers and securityContext
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
        if key == "name" or value is None:  # `volumeMounts:` with nothing under it: YAML's null
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
            named = [p for p in value if p.get("name") == TFJOB_PORT_NAME]
            # TFJob's gRPC port is the one named tfjob-port; a lone port of another name was
            # TFJob's too (older examples declare `containerPort: 2222` unnamed), noted.
            grpc = named[0] if named else value[0] if len(value) == 1 else None
            for i, port in enumerate(value):
                if port is grpc:
                    fields["_port"] = port.get("containerPort")
                    if not named:
                        note(f"{here}.{i}", "the one port of the task: TF's gRPC port (`port`)", "port")
                else:
                    refuse(f"{here}.{i}", "tfk8s declares the task's ports (gRPC: port, metrics: metrics.port)")
        elif key == "securityContext":
            for name, item in value.items():
                if name in pod_fields.TASK_SECURITY_MAY_SET:
                    own.setdefault("securityContext", {})[name] = item
                elif name in ("runAsUser", "runAsGroup"):
                    fields.setdefault("_securityContext", {})[name] = item
                elif more := pod_fields.security_value_problems(here, {name: item}):
                    # a value more than restricted allows: the same refusal as a sidecar's
                    for path, message in more:
                        refuse(path, message)
                else:  # within restricted: the launcher's restricted context replaces it
                    note(f"{here}.{name}", "tfk8s's restricted securityContext decides it (docs/security.md)")
        elif key == "terminationMessagePolicy":
            note(here, "tfk8s uses FallbackToLogsOnError: the cause is the last log lines when none is written")
        elif key in pod_fields.TASK_CONTAINER_MAY_SET:
            own[key] = value
        elif key == "workingDir":
            fields["_workingDir"] = value
        else:
            refuse(here, f"{key} of the task container is not mapped: remove it or map it by hand")
    if len(own) > 1:
        fields.setdefault("podTemplate", {}).setdefault("spec", {})["containers"] = [own]


def _env(entries: list, at: str, fields: dict, own: dict, refuse) -> None:
    for i, entry in enumerate(entries):
        name = entry.get("name", "")
        if name in k8s_contract.RESERVED_ENV:
            refuse(f"{at}.{i}", f"{name} is set by tfk8s for every task")
        elif "valueFrom" in entry:  # in its place: $(NAME) expands only from earlier entries
            fields.setdefault("env", []).append({"name": name, "valueFrom": entry["valueFrom"]})
        else:
            fields.setdefault("env", []).append({"name": name, "value": str(entry.get("value", ""))})


def _resources(value: dict, at: str, fields: dict, refuse) -> None:
    for kind in ("requests", "limits"):
        for name in value.get(kind) or {}:
            if name not in KNOWN_RESOURCES:
                refuse(f"{at}.{kind}.{name}", f"tfk8s asks only for {', '.join(KNOWN_RESOURCES)}")
    extra = [k for k in value if k not in ("requests", "limits")]
    for key in extra:
        refuse(f"{at}.{key}", "only requests and limits are mapped")
    fields["resources"] = {k: v for k, v in value.items() if k in ("requests", "limits")}
