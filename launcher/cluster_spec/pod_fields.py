"""A role's Kubernetes pod fields (roles.<role>.volumes, affinity, podTemplate, ...): their shapes
(launcher/cluster_spec/k8s_shapes.py), what they may not touch, and the pod template's merge rule.

The merge rule of `podTemplate`, applied to each rendered pod (launcher/render/render.py) and by
the chart (`tfk8s.podTemplate` in charts/tfk8s/templates/_job.tpl): mappings are merged key by
key, the template's value winning; a list of named items (containers, initContainers, env) is
merged by `name`, an item of a new name appended; any other list is replaced. It may not set
what the launcher decides or what has a field of its own (its `metadata`: the role's labels and
annotations): TF_CONFIG and the task's env, command,
image, resources and mounts, the addresses TF_CONFIG names (subdomain, hostname, hostNetwork),
the token rule, the supervisor's container and volumes, or the restricted security context.
"""

from __future__ import annotations

from launcher import k8s_contract
from launcher.cluster_spec import k8s_shapes
from launcher.code_shipping.code_bundle import CODE_DIR

Problems = list[tuple[str, str]]
# The volumes the launcher gives a pod (render: /tmp, the model dir's, the supervisor's, the
# code's); tests/launcher/render/test_pod_fields.py holds render to this list.
RESERVED_VOLUMES = ("tmp", "checkpoint", "supervisor", "supervisor-state", "kube-api-access", "code", "code-archive")
RESERVED_CONTAINERS = (k8s_contract.CONTAINER, k8s_contract.WATCHER_CONTAINER, "code")
# The mount paths the launcher's volumes take in a pod, besides the model dir's (the checkpoint
# volume's mountPath): no role's volumeMount may take one.
LAUNCHER_MOUNTS = ("/tmp", k8s_contract.SUPERVISOR_DIR, k8s_contract.SUPERVISOR_STATE_DIR, CODE_DIR)
RESERVED_LABELS = (
    k8s_contract.LABEL_NAME,
    k8s_contract.LABEL_INSTANCE,
    k8s_contract.LABEL_COMPONENT,
    k8s_contract.LABEL_MANAGED_BY,
    k8s_contract.LABEL_STRATEGY,
)
# Pod spec keys a podTemplate may not set, and where that setting lives instead: a role's field,
# the spec's, or why it is the launcher's.
_ROLE_FIELDS = ("affinity", "topologySpreadConstraints", "serviceAccountName", "nodeSelector", "tolerations")
_SPEC_FIELDS = ("imagePullSecrets", "priorityClassName", "terminationGracePeriodSeconds", "activeDeadlineSeconds")
_ADDRESSED = "the launcher's: TF_CONFIG names every task by its host name"
POD_SPEC_HOMES = {
    **{key: f"set roles.{{role}}.{key} instead" for key in (*_ROLE_FIELDS, "volumes")},
    "serviceAccount": "set roles.{role}.serviceAccountName instead",
    **{key: f"set {key} in the spec instead" for key in (*_SPEC_FIELDS, "restartPolicy")},
    "subdomain": _ADDRESSED,
    "hostname": _ADDRESSED,
    "setHostnameAsFQDN": _ADDRESSED,
    "hostNetwork": "refused: tasks on the node's network share its ports and escape the NetworkPolicy",
    "hostPID": "refused: Pod Security restricted forbids host namespaces",
    "hostIPC": "refused: Pod Security restricted forbids host namespaces",
    "shareProcessNamespace": "refused: the task could read the job-watch container's token (docs/security.md)",
    "automountServiceAccountToken": "the launcher's: no token where TF's gRPC server runs (docs/security.md)",
}
# The pod securityContext keys the launcher sets (securityContext in the spec for uid/gid).
POD_SECURITY_SET = ("runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "seccompProfile")
# The task container's own fields: what a podTemplate may add to it (the rest has a role field).
TASK_CONTAINER_MAY_SET = (
    "env",  # only values from a Secret, a ConfigMap or a field (valueFrom): plain ones are roles.<role>.env
    "lifecycle",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "envFrom",
    "securityContext",
    "terminationMessagePath",
    "stdin",
    "tty",
)
# The task container's keys that have a field of the spec or the role: where to set each instead.
TASK_CONTAINER_HOMES = dict(
    (
        ("imagePullPolicy", "set imagePullPolicy in the spec instead (one policy for every role's image)"),
        ("image", "set roles.{role}.image (or the spec's image) instead"),
        ("command", "set roles.{role}.command (or the spec's command) instead"),
        ("args", "set roles.{role}.args (or the spec's args) instead"),
        ("workingDir", "set workingDir in the spec instead"),
        ("resources", "set roles.{role}.resources instead"),
        ("volumeMounts", "set roles.{role}.volumeMounts instead (with roles.{role}.volumes)"),
    )
)
# In the task container's securityContext: only what restricted allows and the launcher leaves unset.
TASK_SECURITY_MAY_SET = ("readOnlyRootFilesystem", "seLinuxOptions", "appArmorProfile")

# The values Pod Security `restricted` allows where a podTemplate may set a value
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/); the API server refuses
# any other at admission, so the launcher refuses it at its line first.
# The volume kinds Pod Security restricted admits ("Volume Types"); a role's volumes take no
# other (the checkpoint volume's hostPath is its own field: docs/security.md).
RESTRICTED_VOLUME_TYPES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
SELINUX_TYPES = ("container_t", "container_init_t", "container_kvm_t", "container_engine_t")
SELINUX_UNSET = ("user", "role")  # seLinuxOptions keys restricted allows only unset (or "")
APPARMOR_TYPES = ("RuntimeDefault", "Localhost")
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
# A probe's or lifecycle handler's action that names a host (baseline: only the pod's own).
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
LIFECYCLE_HANDLERS = ("postStart", "preStop")
HOST_ACTIONS = ("httpGet", "tcpSocket")
# A container the podTemplate adds (a sidecar, an init container): its securityContext values
# restricted refuses (as JSON: a bool, a number or a string), and what it allows instead.
ADDED_SECURITY_REFUSED = {
    "privileged": ((True,), "false"),
    "allowPrivilegeEscalation": ((True,), "false"),
    "runAsNonRoot": ((False,), "true"),
    "runAsUser": ((0,), "a uid other than 0"),
    "procMount": (("Unmasked",), "Default"),
}
ADDED_CAPABILITIES = ("NET_BIND_SERVICE",)  # the one capability restricted lets a container add
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")

