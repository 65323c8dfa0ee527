"""The pod settings Pod Security `restricted` refuses, as a podTemplate would carry them, made
from launcher/cluster_spec/pod_fields.py's allowed-value data (a rule added there is a case
here): the launcher and the chart refuse each (tests/charts/test_helm_pod_policy.py), and a real
API server's `restricted` admission refuses each as well (tests/kind/test_e2e.py). `ADMITTED`
are the neighbours both let through, so neither side is merely stricter.

A setting is placed on the task container, the pod, a container or init container the
podTemplate adds, or is a volume of the role's own (`PLACES`); `at` is its path from there, as
the launcher names it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

from launcher import k8s_contract
from launcher.cluster_spec import pod_fields

PLACES = ("task", "pod", "sidecar", "init", "volume")
# What `restricted` needs of a container of its own (the pod-level part the launcher renders).
COMPLIANT_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@dataclass(frozen=True)
class Setting:
    id: str
    place: str  # one of PLACES
    fields: dict  # set on that container (or on the pod's spec; or the volume itself)
    at: str  # the refused field's path from that place
    pod: dict = field(default_factory=dict)  # pod fields without which the API server finds it invalid


def _profiles() -> list[tuple[str, dict, str]]:
    """securityContext settings refused anywhere they appear: (id, securityContext, path in it)."""
    cases = [("selinux-type", {"seLinuxOptions": {"type": "spc_t"}}, "seLinuxOptions.type")]
    cases += [(f"selinux-{k}", {"seLinuxOptions": {k: "x"}}, f"seLinuxOptions.{k}") for k in pod_fields.SELINUX_UNSET]
    cases += [("apparmor-unconfined", {"appArmorProfile": {"type": "Unconfined"}}, "appArmorProfile.type")]
    return cases


def _hosts() -> list[tuple[str, dict, str]]:
    """A probe's or lifecycle hook's `host` (another machine, checked as this pod): (id, fields, path)."""
    handlers = [(k, lambda h, k=k: {k: h}) for k in pod_fields.PROBES]
    handlers += [(f"lifecycle.{k}", lambda h, k=k: {"lifecycle": {k: h}}) for k in pod_fields.LIFECYCLE_HANDLERS]
    return [
        (f"{where}-{action}-host", place({action: {"host": "10.0.0.1", "port": 80}}), f"{where}.{action}.host")
        for where, place in handlers
        for action in pod_fields.HOST_ACTIONS
    ]


def refused() -> list[Setting]:
    """One setting per value `restricted` refuses, on each place it can appear."""
    profiles, hosts = _profiles(), _hosts()
    cases = [Setting(f"task-{i}", "task", {"securityContext": sc}, f"securityContext.{at}") for i, sc, at in profiles]
    cases += [Setting(f"pod-{i}", "pod", {"securityContext": sc}, f"securityContext.{at}") for i, sc, at in profiles]
    sysctl = {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}
    cases += [Setting("pod-sysctl", "pod", sysctl, "securityContext.sysctls.0.name")]
    cases += [Setting(f"task-{i}", "task", fields, at) for i, fields, at in hosts]
    security = list(profiles)
    security += [
        (f"{key}-{json.dumps(value)}", {key: value}, key)
        for key, (values, _) in pod_fields.ADDED_SECURITY_REFUSED.items()
        for value in values
    ]
    security += [("sys-admin", {"capabilities": {"add": ["SYS_ADMIN"]}}, "capabilities.add.0")]
    security += [("seccomp-unconfined", {"seccompProfile": {"type": "Unconfined"}}, "seccompProfile.type")]
    for place in ("sidecar", "init"):
        cases += [
            # Unmasked /proc is valid only in a user namespace of the pod's own.
            Setting(f"{place}-{i}", place, {"securityContext": sc}, f"securityContext.{at}", unmasked_needs(sc))
            for i, sc, at in security
        ]
        # Only an init container that runs beside the others (restartPolicy Always) has probes and hooks.
        sidecar = {"restartPolicy": "Always"} if place == "init" else {}
        cases += [Setting(f"{place}-{i}", place, {**sidecar, **fields}, at) for i, fields, at in hosts]
    # a role's volume of a kind restricted does not admit (as the API server validates it)
    kinds = {"hostPath": {"path": "/"}, "nfs": {"server": "nfs.example", "path": "/"}}
    cases += [Setting(f"volume-{kind}", "volume", {"name": "v", kind: source}, kind) for kind, source in kinds.items()]
    return cases


def unmasked_needs(security: dict) -> dict:
    return {"hostUsers": False} if security.get("procMount") == "Unmasked" else {}


def admitted() -> list[Setting]:
    """Settings next to the refused ones that `restricted` allows, and so must the launcher."""
    port = {"port": 2222}
    pod = [
        ("pod-selinux-container-t", {"seLinuxOptions": {"type": "container_t"}}),
        ("pod-apparmor-default", {"appArmorProfile": {"type": "RuntimeDefault"}}),
        ("pod-safe-sysctl", {"sysctls": [{"name": pod_fields.SAFE_SYSCTLS[0], "value": "1"}]}),
    ]
    cases = [Setting(i, "pod", {"securityContext": sc}, "") for i, sc in pod]
    cases += [Setting("task-probe-own-port", "task", {"startupProbe": {"tcpSocket": port}}, "")]
    net_bind = {"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}
    cases += [Setting("sidecar-net-bind-service", "sidecar", net_bind, "")]
    cases += [Setting("init-plain", "init", {}, "")]
    return cases


def merged(base: dict, extra: dict) -> dict:
    """`base` with `extra` laid over it, dicts merged key by key (lists replaced)."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def added_container(setting: Setting, image: str) -> dict:
    """The container a sidecar or init setting adds: compliant but for the setting itself (a
    privileged container cannot also refuse privilege escalation: the API server finds that invalid)."""
    compliant = dict(COMPLIANT_CONTAINER)
    if setting.fields.get("securityContext", {}).get("privileged"):
        del compliant["allowPrivilegeEscalation"]
    return merged({"name": "side", "image": image, "securityContext": compliant}, setting.fields)


