"""The chart refuses every pod field the launcher refuses (launcher/cluster_spec/pod_fields.py),
at `helm template`, with the launcher's own path and message: a root, privileged or host-sharing
pod, a token where TF runs, a replaced init container, a volume or mount of the launcher's.

Each case is a values file given to both: the launcher reads it as a spec (`load_data`, as
`render VALUES.yaml` does: tests/launcher/cli/test_cli.py's round trip) and reports its
problems; the chart's refusal must be one of them, word for word. The coverage cases are made
from pod_fields' own lists, so a rule added there is tested here without a new line.
"""

from __future__ import annotations

import copy
import json

import pytest
import restricted_settings
from test_helm_parity import _base_values, chart_refusal, helm  # noqa: F401 (helm: the fixture)

from launcher import k8s_contract
from launcher.cluster_spec import k8s_shapes, pod_fields
from launcher.cluster_spec.loader import load_data
from launcher.code_shipping.code_bundle import CODE_DIR
from launcher.errors import SpecError

ROLE = "worker"
AT = f"roles.{ROLE}"
TEMPLATE = f"{AT}.podTemplate"
TASK = k8s_contract.CONTAINER


def _with(role_fields: dict | None = None, **top) -> dict:
    values = copy.deepcopy(_base_values())
    values["roles"][ROLE].update(role_fields or {})
    values.update(top)
    return values


def _pod(spec: dict) -> dict:
    return _with({"podTemplate": {"spec": spec}})


def _task(container: dict) -> dict:
    return _pod({"containers": [{"name": TASK, **container}]})