# The refusals' texts, str.format strings: the chart's templates/_validate.tpl fills the same ones
# ($c.messages, scripts/chart_schema.py), so a refused podTemplate reads alike on either path.
POD_SPEC_KEY = "{key}: {home}"  # home: POD_SPEC_HOMES[key] with {role} filled in
TEMPLATE_METADATA = "set roles.{role}.labels and roles.{role}.annotations instead"
POD_SECURITY_KEY = "{key} is the launcher's (Pod Security restricted; uid and gid: the spec's securityContext)"
CONTAINER_WITHOUT_NAME = "a container needs a name (tensorflow: the task's; another: a container added to the pod)"
WATCHER_CHANGED = "job-watch is the supervisor's container: it may not be changed"
TASK_CONTAINER_KEY = "{key}: {home}"  # home: TASK_CONTAINER_HOMES[key] with {role} filled in
TASK_CONTAINER_OTHER = (
    "the task container's {key} is the launcher's or has a field of roles.{role} (image, command, "
    "args, env, resources, volumeMounts): set it there"
)
TASK_ENV_PLAIN = "a plain value of {name} belongs in roles.{role}.env: set it there"
TASK_ENV_RESERVED = "{name} is set by the launcher for every pod; remove it"
TASK_SECURITY_KEY = "{key} is the launcher's: Pod Security restricted"
RESERVED_CONTAINER = "'{name}' is the launcher's container: name yours otherwise"
ENV_SET_TWICE = (
    "{name} is set in {where} too: set it once (an env list keeps valueFrom entries in your order: roles.{role}.env)"
)
VOLUME_WITHOUT_NAME = "a volume needs a name"
RESERVED_VOLUME = "'{name}' is one of the launcher's volumes: give it another name"
VOLUME_TYPE = (
    "a {kind} volume is refused by Pod Security restricted: use one of {allowed} (a "
    "persistentVolumeClaim's PersistentVolume, which an administrator makes, may be any kind)"
)
VOLUME_NAMED_TWICE = "'{name}' is named twice: name each volume once"
MOUNT_WITHOUT_VOLUME = "'{name}' is not in {at}.volumes: add the volume there"
MOUNT_WITHOUT_PATH = "a volumeMount needs a mountPath"
RESERVED_MOUNT_PATH = "{path} is the launcher's: mount elsewhere"
RESERVED_LABEL = "{key} is the launcher's label: remove it"
SELINUX_TYPE = (
    "{value} is not an SELinux type Pod Security restricted allows: set one of {allowed}, or leave type unset"
)
SELINUX_SET = "{key} may not be set (Pod Security restricted): remove it"
APPARMOR_TYPE = "{value} is not an AppArmor profile Pod Security restricted allows: set one of {allowed}"
UNSAFE_SYSCTL = "{name} is not a sysctl Pod Security restricted allows: remove it (safe ones: {allowed})"
HOST_SET = "a probe or handler may only reach its own pod (Pod Security baseline): remove host"
ADDED_SECURITY = "a container added to the pod is Pod Security restricted too: set {key} to {allowed} or remove it"
ADDED_CAPABILITY = "{name} may not be added (Pod Security restricted): add only {allowed}"
SECCOMP_TYPE = "{value} is not a seccomp profile Pod Security restricted allows: set one of {allowed}"