def role_fields(setting: Setting) -> dict:
    """The role's fields that carry `setting`: its volumes, or its podTemplate."""
    if setting.place == "volume":
        return {"volumes": [copy.deepcopy(setting.fields)]}
    return {"podTemplate": {"spec": role_pod_spec(setting)}}


def role_pod_spec(setting: Setting) -> dict:
    """The `podTemplate.spec` a role carries for `setting`: the launcher's and the chart's input."""
    if setting.place == "pod":
        return merged(setting.pod, setting.fields)
    if setting.place == "task":
        return {**copy.deepcopy(setting.pod), "containers": [{"name": k8s_contract.CONTAINER, **setting.fields}]}
    key = "containers" if setting.place == "sidecar" else "initContainers"
    return {**copy.deepcopy(setting.pod), key: [added_container(setting, "x")]}


def pod_template(setting: Setting, rendered: dict) -> dict:
    """A pod spec the launcher rendered (`rendered`) carrying `setting`, as no podTemplate could
    make the launcher render it."""
    spec = merged(rendered, setting.pod)
    task = k8s_contract.CONTAINER
    if setting.place == "pod":
        return merged(spec, setting.fields)
    if setting.place == "volume":
        spec["volumes"] = [*spec["volumes"], copy.deepcopy(setting.fields)]
        return spec
    if setting.place == "task":
        spec["containers"] = [merged(c, setting.fields) if c["name"] == task else c for c in spec["containers"]]
        return spec
    image = next(c for c in spec["containers"] if c["name"] == task)["image"]
    key = "containers" if setting.place == "sidecar" else "initContainers"
    spec[key] = [*spec.get(key, []), added_container(setting, image)]
    return spec