# (id, values, the path the launcher refuses them at)
HOSTILE = [
    (
        "privileged",
        _task({"securityContext": {"privileged": True}}),
        f"{TEMPLATE}.spec.containers.0.securityContext.privileged",
    ),
    (
        "sys-admin",
        _task({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
        f"{TEMPLATE}.spec.containers.0.securityContext.capabilities",
    ),
    (
        "seccomp-unconfined",
        _pod({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        f"{TEMPLATE}.spec.securityContext.seccompProfile",
    ),
    ("run-as-root", _pod({"securityContext": {"runAsUser": 0}}), f"{TEMPLATE}.spec.securityContext.runAsUser"),
    (
        "run-as-non-root-false",
        _pod({"securityContext": {"runAsNonRoot": False}}),
        f"{TEMPLATE}.spec.securityContext.runAsNonRoot",
    ),
    ("host-path-root", _pod({"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}), f"{TEMPLATE}.spec.volumes"),
    ("host-network", _pod({"hostNetwork": True}), f"{TEMPLATE}.spec.hostNetwork"),
    ("host-pid", _pod({"hostPID": True}), f"{TEMPLATE}.spec.hostPID"),
    ("token", _pod({"automountServiceAccountToken": True}), f"{TEMPLATE}.spec.automountServiceAccountToken"),
    (
        "code-init-container",
        _pod({"initContainers": [{"name": "code", "image": "evil", "command": ["sh"]}]}),
        f"{TEMPLATE}.spec.initContainers.0.name",
    ),
    (
        "job-watch-container",
        _pod({"containers": [{"name": k8s_contract.WATCHER_CONTAINER, "image": "evil"}]}),
        f"{TEMPLATE}.spec.containers.0.name",
    ),
    ("share-process-namespace", _pod({"shareProcessNamespace": True}), f"{TEMPLATE}.spec.shareProcessNamespace"),
    (
        "token-volume-mounted",
        _with({"volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/x"}]}),
        f"{AT}.volumeMounts.0.name",
    ),
    (
        "supervisor-dir-mounted",
        _with(
            {
                "volumes": [{"name": "mine", "emptyDir": {}}],
                "volumeMounts": [{"name": "mine", "mountPath": k8s_contract.SUPERVISOR_DIR + "/"}],
            }
        ),
        f"{AT}.volumeMounts.0.mountPath",
    ),
    (
        "model-dir-mounted",  # the checkpoint volume's mountPath (/ckpt in the base values)
        _with(
            {"volumes": [{"name": "mine", "emptyDir": {}}], "volumeMounts": [{"name": "mine", "mountPath": "/ckpt"}]}
        ),
        f"{AT}.volumeMounts.0.mountPath",
    ),
    (
        "volume-named-twice",
        _with({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]}),
        f"{AT}.volumes.1.name",
    ),
    ("task-image", _task({"image": "evil"}), f"{TEMPLATE}.spec.containers.0.image"),
    ("task-ports", _task({"ports": [{"containerPort": 22}]}), f"{TEMPLATE}.spec.containers.0.ports"),
    ("task-plain-env", _task({"env": [{"name": "X", "value": "1"}]}), f"{TEMPLATE}.spec.containers.0.env.0"),
    (
        "task-env-reserved",
        _task({"env": [{"name": "TF_CONFIG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}),
        f"{TEMPLATE}.spec.containers.0.env.0.name",
    ),
    (
        "task-env-set-twice",
        _task({"env": [{"name": "A_FIRST", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
        f"{TEMPLATE}.spec.containers.0.env.0.name",
    ),
    ("template-metadata", _with({"podTemplate": {"metadata": {"labels": {"a": "b"}}}}), f"{TEMPLATE}.metadata"),
]


def _sample(type_name: str) -> object:
    """A value of the kubernetes client's type `type_name` that passes k8s_shapes: what the
    policy, not the shape check, must refuse."""
    if type_name.startswith("list["):
        inner = _sample(type_name[5:-1])
        return [inner]
    if type_name.startswith("dict("):
        return {"a": "b"}
    return {"str": "x", "int": 1, "float": 1, "bool": True, "object": "x"}.get(type_name, {})


def _coverage() -> list:
    """One case per entry of pod_fields' lists (id, values, path)."""
    pod = k8s_shapes.fields_of("V1PodSpec")
    container = k8s_shapes.fields_of("V1Container")
    security = k8s_shapes.fields_of("V1SecurityContext")
    cases = [(f"pod-spec-{k}", _pod({k: _sample(pod[k])}), f"{TEMPLATE}.spec.{k}") for k in pod_fields.POD_SPEC_HOMES]
    cases += [
        (f"pod-security-{k}", _pod({"securityContext": {k: _sample(t)}}), f"{TEMPLATE}.spec.securityContext.{k}")
        for k, t in k8s_shapes.fields_of("V1PodSecurityContext").items()
        if k in pod_fields.POD_SECURITY_SET
    ]
    cases += [
        (f"task-{k}", _task({k: _sample(t)}), f"{TEMPLATE}.spec.containers.0.{k}")
        for k, t in container.items()
        if k != "name" and k not in pod_fields.TASK_CONTAINER_MAY_SET
    ]
    cases += [
        (
            f"task-security-{k}",
            _task({"securityContext": {k: _sample(t)}}),
            f"{TEMPLATE}.spec.containers.0.securityContext.{k}",
        )
        for k, t in security.items()
        if k not in pod_fields.TASK_SECURITY_MAY_SET
    ]
    cases += [
        (f"init-container-{n}", _pod({"initContainers": [{"name": n}]}), f"{TEMPLATE}.spec.initContainers.0.name")
        for n in pod_fields.RESERVED_CONTAINERS
    ]
    cases += [
        (f"volume-{n}", _with({"volumes": [{"name": n, "emptyDir": {}}]}), f"{AT}.volumes.0.name")
        for n in pod_fields.RESERVED_VOLUMES
    ]
    cases += [
        (f"volume-kind-{k}", _with({"volumes": [{"name": "v", k: _sample(t)}]}), f"{AT}.volumes.0.{k}")
        for k, t in k8s_shapes.fields_of("V1Volume").items()
        if k != "name" and k not in pod_fields.RESTRICTED_VOLUME_TYPES
    ]
    cases += [
        (
            f"mount-{path}",
            _with(
                {"volumes": [{"name": "mine", "emptyDir": {}}], "volumeMounts": [{"name": "mine", "mountPath": path}]}
            ),
            f"{AT}.volumeMounts.0.mountPath",
        )
        for path in pod_fields.LAUNCHER_MOUNTS
    ]
    cases += [(f"label-{k}", _with({"labels": {k: "x"}}), f"{AT}.labels.{k}") for k in pod_fields.RESERVED_LABELS]
    cases += [
        (
            f"task-env-{name}",
            _task({"env": [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}),
            f"{TEMPLATE}.spec.containers.0.env.0.name",
        )
        for name in k8s_contract.RESERVED_ENV
    ]
    return cases


def _restricted() -> list:
    """Each setting Pod Security restricted refuses (tests/restricted_settings.py, made from
    pod_fields' allowed-value data) as a values file: (id, values, path)."""
    where = {
        "task": f"{TEMPLATE}.spec.containers.0",
        "pod": f"{TEMPLATE}.spec",
        "sidecar": f"{TEMPLATE}.spec.containers.0",
        "init": f"{TEMPLATE}.spec.initContainers.0",
        "volume": f"{AT}.volumes.0",
    }
    return [
        (s.id, _with(restricted_settings.role_fields(s)), f"{where[s.place]}.{s.at}")
        for s in restricted_settings.refused()
    ]


@pytest.mark.parametrize("setting", [pytest.param(s, id=s.id) for s in restricted_settings.admitted()])
def test_what_restricted_admits_the_launcher_admits(setting):
    load_data(_with(restricted_settings.role_fields(setting)))


def _launcher_refusals(values: dict) -> list[str]:
    with pytest.raises(SpecError) as refused:
        load_data(values)
    return [f"{p.path}: {p.message}" for p in refused.value.problems]


def _refused_alike(helm, values: dict, path: str) -> str:  # noqa: F811
    """The chart's refusal, checked to be the launcher's one refusal of `values`, at `path`."""
    launcher = _launcher_refusals(values)
    assert len(launcher) == 1 and launcher[0].startswith(f"{path}: "), launcher
    chart = chart_refusal(helm.template("rel", values["namespace"], values))
    assert chart == launcher[0]
    return chart


@pytest.mark.helm
@pytest.mark.parametrize("values,path", [pytest.param(v, p, id=i) for i, v, p in HOSTILE])
def test_a_hostile_pod_field_is_refused_as_the_launcher_refuses_it(helm, values, path):  # noqa: F811
    _refused_alike(helm, values, path)


@pytest.mark.helm
@pytest.mark.parametrize("values,path", [pytest.param(v, p, id=i) for i, v, p in _coverage()])
def test_every_rule_of_pod_fields_is_the_charts(helm, values, path):  # noqa: F811
    _refused_alike(helm, values, path)


@pytest.mark.helm
@pytest.mark.parametrize("values,path", [pytest.param(v, p, id=i) for i, v, p in _restricted()])
def test_what_restricted_refuses_the_chart_refuses_as_the_launcher_does(helm, values, path):  # noqa: F811
    _refused_alike(helm, values, path)


def test_the_coverage_cases_cover_every_list_of_pod_fields():
    ids = {case[0] for case in _coverage()}
    assert {f"pod-spec-{k}" for k in pod_fields.POD_SPEC_HOMES} <= ids
    assert {f"pod-security-{k}" for k in pod_fields.POD_SECURITY_SET} <= ids
    assert {f"task-{k}" for k in pod_fields.TASK_CONTAINER_HOMES} <= ids
    assert {f"volume-{n}" for n in pod_fields.RESERVED_VOLUMES} <= ids
    assert {f"init-container-{n}" for n in pod_fields.RESERVED_CONTAINERS} <= ids
    restricted = {case[0] for case in _restricted()}
    assert {
        f"init-{k}-{json.dumps(v)}" for k, (vs, _) in pod_fields.ADDED_SECURITY_REFUSED.items() for v in vs
    } <= restricted
    assert {f"sidecar-{p}-{a}-host" for p in pod_fields.PROBES for a in pod_fields.HOST_ACTIONS} <= restricted


# The chart's own pod extras (no launcher key): sidecars, extraVolumes and extraVolumeMounts take
# the rules of a podTemplate's init containers, a role's volumes and the task's mounts, with
# their messages.
CHART_ONLY = [
    (
        "sidecar-named-code",
        {"sidecars": [{"name": "code", "image": "evil"}]},
        "sidecars.0.name",
        pod_fields.RESERVED_CONTAINER.format(name="code"),
    ),
    (
        "sidecar-privileged",
        {"sidecars": [{"name": "side", "image": "x", "securityContext": {"privileged": True}}]},
        "sidecars.0.securityContext.privileged",
        pod_fields.ADDED_SECURITY.format(key="privileged", allowed="false"),
    ),
    (
        "sidecar-probe-host",
        {"sidecars": [{"name": "side", "image": "x", "startupProbe": {"tcpSocket": {"host": "h", "port": 1}}}]},
        "sidecars.0.startupProbe.tcpSocket.host",
        pod_fields.HOST_SET,
    ),
    (
        "extra-volume-named-like-ours",
        {"extraVolumes": [{"name": "supervisor", "emptyDir": {}}]},
        "extraVolumes.0.name",
        pod_fields.RESERVED_VOLUME.format(name="supervisor"),
    ),
    (
        "extra-volume-host-path",
        {"extraVolumes": [{"name": "host", "hostPath": {"path": "/"}}]},
        "extraVolumes.0.hostPath",
        pod_fields.VOLUME_TYPE.format(kind="hostPath", allowed=pod_fields.quoted(pod_fields.RESTRICTED_VOLUME_TYPES)),
    ),
    (
        "extra-mount-of-the-token",
        {"extraVolumeMounts": [{"name": "kube-api-access", "mountPath": "/token"}]},
        "extraVolumeMounts.0.name",
        pod_fields.RESERVED_VOLUME.format(name="kube-api-access"),
    ),
    (
        "extra-mount-on-the-code",
        {
            "extraVolumes": [{"name": "x", "emptyDir": {}}],
            "extraVolumeMounts": [{"name": "x", "mountPath": CODE_DIR}],
        },
        "extraVolumeMounts.0.mountPath",
        pod_fields.RESERVED_MOUNT_PATH.format(path=CODE_DIR),
    ),
]


@pytest.mark.helm
@pytest.mark.parametrize("extra,path,message", [pytest.param(e, p, m, id=i) for i, e, p, m in CHART_ONLY])
def test_the_charts_pod_extras_follow_the_same_rules(helm, extra, path, message):  # noqa: F811
    values = _with(**extra)
    assert chart_refusal(helm.template("rel", values["namespace"], values)) == f"{path}: {message}"