def role_problems(
    role: str, fields: dict, supervised: bool, has_command: bool, model_mount: str, spec_env: tuple[str, ...] = ()
) -> Problems:
    """What is wrong with roles.<role>'s pod fields (`fields`: its values by camelCase key;
    `spec_env`: the names of the spec's `env`)."""
    at = f"roles.{role}"
    out: Problems = []
    for key, type_name in (
        ("volumes", "list[V1Volume]"),
        ("volumeMounts", "list[V1VolumeMount]"),
        ("affinity", "V1Affinity"),
        ("topologySpreadConstraints", "list[V1TopologySpreadConstraint]"),
    ):
        if fields.get(key):
            out += k8s_shapes.problems(fields[key], type_name, f"{at}.{key}")
    if out:
        return out
    if (fields.get("command") is not None or fields.get("args") is not None) and not has_command:
        key = "command" if fields.get("command") is not None else "args"
        out.append((f"{at}.{key}", "the built-in worker runs every role: set the spec's command, or remove this"))
    if fields.get("serviceAccountName") and supervised:
        out.append(
            (
                f"{at}.serviceAccountName",
                f"the {role} pods are supervised and their job-watch container watches with the cluster's "
                "account: set serviceAccountName for the whole spec instead",
            )
        )
    out += _volume_problems(at, fields.get("volumes") or [], fields.get("volumeMounts") or [], model_mount)
    out += [(f"{at}.labels.{k}", RESERVED_LABEL.format(key=k)) for k in fields["labels"] if k in RESERVED_LABELS]
    if fields.get("podTemplate") is not None:
        out += template_problems(role, fields["podTemplate"])
        out += _env_set_twice(role, fields["podTemplate"], spec_env, tuple(e["name"] for e in fields.get("env") or []))
    return out


def _env_set_twice(role: str, template: dict, spec_env: tuple[str, ...], role_env: tuple[str, ...]) -> Problems:
    """A podTemplate env name that `env` sets too: merged by name, the pod's entry would have both
    a value and a valueFrom, which Kubernetes refuses."""
    at = f"roles.{role}.podTemplate.spec.containers"
    return [
        (
            f"{at}.{i}.env.{j}.name",
            ENV_SET_TWICE.format(
                name=item["name"], where=f"roles.{role}.env" if item["name"] in role_env else "env", role=role
            ),
        )
        for i, container in enumerate((template.get("spec") or {}).get("containers") or [])
        if isinstance(container, dict) and container.get("name") == k8s_contract.CONTAINER
        for j, item in enumerate(container.get("env") or [])
        if isinstance(item, dict) and item.get("name") in (*spec_env, *role_env)
    ]


def _volume_problems(at: str, volumes: list[dict], mounts: list[dict], model_mount: str) -> Problems:
    out: Problems = []
    names = [v.get("name") for v in volumes]
    for i, name in enumerate(names):
        if name is None:
            out.append((f"{at}.volumes.{i}", VOLUME_WITHOUT_NAME))
        elif name in RESERVED_VOLUMES:
            out.append((f"{at}.volumes.{i}.name", RESERVED_VOLUME.format(name=name)))
        elif name in names[:i]:
            out.append((f"{at}.volumes.{i}.name", VOLUME_NAMED_TWICE.format(name=name)))
    out += [
        (f"{at}.volumes.{i}.{kind}", VOLUME_TYPE.format(kind=kind, allowed=quoted(RESTRICTED_VOLUME_TYPES)))
        for i, volume in enumerate(volumes)
        for kind in volume
        if kind != "name" and kind not in RESTRICTED_VOLUME_TYPES
    ]
    ours = (*LAUNCHER_MOUNTS, model_mount)
    for i, mount in enumerate(mounts):
        if mount.get("name") not in names:
            out.append((f"{at}.volumeMounts.{i}.name", MOUNT_WITHOUT_VOLUME.format(name=mount.get("name"), at=at)))
        if "mountPath" not in mount:
            out.append((f"{at}.volumeMounts.{i}", MOUNT_WITHOUT_PATH))
        elif mount["mountPath"].rstrip("/") in ours:
            out.append((f"{at}.volumeMounts.{i}.mountPath", RESERVED_MOUNT_PATH.format(path=mount["mountPath"])))
    return out


def template_problems(role: str, template: object) -> Problems:
    """What roles.<role>.podTemplate (a pod template's `spec`) may not set, or what is not a pod
    template's."""
    at = f"roles.{role}.podTemplate"
    shape = k8s_shapes.problems(template, "V1PodTemplateSpec", at)
    if shape:
        return shape
    out: Problems = []
    spec = template.get("spec") or {}
    if "metadata" in template:  # one home for a pod's labels and annotations: the role's fields
        out.append((f"{at}.metadata", TEMPLATE_METADATA.format(role=role)))
    for key in spec:
        if key in POD_SPEC_HOMES:
            out.append((f"{at}.spec.{key}", POD_SPEC_KEY.format(key=key, home=POD_SPEC_HOMES[key].format(role=role))))
    pod_security = spec.get("securityContext") or {}
    out += [
        (f"{at}.spec.securityContext.{k}", POD_SECURITY_KEY.format(key=k))
        for k in pod_security
        if k in POD_SECURITY_SET
    ]
    out += profile_problems(f"{at}.spec.securityContext", pod_security)
    out += [
        (
            f"{at}.spec.securityContext.sysctls.{i}.name",
            UNSAFE_SYSCTL.format(name=s.get("name"), allowed=quoted(SAFE_SYSCTLS)),
        )
        for i, s in enumerate(pod_security.get("sysctls") or [])
        if s.get("name") not in SAFE_SYSCTLS
    ]
    for i, container in enumerate(spec.get("containers") or []):
        out += _container_problems(f"{at}.spec.containers.{i}", container, role)
    for i, container in enumerate(spec.get("initContainers") or []):
        name = container.get("name")
        if name in RESERVED_CONTAINERS:
            out.append((f"{at}.spec.initContainers.{i}.name", RESERVED_CONTAINER.format(name=name)))
        else:
            out += added_container_problems(f"{at}.spec.initContainers.{i}", container)
    return out


def quoted(allowed: tuple[str, ...]) -> str:
    """`allowed` as a message lists it (the chart's tfk8s.quoted of the same list)."""
    return ", ".join(f"'{a}'" for a in allowed)


def profile_problems(at: str, security: dict) -> Problems:
    """The SELinux and AppArmor values of a pod's or container's securityContext (at `at`) that
    restricted refuses."""
    out: Problems = []
    selinux = security.get("seLinuxOptions") or {}
    if selinux.get("type") and selinux["type"] not in SELINUX_TYPES:  # "" is unset
        value = selinux["type"]
        out.append((f"{at}.seLinuxOptions.type", SELINUX_TYPE.format(value=value, allowed=quoted(SELINUX_TYPES))))
    out += [(f"{at}.seLinuxOptions.{k}", SELINUX_SET.format(key=k)) for k in SELINUX_UNSET if selinux.get(k)]
    apparmor = (security.get("appArmorProfile") or {}).get("type")
    if apparmor is not None and apparmor not in APPARMOR_TYPES:
        out.append((f"{at}.appArmorProfile.type", APPARMOR_TYPE.format(value=apparmor, allowed=quoted(APPARMOR_TYPES))))
    return out


def host_problems(at: str, container: dict) -> Problems:
    """A probe or lifecycle handler of `container` that names a host: baseline allows only the
    pod's own address (host unset or "")."""
    handlers = [(k, container.get(k)) for k in PROBES]
    handlers += [(f"lifecycle.{k}", (container.get("lifecycle") or {}).get(k)) for k in LIFECYCLE_HANDLERS]
    return [
        (f"{at}.{where}.{action}.host", HOST_SET)
        for where, handler in handlers
        for action in HOST_ACTIONS
        if ((handler or {}).get(action) or {}).get("host")
    ]


def security_value_problems(at: str, security: dict) -> Problems:
    """What restricted refuses of a container's own securityContext (at `at`): privilege, root,
    capabilities, seccomp, procMount, SELinux and AppArmor."""
    out: Problems = [
        (f"{at}.{key}", ADDED_SECURITY.format(key=key, allowed=allowed))
        for key, (refused, allowed) in sorted(ADDED_SECURITY_REFUSED.items())  # sorted: as the chart ranges
        if key in security and any(_same(security[key], r) for r in refused)
    ]
    out += [
        (f"{at}.capabilities.add.{i}", ADDED_CAPABILITY.format(name=name, allowed=quoted(ADDED_CAPABILITIES)))
        for i, name in enumerate((security.get("capabilities") or {}).get("add") or [])
        if name not in ADDED_CAPABILITIES
    ]
    seccomp = (security.get("seccompProfile") or {}).get("type")
    if seccomp is not None and seccomp not in SECCOMP_TYPES:
        out.append((f"{at}.seccompProfile.type", SECCOMP_TYPE.format(value=seccomp, allowed=quoted(SECCOMP_TYPES))))
    return out + profile_problems(at, security)


def _same(value: object, refused: object) -> bool:
    """`value == refused` as JSON compares (True is not 1): the chart's toJson comparison."""
    return type(value) is type(refused) and value == refused


def added_container_problems(at: str, container: dict) -> Problems:
    """A container or init container the podTemplate adds, held to restricted as ours are."""
    return security_value_problems(f"{at}.securityContext", container.get("securityContext") or {}) + host_problems(
        at, container
    )


def _container_problems(at: str, container: dict, role: str) -> Problems:
    name = container.get("name")
    if name is None:
        return [(at, CONTAINER_WITHOUT_NAME)]
    if name == k8s_contract.WATCHER_CONTAINER:
        return [(f"{at}.name", WATCHER_CHANGED)]
    if name != k8s_contract.CONTAINER:
        return added_container_problems(at, container)
    out = [
        (
            f"{at}.{k}",
            TASK_CONTAINER_KEY.format(key=k, home=TASK_CONTAINER_HOMES[k].format(role=role))
            if k in TASK_CONTAINER_HOMES
            else TASK_CONTAINER_OTHER.format(key=k, role=role),
        )
        for k in container
        if k != "name" and k not in TASK_CONTAINER_MAY_SET
    ]
    for i, item in enumerate(container.get("env") or []):
        name = item.get("name", "")
        if "valueFrom" not in item:
            out.append((f"{at}.env.{i}", TASK_ENV_PLAIN.format(name=name, role=role)))
        elif name in k8s_contract.RESERVED_ENV:
            out.append((f"{at}.env.{i}.name", TASK_ENV_RESERVED.format(name=name)))
    out += [
        (f"{at}.securityContext.{k}", TASK_SECURITY_KEY.format(key=k))
        for k in container.get("securityContext") or {}
        if k not in TASK_SECURITY_MAY_SET
    ]
    out += profile_problems(f"{at}.securityContext", container.get("securityContext") or {})
    return out + host_problems(at, container)


def merge(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base` (the module's rule)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        elif _named(value) and _named(out.get(key)):
            merged = list(out[key])
            for item in value:
                at = next((i for i, old in enumerate(merged) if old["name"] == item["name"]), None)
                if at is None:
                    merged.append(item)
                else:
                    merged[at] = merge(merged[at], item)
            out[key] = merged
        else:
            out[key] = value
    return out


def _named(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) and "name" in item for item in value)
